"""Hundreds of workers on one deployed scheduler, over its mutual TLS: time to ready, the scheduler's CPU and memory,
registration under a handshake storm, and the verification at that count.

    tests/fleet/many_workers.py --bundle ARTIFACTS/client/env.sh --workers 500 --processes 4
        [--scheduler-host fleet-sched] [--verify] [--out reports/fleet/many-workers.json]
    tests/fleet/many_workers.py --bundle env.sh --listen 127.0.0.1 --scheduler-pid PID \\
        --metrics-url http://127.0.0.1:8787/metrics --workers 500 --processes 12 --verify

Run it with a Python made from the cluster's lock (scripts/client-env.sh, plus images/verify installed without
dependencies): the verification compares every worker's packages with the scheduler's, and load workers from
another environment are rightly flagged.

The workers are real distributed.Worker objects (one thread each, no dashboard, no GPU: CUDA_VISIBLE_DEVICES is
empty in their processes) started all at once in a few freshly spawned processes, each with its own TLS connection,
heartbeats and task stream: a load generator that is cheap in memory (one interpreter holds many workers), so
several hundred fit on one machine. The scheduler is either the deployed one (its container on the scheduler host,
read with `docker stats`, /metrics read inside that host) or, with --scheduler-pid, a local process (the units'
command line run as a plain process, tests/gpu/gpu-proof-many-workers.sh): its CPU and RSS read from /proc and
/metrics from --metrics-url. What this does not show: hundreds of worker processes' own start-up (nannies) on hosts
of their own; here they share the machine's cores with the scheduler, so times are pessimistic.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import resource
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any, Protocol

from distributed import Client, Worker
from distributed.security import Security


def bundle(path: Path) -> dict[str, str]:
    pairs = (line.removeprefix("export ").split("=", 1) for line in path.read_text().splitlines()
             if line.startswith("export "))
    return {key: value.strip("'\"") for key, value in pairs}


def security(env: dict[str, str]) -> Security:
    return Security(tls_ca_file=env["DASK_DISTRIBUTED__COMM__TLS__CA_FILE"],
                    tls_client_cert=env["DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT"],
                    tls_client_key=env["DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY"],
                    tls_worker_cert=env["DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT"],
                    tls_worker_key=env["DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY"], require_encryption=True)


def serve(env: dict[str, str], first: int, count: int, listen: str, memory_limit: str, stop: Any) -> None:
    """One process: `count` workers started concurrently, kept until `stop` is set."""
    # Load workers are CPU workers: on a GPU machine each would otherwise see (and claim) the host's GPUs, and the
    # verification would rightly fail them for sharing one GPU.
    os.environ["CUDA_VISIBLE_DEVICES"] = ""

    async def run() -> None:
        workers = [Worker(env["DASK_SCHEDULER_ADDRESS"], nthreads=1, name=f"load-{first + index}",
                          security=security(env), dashboard=False, memory_limit=memory_limit, host=listen,
                          local_directory=f"/tmp/many-workers-{os.getpid()}") for index in range(count)]
        await asyncio.gather(*(worker.start() for worker in workers))
        while not stop.is_set():
            await asyncio.sleep(0.5)
        await asyncio.gather(*(worker.close(timeout=30) for worker in workers), return_exceptions=True)
    asyncio.run(run())


class Meter(Protocol):
    def sample(self) -> dict[str, Any]: ...


def scheduler_stats(host: str, container: str) -> dict[str, Any]:
    """CPU % and memory of the scheduler's container, read inside the scheduler host with docker stats."""
    out = subprocess.run(["docker", "exec", host, "docker", "stats", "--no-stream", "--format",
                          "{{.CPUPerc}} {{.MemUsage}}", container], capture_output=True, text=True, check=False)
    parts = out.stdout.split()
    return {"cpu": parts[0], "memory": parts[1]} if len(parts) >= 2 else {"error": out.stderr.strip()[:200]}


class ContainerMeter:
    """The deployed scheduler: its container's `docker stats` (CPU % over docker's own short window)."""

    def __init__(self, host: str, container: str) -> None:
        self.host, self.container = host, container

    def sample(self) -> dict[str, Any]:
        return scheduler_stats(self.host, self.container)


class ProcessMeter:
    """A local scheduler process: CPU % of one core since the previous sample (as docker stats counts it), its
    resident memory and open files, from /proc."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.tick = os.sysconf("SC_CLK_TCK")
        self.last = (time.monotonic(), self.cpu_seconds())

    def cpu_seconds(self) -> float:
        # Fields after the command's closing parenthesis: utime and stime are the 12th and 13th.
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / self.tick

    def rss_mib(self) -> float:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def sample(self) -> dict[str, Any]:
        try:
            now, cpu = time.monotonic(), self.cpu_seconds()
            rss, files = self.rss_mib(), len(os.listdir(f"/proc/{self.pid}/fd"))
        except OSError as error:
            return {"error": f"scheduler process {self.pid}: {error}"}
        percent = 100 * (cpu - self.last[1]) / max(now - self.last[0], 1e-6)
        self.last = (now, cpu)
        return {"cpu": f"{percent:.2f}%", "memory": f"{rss:.1f}MiB", "cpu_percent": round(percent, 2),
                "rss_mib": round(rss, 1), "open_files": files}


def cpu_percent(stats: dict[str, Any]) -> float:
    try:
        return float(str(stats.get("cpu", "")).rstrip("%"))
    except ValueError:
        return -1.0


def machine_jiffies() -> tuple[int, int]:
    """Busy and total jiffies of all cores (/proc/stat), or zeros where there is no /proc."""
    try:
        values = [int(value) for value in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    except (OSError, ValueError, IndexError):
        return 0, 0
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return sum(values) - idle, sum(values)


METRICS_READ = """
import time, urllib.request
started = time.monotonic()
body = urllib.request.urlopen("http://127.0.0.1:{port}/metrics", timeout=60).read().decode()
lines = [line for line in body.splitlines() if line and not line.startswith("#")]
print(len(body), round(time.monotonic() - started, 3), len(lines))
"""


def scheduler_metrics(host: str, port: int) -> dict[str, Any]:
    """One scrape of the scheduler's /metrics (what Prometheus's dask-scheduler job reads), from inside the scheduler
    host (the dashboard binds loopback there): bytes, seconds and samples."""
    out = subprocess.run(["docker", "exec", host, "python3", "-c", METRICS_READ.format(port=port)],
                         capture_output=True, text=True, check=False)
    parts = out.stdout.split()
    if len(parts) != 3:
        return {"error": (out.stderr.strip() or out.stdout.strip())[-200:]}
    return {"bytes": int(parts[0]), "seconds": float(parts[1]), "samples": int(parts[2])}


def metrics_at(url: str) -> dict[str, Any]:
    """One scrape of /metrics at a URL this machine reaches: bytes, seconds and samples."""
    started = time.monotonic()
    try:
        body = urllib.request.urlopen(url, timeout=60).read().decode()  # noqa: S310 (the operator's URL)
    except OSError as error:
        return {"error": str(error)[-200:]}
    lines = [line for line in body.splitlines() if line and not line.startswith("#")]
    return {"bytes": len(body), "seconds": round(time.monotonic() - started, 3), "samples": len(lines)}


def verify(args: argparse.Namespace, env: dict[str, str], target: int) -> dict[str, Any]:
    """dask-gpu-verify against every worker: its exit status, time, output (a line per host above 32 workers) and the
    gist of its JSON report."""
    report = args.out.with_suffix(".verify.json")
    beside = Path(sys.executable).parent / "dask-gpu-verify"
    program = str(beside) if beside.exists() else shutil.which("dask-gpu-verify") or str(beside)
    command = [program, "--expect-workers", str(target), "--allow-cpu",
               "--bandwidth-mib", str(args.bandwidth_mib), "--json", str(report)]
    started = time.monotonic()
    try:
        run = subprocess.run(command, env={**os.environ, **env}, capture_output=True, text=True, check=False,
                             timeout=args.verify_timeout)
    except subprocess.TimeoutExpired as expired:
        stdout = expired.stdout.decode() if isinstance(expired.stdout, bytes) else expired.stdout or ""
        return {"rc": None, "timed_out": args.verify_timeout, "seconds": round(time.monotonic() - started, 1),
                "tail": stdout.splitlines()[-6:]}
    args.out.with_suffix(".verify.txt").write_text(run.stdout + run.stderr[-4000:])
    result: dict[str, Any] = {"rc": run.returncode, "seconds": round(time.monotonic() - started, 1),
                              "output_lines": len(run.stdout.splitlines()), "tail": run.stdout.splitlines()[-6:],
                              "stderr_tail": run.stderr.splitlines()[-6:]}
    if report.exists():
        found = json.loads(report.read_text())
        result["report"] = {key: found.get(key) for key in ("ok", "backend", "workers_registered", "gpus", "timings",
                                                             "bandwidth_cluster")}
        result["report"]["workload_seconds"] = found.get("workload", {}).get("seconds")
        result["report"]["frames_seconds"] = found.get("frames", {}).get("seconds")
        result["report"]["failures"] = len(found.get("failures", []))
        result["report"]["first_failures"] = found.get("failures", [])[:5]
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bundle", type=Path, required=True,
                        help="the cluster's client/env.sh (DASK_SCHEDULER_ADDRESS and the TLS files)")
    parser.add_argument("--workers", type=int, default=500)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--listen", default="10.232.0.1",
                        help="address the workers listen on, one the scheduler reaches (default: this machine on the "
                        "fleet network)")
    where = parser.add_argument_group("the scheduler's CPU, memory and /metrics",
                                      "default: its container on --scheduler-host, read by docker exec")
    where.add_argument("--scheduler-host", default="fleet-sched")
    where.add_argument("--scheduler-container", default="dask-scheduler")
    where.add_argument("--dashboard-port", type=int, default=8787,
                       help="the scheduler's HTTP port (dask_dashboard_port), where /metrics is read")
    where.add_argument("--scheduler-pid", type=int, default=None,
                       help="a local scheduler process: CPU and RSS from /proc instead of docker stats")
    where.add_argument("--metrics-url", default=None,
                       help="read /metrics at this URL (e.g. http://127.0.0.1:8787/metrics), not inside the scheduler "
                       "host")
    parser.add_argument("--timeout", type=float, default=600, help="seconds to wait for every worker to register")
    parser.add_argument("--memory-limit", default="0",
                        help="each load worker's memory limit (default 0: none. The workers of one process share its "
                        "memory, and a worker's limit is checked against the whole process's: with a limit, every "
                        "worker of a process pauses once the process holds more than it, and no task finishes)")
    parser.add_argument("--verify", action="store_true", help="run dask-gpu-verify against all of them")
    parser.add_argument("--bandwidth-mib", type=int, default=16,
                        help="the verification's per-worker bandwidth probe size (default 16 MiB)")
    parser.add_argument("--verify-timeout", type=float, default=900, help="seconds the verification may take")
    parser.add_argument("--out", type=Path, default=Path("reports/fleet/many-workers.json"))
    args = parser.parse_args(argv)
    env = bundle(args.bundle)
    meter: Meter = (ProcessMeter(args.scheduler_pid) if args.scheduler_pid is not None
                    else ContainerMeter(args.scheduler_host, args.scheduler_container))

    def metrics() -> dict[str, Any]:
        return metrics_at(args.metrics_url) if args.metrics_url else scheduler_metrics(args.scheduler_host,
                                                                                        args.dashboard_port)

    args.out.parent.mkdir(parents=True, exist_ok=True)
    client = Client(env["DASK_SCHEDULER_ADDRESS"], security=security(env), timeout=60)
    before = len(client.scheduler_info(n_workers=-1)["workers"])
    target = before + args.workers
    local = args.scheduler_pid is not None
    if local:  # its CPU % is measured since the meter was made
        time.sleep(2)
    idle = meter.sample()
    metrics_before = metrics()
    # Spawned, not forked: this process already runs the client's thread, and a worker process starts from scratch.
    context = multiprocessing.get_context("spawn")
    stop = context.Event()
    share = [args.workers // args.processes + (index < args.workers % args.processes)
             for index in range(args.processes)]
    busy_started, total_started = machine_jiffies()
    started = time.monotonic()
    procs = [context.Process(target=serve,
                             args=(env, sum(share[:index]), count, args.listen, args.memory_limit, stop))
             for index, count in enumerate(share)]
    for proc in procs:
        proc.start()
    seen, marks, peak, last_print = before, {}, idle, 0.0
    while seen < target and time.monotonic() - started < args.timeout:
        time.sleep(1)
        seen = len(client.scheduler_info(n_workers=-1)["workers"])
        elapsed = time.monotonic() - started
        for share_of in (0.5, 0.9, 1.0):
            if seen - before >= share_of * args.workers and share_of not in marks:
                marks[share_of] = round(elapsed, 1)
        if local or int(elapsed) % 5 == 0:
            stats = meter.sample()
            peak = stats if cpu_percent(stats) >= cpu_percent(peak) else peak
        if elapsed - last_print >= 5:
            last_print = elapsed
            print(f"[many-workers] {seen - before}/{args.workers} registered after {elapsed:.0f} s; scheduler peak "
                  f"{peak}", flush=True)
    registering = time.monotonic() - started
    busy_ended, total_ended = machine_jiffies()
    cpus = os.cpu_count() or 1
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    result: dict[str, Any] = {"workers": args.workers, "processes": args.processes, "registered": seen - before,
                              "workers_before": before,
                              "seconds_to": {f"{int(k * 100)}%": v for k, v in marks.items()},
                              "machine": {"cpus": cpus, "nofile_soft": soft, "nofile_hard": hard},
                              "scheduler_idle": idle, "scheduler_while_registering": peak}
    if total_ended > total_started:
        result["machine"]["busy_cores_while_registering"] = round(
            cpus * (busy_ended - busy_started) / (total_ended - total_started), 2)
        result["machine"]["registering_seconds"] = round(registering, 1)
    if local:  # the steady figure is the next 10 s alone
        meter.sample()
    time.sleep(10)
    result["scheduler_steady"] = meter.sample()
    result["scheduler_metrics"] = {f"{before}_workers": metrics_before, f"{seen}_workers": metrics()}
    started = time.monotonic()
    total = client.submit(sum, client.map(lambda x: x + 1, range(4 * args.workers))).result(timeout=300)
    result["map_4_tasks_per_worker"] = {"tasks": 4 * args.workers, "seconds": round(time.monotonic() - started, 1),
                                        "exact": total == sum(range(1, 4 * args.workers + 1))}
    print(json.dumps(result, indent=1), flush=True)
    if args.verify:
        result["verify"] = verify(args, env, target)
        result["scheduler_after_verify"] = meter.sample()
    stop.set()
    for proc in procs:
        proc.join(60)
        if proc.is_alive():
            proc.kill()
    client.close()
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))
    return 0 if result["registered"] == args.workers and result.get("verify", {}).get("rc", 0) == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
