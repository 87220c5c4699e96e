"""A seeds-like data-frame ETL, timed step by step, against any cluster: dask-cudf on GPU workers or
dask.dataframe on pandas (the CPU baseline), with check values that must be identical on both.

    python -m dask_gpu_verify.etl --scheduler tcp://127.0.0.1:8786 --rows 96000000 --files 8 --partitions 8
    python -m dask_gpu_verify.etl --local-cpu 8 --partitions 32 --json cpu.json
    python -m dask_gpu_verify.etl --local-cuda --rmm-pool-size 0.8 --json bare.json

The data (made once, deterministic, reused while it matches): ROWS rows in FILES CSV files of the facts
(`id`: ROWS // 32 distinct keys, `cat`: 1,000 categories, `x`, `y`: cents, `qty`: 1-9), a dimension table of the
keys (`dim.csv`: region, weight; every key with id % 10 == 7 missing) and one of the categories (`cats.csv`). A pass:
read the CSV files, filter, group by the key (split_out = partitions, a shuffle), merge with the dimension table
(hash shuffle), merge with the categories (broadcast) and group by their 20 labels, then the final aggregate by
region, brought to the client. Each step is persisted and timed; the figure is pass 2 (steady state: pass 1 pays
first-use costs), and the median of passes 2..N is reported beside it.
Check values: the final tables, float sums rounded to cents (every input is a whole number of cents, so the
rounded sums are exact whatever the summation order).
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.metadata
import json
import math
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SEED = 24
KEYS_PER_ROW = 32  # ROWS // 32 distinct ids: a high-cardinality key, as in the seeds' groupby by customer
CATEGORIES, LABELS, REGIONS = 1000, 20, 64
FACT_COLUMNS = {"id": "int64", "cat": "int64", "x": "float64", "y": "float64", "qty": "int64"}
DIM_COLUMNS = {"id": "int64", "region": "int64", "weight": "int64"}
ROW_BYTES = 8 * len(FACT_COLUMNS)  # a fact row in memory (five 64-bit columns), for the partitioning
CAT_COLUMNS = {"cat": "int64", "label": "int64", "rate": "int64"}
STEPS = ("read", "filter", "groupby", "merge", "broadcast_merge", "aggregate")
SHUFFLES = ("tasks", "p2p")


@dataclass(frozen=True)
class Data:
    """Where the CSV files are and how they were made."""

    folder: Path
    rows: int
    files: int

    @property
    def keys(self) -> int:
        return max(1, self.rows // KEYS_PER_ROW)

    @property
    def facts(self) -> list[Path]:
        return [self.folder / f"facts-{i:03d}.csv" for i in range(self.files)]

    @property
    def dim(self) -> Path:
        return self.folder / "dim.csv"

    @property
    def cats(self) -> Path:
        return self.folder / "cats.csv"

    @property
    def manifest(self) -> Path:
        return self.folder / "manifest.json"


def _write_csv(path: Path, columns: dict[str, Any]) -> None:
    """Unquoted header, then the rows through Arrow's writer (fast, and the same bytes on every machine)."""
    import pyarrow
    import pyarrow.csv

    table = pyarrow.table(columns)
    with open(path, "wb") as out:
        out.write((",".join(columns) + "\n").encode())
        pyarrow.csv.write_csv(table, out, pyarrow.csv.WriteOptions(include_header=False))


def _write_facts(data: Data, index: int) -> None:
    import numpy

    rows = data.rows // data.files + (1 if index < data.rows % data.files else 0)
    rng = numpy.random.default_rng([SEED, index])
    _write_csv(data.facts[index], {
        "id": rng.integers(0, data.keys, rows, dtype="int64"),
        "cat": rng.integers(0, CATEGORIES, rows, dtype="int64"),
        "x": rng.integers(0, 10_000, rows, dtype="int64") / 100,
        "y": rng.integers(0, 10_000, rows, dtype="int64") / 100,
        "qty": rng.integers(1, 10, rows, dtype="int64"),
    })


def _write_dimensions(data: Data) -> None:
    import numpy

    ids = numpy.arange(data.keys, dtype="int64")
    ids = ids[ids % 10 != 7]
    _write_csv(data.dim, {"id": ids, "region": ids * 7919 % REGIONS, "weight": 1 + ids % 5})
    cats = numpy.arange(CATEGORIES, dtype="int64")
    _write_csv(data.cats, {"cat": cats, "label": cats * 31 % LABELS, "rate": 1 + cats % 3})


def generate(data: Data) -> dict[str, Any]:
    """Write the CSV files unless the manifest says these exact files are there; {"seconds", "reused", "bytes"}."""
    spec = {"seed": SEED, "rows": data.rows, "files": data.files, "keys": data.keys}
    if data.manifest.exists():
        found = json.loads(data.manifest.read_text())
        paths = [*data.facts, data.dim, data.cats]
        if found.get("spec") == spec and all(p.exists() and p.stat().st_size == found["sizes"].get(p.name)
                                             for p in paths):
            return {"seconds": 0.0, "reused": True, "bytes": sum(found["sizes"][p.name] for p in data.facts)}
    started = time.monotonic()
    data.folder.mkdir(parents=True, exist_ok=True)
    data.manifest.unlink(missing_ok=True)
    # Spawned processes (a client's threads may be running in this process); a Dask worker's own process is a
    # daemon, which may not have children: there the files are written one after another.
    if data.rows >= 1_000_000 and data.files > 1 and not multiprocessing.current_process().daemon:
        with ProcessPoolExecutor(min(data.files, os.cpu_count() or 1), multiprocessing.get_context("spawn")) as pool:
            list(pool.map(_write_facts, [data] * data.files, range(data.files)))
    else:
        for index in range(data.files):
            _write_facts(data, index)
    _write_dimensions(data)
    sizes = {p.name: p.stat().st_size for p in [*data.facts, data.dim, data.cats]}
    data.manifest.write_text(json.dumps({"spec": spec, "sizes": sizes}, indent=1) + "\n")
    return {"seconds": round(time.monotonic() - started, 3), "reused": False,
            "bytes": sum(sizes[p.name] for p in data.facts)}


def read_csv(backend: str, paths: list[Path], blocksize: int, dtype: dict[str, str]) -> Any:
    """A dask data frame of the files: cuDF partitions through dask_cudf, pandas ones through dask.dataframe."""
    files = [str(p) for p in paths]
    if backend == "cudf":
        import dask_cudf

        return dask_cudf.read_csv(files, blocksize=blocksize, dtype=dtype)
    import dask.dataframe as dd

    return dd.read_csv(files, blocksize=blocksize, dtype=dtype)


def blocksize(backend: str, paths: list[Path], parts_per_file: int) -> int:
    """The block size that cuts each file into `parts_per_file` partitions (the files are of about one size):
    dask_cudf makes ceil(size / blocksize) blocks of a file, dask.dataframe size // blocksize."""
    sizes = [p.stat().st_size for p in paths]
    if backend == "cudf":
        return max(1, math.ceil(max(sizes) / parts_per_file))
    return max(1, min(sizes) // parts_per_file)


def _to_pandas(frame: Any) -> Any:
    return frame.to_pandas() if hasattr(frame, "to_pandas") else frame


def check_values(per_region: Any, per_label: Any) -> dict[str, list[list[float | int]]]:
    """The final tables as sorted rows; float sums rounded to cents, counts and maxima as they are."""
    region = _to_pandas(per_region).reset_index().sort_values("region")
    label = _to_pandas(per_label).reset_index().sort_values("label")
    return {
        "per_region": [[int(r.region), round(float(r.value), 2), int(r.rows), round(float(r.peak), 2)]
                       for r in region.itertuples()],
        "per_label": [[int(r.label), round(float(r.scaled), 2), int(r.qty)] for r in label.itertuples()],
    }


def digest(checks: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(checks, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class Plan:
    """One pass's settings: the data, the backend and how it is cut and shuffled."""

    data: Data
    backend: str
    partitions: int
    shuffle: str


def one_pass(client: Any, plan: Plan) -> dict[str, Any]:
    """Run the ETL once; {"steps": {step: seconds}, "seconds", "partitions", "checks"}."""
    from distributed import wait

    data, backend = plan.data, plan.backend
    steps: dict[str, float] = {}
    held: dict[str, Any] = {}

    def timed(name: str, build: Callable[[], Any]) -> Any:
        started = time.perf_counter()
        result = client.persist(build())
        wait(result)
        steps[name] = round(time.perf_counter() - started, 4)
        held[name] = result  # released when the pass ends
        return result

    per_file = plan.partitions // data.files
    facts, dim, cats = timed("read", lambda: (
        read_csv(backend, data.facts, blocksize(backend, data.facts, per_file), FACT_COLUMNS),
        read_csv(backend, [data.dim], blocksize(backend, [data.dim], max(2, per_file)), DIM_COLUMNS),
        read_csv(backend, [data.cats], blocksize(backend, [data.cats], 1), CAT_COLUMNS)))
    kept = timed("filter", lambda: facts[(facts["x"] >= 10.0) & (facts["qty"] > 1)])
    by_id = timed("groupby", lambda: kept[["id", "x", "y", "qty"]].groupby("id")
                  .agg({"x": "sum", "y": "max", "qty": "count"}, split_out=kept.npartitions)
                  .rename(columns={"x": "amount", "y": "peak", "qty": "rows"}).reset_index())

    def merged() -> Any:
        joined = by_id.merge(dim, on="id", how="inner", broadcast=False)
        return joined.assign(value=joined["amount"] * joined["weight"])

    joined = timed("merge", merged)

    def labelled() -> Any:
        frame = kept[["cat", "x", "qty"]].merge(cats, on="cat", how="inner", broadcast=True)
        frame = frame.assign(scaled=frame["x"] * frame["rate"])
        return frame[["label", "scaled", "qty"]].groupby("label").agg({"scaled": "sum", "qty": "sum"}, split_out=1)

    per_label = timed("broadcast_merge", labelled)
    started = time.perf_counter()
    per_region = joined[["region", "value", "rows", "peak"]].groupby("region").agg(
        {"value": "sum", "rows": "sum", "peak": "max"}, split_out=1)
    region_table, label_table = client.compute([per_region, per_label], sync=True)
    steps["aggregate"] = round(time.perf_counter() - started, 4)
    result = {"steps": steps, "seconds": round(sum(steps.values()), 4), "partitions": facts.npartitions,
              "checks": check_values(region_table, label_table)}
    held.clear()
    return result


def versions() -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for name in ("dask", "distributed", "dask-cuda", "cudf-cu13", "dask-cudf-cu13", "rmm-cu13", "pandas", "numpy",
                 "pyarrow", "cupy-cuda13x"):
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = None
    return found


def run(client: Any, plan: Plan, passes: int, made: dict[str, Any] | None = None) -> dict[str, Any]:
    """Every pass under the chosen shuffle method; the report with pass 2 as the figure. `made`: what
    generate() said, when the caller made the data before starting its cluster."""
    import dask

    made = made or generate(plan.data)
    with dask.config.set({"dataframe.shuffle.method": plan.shuffle}):
        runs = [one_pass(client, plan) for _ in range(passes)]
    checks = runs[-1]["checks"]
    figure = runs[1] if len(runs) > 1 else runs[0]
    steady = [r["seconds"] for r in runs[1:]] or [figure["seconds"]]
    return {
        "backend": plan.backend, "rows": plan.data.rows, "files": plan.data.files, "keys": plan.data.keys,
        "csv_bytes": made["bytes"], "generate": made, "partitions": runs[-1]["partitions"],
        "shuffle": plan.shuffle, "passes": [{k: v for k, v in r.items() if k != "checks"} for r in runs],
        "seconds": figure["seconds"], "steps": figure["steps"], "steady_median_s": statistics.median(steady),
        "steady_min_s": min(steady),
        "rows_per_s": round(plan.data.rows / figure["seconds"]) if figure["seconds"] else None,
        "checks_stable": all(r["checks"] == checks for r in runs), "check_digest": digest(checks), "checks": checks,
        "workers": len(client.scheduler_info(n_workers=-1)["workers"]),
    }


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m dask_gpu_verify.etl", description=__doc__.split("\n\n")[0])
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--scheduler", help="a running cluster's scheduler address (cuDF workers unless --backend)")
    where.add_argument("--local-cpu", type=int, metavar="N", help="a LocalCluster of N worker processes (pandas)")
    where.add_argument("--local-cuda", action="store_true", help="a dask_cuda.LocalCUDACluster (cuDF)")
    p.add_argument("--backend", choices=("cudf", "pandas"), help="default: pandas with --local-cpu, else cudf")
    p.add_argument("--threads", type=int, help="threads per worker with --local-cpu (default 1)")
    p.add_argument("--rmm-pool-size", help="with --local-cuda: the workers' RMM pool, a fraction (0.8) or a size")
    p.add_argument("--enable-cudf-spill", action="store_true",
                   help="with --local-cuda: cuDF spilling on its workers and in this process (a running cluster's "
                   "workers take `dask cuda worker --enable-cudf-spill`; its scheduler and this client then need "
                   "CUDF_SPILL=on in their environment)")
    p.add_argument("--rows", type=int, default=96_000_000, help="fact rows (default 96000000)")
    p.add_argument("--files", type=int, default=8, help="fact CSV files (default 8)")
    p.add_argument("--partitions", type=int, help="fact partitions, a multiple of --files (default: --files)")
    p.add_argument("--shuffle", choices=SHUFFLES, default="tasks", help="dataframe.shuffle.method (default tasks)")
    p.add_argument("--passes", type=int, default=2, help="passes; the last is the figure (default 2)")
    p.add_argument("--data", type=Path, default=Path(tempfile.gettempdir()) / "dask-gpu-etl",
                   help="folder of the CSV files, made once and reused (default: TMPDIR/dask-gpu-etl)")
    p.add_argument("--label", default="", help="what this configuration is (kept in the report)")
    p.add_argument("--json", type=Path, help="write the report here")
    return p


def validate(p: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.Namespace:
    """Refuse combinations that do not mean anything (exit 2 with the reason); fill in the defaults."""
    if args.backend is None:
        args.backend = "pandas" if args.local_cpu is not None else "cudf"
    if args.partitions is None:
        args.partitions = args.files
    problems = []
    if args.local_cpu is not None and args.local_cpu < 1:
        problems.append("--local-cpu needs at least 1 worker")
    if args.local_cpu is not None and args.backend == "cudf":
        problems.append("--local-cpu runs pandas: cuDF needs --local-cuda or --scheduler")
    if args.local_cuda and args.backend == "pandas":
        problems.append("--local-cuda runs cuDF: pandas needs --local-cpu or --scheduler")
    if args.threads is not None and (args.local_cpu is None or args.threads < 1):
        problems.append("--threads is for --local-cpu, at least 1")
    if args.rmm_pool_size is not None and not args.local_cuda:
        problems.append("--rmm-pool-size is for --local-cuda (a running cluster's workers have their own)")
    if args.enable_cudf_spill and not args.local_cuda:
        problems.append("--enable-cudf-spill is for --local-cuda (a running cluster's workers have their own)")
    if args.rows < 1 or args.files < 1 or args.rows < args.files:
        problems.append("--rows and --files must be positive, with at least one row per file")
    if args.partitions < args.files or args.partitions % args.files:
        problems.append(f"--partitions must be a multiple of --files ({args.files}): each file is cut evenly")
    if args.passes < 1:
        problems.append("--passes must be at least 1")
    if problems:
        p.error("; ".join(problems))
    return args


def _pool_size(text: str | None) -> float | str | None:
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        return text


@contextlib.contextmanager
def cluster_client(args: argparse.Namespace) -> Iterator[tuple[Any, dict[str, Any]]]:
    """A client for the chosen cluster, and how that cluster was made (kept in the report)."""
    from distributed import Client, LocalCluster

    if args.scheduler:
        with Client(args.scheduler, timeout=60) as client:
            client.wait_for_workers(1, timeout=120)
            yield client, {"kind": "scheduler", "address": args.scheduler}
        return
    if args.local_cpu is not None:
        threads = args.threads or 1
        with LocalCluster(n_workers=args.local_cpu, threads_per_worker=threads, processes=True,
                          dashboard_address=None) as cluster, Client(cluster) as client:
            yield client, {"kind": "LocalCluster", "workers": args.local_cpu, "threads_per_worker": threads}
        return
    from dask_cuda import LocalCUDACluster

    settings = {"protocol": "tcp", "rmm_pool_size": _pool_size(args.rmm_pool_size),
                "enable_cudf_spill": args.enable_cudf_spill}
    with LocalCUDACluster(dashboard_address=None, **settings) as cluster, Client(cluster) as client:
        yield client, {"kind": "LocalCUDACluster", **settings}


def table(report: dict[str, Any]) -> str:
    lines = [f"ETL {report['label'] or report['backend']}: {report['rows']:,} rows in {report['files']} files "
             f"({report['csv_bytes'] / 1e9:.2f} GB), {report['partitions']} partitions, shuffle {report['shuffle']}"]
    for number, one in enumerate(report["passes"], 1):
        steps = "  ".join(f"{name} {one['steps'][name]:.3f}" for name in STEPS)
        lines.append(f"  pass {number}: {one['seconds']:.3f} s   ({steps})")
    stable = "stable" if report["checks_stable"] else "DIFFER between passes"
    lines.append(f"  figure (pass {min(2, len(report['passes']))}): {report['seconds']:.3f} s, median of passes 2..: "
                 f"{report['steady_median_s']:.3f} s; "
                 f"checks {report['check_digest'][:16]} ({stable})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = parser()
    args = validate(p, p.parse_args(argv))
    plan = Plan(Data(args.data, args.rows, args.files), args.backend, args.partitions, args.shuffle)
    made = generate(plan.data)  # before any cluster: the files are then in the page cache for every pass
    with cluster_client(args) as (client, cluster):
        report = run(client, plan, args.passes, made)
    report = {"label": args.label, "cluster": cluster, **report, "versions": versions(),
              "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "argv": sys.argv[1:] if argv is None else argv}
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    print(table(report))
    return 0 if report["checks_stable"] else 1


if __name__ == "__main__":
    sys.exit(main())
