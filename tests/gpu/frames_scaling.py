#!/usr/bin/env python3
"""Data frames on one GPU and on every GPU of one host, through the cluster the bundle renders (issue 42): which
partitioning makes N GPUs count, strong and weak scaling of the seeds-like ETL, the RMM pool question settled with
interleaved passes, the transports, dask-cuda's merge benchmark, and one GPU as shipped against 8 single-thread CPU
workers. Run on a lent GPU machine by tests/gpu/gpu-proof-scaling.sh (which installs the carried wheels); each phase
is data (variants and runs) below.

    python3 tests/gpu/frames_scaling.py --out OUT --phase PHASE [--budget SECONDS]   (sweep, transports, change,
    pool, defaults, shipped)

Every cluster is rendered by playbooks/render-commands.yml from inventory settings (tests/gpu/harness.py) and run as
the units run it: `dask scheduler` and `dask cuda worker` with what the bundle ships (no RMM pool unless a variant
sets one). Writes OUT/runs.jsonl (one line per run), OUT/PHASE.md (the tables with their ratios) and each run's
client output under OUT/logs. A run that would not fit the time left is skipped and says so.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402 - beside this script

ROWS = 96_000_000
ROWS_PER_FILE = 24_000_000  # 0.9 GB of CSV a file: 4 files at 96 M rows, 16 at 384 M
# The proofs compare without a pool unless a variant sets one (the shipped default, auto, is a pool of 0.8 with the
# full profile since the pool phase measured it; the defaults phase runs exactly what ships).
FULL = {"dask_image_profile": "full", "dask_worker_rmm_pool_size": ""}
# tcp and ucx turn TLS off: a lent machine with no network, where that is acknowledged as a user must.
PLAIN = {"dask_tls_disabled_ack": True}
# UCX listeners need the firewall on (the check refuses them without); rendered only: the lent machines have no
# nftables, and no network for anyone to reach them by.
UCX = {"dask_firewall_enabled": True}
SECOND = {"dask_scheduler_port": 9786, "dask_dashboard_port": 9787, "dask_worker_http_port": 9790}
# The defaults phase's CPU baseline (issue 42: one GPU as shipped >= 7 x this): 8 worker processes of 1 thread,
# dask.dataframe on pandas, 32 partitions as in every earlier CPU run (docs/performance.md, "Data-frame defaults").
CPU_WORKERS, CPU_PARTITIONS, CPU_TARGET = 8, 32, 7.0


def ports(block: int) -> dict[str, int]:
    """A port block of its own for each variant: no variant waits for another's sockets in TIME_WAIT (the change
    phase restarts on the default ports on purpose)."""
    base = 8700 + 20 * block
    return {"dask_scheduler_port": base, "dask_dashboard_port": base + 1, "dask_scheduler_ucx_port": base + 2,
            "dask_worker_http_port": base + 10}


def variants(gpus: int) -> dict[str, dict[str, Any]]:
    """Inventory settings of every cluster the phases start: GPU 0 alone or every GPU, each transport; a second
    one-GPU cluster on GPU 1 with an RMM pool for the interleaved passes; the change phase's clusters on the
    default ports."""
    one = {"dask_worker_gpus": ["0"]}
    found: dict[str, dict[str, Any]] = {
        "tcp-1": {**FULL, "dask_transport": "tcp", **PLAIN, **one},
        f"tcp-{gpus}": {**FULL, "dask_transport": "tcp", **PLAIN},
        "tcp-pool-1": {**FULL, "dask_transport": "tcp", **PLAIN, "dask_worker_gpus": ["1"],
                       "dask_worker_rmm_pool_size": "0.8"},
        # the pool phase's second half: the same two clusters with their GPUs swapped
        "tcp-swap-1": {**FULL, "dask_transport": "tcp", **PLAIN, "dask_worker_gpus": ["1"]},
        "tcp-swap-pool-1": {**FULL, "dask_transport": "tcp", **PLAIN, "dask_worker_gpus": ["0"],
                            "dask_worker_rmm_pool_size": "0.8"},
    }
    for transport in ("tls", "tls-ucx", "ucx"):
        ack = {**(PLAIN if transport == "ucx" else {}), **(UCX if "ucx" in transport else {})}
        found[f"{transport}-1"] = {**FULL, "dask_transport": transport, **ack, **one}
        found[f"{transport}-{gpus}"] = {**FULL, "dask_transport": transport, **ack}
    found = {name: {**settings, **ports(block)} for block, (name, settings) in enumerate(found.items())}
    found["defaults-1"] = {"dask_image_profile": "full", "dask_worker_gpus": ["0"], **ports(len(found))}
    # The shipped phase: the full profile as it ships (its auto RMM pool of 0.8, CuPy from it), tls-ucx on GPU 0 and
    # on every GPU, tls (the default transport) on every GPU.
    for name, settings in (("shipped-tls-ucx-1", {"dask_transport": "tls-ucx", **UCX, **one}),
                           (f"shipped-tls-ucx-{gpus}", {"dask_transport": "tls-ucx", **UCX}),
                           (f"shipped-tls-{gpus}", {"dask_transport": "tls"})):
        found[name] = {"dask_image_profile": "full", **settings, **ports(len(found))}
    for transport in CHANGE:
        found[f"change-{transport}"] = {**FULL, "dask_transport": transport, **(PLAIN if transport == "ucx" else {}),
                                        **(UCX if "ucx" in transport else {})}
    return found


# The change phase: one cluster on the default ports taken from transport to transport and back, as a rerun of
# site.yml with another dask_transport would (each start waits for its ports; the verification runs on each).
CHANGE = ("tls", "tls-ucx", "ucx")


@dataclass
class Context:
    out: Path
    gpus: int
    budget: float
    started: float = field(default_factory=time.monotonic)
    dry_run: bool = False
    only: tuple[str, ...] = ()
    rendered: dict[str, harness.Rendered] = field(default_factory=dict)
    results: list[dict[str, Any]] = field(default_factory=list)

    def left(self) -> float:
        return self.budget - (time.monotonic() - self.started)

    def record(self, row: dict[str, Any]) -> None:
        self.results.append(row)
        with (self.out / "runs.jsonl").open("a") as sink:
            sink.write(json.dumps(row) + "\n")
        shown = {k: v for k, v in row.items() if k not in ("steps", "passes", "report")}
        print(json.dumps(shown), flush=True)


def data_dir(rows: int) -> Path:
    return Path("/var/tmp") / f"dask-gpu-etl-{rows // 1_000_000}M"


def make_data(rows: int) -> dict[str, Any]:
    from dask_gpu_verify import etl  # type: ignore[import-untyped,unused-ignore]

    return dict(etl.generate(etl.Data(data_dir(rows), rows, max(1, rows // ROWS_PER_FILE))))


def etl_run(ctx: Context, variant: str, rows: int, partitions: int, passes: int = 3, tag: str = "") -> float | None:
    """One ETL invocation (its own client) against the running cluster; the pass-2 seconds, None when it failed."""
    files = max(1, rows // ROWS_PER_FILE)
    need = 15 + passes * rows / 12e6 / ctx.rendered[variant].workers ** 0.5
    name = f"etl-{variant}-{rows // 1_000_000}M-p{partitions}{tag}"
    if ctx.left() < need:
        ctx.record({"run": name, "skipped": f"{ctx.left():.0f} s left, needs about {need:.0f}"})
        return None
    rendered = ctx.rendered[variant]
    report = ctx.out / "etl" / f"{name}.json"
    argv = ["python3", "-m", "dask_gpu_verify.etl", "--scheduler", rendered.address, "--rows", str(rows),
            "--files", str(files), "--partitions", str(partitions), "--passes", str(passes), "--shuffle", "tasks",
            "--data", str(data_dir(rows)), "--label", name, "--json", str(report)]
    argv += ["--backend", "pandas"] if ctx.dry_run else []
    started = time.monotonic()
    done = harness.run_client(rendered, argv, ctx.out / "logs" / f"{name}.txt", timeout=min(300, ctx.left()))
    if done.returncode or not report.exists():
        ctx.record({"run": name, "failed": done.stderr[-1500:]})
        return None
    found = json.loads(report.read_text())
    ctx.record({"run": name, "kind": "etl", "variant": variant, "gpus": rendered.workers, "rows": rows,
                "partitions": partitions, "per_gpu": partitions / rendered.workers,
                "mb_per_partition": round(found["csv_bytes"] / partitions / 1e6), **etl_figures(found, started)})
    return float(found["seconds"])


def etl_figures(found: dict[str, Any], started: float) -> dict[str, Any]:
    """The figures of a dask_gpu_verify.etl report that every ETL row keeps (GPU cluster or CPU baseline)."""
    return {"pass2_s": found["seconds"], "median_s": found["steady_median_s"],
            "passes_s": [p["seconds"] for p in found["passes"]], "steps": found["steps"],
            "digest": found["check_digest"], "wall_s": round(time.monotonic() - started, 1)}


def merge_run(ctx: Context, variant: str, chunks_per_gpu: int, chunk_rows: int = 100_000_000) -> None:
    """dask-cuda's local_cudf_merge against the running cluster (its RMM stays as deployed), the same rows per GPU
    on 1 and N GPUs (weak scaling)."""
    rendered = ctx.rendered[variant]
    chunks = chunks_per_gpu * rendered.workers
    name = f"merge-{variant}-{chunks}x{chunks}"
    if ctx.left() < 60:
        ctx.record({"run": name, "skipped": f"{ctx.left():.0f} s left"})
        return
    base = ctx.out / "merge" / name
    base.parent.mkdir(parents=True, exist_ok=True)
    argv = ["python3", "-m", "dask_cuda.benchmarks.local_cudf_merge", "--scheduler-address", rendered.address,
            "-c", str(chunk_rows), "--base-chunks", str(chunks), "--other-chunks", str(chunks), "--runs", "2",
            "--output-basename", str(base)]
    done = harness.run_client(rendered, argv, ctx.out / "logs" / f"{name}.txt", timeout=min(150, ctx.left()))
    found = Path(f"{base}.json")  # dask-cuda's BASENAME.json
    if done.returncode or not found.exists():
        ctx.record({"run": name, "failed": (done.stdout + done.stderr)[-1500:]})
        return
    result = json.loads(found.read_text())
    gib_s = sum(result["data_processed"].values()) / sum(result["wallclock"].values()) / 2**30
    ctx.record({"run": name, "kind": "merge", "variant": variant, "gpus": rendered.workers, "chunks": chunks,
                "chunk_rows": chunk_rows, "gib_per_s": round(gib_s, 2),
                "wallclock_s": [round(v, 3) for v in result["wallclock"].values()]})


def up(ctx: Context, variant: str) -> harness.Cluster | None:
    if variant not in ctx.rendered:
        ctx.record({"run": f"start-{variant}", "skipped": "not rendered in this run (the dry run has no UCX)"})
        return None
    cluster = harness.Cluster(ctx.rendered[variant], ctx.out / "logs")
    try:
        cluster.start()
    except RuntimeError as error:
        ctx.record({"run": f"start-{variant}", "failed": str(error)[-1500:]})
        cluster.stop()
        return None
    ctx.record({"run": f"start-{variant}", "kind": "start", "workers": ctx.rendered[variant].workers,
                "registered_s": cluster.registered_s, "ports_waited_s": cluster.ports_waited_s})
    return cluster


def best(ctx: Context, variant: str, rows: int) -> int | None:
    """The partition count with the lowest pass 2 on this variant and size, from the runs so far."""
    rows_found = [r for r in ctx.results if r.get("variant") == variant and r.get("rows") == rows and "pass2_s" in r]
    return min(rows_found, key=lambda r: r["pass2_s"])["partitions"] if rows_found else None


def sweep(ctx: Context) -> None:
    """Partitions per GPU on N GPUs (96 M rows and N x 96 M) and on one GPU (96 M), then the RMM pool question:
    passes interleaved between GPU 0 without a pool and GPU 1 with a pool of 0.8, round after round."""
    n = ctx.gpus
    for rows in (ROWS, ROWS * n):
        made = make_data(rows)
        ctx.record({"run": f"data-{rows // 1_000_000}M", "kind": "data", **made})
    many = up(ctx, f"tcp-{n}")
    if many:
        for partitions in (4, 8, 16, 32):
            etl_run(ctx, f"tcp-{n}", ROWS, partitions)
        for partitions in (16, 32, 64):
            etl_run(ctx, f"tcp-{n}", ROWS * n, partitions)
        many.stop()
    one, pool = up(ctx, "tcp-1"), up(ctx, "tcp-pool-1")
    if one:
        for partitions in (4, 8, 16, 32):
            etl_run(ctx, "tcp-1", ROWS, partitions)
        chosen = best(ctx, "tcp-1", ROWS) or 8
        if pool:
            for round_ in range(5):
                etl_run(ctx, "tcp-1", ROWS, chosen, passes=2, tag=f"-round{round_}")
                etl_run(ctx, "tcp-pool-1", ROWS, chosen, passes=2, tag=f"-round{round_}")
    for cluster in (one, pool):
        if cluster:
            cluster.stop()


def pool(ctx: Context, rounds: int, partitions: int) -> None:
    """The RMM pool question alone: rounds of passes interleaved between a cluster without a pool and one with a
    pool of 0.8, each on its own GPU; the second half with the GPUs swapped, so a difference between the two GPUs
    cannot pass for the pool's."""
    ctx.record({"run": f"data-{ROWS // 1_000_000}M", "kind": "data", **make_data(ROWS)})
    for off, on, half in (("tcp-1", "tcp-pool-1", range(rounds // 2)),
                          ("tcp-swap-1", "tcp-swap-pool-1", range(rounds // 2, rounds))):
        clusters = [up(ctx, off), up(ctx, on)]
        if all(clusters):
            for round_ in half:
                etl_run(ctx, off, ROWS, partitions, passes=2, tag=f"-round{round_}")
                etl_run(ctx, on, ROWS, partitions, passes=2, tag=f"-round{round_}")
        for cluster in clusters:
            if cluster:
                cluster.stop()


def defaults(ctx: Context) -> None:
    """The full profile exactly as it ships (tls, the auto RMM pool with CuPy from it) on GPU 0: the verification as
    its unit runs it (CuPy workload, bandwidth, data frames), then the ETL at the published partitioning; then the
    same ETL on 8 single-thread CPU workers of this machine, and CPU / GPU (medians of passes 2..) with the check
    digests compared."""
    ctx.record({"run": f"data-{ROWS // 1_000_000}M", "kind": "data", **make_data(ROWS)})
    cluster = up(ctx, "defaults-1")
    if not cluster:
        return
    try:
        rendered = ctx.rendered["defaults-1"]
        ctx.record({"run": "defaults-worker-argv", "argv": rendered.spec("worker")["argv"]})
        done = harness.run_client(rendered, rendered.spec("verify")["argv"], ctx.out / "logs" / "defaults-verify.log",
                                  max(30.0, ctx.left() - 60))
        report = Path("/var/lib/dask-reports/verify-latest.json")
        found = json.loads(report.read_text()) if report.exists() else {}
        ctx.record({"run": "defaults-verify", "status": done.returncode, "failures": found.get("failures"),
                    "workload": found.get("workload"), "frames": found.get("frames"),
                    "tail": (done.stdout + done.stderr)[-1200:]})
        etl_run(ctx, "defaults-1", ROWS, 4, passes=4)
    finally:
        cluster.stop()
    gpu = next((r for r in ctx.results if r.get("kind") == "etl" and r["variant"] == "defaults-1"), None)
    cpu = cpu_etl_run(ctx, ROWS, CPU_WORKERS, CPU_PARTITIONS, passes=4) if gpu else None
    if gpu and cpu:
        row: dict[str, Any] = {"run": f"ratio-cpu{CPU_WORKERS}x1-defaults-1", "kind": "cpu-ratio",
                               "gpu_median_s": gpu["median_s"], "cpu_median_s": cpu["median_s"],
                               "ratio": round(cpu["median_s"] / gpu["median_s"], 2), "target": CPU_TARGET,
                               "digests_equal": gpu["digest"] == cpu["digest"]}
        # --dry-run: the "GPU" side is CPU workers on pandas too, so the ratio measures nothing against the target.
        row["met"] = None if ctx.dry_run else row["ratio"] >= CPU_TARGET
        if not row["digests_equal"]:
            row["failed"] = f"check digests differ: GPU {gpu['digest']}, CPU {cpu['digest']}"
        ctx.record(row)


def cpu_etl_run(ctx: Context, rows: int, workers: int, partitions: int, passes: int) -> dict[str, Any] | None:
    """The same ETL on this machine's CPUs, the files the GPU read: `python -m dask_gpu_verify.etl --local-cpu
    WORKERS --threads 1` (a LocalCluster of single-thread processes, dask.dataframe on pandas, tasks shuffle), started
    after the GPU cluster stopped. Its row (median of passes 2..), None when skipped or failed."""
    name = f"etl-cpu{workers}x1-{rows // 1_000_000}M-p{partitions}"
    need = 15 + passes * rows / 4e6
    if ctx.left() < need:
        ctx.record({"run": name, "skipped": f"{ctx.left():.0f} s left, needs about {need:.0f}"})
        return None
    report, log = ctx.out / "etl" / f"{name}.json", ctx.out / "logs" / f"{name}.txt"
    argv = ["python3", "-m", "dask_gpu_verify.etl", "--local-cpu", str(workers), "--threads", "1", "--rows", str(rows),
            "--files", str(max(1, rows // ROWS_PER_FILE)), "--partitions", str(partitions), "--passes", str(passes),
            "--shuffle", "tasks", "--data", str(data_dir(rows)), "--label", name, "--json", str(report)]
    started = time.monotonic()
    log.parent.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=min(400, ctx.left()), check=False,
                              cwd=harness.ROOT)
    except subprocess.TimeoutExpired:
        ctx.record({"run": name, "failed": f"timed out after {time.monotonic() - started:.0f} s"})
        return None
    log.write_text(done.stdout + "\n--- stderr\n" + done.stderr)
    if done.returncode or not report.exists():
        ctx.record({"run": name, "failed": done.stderr[-1500:]})
        return None
    found = json.loads(report.read_text())
    row = {"run": name, "kind": "cpu-etl", "workers": workers, "threads": 1, "backend": found["backend"],
           "rows": rows, "partitions": partitions, **etl_figures(found, started)}
    ctx.record(row)
    return row


def transports(ctx: Context, per_gpu: float, per_gpu_big: float) -> None:
    """ucx, the merges over TCP, tls-ucx and tls (the default) on 1 and N GPUs at the partitioning the sweep chose;
    merges over UCX and TCP at the same rows per GPU on 1 and N GPUs (weak scaling)."""
    n = ctx.gpus
    plan = [("ucx", 1, True, True), ("ucx", n, True, True), ("tcp", 1, False, True), ("tcp", n, False, True),
            ("tls-ucx", 1, True, False), ("tls-ucx", n, True, False), ("tls", 1, True, False), ("tls", n, True, False)]
    for transport, gpus, frames, merge in plan:
        variant = f"{transport}-{gpus}"
        if ctx.only and variant not in ctx.only:
            continue
        cluster = up(ctx, variant)
        if not cluster:
            continue
        if frames:
            etl_run(ctx, variant, ROWS, max(4, int(per_gpu * gpus)))
            if gpus == n:
                etl_run(ctx, variant, ROWS * n, max(16, int(per_gpu_big * gpus)))
        if merge and not ctx.dry_run:
            merge_run(ctx, variant, 4)
        cluster.stop()


def shipped(ctx: Context, merge_rows: int) -> None:
    """The full profile as it ships (auto RMM pool): the ETL at 96 M rows on one GPU and on every GPU, and at N x the
    rows on every GPU (weak scaling), over tls-ucx, then tls; local_cudf_merge at the same rows per GPU on 1 and N."""
    n = ctx.gpus
    for rows in (ROWS, ROWS * n):
        ctx.record({"run": f"data-{rows // 1_000_000}M", "kind": "data", **make_data(rows)})
    one = up(ctx, "shipped-tls-ucx-1")
    if one:
        etl_run(ctx, "shipped-tls-ucx-1", ROWS, 4)  # a file a partition: the fewest the ETL can cut
        one.stop()
    many = up(ctx, f"shipped-tls-ucx-{n}")
    if many:
        for partitions in (max(4, n), max(8, 2 * n)):
            etl_run(ctx, f"shipped-tls-ucx-{n}", ROWS, partitions)
        etl_run(ctx, f"shipped-tls-ucx-{n}", ROWS * n, 4 * n)  # a file a partition
        if not ctx.dry_run:
            merge_run(ctx, f"shipped-tls-ucx-{n}", 4, merge_rows)
        many.stop()
    one = up(ctx, "shipped-tls-ucx-1")
    if one:
        if not ctx.dry_run:
            merge_run(ctx, "shipped-tls-ucx-1", 4, merge_rows)
        one.stop()
    default = up(ctx, f"shipped-tls-{n}")
    if default:
        etl_run(ctx, f"shipped-tls-{n}", ROWS, max(4, n))
        etl_run(ctx, f"shipped-tls-{n}", ROWS * n, 4 * n)
        default.stop()


def change(ctx: Context) -> None:
    """tls -> tls-ucx -> ucx -> tls on the same ports, the verification client on every GPU each time."""
    for transport in (*CHANGE, CHANGE[0]):
        variant = f"change-{transport}"
        cluster = up(ctx, variant)
        if not cluster:
            continue
        rendered = ctx.rendered[variant]
        started = time.monotonic()
        done = harness.run_client(rendered, ["sh", str(rendered.script("verify"))],
                                  ctx.out / "logs" / f"verify-{variant}-{len(ctx.results)}.txt", timeout=120)
        row = {"run": f"verify-{variant}", "kind": "verify", "transport": transport,
               "ports_waited_s": cluster.ports_waited_s, "registered_s": cluster.registered_s,
               "seconds": round(time.monotonic() - started, 1), "passed": done.returncode == 0,
               "last_line": (done.stdout.strip().splitlines() or [""])[-1]}
        if done.returncode:
            row["failed"] = (done.stdout + done.stderr)[-1500:]
        ctx.record(row)
        cluster.stop()


def ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}" if a and b else "-"


def summary(ctx: Context, rows: list[dict[str, Any]]) -> str:
    """Tables: ETL pass 2 by variant, size and partitions, with N-GPU over 1-GPU ratios; pool rounds; merges."""
    n = ctx.gpus
    etls = [r for r in rows if r.get("kind") == "etl" and "-round" not in r["run"]]
    lines = ["| variant | GPUs | rows | partitions | per GPU | MB/partition | pass 2 s | median s | M rows/s |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in etls:
        lines.append(f"| {r['variant']} | {r['gpus']} | {r['rows'] / 1e6:g} M | {r['partitions']} | "
                     f"{r['per_gpu']:g} | {r['mb_per_partition']} | {r['pass2_s']:.2f} | {r['median_s']:.2f} | "
                     f"{r['rows'] / r['median_s'] / 1e6:.0f} |")
    lines += ["", f"Scaling (median of passes 2.., best partitioning of each): {n} GPUs against 1",
              f"| transport | 1 GPU {ROWS / 1e6:g} M s | {n} GPUs {ROWS / 1e6:g} M s | strong (1/N time) | "
              f"{n} GPUs {n} x rows s | weak (throughput) |",
              "| --- | --- | --- | --- | --- | --- |"]
    for transport in ("tcp", "tls", "tls-ucx", "ucx", "shipped-tls-ucx", "shipped-tls"):
        def fastest(variant: str, size: int, pick: Callable[[dict[str, Any]], bool] = lambda r: True) -> float | None:
            found = [r["median_s"] for r in etls if r["variant"] == variant and r["rows"] == size and pick(r)]
            return min(found) if found else None
        t1, tn, tbig = fastest(f"{transport}-1", ROWS), fastest(f"{transport}-{n}", ROWS), \
            fastest(f"{transport}-{n}", ROWS * n)
        if t1 or tn:
            weak = f"{n * t1 / tbig:.2f}" if t1 and tbig else "-"
            shown = [f"{t:.2f}" if t else "-" for t in (t1, tn, tbig)]
            lines.append(f"| {transport} | {shown[0]} | {shown[1]} | {ratio(t1, tn)} | {shown[2]} | {weak} |")
    rounds = [r for r in rows if r.get("kind") == "etl" and "-round" in r["run"]]
    off = [r["pass2_s"] for r in rounds if r["variant"] in ("tcp-1", "tcp-swap-1")]
    on = [r["pass2_s"] for r in rounds if r["variant"] in ("tcp-pool-1", "tcp-swap-pool-1")]
    if off and on:
        lines += ["", "RMM pool, interleaved rounds on one GPU each (pass 2 of each round; GPUs swapped halfway in "
                  "the pool phase):",
                  f"- no pool: {off} median {statistics.median(off):.3f} s",
                  f"- pool 0.8: {on} median {statistics.median(on):.3f} s",
                  f"- no pool / pool: {statistics.median(off) / statistics.median(on):.2f}"]
    merges = [r for r in rows if r.get("kind") == "merge"]
    if merges:
        lines += ["", "| merge | GPUs | chunks a side x rows | GiB/s |", "| --- | --- | --- | --- |"]
        lines += [f"| {r['variant']} | {r['gpus']} | {r['chunks']} x {r['chunk_rows'] // 1_000_000} M | "
                  f"{r['gib_per_s']} |" for r in merges]
    cpus = [r for r in rows if r.get("kind") == "cpu-etl"]
    if cpus:
        lines += ["", "The same ETL on this machine's CPUs (LocalCluster of single-thread worker processes, "
                  "dask.dataframe on pandas, tasks shuffle, the same files):",
                  "| CPU run | workers x threads | partitions | passes s | pass 2 s | median s |",
                  "| --- | --- | --- | --- | --- | --- |"]
        lines += [f"| {r['run']} | {r['workers']} x {r['threads']} | {r['partitions']} | {r['passes_s']} | "
                  f"{r['pass2_s']:.2f} | {r['median_s']:.2f} |" for r in cpus]
    for r in (r for r in rows if r.get("kind") == "cpu-ratio"):
        verdict = "dry run, no GPU: not a measurement" if r["met"] is None else "met" if r["met"] else "NOT met"
        lines.append(f"- CPU / GPU (median of passes 2..): {r['cpu_median_s']:.3f} / {r['gpu_median_s']:.3f} s = "
                     f"**{r['ratio']:.2f} x** (target >= {r['target']:g} x: {verdict}); "
                     f"check digests {'equal' if r['digests_equal'] else 'DIFFER'}")
    digests = {(r["rows"], r["digest"]) for r in rows if r.get("kind") in ("etl", "cpu-etl")}
    sizes = {size for size, _ in digests}
    lines += ["", "Check digests: " + ("one per size, every run the same" if len(digests) == len(sizes)
                                       else f"DIFFER: {sorted(digests)}")]
    verifies = [r for r in rows if r.get("kind") == "verify"]
    if verifies:
        lines += ["", "Transport change on the same ports (tls -> tls-ucx -> ucx -> tls):"]
        lines += [f"- {r['transport']}: ports waited {r['ports_waited_s']} s, workers registered in "
                  f"{r['registered_s']} s, verification {'passed' if r['passed'] else 'FAILED'} in {r['seconds']} s"
                  for r in verifies]
    problems = [r["run"] for r in rows if "failed" in r]
    if problems:
        lines.append(f"Failed: {', '.join(problems)}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--phase", choices=("sweep", "transports", "change", "pool", "defaults", "shipped", "summary"),
                        required=True)
    parser.add_argument("--rounds", type=int, default=6, help="pool: interleaved rounds (default 6)")
    parser.add_argument("--partitions", type=int, default=4, help="pool: partitions at 96 M rows (default 4)")
    parser.add_argument("--budget", type=float, default=540, help="seconds this phase may take (default 540)")
    parser.add_argument("--only", default="", help="transports: these variants only (comma-separated)")
    parser.add_argument("--dry-run", action="store_true",
                        help="this harness on a machine without a GPU: CPU workers, pandas, 1/100 of the rows")
    parser.add_argument("--per-gpu", type=float, default=2, help="transports: partitions per GPU at 96 M rows")
    parser.add_argument("--per-gpu-big", type=float, default=4, help="transports: partitions per GPU at 4x rows")
    parser.add_argument("--merge-rows", type=int, default=50_000_000,
                        help="shipped: rows of each local_cudf_merge chunk (4 chunks a side per GPU)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    global ROWS, ROWS_PER_FILE  # noqa: PLW0603 - the dry run's smaller data
    if args.dry_run:
        gpus, ROWS, ROWS_PER_FILE = 2, ROWS // 100, ROWS_PER_FILE // 100
    elif args.phase == "summary":  # on any machine, from the runs of every phase gathered in OUT/runs.jsonl
        gpus = max(json.loads(line).get("gpus", 1) for line in (args.out / "runs.jsonl").read_text().splitlines())
    else:
        gpus = len(subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=True).stdout.splitlines())
    ctx = Context(args.out, gpus, args.budget, dry_run=args.dry_run,
                  only=tuple(name for name in args.only.split(",") if name))
    if args.phase != "summary":
        prefix = {"sweep": ("tcp-1", f"tcp-{gpus}", "tcp-pool-1"), "transports": ("tcp-1", f"tcp-{gpus}", "tls", "ucx"),
                  "change": ("change",), "pool": ("tcp-1", "tcp-pool-1", "tcp-swap"),
                  "defaults": ("defaults",), "shipped": ("shipped",)}[args.phase]
        wanted = {name: settings for name, settings in variants(gpus).items() if name.startswith(prefix)}
        if args.dry_run:  # no GPU here: every variant a CPU worker, no GPU selection or pool
            wanted = {name: {**{k: v for k, v in settings.items() if k not in ("dask_worker_gpus",
                                                                                 "dask_worker_rmm_pool_size")},
                             "dask_worker_allow_cpu": True}
                      for name, settings in wanted.items() if "ucx" not in name}
        ctx.rendered = harness.render_all(wanted, args.out)
        ctx.record({"run": f"render-{args.phase}", "kind": "render", "variants": sorted(wanted),
                    "seconds": round(time.monotonic() - ctx.started, 1)})
        harness.install_tls(args.out)
        if args.phase == "sweep":
            sweep(ctx)
        elif args.phase == "transports":
            transports(ctx, args.per_gpu, args.per_gpu_big)
        elif args.phase == "pool":
            pool(ctx, args.rounds, args.partitions)
        elif args.phase == "defaults":
            defaults(ctx)
        elif args.phase == "shipped":
            shipped(ctx, args.merge_rows)
        else:
            change(ctx)
    rows = [json.loads(line) for line in (args.out / "runs.jsonl").read_text().splitlines() if line.strip()]
    text = summary(ctx, rows)
    (args.out / "summary.md").write_text(text + "\n")
    print(text)
    return 1 if any("failed" in r for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
