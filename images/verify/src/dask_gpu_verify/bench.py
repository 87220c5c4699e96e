"""dask-gpu-bench: what a deployed cluster delivers, held against raw-GPU baselines measured in the same run.

    dask-gpu-bench --scheduler tls://10.0.0.1:8786 --expect-workers 2 --expect-host gpu-a=2 --out reports/bench

Per worker: device-to-device copy and fp64 sum (GB/s), fp64 and fp32 matmul (TFLOP/s), run inside the worker
process. Through the scheduler: two workloads on one worker and on all of them (transpose_sum moves blocks
between workers, gram does not), dask-cuda's own benchmarks (GPU clusters: local_cupy's transpose_sum and dot;
local_cudf_merge and local_cudf_shuffle where cuDF is installed in the client and on every worker, else said
skipped), the scheduler's no-op task rate and round-trip latency, and with --etl-rows the seeds-like data-frame
ETL (dask_gpu_verify.etl) on the cluster against pandas on this host's CPUs, with check values that must be equal.
Writes PREFIX.json, PREFIX.md and PREFIX.html (a bar chart).
Exit status: 0 benchmarked, 1 the expected workers (in all, or on a host) did not register in time or there is
nothing to benchmark (no GPU worker and no --allow-cpu), 2 the scheduler could not be reached; no report then.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from dask_gpu_verify import bench_report, checks, etl, frames, gpu_polars, partitions, probes, session, workload
from dask_gpu_verify.session import EXIT_FAILED, EXIT_OK, EXIT_UNREACHABLE

# Sizes per backend: the GPU ones give each task tens of ms and one GPU seconds of work (facts.md).
SIZES: dict[str, dict[str, Any]] = {
    "cupy": {"bandwidth_mib": 2048, "noop_tasks": 5000, "matmul_n": 8192,
             "transpose_sum": (40000, 10000), "gram": (65536, 8192)},
    "numpy": {"bandwidth_mib": 128, "noop_tasks": 1000, "matmul_n": 512,
              "transpose_sum": (2000, 500), "gram": (2048, 512)},
}
# dask-cuda's benchmarks through the cluster (GPU clusters): (benchmark, operation, options, size, needs cuDF).
# The merge joins 8 x 8 chunks of 50 M rows (12.8 GB processed), the shuffle 64 partitions of 64 MiB.
DASK_CUDA: list[tuple[str, str, list[str], str, bool]] = [
    ("local_cupy", "transpose_sum", ["--operation", "transpose_sum", "-s", "40000", "-c", "10000"], "40000 / 10000",
     False),
    ("local_cupy", "dot", ["--operation", "dot", "-s", "40000", "-c", "10000"], "40000 / 10000", False),
    ("local_cudf_merge", "merge", ["-c", "50000000", "--base-chunks", "8", "--other-chunks", "8"],
     "8 x 8 chunks of 50 M rows", True),
    ("local_cudf_shuffle", "shuffle", ["--partition-size", "64MiB", "--in-parts", "64"], "64 x 64 MiB", True),
]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dask-gpu-bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--scheduler", default=os.environ.get("DASK_SCHEDULER_ADDRESS"),
                   help="scheduler address, e.g. tls://10.0.0.1:8786 (default: $DASK_SCHEDULER_ADDRESS)")
    p.add_argument("--scheduler-file", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--expect-workers", type=int, default=1,
                   help="workers that must register, else no benchmark and exit 1 (default 1)")
    p.add_argument("--expect-host", type=session.parse_host_count, action="append", default=[], metavar="HOST=COUNT",
                   help="workers that must register on one host (hostname, IP or worker name); repeat per host")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for the workers (default 120)")
    p.add_argument("--allow-cpu", action="store_true",
                   help="without it every worker must have a usable GPU; with it, the GPU workers are benchmarked "
                   "(the report names those left out), or every worker with NumPy when none has a GPU")
    p.add_argument("--runs", type=int, default=3, help="timed runs per workload, after one warm-up (default 3)")
    p.add_argument("--label", default="", help="what this configuration is (shown in the report)")
    p.add_argument("--ready-seconds", type=float, default=None, help="time to ready of the last deploy, to report")
    p.add_argument("--no-dask-cuda", "--no-local-cupy", dest="no_dask_cuda", action="store_true",
                   help="skip dask-cuda's own benchmarks (local_cupy, local_cudf_merge, local_cudf_shuffle)")
    p.add_argument("--etl-rows", type=int, default=0,
                   help="rows of the seeds-like ETL, run on the cluster and on this host's CPUs (default 0: not run)")
    p.add_argument("--etl-files", type=int, default=0,
                   help="CSV files of the ETL, its partitions (default 0: as the cluster's published partitioning "
                   "says for its rows and workers, dask_gpu_verify.partitions)")
    p.add_argument("--etl-cpu-workers", type=int, default=min(8, os.cpu_count() or 1),
                   help="pandas worker processes of the CPU comparison (default: this host's CPUs, at most 8)")
    p.add_argument("--etl-data", type=Path, default=Path(tempfile.gettempdir()) / "dask-gpu-etl",
                   help="where the ETL's CSV files are written, the same path on every worker host and here "
                   "(default TMPDIR/dask-gpu-etl)")
    p.add_argument("--polars-scale", type=float, default=0.0,
                   help="scale of the PDS-H-like Polars queries (DaskEngine on every GPU worker against CPU Polars on "
                   "a worker host's cores; needs the polars image profile; 1 = 6 M line items; default 0: not run)")
    p.add_argument("--polars-folder", default=None,
                   help="where the Polars tables are written on every worker host (default: beside the workers' "
                   "local directory)")
    p.add_argument("--out", type=Path, required=True, help="write OUT.json, OUT.md and OUT.html")
    return p


def median_time(run: Any, runs: int) -> tuple[float, list[float]]:
    run()  # warm-up
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times), times


def transfers(client: Any, since: float) -> dict[str, float]:
    logs: dict[str, dict[str, float]] = client.run(probes.transfer_log, since)
    total = {key: sum(log[key] for log in logs.values()) for key in ("bytes", "seconds", "count")}
    total["mib_per_s"] = total["bytes"] / total["seconds"] / 2**20 if total["seconds"] > 0 else 0.0
    return total


def baselines(client: Any, targets: list[str], backend: str) -> dict[str, dict[str, Any]]:
    """Raw per-device figures, measured inside each worker process, one worker at a time."""
    sizes = SIZES[backend]
    out: dict[str, dict[str, Any]] = {}
    for address in targets:
        def on(function: Any, *args: Any, address: str = address) -> Any:
            return client.submit(function, *args, workers=[address], allow_other_workers=False,
                                 pure=False).result()
        memory = on(probes.memory_bandwidth, sizes["bandwidth_mib"] << 20, 5, backend)
        out[address] = {"sum_gbps": memory["sum_gbps"], "copy_gbps": memory["copy_gbps"],
                        "fp64_tflops": on(probes.matmul_tflops, sizes["matmul_n"], "float64", 5, backend),
                        "fp32_tflops": on(probes.matmul_tflops, sizes["matmul_n"], "float32", 5, backend)}
    return out


def transpose_sum_graph(n: int, chunk: int, backend: str) -> Any:
    """sum(x + x.T) for x[i, j] = i + 2j: moves blocks between workers; the answer is 3 n^2 (n - 1)."""
    import dask.array as da

    chunks = ((chunk,) * (n // chunk) + ((n % chunk,) if n % chunk else ()),) * 2
    x = da.map_blocks(workload.make_block, backend, chunks=chunks, dtype="f8", name=f"bench-x-{backend}-{n}-{chunk}")
    return (x + x.T).sum()


def gram_graph(n: int, chunk: int, backend: str) -> Any:
    """Per block B of x, sum(B @ B.T), then a reduction of 1x1 results: no block moves between workers."""
    import dask.array as da

    chunks = ((chunk,) * (n // chunk) + ((n % chunk,) if n % chunk else ()),) * 2
    x = da.map_blocks(workload.make_block, backend, chunks=chunks, dtype="f8", name=f"bench-g-{backend}-{n}-{chunk}")
    return x.map_blocks(workload.gram_sum, chunks=(1, 1), dtype="f8").sum()


def scaling(client: Any, targets: list[str], backend: str, runs: int) -> list[dict[str, Any]]:
    """Each workload on the first worker alone, then on all of them: time, throughput, ratio, transfers."""
    rows = []
    for name, build, unit in (("transpose_sum", transpose_sum_graph, "GB/s"), ("gram", gram_graph, "TFLOP/s")):
        n, chunk = SIZES[backend][name]
        amount = n * n * 8 / 1e9 if name == "transpose_sum" else 2.0 * chunk * n * n / 1e12
        row: dict[str, Any] = {"workload": name, "n": n, "chunk": chunk, "unit": unit,
                               "transfers_between_workers": name == "transpose_sum"}
        for label, workers in (("one", targets[:1]), ("all", targets)):
            graph = build(n, chunk, backend)
            since = time.time()
            seconds, times = median_time(
                lambda graph=graph, workers=workers: client.compute(graph, workers=workers,
                                                                     allow_other_workers=False).result(), runs)
            moved = transfers(client, since)
            row[label] = {"workers": len(workers), "seconds": seconds, "times": times,
                          "throughput": amount / seconds, "per_worker": amount / seconds / len(workers),
                          "transfer_mib_per_s": moved["mib_per_s"], "transferred_gib": moved["bytes"] / 2**30}
        row["ratio"] = row["all"]["throughput"] / row["one"]["throughput"]
        row["efficiency"] = row["ratio"] / len(targets)
        rows.append(row)
    return rows


def cudf_missing(client: Any) -> str | None:
    """Why dask-cuda's data-frame benchmarks cannot run here (cuDF absent in this client or on a worker), or None."""
    if importlib.util.find_spec("cudf") is None:
        return "cuDF is not installed in this client"
    found: dict[str, bool] = client.run(lambda: importlib.util.find_spec("cudf") is not None)
    lacking = sorted(address for address, present in found.items() if not present)
    return f"cuDF is not installed on {len(lacking)} worker(s): {', '.join(lacking)}" if lacking else None


def dataframe_missing(client: Any) -> str | None:
    """Why the ETL cannot run here (dask.dataframe, which needs pyarrow, does not import in this client or on a
    worker: the lean profile has no pyarrow), or None."""
    found: dict[str, dict[str, Any]] = {"this client": frames.available(), **client.run(frames.available)}
    broken = {where: info["dask_dataframe_error"] for where, info in found.items() if info.get("dask_dataframe_error")}
    if not broken:
        return None
    where, error = next(iter(broken.items()))
    return (f"dask.dataframe does not import in {len(broken)} of {len(found)} processes ({where}: {error}); the "
            "images' lean profile has no pyarrow, dask_image_profile full has it")


def dask_cuda_benchmarks(client: Any, scheduler: str, runs: int, folder: Path) -> list[dict[str, Any]]:
    """dask-cuda's own benchmarks against this cluster (never with EXPECTED_NUM_WORKERS: it would shut the
    cluster down on a timeout; --disable-rmm: measure the workers' own allocator settings; the data frames
    shuffle by tasks, as distributed's p2p is a trap for cuDF)."""
    rows = []
    without_cudf = cudf_missing(client)
    for benchmark, operation, options, size, needs_frames in DASK_CUDA:
        base = folder / f"{benchmark}-{operation}"
        argv = [sys.executable, "-m", f"dask_cuda.benchmarks.{benchmark}", "--scheduler-address", scheduler,
                *options, "--runs", str(runs), "--disable-rmm", "--output-basename", str(base)]
        row: dict[str, Any] = {"benchmark": benchmark, "operation": operation, "size": size,
                               "command": " ".join(argv[1:-2])}
        if needs_frames and without_cudf:
            rows.append({**row, "skipped": without_cudf})
            continue
        env = {k: v for k, v in os.environ.items() if k != "EXPECTED_NUM_WORKERS"}
        env["DASK_DATAFRAME__SHUFFLE__METHOD"] = "tasks"
        since = time.time()
        run = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=1800, check=False)
        if run.returncode != 0:
            row["error"] = (run.stderr or run.stdout).strip().splitlines()[-1:] or [f"exit {run.returncode}"]
            rows.append(row)
            continue
        data = json.loads(base.with_suffix(".json").read_text())
        walls = [float(v) for v in data["wallclock"].values()]
        processed = [float(v) for v in data["data_processed"].values()]
        moved = transfers(client, since)
        row.update(seconds=statistics.median(walls), times=walls,
                   throughput_gbps=statistics.median(p / w for p, w in zip(processed, walls, strict=True)) / 1e9,
                   transfer_mib_per_s=moved["mib_per_s"], transferred_gib=moved["bytes"] / 2**30)
        rows.append(row)
    return rows


def etl_section(client: Any, args: argparse.Namespace, registered: session.Registered,
                chosen: session.Backend) -> dict[str, Any]:
    """The seeds-like ETL on the cluster (cuDF on GPU workers, pandas on CPU ones) and on pandas worker processes of
    this host, from the same CSV files: each worker host writes them (one worker per host, the same path
    everywhere; deterministic), and so does this client, which reads their metadata."""
    backend = "cudf" if chosen.name == "cupy" else "pandas"
    files = args.etl_files or max(1, min(args.etl_rows, partitions.count(args.etl_rows * etl.ROW_BYTES,
                                                                         len(registered.workers))))
    row: dict[str, Any] = {"rows": args.etl_rows, "files": files, "backend": backend,
                           "partitioning": "given" if args.etl_files else "published"}
    if backend == "cudf" and chosen.left_out:
        return {**row, "skipped": f"{len(chosen.left_out)} worker(s) without a GPU in the cluster: cuDF partitions "
                                  "would land on them"}
    if backend == "cudf" and (missing := cudf_missing(client)):
        return {**row, "skipped": f"{missing} (the images' full profile has it)"}
    if broken := dataframe_missing(client):
        return {**row, "skipped": broken}
    data = etl.Data(args.etl_data, args.etl_rows, files)
    per_host: dict[str, str] = {}
    for address in sorted(registered.workers):
        per_host.setdefault(registered.host_of(address), address)
    writes = [client.submit(etl.generate, data, workers=[address], allow_other_workers=False, pure=False)
              for address in per_host.values()]
    row["generated_on"] = dict(zip(per_host, client.gather(writes), strict=True))
    made = etl.generate(data)
    plan = etl.Plan(data, backend, files, "tasks")
    row["cluster"] = etl.run(client, plan, 2, made)
    row["cpu"] = etl_on_cpus(data, args.etl_cpu_workers)
    row["cpu_workers"] = args.etl_cpu_workers
    row["cpu_over_cluster"] = row["cpu"]["seconds"] / row["cluster"]["seconds"]
    row["checks_equal"] = row["cluster"]["check_digest"] == row["cpu"]["check_digest"]
    return row


def etl_on_cpus(data: etl.Data, workers: int) -> dict[str, Any]:
    """The same ETL on pandas processes of this host: `python -m dask_gpu_verify.etl --local-cpu`, a LocalCluster on
    loopback for the run. Its own process, without the cluster's comm settings (their required encryption and
    certificates are for the cluster, not for this throwaway one)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("DASK_DISTRIBUTED__COMM__")}
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "cpu.json"
        argv = [sys.executable, "-m", "dask_gpu_verify.etl", "--local-cpu", str(workers), "--rows", str(data.rows),
                "--files", str(data.files), "--passes", "2", "--data", str(data.folder), "--label",
                "pandas on the benchmark host", "--json", str(out)]
        run = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=3600, check=False)
        if run.returncode != 0 or not out.exists():
            raise NotBenchmarked(f"the ETL on this host's CPUs failed (exit {run.returncode}): "
                                 + " ".join((run.stderr or run.stdout).strip().splitlines()[-3:]))
        return dict(json.loads(out.read_text()))


def noop(x: int) -> int:
    return x


def overhead(client: Any, tasks: int = 5000, trips: int = 100) -> dict[str, float]:
    """No-op tasks per second through the scheduler, and the median submit-to-result round trip."""
    client.gather(client.map(noop, range(100), pure=False))  # warm-up
    started = time.perf_counter()
    client.gather(client.map(noop, range(tasks), pure=False))
    rate = tasks / (time.perf_counter() - started)
    latencies = []
    for i in range(trips):
        begin = time.perf_counter()
        client.submit(noop, i, pure=False).result()
        latencies.append(time.perf_counter() - begin)
    return {"tasks": tasks, "tasks_per_s": rate, "round_trip_ms": statistics.median(latencies) * 1e3}


class NotBenchmarked(Exception):
    """The cluster is not the one expected, or has nothing to benchmark: the message says what is missing."""


def prepare(client: Any, args: argparse.Namespace) -> tuple[session.Registered, dict[str, Any], session.Backend]:
    """Wait for every expected worker, then pick the backend; refuse to benchmark fewer workers than expected."""
    expected = session.Expected(args.expect_workers, dict(args.expect_host))
    registered = session.wait_for_workers(client, expected, args.timeout)
    if not registered.complete:
        lines = [finding.line() for finding in registered.missing]
        raise NotBenchmarked(f"expected {expected.describe()}; after {registered.seconds:.0f} s "
                             f"{len(registered.workers)} registered, so nothing was benchmarked:\n" + "\n".join(lines))
    gpus: dict[str, dict[str, Any]] = client.run(probes.gpu_info)
    backend = session.pick_backend(gpus, registered.workers, args.allow_cpu)
    if backend is None:
        raise NotBenchmarked(f"no GPU worker among {len(registered.workers)} workers "
                             "(use --allow-cpu to benchmark CPU workers)")
    if not args.allow_cpu and backend.left_out:  # every worker must have its GPU, as dask-gpu-verify requires
        hosts = {a: registered.host_of(a) for a in backend.left_out}
        lacking = {a: gpus.get(a, {}) for a in backend.left_out}
        lines = [finding.line() for finding in checks.missing_gpus(lacking, hosts, gpu_required=True)]
        raise NotBenchmarked(f"{len(backend.left_out)} of {len(registered.workers)} workers have no usable GPU "
                             "(use --allow-cpu to benchmark only the GPU workers):\n" + "\n".join(lines))
    return registered, gpus, backend


def run(client: Any, args: argparse.Namespace) -> dict[str, Any]:
    registered, gpus, chosen = prepare(client, args)
    backend, targets, workers = chosen.name, chosen.targets, registered.workers
    scheduler = args.scheduler or client.scheduler.address
    report: dict[str, Any] = {
        "label": args.label, "scheduler": scheduler, "backend": backend,
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "workers": {a: {"name": workers[a].get("name"), "host": workers[a].get("host"), "gpu": gpus.get(a, {})}
                    for a in targets},
        "expected": {"workers": args.expect_workers, "per_host": dict(args.expect_host),
                     "registered": len(workers), "wait_seconds": registered.seconds},
        "left_out": {a: {"name": workers[a].get("name"), "host": workers[a].get("host"), "reason": reason}
                     for a, reason in chosen.left_out.items()},
        "versions": probes.versions(), "ready_seconds": args.ready_seconds,
    }
    report["baselines"] = baselines(client, targets, backend)
    report["scaling"] = scaling(client, targets, backend, args.runs)
    if backend == "cupy" and not args.no_dask_cuda:
        with tempfile.TemporaryDirectory() as folder:
            report["dask_cuda"] = dask_cuda_benchmarks(client, scheduler, args.runs, Path(folder))
    else:
        report["dask_cuda"] = []
    report["overhead"] = overhead(client, SIZES[backend]["noop_tasks"])
    if args.etl_rows > 0:
        report["etl"] = etl_section(client, args, registered, chosen)
    if args.polars_scale > 0:
        report["polars"] = gpu_polars.benchmark(client, args.polars_scale, "all", args.runs, args.polars_folder,
                                                cpu_passes=1, setting="--polars-scale")
    return report


def main(argv: list[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    if args.polars_scale < 0:
        p.error(f"--polars-scale must be 0 (off) or above, not {args.polars_scale:g}")
    if args.etl_rows < 0 or args.etl_files < 0 or args.etl_cpu_workers < 1 or 0 < args.etl_rows < args.etl_files:
        p.error("--etl-rows must be 0 (off) or at least --etl-files; --etl-files 0 (the cluster's partitioning) or "
                "more, --etl-cpu-workers at least 1")
    try:
        client = session.connect(args.scheduler, args.scheduler_file, args.timeout)
    except (OSError, ValueError) as error:
        print(f"cannot reach the scheduler {args.scheduler or args.scheduler_file}: {error}", file=sys.stderr)
        return EXIT_UNREACHABLE
    with client:
        try:
            report = run(client, args)
        except NotBenchmarked as error:
            print(f"dask-gpu-bench: FAILED: {error}", file=sys.stderr)
            return EXIT_FAILED
    args.out.parent.mkdir(parents=True, exist_ok=True)
    Path(f"{args.out}.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    markdown = bench_report.markdown(report)
    Path(f"{args.out}.md").write_text(markdown)
    Path(f"{args.out}.html").write_text(bench_report.html(report, markdown))
    print(markdown)
    if report.get("etl", {}).get("checks_equal") is False:
        print("dask-gpu-bench: FAILED: the ETL's check values differ between the cluster and pandas", file=sys.stderr)
        return EXIT_FAILED
    if report.get("polars", {}).get("status") == "failed":
        print(f"dask-gpu-bench: FAILED: Polars: {report['polars'].get('reason')}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
