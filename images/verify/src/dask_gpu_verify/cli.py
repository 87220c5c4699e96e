"""dask-gpu-verify: prove a Dask-CUDA cluster works, or name the host and GPU that does not.

Connects to a scheduler (TLS from the standard Dask config or DASK_DISTRIBUTED__COMM__TLS__* env),
waits for the expected workers, compares versions, checks GPU placement, measures memory bandwidth
per worker, runs a workload with a closed-form answer, prints a table and writes JSON.
Exit status: 0 all checks pass, 1 a check failed, 2 the cluster could not be reached.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from . import checks, frames, gpu_polars, probes, session, workload
from .findings import Finding
from .report import Report
from .session import EXIT_FAILED, EXIT_OK, EXIT_UNREACHABLE


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dask-gpu-verify", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    where = p.add_mutually_exclusive_group()
    where.add_argument("--scheduler", default=os.environ.get("DASK_SCHEDULER_ADDRESS"),
                       help="scheduler address, e.g. tls://10.0.0.1:8786 (default: $DASK_SCHEDULER_ADDRESS)")
    where.add_argument("--scheduler-file", type=Path, help="a scheduler file written by `dask scheduler`")
    p.add_argument("--expect-workers", type=int, default=1, help="Dask workers that must register (default 1)")
    p.add_argument("--expect-gpus", type=int, default=None,
                   help="GPU workers required (default: all expected workers, or 0 with --allow-cpu)")
    p.add_argument("--expect-host", type=session.parse_host_count, action="append", default=[], metavar="HOST=COUNT",
                   help="workers expected on one host (hostname, IP or worker name); repeat per host")
    p.add_argument("--allow-cpu", action="store_true",
                   help="GPUs are not required: without them the workload runs with NumPy, and the report says so")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for workers (default 120)")
    p.add_argument("--size", type=int, default=None, help="workload matrix size n (default per backend)")
    p.add_argument("--chunk", type=int, default=None, help="workload chunk size (default per backend)")
    p.add_argument("--bandwidth-mib", type=int, default=None,
                   help="array size per worker for the bandwidth probe (default 2048 on GPU, 256 on CPU)")
    p.add_argument("--tolerance", type=float, default=1e-9, help="relative tolerance on the workload's answer")
    p.add_argument("--frame-rows", type=int, default=frames.DEFAULT_ROWS,
                   help=f"rows of the data-frame check (default {frames.DEFAULT_ROWS}; 0 leaves it out)")
    p.add_argument("--polars-rows", type=int, default=2_000_000,
                   help="rows of the Polars check (DaskEngine on every GPU worker, where the images carry "
                        "cudf-polars; default 2000000; 0 leaves it out)")
    p.add_argument("--json", type=Path, default=None, help="write the JSON report here")
    return p


def expected(args: argparse.Namespace) -> session.Expected:
    return session.Expected(args.expect_workers, dict(args.expect_host))


def verify(client: Any, args: argparse.Namespace, report: Report) -> None:
    registered = session.wait_for_workers(client, expected(args), args.timeout)
    report.timings["wait_for_workers_s"] = registered.seconds
    workers = registered.workers
    report.findings += registered.missing
    if not workers:
        report.findings.append(Finding("workers", f"no worker registered within {args.timeout:g} s"))
        return

    gpus: dict[str, dict[str, Any]] = client.run(probes.gpu_info)
    for address, info in workers.items():
        info["hostname"] = gpus.get(address, {}).get("hostname") or registered.host_of(address)
        info["gpu"] = gpus.get(address, {})
    hosts = {address: info["hostname"] for address, info in workers.items()}
    report.workers = workers

    client_versions = probes.versions()
    scheduler_versions = client.run_on_scheduler(probes.versions)
    worker_versions = client.run(probes.versions)
    report.versions = {"client": client_versions, "scheduler": scheduler_versions, "workers": worker_versions}
    report.findings += checks.version_mismatches(client_versions, scheduler_versions, worker_versions, hosts)

    gpu_workers = sorted(address for address, info in gpus.items() if "uuid" in info)
    report.findings += checks.missing_gpus(gpus, hosts, gpu_required=not args.allow_cpu)
    report.findings += checks.gpu_placement(gpus, hosts)
    if gpu_workers:
        health: dict[str, dict[str, Any]] = client.run(probes.gpu_health, workers=gpu_workers)
        for address, info in health.items():
            report.workers[address]["gpu_health"] = info
        report.findings += checks.gpu_health(health, hosts)
        report.findings += checks.cpu_affinity(health, hosts)
    expect_gpus = args.expect_gpus if args.expect_gpus is not None else (0 if args.allow_cpu else args.expect_workers)
    if len(gpu_workers) < expect_gpus:
        report.findings.append(Finding("gpu", f"{len(gpu_workers)} GPU workers found, {expect_gpus} expected"))

    backend = session.pick_backend(gpus, workers, args.allow_cpu)
    if backend is None:
        return
    report.backend = backend.name
    run_bandwidth(client, args, report, backend.targets)
    run_workload(client, args, report, backend.targets)
    run_frames(client, args, report)
    run_polars(client, args, report)


def run_polars(client: Any, args: argparse.Namespace, report: Report) -> None:
    """The Polars check where every worker has cudf-polars (the polars profile): a query through DaskEngine on
    every GPU worker, exactly equal to CPU Polars here; else said to be skipped."""
    if args.polars_rows <= 0:
        return
    found = client.run(gpu_polars.available)
    if not found or any("error" in info for info in found.values()) or "error" in gpu_polars.available():
        report.polars = {"status": "skipped", "reason": "no cudf-polars on every worker and here (dask_image_profile: "
                                                        "polars has it)"}
        return
    try:
        report.polars = gpu_polars.verify(client, args.polars_rows)
    except Exception as error:  # noqa: BLE001 - any failure of the engine is this check's finding
        report.polars = {"status": "failed", "error": f"{type(error).__name__}: {error}"}
    if report.polars.get("status") == "failed":
        why = report.polars.get("error") or report.polars.get("reason") or report.polars.get("difference") or "?"
        report.findings.append(Finding("polars", f"the Polars check failed: {why}"))
    elif report.polars.get("status") == "skipped":
        report.findings.append(Finding("polars", f"the images carry cudf-polars, but {report.polars['reason']}"))


def run_frames(client: Any, args: argparse.Namespace, report: Report) -> None:
    """The data-frame check: cuDF when every worker has it, pandas on CPU workers, else said to be skipped."""
    if args.frame_rows <= 0:
        return
    found: dict[str, dict[str, Any]] = client.run(frames.available)
    local = frames.available()
    if report.backend == "cupy" and not all(info.get("cudf") and info.get("dask_cudf") for info in found.values()):
        report.frames = {"backend": "skipped", "reason": "no cuDF and dask-cudf on every worker (the image's profile "
                                                         "is lean; dask_image_profile: full has them)"}
        return
    broken = [info["dask_dataframe_error"] for info in [*found.values(), local] if info.get("dask_dataframe_error")]
    if broken:
        report.frames = {"backend": "skipped", "reason": f"dask.dataframe does not import here ({broken[0]}; the "
                                                         "lean profile has no pyarrow)"}
        return
    report.frames = frames.run(client, "cudf" if report.backend == "cupy" else "pandas", args.frame_rows)
    if report.frames.get("error"):
        report.findings.append(Finding("frames", f"failed on the cluster: {report.frames['error']}"))
    elif not report.frames.get("exact"):
        report.findings.append(Finding("frames", "the data-frame check's result differs from pandas on the client"))


def run_bandwidth(client: Any, args: argparse.Namespace, report: Report, targets: list[str]) -> None:
    mib = args.bandwidth_mib or (2048 if report.backend == "cupy" else 256)
    futures = {address: client.submit(probes.memory_bandwidth, mib << 20, 5, report.backend, workers=[address],
                                      allow_other_workers=False, pure=False) for address in targets}
    for address, future in futures.items():
        try:
            report.workers[address]["bandwidth"] = future.result()
        except Exception as error:
            worker = report.workers[address]
            report.findings.append(Finding("bandwidth", f"probe failed: {error!r}", host=worker["hostname"],
                                           worker=address, gpu=worker.get("gpu", {}).get("uuid")))


def run_workload(client: Any, args: argparse.Namespace, report: Report, targets: list[str]) -> None:
    default_n, default_chunk = workload.DEFAULTS[report.backend]
    n, chunk = args.size or default_n, args.chunk or default_chunk
    expected = workload.expected_total(n, chunk)
    report.workload = {"n": n, "chunk": chunk, "expected": float(expected), "gram_tasks": workload.task_count(n, chunk),
                       "flops": 2.0 * chunk ** 2 * n * n / chunk}
    graph = workload.build(n, chunk, report.backend)
    started = time.monotonic()
    try:
        got = client.compute(graph, workers=targets, allow_other_workers=False).result()
    except Exception as error:
        report.findings.append(Finding("workload", f"failed on the cluster: {error!r}"))
        return
    seconds = time.monotonic() - started
    report.workload.update(result=got, seconds=seconds, tflops=report.workload["flops"] / seconds / 1e12)
    finding = checks.result_error(float(expected), got, args.tolerance)
    if finding is not None:
        report.findings.append(finding)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    report = Report(scheduler=str(args.scheduler or args.scheduler_file), gpu_required=not args.allow_cpu)
    try:
        client = session.connect(args.scheduler, args.scheduler_file, args.timeout)
    except (OSError, ValueError) as error:
        print(f"cannot reach the scheduler {report.scheduler}: {error}", file=sys.stderr)
        report.findings.append(Finding("connect", str(error)))
        if args.json:
            report.write_json(args.json)
        return EXIT_UNREACHABLE
    with client:
        verify(client, args, report)
    report.print_table(sys.stdout)
    if args.json:
        report.write_json(args.json)
    return EXIT_OK if report.ok else EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
