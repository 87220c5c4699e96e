#!/usr/bin/env python3
"""Polars on the GPUs of one host through the cluster the bundle renders (issue 42): cudf-polars' DaskEngine on the
polars image profile's workers, on 1 GPU and on every GPU, against CPU Polars on all of the host's cores and
against the same engine on a bare cluster (`dask scheduler` and `dask cuda worker` started by hand, as cudf-polars'
docs start them). Run on a lent GPU machine by tests/gpu/gpu-proof-polars.sh (which installs the carried wheels).

    python3 tests/gpu/polars_scaling.py --out OUT --phase all|every|one|bare [--scale 100] [--budget SECONDS]

Phases: every - the cluster on every GPU: the verification's Polars check, the engine's start (3 times), the
PDS-H-like queries (their data generated on the GPUs first) with CPU Polars beside them, and the seeds-like ETL in
Polars on the GPUs and on CPU Polars; one - the same queries and ETL on GPU 0 alone; bare - the queries on every
GPU of a bare cluster. Writes OUT/runs.jsonl (one line per run), OUT/summary.md and each client's output under
OUT/logs. A run that would not fit the time left is skipped and says so.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402 - beside this script

# The polars profile as docs/polars.md sets it. The firewall is rendered only: the lent machines have no nftables,
# and no network for anyone to reach them by.
POLARS = {"dask_image_profile": "polars", "dask_firewall_enabled": True, "dask_polars_unencrypted_ack": True}
DATA = Path("/var/tmp")  # pdsh-sf<scale> kept while the machine stays warm: a later call reuses the tables
ETL_DATA = Path("/var/tmp/etl-polars")
ETL_ROWS, ETL_FILES = 96_000_000, 4


def ports(block: int) -> dict[str, int]:
    base = 8600 + 20 * block
    return {"dask_scheduler_port": base, "dask_dashboard_port": base + 1, "dask_worker_http_port": base + 10}


VARIANTS = {"polars-all": {**POLARS, **ports(0)}, "polars-1": {**POLARS, "dask_worker_gpus": ["0"], **ports(1)}}
BARE_PORT = 8680


@dataclass
class Context:
    out: Path
    budget: float
    scale: float
    passes: int
    started: float = field(default_factory=time.monotonic)

    @property
    def left(self) -> float:
        return self.budget - (time.monotonic() - self.started)

    def record(self, entry: dict[str, Any]) -> None:
        entry = {"at_s": round(time.monotonic() - self.started, 1), **entry}
        with (self.out / "runs.jsonl").open("a") as sink:
            sink.write(json.dumps(entry) + "\n")
        print(json.dumps(entry)[:600], flush=True)


def client(ctx: Context, env: dict[str, str], name: str, argv: list[str], need: float) -> dict[str, Any] | None:
    """One gpu_polars client command; its JSON report, recorded under `name` (None when it did not run or fail)."""
    if ctx.left < need:
        ctx.record({"run": name, "skipped": f"{ctx.left:.0f} s left, {need:.0f} s wanted"})
        return None
    report = ctx.out / "logs" / f"{name}.json"
    report.parent.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "dask_gpu_verify.gpu_polars", *argv, "--json", str(report)]
    started = time.monotonic()
    try:
        done = subprocess.run(command, env={**os.environ, **env}, capture_output=True, text=True,
                              timeout=max(30.0, ctx.left - 15), check=False)
        status, tail = done.returncode, (done.stdout + done.stderr)[-3000:]
    except subprocess.TimeoutExpired:
        status, tail = 124, "timed out"
    (ctx.out / "logs" / f"{name}.log").write_text(tail)
    found = json.loads(report.read_text()) if report.exists() else None
    ctx.record({"run": name, "status": status, "wall_s": round(time.monotonic() - started, 1),
                **({"report": found} if found else {"tail": tail[-1500:]})})
    return found


def bench_argv(ctx: Context, cpu: bool) -> list[str]:
    return ["bench", "--scale", f"{ctx.scale:g}", "--folder", str(DATA / f"pdsh-sf{ctx.scale:g}"),
            "--passes", str(ctx.passes),
            "--cpu-passes", "1" if cpu else "0"]


def etl_argv(cpu: bool = False) -> list[str]:
    return ["etl", "--folder", str(ETL_DATA), "--rows", str(ETL_ROWS), "--files", str(ETL_FILES), "--passes", "3",
            *(["--cpu"] if cpu else [])]


def start(ctx: Context, rendered: harness.Rendered) -> harness.Cluster | None:
    """The rendered cluster started, and its start recorded (None, with the error recorded, when it did not)."""
    try:
        cluster = harness.Cluster(rendered, ctx.out / "logs").start()
    except RuntimeError as error:
        ctx.record({"run": f"start-{rendered.name}", "error": str(error)[-2000:]})
        return None
    ctx.record({"run": f"start-{rendered.name}", "registered_s": cluster.registered_s,
                "ports_waited_s": cluster.ports_waited_s, "workers": rendered.workers,
                "worker_argv": rendered.spec("worker")["argv"], "shm_size": rendered.spec("worker")["shm_size"]})
    return cluster


def rendered_runs(ctx: Context, rendered: harness.Rendered, cpu: bool, only_queries: bool = False) -> None:
    env = {**rendered.client_env, "DASK_SCHEDULER_ADDRESS": rendered.address}
    cluster = start(ctx, rendered)
    if cluster is None:
        return
    try:
        name = rendered.name
        if only_queries:
            client(ctx, env, f"{name}-queries-sf{ctx.scale:g}", bench_argv(ctx, cpu), 150)
            return
        client(ctx, env, f"{name}-verify", ["verify", "--rows", "4000000"], 60)
        client(ctx, env, f"{name}-starts", ["starts", "--times", "3"], 60)
        client(ctx, env, f"{name}-queries", bench_argv(ctx, cpu), 150)
        client(ctx, env, f"{name}-etl", etl_argv(), 90)
    finally:
        cluster.stop()


def clients_runs(ctx: Context, rendered: harness.Rendered, cpu_scale: float) -> None:
    """The bundle's own clients on the polars cluster: dask-gpu-verify as the verify unit runs it (its Polars check),
    dask-gpu-bench with --polars-scale (its Polars section), then CPU Polars at cpu_scale on the queries that missed
    10 x at scale 100."""
    cluster = start(ctx, rendered)
    if cluster is None:
        return
    try:
        for name, argv, need in (
                ("verify-cli", rendered.spec("verify")["argv"], 90),
                ("bench-cli", ["dask-gpu-bench", "--scheduler", rendered.address, "--expect-workers",
                               str(rendered.workers), "--no-dask-cuda", "--runs", "3", "--label", "polars",
                               "--polars-scale", f"{ctx.scale:g}", "--polars-folder", str(DATA / "pdsh-bench"),
                               "--out", str(ctx.out / "logs" / "bench")], 200)):
            if ctx.left < need:
                ctx.record({"run": name, "skipped": f"{ctx.left:.0f} s left"})
                continue
            started = time.monotonic()
            done = harness.run_client(rendered, argv, ctx.out / "logs" / f"{name}.log", ctx.left - 10)
            report = (Path("/var/lib/dask-reports/verify-latest.json") if name == "verify-cli"
                      else ctx.out / "logs" / "bench.json")
            found = json.loads(report.read_text()) if report.exists() else {}
            ctx.record({"run": name, "status": done.returncode, "wall_s": round(time.monotonic() - started, 1),
                        "polars": found.get("polars"), "failures": found.get("failures"),
                        "tail": (done.stdout + done.stderr)[-1500:]})
        env = {**rendered.client_env, "DASK_SCHEDULER_ADDRESS": rendered.address}
        large = Context(ctx.out, ctx.left + (time.monotonic() - ctx.started), cpu_scale, 1, ctx.started)
        client(large, env, f"cpu-sf{cpu_scale:g}", ["bench", "--scale", f"{cpu_scale:g}", "--folder",
                                                    str(DATA / f"pdsh-sf{cpu_scale:g}"), "--passes", "1",
                                                    "--queries", "q1,q6,q10", "--cpu-passes", "1"], 150)
    finally:
        cluster.stop()


def cpu_runs(ctx: Context, queries: str) -> None:
    """CPU Polars on every core of this machine, one timed pass of `queries` at the large phase's scale (the tables
    the GPU runs made), as `cpu-queries-sfSCALE`."""
    name = f"cpu-queries-sf{ctx.scale:g}"
    folder = DATA / f"pdsh-sf{ctx.scale:g}"
    if ctx.left < 60 or not (folder / "manifest.json").exists():
        ctx.record({"run": name, "skipped": f"{ctx.left:.0f} s left; tables there: {folder.exists()}"})
        return
    started = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-m", "dask_gpu_verify.gpu_polars", "cpu", "--folder", str(folder),
                               "--queries", queries, "--passes", "1"], capture_output=True, text=True,
                              timeout=max(30.0, ctx.left - 15), check=False)
        status, out = done.returncode, done.stdout
        tail = (done.stdout + done.stderr)[-1500:]
    except subprocess.TimeoutExpired:
        status, out, tail = 124, "", "timed out"
    try:
        found = json.loads(out) if status == 0 else None
    except ValueError:
        found = None
    ctx.record({"run": name, "status": status, "wall_s": round(time.monotonic() - started, 1),
                **({"report": found} if found else {"tail": tail})})


def bare_runs(ctx: Context) -> None:
    """The engine on a bare cluster of every GPU: a TCP scheduler and `dask cuda worker` with nothing else."""
    env = {**os.environ, "DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION": "False"}
    logs = ctx.out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    address = f"tcp://127.0.0.1:{BARE_PORT}"
    commands = [["python3", "-m", "dask", "scheduler", "--host", "127.0.0.1", "--port", str(BARE_PORT),
                 "--dashboard-address", f"127.0.0.1:{BARE_PORT + 1}"],
                # --resources GPU=1 only lets the client count its GPU workers (the bundle's workers carry it too)
                ["python3", "-m", "dask", "cuda", "worker", address, "--local-directory", "/tmp/bare-worker",
                 "--resources", "GPU=1"]]
    processes = []
    try:
        for index, command in enumerate(commands):
            sink = (logs / f"bare-{index}.log").open("ab")
            processes.append(subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, env=env,
                                              start_new_session=True))
            time.sleep(3 if index == 0 else 0)
        deadline = time.monotonic() + 120
        gpus = int(subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False)
                   .stdout.count("GPU "))
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{BARE_PORT + 1}/json/counts.json", timeout=2) as r:
                    if json.load(r).get("workers", 0) >= gpus:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                ctx.record({"run": "start-bare", "error": "workers did not register in 120 s"})
                return
            time.sleep(0.5)
        ctx.record({"run": "start-bare", "workers": gpus, "argv": commands})
        bare_env = {"DASK_SCHEDULER_ADDRESS": address, "DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION": "False"}
        client(ctx, bare_env, "bare-starts", ["starts", "--times", "3"], 60)
        client(ctx, bare_env, "bare-queries", bench_argv(ctx, cpu=False), 120)
    finally:
        for process in processes[::-1]:
            try:
                os.killpg(process.pid, signal.SIGTERM)
                process.wait(20)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                os.killpg(process.pid, signal.SIGKILL)


def median(report: dict[str, Any] | None, *keys: str) -> float | None:
    value: Any = report
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return float(value) if isinstance(value, (int, float)) else None


def summary(out: Path) -> str:
    """The tables from runs.jsonl: per query the seconds on every GPU, one GPU, bare, CPU, and the ratios."""
    runs = {}
    for line in (out / "runs.jsonl").read_text().splitlines():
        entry = json.loads(line)
        if "report" in entry:
            runs[entry["run"]] = entry["report"]
    every, one, bare = runs.get("polars-all-queries"), runs.get("polars-1-queries"), runs.get("bare-queries")
    cpu = (every or {}).get("cpu") or {}
    names = list((every or one or bare or {}).get("gpu") or {})
    lines = ["| query | all GPUs s | 1 GPU s | bare all GPUs s | CPU Polars s | all/1 | CPU/all | bundle/bare |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]

    def cell(value: float | None) -> str:
        return f"{value:.3f}" if value is not None else "-"

    def ratio(a: float | None, b: float | None) -> str:
        return f"{a / b:.2f}" if a and b else "-"

    for name in names:
        a, o, b = (median(r, "gpu", name, "median") for r in (every, one, bare))
        c = median(cpu, name, "median")
        lines.append(f"| {name} | {cell(a)} | {cell(o)} | {cell(b)} | {cell(c)} | {ratio(o, a)} | {ratio(c, a)} | "
                     f"{ratio(b, a)} |")
    etl_all, etl_one, etl_cpu = (median(runs.get(k), "median") for k in ("polars-all-etl", "polars-1-etl",
                                                                          "cpu-etl"))
    lines += ["", "| ETL (96 M rows) | all GPUs s | 1 GPU s | CPU Polars s | all/1 | CPU/all |",
              "| --- | --- | --- | --- | --- | --- |",
              f"| Polars | {cell(etl_all)} | {cell(etl_one)} | {cell(etl_cpu)} | {ratio(etl_one, etl_all)} | "
              f"{ratio(etl_cpu, etl_all)} |", "",
              *large_table(runs), "",
              "Engine start (median of 3): " + ", ".join(
                  f"{k}: {median(runs.get(k), 'median_start')}" for k in ("polars-all-starts", "polars-1-starts",
                                                                          "bare-starts") if k in runs)]
    return "\n".join(lines) + "\n"


def large_table(runs: dict[str, Any]) -> list[str]:
    """The large phase's tables (every GPU against one, per scale), where it ran."""
    scales = sorted({name.rsplit("-sf", 1)[1] for name in runs if "-queries-sf" in name}, key=float)
    lines = []
    for scale in scales:
        every, one = runs.get(f"polars-all-queries-sf{scale}"), runs.get(f"polars-1-queries-sf{scale}")
        cpu = runs.get(f"cpu-queries-sf{scale}") or {}
        lines += ["", f"| scale {scale}: query | all GPUs s | 1 GPU s | CPU Polars s | all/1 | CPU/all | same result |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        for name in (every or one or {}).get("gpu") or {}:
            a, o, c = median(every, "gpu", name, "median"), median(one, "gpu", name, "median"), median(cpu, name,
                                                                                                          "median")
            digests = {entry.get(name, {}).get("digest") for entry in ((every or {}).get("gpu", {}),
                                                                       (one or {}).get("gpu", {}), cpu)
                       if entry.get(name)}
            shown = " | ".join(f"{v:.3f}" if v else "-" for v in (a, o, c))
            ratios = " | ".join(f"{x / y:.2f}" if x and y else "-" for x, y in ((o, a), (c, a)))
            lines.append(f"| {name} | {shown} | {ratios} | {'yes' if len(digests) == 1 else 'NO'} |")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--phase", choices=["all", "every", "one", "bare", "large", "clients", "summary"],
                        default="all", help="large: the queries alone on every GPU and on one (no CPU Polars) at "
                        "--scale; clients: dask-gpu-verify and dask-gpu-bench at --scale, CPU Polars at --cpu-scale")
    parser.add_argument("--cpu-scale", type=float, default=500.0)
    parser.add_argument("--cpu-queries", default="", help="large: these queries on CPU Polars too, at --scale "
                        "(comma-separated; default none)")
    parser.add_argument("--scale", type=float, default=100.0)
    parser.add_argument("--passes", type=int, default=2)
    parser.add_argument("--budget", type=float, default=540)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    ctx = Context(args.out, args.budget, args.scale, args.passes)
    if args.phase != "summary":
        harness.install_tls(args.out)
    if args.phase in ("all", "every"):
        rendered = harness.render("polars-all", VARIANTS["polars-all"], args.out)
        rendered_runs(ctx, rendered, cpu=True)
        client(ctx, {}, "cpu-etl", etl_argv(cpu=True), 120)
    if args.phase in ("all", "one"):
        rendered_runs(ctx, harness.render("polars-1", VARIANTS["polars-1"], args.out), cpu=False)
    if args.phase in ("all", "bare"):
        bare_runs(ctx)
    if args.phase == "clients":
        clients_runs(ctx, harness.render("polars-all", VARIANTS["polars-all"], args.out), args.cpu_scale)
    if args.phase == "large":
        for name in ("polars-all", "polars-1"):
            rendered_runs(ctx, harness.render(name, VARIANTS[name], args.out), cpu=False, only_queries=True)
        if args.cpu_queries:
            cpu_runs(ctx, args.cpu_queries)
    text = summary(args.out)
    (args.out / "summary.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
