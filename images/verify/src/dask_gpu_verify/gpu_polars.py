"""Polars on the cluster's GPUs: cudf-polars' DaskEngine on a client of the deployed cluster (docs/polars.md).

    from dask_gpu_verify import session, gpu_polars
    with session.client() as client, gpu_polars.engine(client) as eng:
        lazy_frame.collect(engine=eng)

The engine runs one rank per Dask worker (every worker must be a GPU worker: the polars image profile's), over
rapidsmpf's own UCXX communicator, which it starts on the workers through `Client.run`. The bundle's workers are
already bound to their GPU and CPUs (the container's GPU selection, dask-cuda's CPU affinity), so the engine's own
hardware binding is off, and it never falls back to CPU Polars silently (raise_on_fail).

Also here: the verification's Polars check (a query on every GPU, compared exactly with CPU Polars), the
PDS-H-like benchmark (pdsh.py's queries on 1..N GPUs against CPU Polars on all of a worker host's cores) and the
seeds-like ETL written in Polars (etl.py's data, its check values).

    python -m dask_gpu_verify.gpu_polars cpu --folder DIR --queries all --passes 3   # CPU Polars, all cores
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from . import etl, pdsh

VERIFY_KEYS = 10_007


def available() -> dict[str, Any]:
    """What this process has of the engine: versions, or the import error."""
    try:
        import cudf_polars
        import polars
        import rapidsmpf
    except ImportError as error:
        return {"error": f"{type(error).__name__}: {error}"}
    return {"polars": polars.__version__, "cudf_polars": cudf_polars.__version__,
            "rapidsmpf": getattr(rapidsmpf, "__version__", "?")}


def new_engine(client: Any, **executor_options: Any) -> Any:
    """A DaskEngine on the client's cluster, as the bundle's workers need it (the caller shuts it down: a notebook
    keeps one open across cells)."""
    from cudf_polars.engine.dask import DaskEngine
    from cudf_polars.engine.hardware_binding import HardwareBindingPolicy

    options = {"hardware_binding": HardwareBindingPolicy(enabled=False), "raise_on_fail": True}
    return DaskEngine(dask_client=client, executor_options=executor_options or None, engine_options=options)


@contextmanager
def engine(client: Any, **executor_options: Any) -> Iterator[Any]:
    """new_engine(), shut down on leaving."""
    eng = new_engine(client, **executor_options)
    try:
        yield eng
    finally:
        eng.shutdown()


def gpu_workers(client: Any) -> tuple[list[str], list[str]]:
    """(GPU workers, other workers) by the GPU resource the bundle gives every GPU worker."""
    workers = client.scheduler_info(n_workers=-1)["workers"]
    gpu = sorted(a for a, info in workers.items() if (info.get("resources") or {}).get("GPU"))
    return gpu, sorted(set(workers) - set(gpu))


def not_runnable(client: Any) -> str | None:
    """Why the engine cannot run on this cluster, or None."""
    gpu, other = gpu_workers(client)
    if not gpu:
        return "no GPU workers"
    if other:
        return (f"{len(other)} workers without a GPU ({other[0]}, ...): DaskEngine runs a rank on every worker, "
                "and every rank needs a GPU")
    missing = {address: info["error"] for address, info in client.run(available).items() if "error" in info}
    if missing:
        address, error = next(iter(missing.items()))
        return (f"cudf-polars does not import on {len(missing)} workers ({address}: {error}): the images' "
                "dask_image_profile must be polars")
    return None


def _verify_frames(rows: int) -> tuple[Any, Any]:
    import numpy
    import polars as pl

    rng = numpy.random.default_rng(11)
    facts = pl.DataFrame({"key": rng.integers(0, VERIFY_KEYS, rows), "value": rng.integers(-1000, 1001, rows),
                          "qty": rng.integers(1, 10, rows)})
    keys = numpy.arange(VERIFY_KEYS)
    dim = pl.DataFrame({"key": keys[keys % 10 != 3], "group": keys[keys % 10 != 3] % 97})
    return facts, dim


def verify_query(facts: Any, dim: Any) -> Any:
    """A join, a 97-group aggregate of whole numbers and a sort: exact on every engine."""
    import polars as pl

    return (facts.lazy().join(dim.lazy(), on="key").group_by("group")
            .agg(pl.col("value").sum().alias("total"), pl.col("value").min().alias("low"),
                 pl.col("qty").max().alias("high"), pl.len().cast(pl.Int64).alias("rows"))
            .sort("group"))


def verify(client: Any, rows: int) -> dict[str, Any]:
    """The verification's Polars check: the query on every GPU worker (one rank each) and on CPU Polars here."""
    import polars.testing

    why = not_runnable(client)
    if why:
        return {"status": "skipped", "reason": why}
    facts, dim = _verify_frames(rows)
    query = verify_query(facts, dim)
    expected = query.collect()
    started = time.perf_counter()
    gpu, _ = gpu_workers(client)
    with engine(client, max_rows_per_partition=max(1_000, rows // (4 * len(gpu)))) as eng:
        start_seconds = time.perf_counter() - started
        ranks = eng.gather_cluster_info()
        began = time.perf_counter()
        got = query.collect(engine=eng)
        seconds = time.perf_counter() - began
    try:
        polars.testing.assert_frame_equal(got, expected, check_exact=True)
        equal, difference = True, ""
    except AssertionError as error:
        equal, difference = False, str(error).splitlines()[0]
    uuids = sorted({info.gpu_uuid for info in ranks})
    result = {"status": "ok" if equal and len(uuids) == len(gpu) else "failed", "rows": rows,
              "ranks": len(ranks), "gpus": uuids, "workers": len(gpu), "equal": equal,
              "engine_start_seconds": round(start_seconds, 3), "query_seconds": round(seconds, 3),
              "groups": got.height, **available()}
    if difference:
        result["difference"] = difference
    if len(uuids) != len(gpu):
        result["reason"] = f"{len(uuids)} distinct GPUs answered for {len(gpu)} GPU workers"
    return result


# --- the seeds-like ETL in Polars (etl.py's data and check values) ---

def etl_queries(data: etl.Data) -> tuple[Any, Any]:
    """etl.py's pass as two lazy frames: the aggregate by region and the one by label."""
    import polars as pl

    def scan(paths: list[Path], columns: dict[str, str]) -> Any:
        schema = {name: pl.Int64 if kind == "int64" else pl.Float64 for name, kind in columns.items()}
        return pl.scan_csv([str(p) for p in paths], schema=schema)

    kept = scan(data.facts, etl.FACT_COLUMNS).filter((pl.col("x") >= 10.0) & (pl.col("qty") > 1))
    by_id = kept.group_by("id").agg(pl.col("x").sum().alias("amount"), pl.col("y").max().alias("peak"),
                                    pl.col("qty").count().alias("rows"))
    joined = by_id.join(scan([data.dim], etl.DIM_COLUMNS), on="id").with_columns(
        (pl.col("amount") * pl.col("weight")).alias("value"))
    per_region = joined.group_by("region").agg(pl.col("value").sum(), pl.col("rows").sum(),
                                               pl.col("peak").max()).sort("region")
    per_label = (kept.join(scan([data.cats], etl.CAT_COLUMNS), on="cat")
                 .with_columns((pl.col("x") * pl.col("rate")).alias("scaled"))
                 .group_by("label").agg(pl.col("scaled").sum(), pl.col("qty").sum()).sort("label"))
    return per_region, per_label


def etl_pass(data: etl.Data, eng: Any) -> dict[str, Any]:
    """One pass of the Polars ETL on an engine (None: CPU Polars); seconds and etl.py's check values."""
    started = time.perf_counter()
    per_region, per_label = (collect(frame, eng) for frame in etl_queries(data))
    seconds = time.perf_counter() - started
    checks = etl.check_values(per_region.to_pandas(), per_label.to_pandas())
    return {"seconds": round(seconds, 4), "digest": etl.digest(checks)}


# --- the PDS-H-like benchmark ---

def _timed(run: Callable[[], Any], passes: int) -> tuple[list[float], Any]:
    """passes + 1 runs (the first pays first-use costs and is not counted); the seconds and the last result."""
    seconds, result = [], None
    for index in range(passes + 1):
        started = time.perf_counter()
        result = run()
        if index:
            seconds.append(round(time.perf_counter() - started, 4))
    return seconds, result


def result_digest(frame: Any) -> str:
    import hashlib

    return hashlib.sha256(frame.write_csv().encode()).hexdigest()[:16]


def collect(query: Any, eng: Any) -> Any:
    """The query's result on an engine, or on CPU Polars in this process (None)."""
    return query.collect(engine=eng) if eng is not None else query.collect()


def run_queries(folder: Path, names: str, passes: int, eng: Any = None) -> dict[str, Any]:
    """Each query's pass seconds, median and result digest, on an engine (None: CPU Polars in this process)."""
    found: dict[str, Any] = {}
    for name, build in pdsh.selected(names):
        query = build(folder)
        try:
            seconds, frame = _timed(functools.partial(collect, query, eng), passes)
        except Exception as error:  # noqa: BLE001 - a query the engine cannot run is reported, the rest go on
            found[name] = {"error": f"{type(error).__name__}: {str(error).splitlines()[0][:300]}"}
            continue
        found[name] = {"seconds": seconds, "median": statistics.median(seconds), "rows": frame.height,
                       "digest": result_digest(frame)}
    return found


def cpu_queries(folder: str, names: str, passes: int) -> dict[str, Any]:
    """CPU Polars on every core of this host: in a process of its own, whose CPU affinity is the whole host (a
    dask-cuda worker's is its GPU's NUMA node)."""
    argv = [sys.executable, "-m", "dask_gpu_verify.gpu_polars", "cpu", "--folder", folder, "--queries", names,
            "--passes", str(passes)]
    done = subprocess.run(argv, capture_output=True, text=True, check=False,
                          preexec_fn=lambda: os.sched_setaffinity(0, range(os.cpu_count() or 1)))
    if done.returncode:
        return {"error": (done.stderr or done.stdout).strip().splitlines()[-1:] or ["failed"]}
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def host_folders(client: Any, scale: float, folder: str | None) -> dict[str, tuple[str, list[str]]]:
    """{host: (folder, its workers)}: the data's folder on each worker host (given, or beside the workers' local
    directory) and the workers that write and read it."""
    workers = client.scheduler_info(n_workers=-1)["workers"]
    by_host: dict[str, list[str]] = {}
    for address, info in sorted(workers.items()):
        by_host.setdefault(info["host"], []).append(address)
    found = {}
    for host, addresses in by_host.items():
        where = folder or client.submit(default_folder, scale, workers=[addresses[0]], pure=False).result()
        found[host] = (where, addresses)
    return found


def default_folder(scale: float) -> str:
    """On a worker: pdsh-sf<scale> beside its scratch space (the folder of dask_worker's --local-directory)."""
    from distributed import get_worker

    path = Path(get_worker().local_directory)
    for parent in [path, *path.parents]:
        if parent.name == "dask-scratch-space":
            path = parent.parent
            break
    return str(path / f"pdsh-sf{scale:g}")


def _prepare(folder: str, scale: float, setting: str) -> dict[str, Any]:
    path = Path(folder)
    if pdsh.ready(path, scale):
        return {"ready": True}
    problem = pdsh.space_problem(path, scale, setting)
    if problem:
        return {"problem": problem}
    path.mkdir(parents=True, exist_ok=True)
    (path / "manifest.json").unlink(missing_ok=True)
    return {"ready": False}


def _finish(folder: str, scale: float) -> int:
    path = Path(folder)
    (path / "manifest.json").write_text(json.dumps(pdsh.manifest(scale), indent=1) + "\n")
    return sum(p.stat().st_size for p in path.glob("*/*.parquet"))


def generate(client: Any, scale: float, folder: str | None, setting: str) -> dict[str, Any]:
    """The tables on every worker host, written by its workers (their GPUs), unless already there; refused before
    anything is written when a host's disk cannot hold them."""
    started = time.perf_counter()
    hosts = host_folders(client, scale, folder)
    states = {host: client.submit(_prepare, where, scale, setting, workers=[ws[0]], pure=False).result()
              for host, (where, ws) in hosts.items()}
    problems = [f"host {host}: {state['problem']}" for host, state in states.items() if "problem" in state]
    if problems:
        raise SystemExit("\n".join(problems))
    futures = []
    for host, (where, addresses) in hosts.items():
        if states[host]["ready"]:
            continue
        for index, part in enumerate(pdsh.plan(scale)):
            futures.append(client.submit(pdsh.write_part, where, part, workers=[addresses[index % len(addresses)]],
                                         pure=False, allow_other_workers=False))
    client.gather(futures)
    sizes = {host: client.submit(_finish, where, scale, workers=[ws[0]], pure=False).result()
             for host, (where, ws) in hosts.items()}
    return {"seconds": round(time.perf_counter() - started, 3), "reused": not futures,
            "bytes": max(sizes.values()), "folders": {host: where for host, (where, _) in hosts.items()},
            "scale": scale, "rows": {table: pdsh.rows(table, scale) for table in pdsh.ROW_BYTES}}


def benchmark(client: Any, scale: float, names: str, passes: int, folder: str | None = None,
              cpu_passes: int = 1, setting: str = "--scale") -> dict[str, Any]:
    """The PDS-H-like queries on every GPU worker of the cluster (one engine) and, with cpu, on CPU Polars on every
    core of the first worker host (cpu_passes, 0: none); the ratios per query and whether the results are equal.
    `setting` names the scale in a refusal (the CLI's --scale, the playbook's variable)."""
    why = not_runnable(client)
    if why:
        return {"status": "skipped", "reason": why}
    made = generate(client, scale, folder, setting)
    gpu, _ = gpu_workers(client)
    first_host_folder, first_workers = next(iter(host_folders(client, scale, folder).values()))
    started = time.perf_counter()
    with engine(client) as eng:
        start_seconds = round(time.perf_counter() - started, 3)
        queries = run_queries(Path(first_host_folder), names, passes, eng)
    report: dict[str, Any] = {"status": "ok", "workers": len(gpu), "engine_start_seconds": start_seconds,
                              "data": made, "passes": passes, "gpu": queries, **available()}
    if cpu_passes:
        report["cpu"] = client.submit(cpu_queries, first_host_folder, names, cpu_passes, workers=[first_workers[0]],
                                      pure=False).result()
        report["ratios"] = ratios(queries, report["cpu"])
        unequal = [name for name, entry in queries.items()
                   if "digest" in entry and entry["digest"] != report["cpu"].get(name, {}).get("digest")]
        if unequal:
            report.update(status="failed", reason=f"results differ from CPU Polars: {', '.join(unequal)}")
    errors = [name for name, entry in queries.items() if "error" in entry]
    if errors:
        report.update(status="failed", reason=f"the engine failed on {', '.join(errors)}")
    return report


def ratios(gpu: dict[str, Any], cpu: dict[str, Any]) -> dict[str, float]:
    """CPU median / GPU median per query both ran."""
    return {name: round(cpu[name]["median"] / entry["median"], 2) for name, entry in gpu.items()
            if "median" in entry and "median" in cpu.get(name, {}) and entry["median"] > 0}


def _client_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scheduler", default=os.environ.get("DASK_SCHEDULER_ADDRESS"),
                   help="scheduler address (default DASK_SCHEDULER_ADDRESS); TLS from the Dask configuration")
    p.add_argument("--json", type=Path, help="write the report here too")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m dask_gpu_verify.gpu_polars", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    cpu = sub.add_parser("cpu", help="the PDS-H-like queries on CPU Polars in this process (JSON on stdout)")
    cpu.add_argument("--folder", required=True, type=Path, help="the tables (pdsh.py's layout)")
    cpu.add_argument("--queries", default="all", help=f"comma-separated, of {', '.join(pdsh.QUERIES)} (default all)")
    cpu.add_argument("--passes", type=int, default=3, help="timed passes after a first one (default 3)")
    gen = sub.add_parser("generate", help="write the tables here (CPU, or this process's GPU)")
    gen.add_argument("--folder", required=True, type=Path)
    gen.add_argument("--scale", required=True, type=float, help="scale factor (1 = 6 M line items)")
    check = sub.add_parser("verify", help="the verification's Polars check on a cluster")
    _client_args(check)
    check.add_argument("--rows", type=int, default=2_000_000)
    bench = sub.add_parser("bench", help="the PDS-H-like queries on a cluster's GPUs and on CPU Polars")
    _client_args(bench)
    bench.add_argument("--scale", type=float, default=10.0, help="scale factor (1 = 6 M line items; default 10)")
    bench.add_argument("--folder", help="the tables' folder on every worker host (default: beside the workers' "
                                        "local directory)")
    bench.add_argument("--queries", default="all")
    bench.add_argument("--passes", type=int, default=3)
    bench.add_argument("--cpu-passes", type=int, default=1, help="timed passes of CPU Polars (0: none; default 1)")
    starts = sub.add_parser("starts", help="how long the engine takes to start on a running cluster, N times")
    _client_args(starts)
    starts.add_argument("--times", type=int, default=3)
    polars_etl = sub.add_parser("etl", help="the seeds-like ETL in Polars (etl.py's data) on a cluster or the CPU")
    _client_args(polars_etl)
    polars_etl.add_argument("--folder", type=Path, required=True, help="etl.py's CSV data (made if missing)")
    polars_etl.add_argument("--rows", type=int, default=96_000_000)
    polars_etl.add_argument("--files", type=int, default=4)
    polars_etl.add_argument("--passes", type=int, default=3)
    polars_etl.add_argument("--cpu", action="store_true", help="CPU Polars in this process instead of a cluster")
    return p


def engine_starts(client: Any, times: int) -> dict[str, Any]:
    """Seconds each engine start (and shutdown) took on the running cluster."""
    starts, stops = [], []
    for _ in range(times):
        began = time.perf_counter()
        with engine(client) as eng:
            starts.append(round(time.perf_counter() - began, 3))
            del eng
            began = time.perf_counter()
        stops.append(round(time.perf_counter() - began, 3))
    return {"starts": starts, "stops": stops, "median_start": statistics.median(starts)}


def etl_runs(data: etl.Data, passes: int, eng: Any) -> dict[str, Any]:
    etl.generate(data)
    runs = [etl_pass(data, eng) for _ in range(passes + 1)]
    seconds = [run["seconds"] for run in runs[1:]]
    return {"seconds": seconds, "median": statistics.median(seconds), "first": runs[0]["seconds"],
            "digests": sorted({run["digest"] for run in runs}), "rows": data.rows, "files": data.files}


def _on_cluster(args: argparse.Namespace) -> dict[str, Any]:
    from distributed import Client

    if not args.scheduler:
        parser().error("--scheduler (or DASK_SCHEDULER_ADDRESS) is needed")
    with Client(args.scheduler, timeout=60) as client:
        if args.command == "verify":
            return verify(client, args.rows)
        if args.command == "bench":
            return benchmark(client, args.scale, args.queries, args.passes, args.folder, args.cpu_passes)
        if args.command == "starts":
            return engine_starts(client, args.times)
        why = not_runnable(client)
        if why:
            return {"status": "skipped", "reason": why}
        with engine(client) as eng:
            return etl_runs(etl.Data(args.folder, args.rows, args.files), args.passes, eng)


def main(argv: list[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    if getattr(args, "passes", 1) < 1:
        p.error(f"--passes must be at least 1, not {args.passes}")
    if args.command in ("generate", "bench") and args.scale <= 0:
        p.error(f"--scale must be above 0, not {args.scale:g}")
    if args.command in ("cpu", "bench"):
        try:
            list(pdsh.selected(args.queries))
        except ValueError as error:
            p.error(f"--queries: {error}")
    if args.command == "generate":
        report: dict[str, Any] = pdsh.generate_local(args.folder, args.scale)
    elif args.command == "cpu":
        report = {**run_queries(args.folder, args.queries, args.passes), "threads": _threads()}
    elif args.command == "etl" and args.cpu:
        report = {**etl_runs(etl.Data(args.folder, args.rows, args.files), args.passes, None),
                  "threads": _threads()}
    else:
        report = _on_cluster(args)
    text = json.dumps(report, indent=None if args.command == "cpu" else 1)
    print(text)
    if getattr(args, "json", None):
        args.json.write_text(text + "\n")
    return 1 if report.get("status") == "failed" else 0


def _threads() -> int:
    import polars

    return int(polars.thread_pool_size())


if __name__ == "__main__":
    sys.exit(main())
