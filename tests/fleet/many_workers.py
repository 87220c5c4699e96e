"""Hundreds of workers on one deployed scheduler, over its mutual TLS: time to ready, the scheduler's CPU and memory,
registration under a handshake storm, and the verification at that count.

    tests/fleet/many_workers.py --bundle ARTIFACTS/client/env.sh --workers 500 --processes 4
        [--scheduler-host fleet-sched] [--verify] [--out reports/fleet/many-workers.json]

Run it with a Python made from the cluster's lock (scripts/client-env.sh, plus images/verify installed without
dependencies): the verification compares every worker's packages with the scheduler's, and load workers from
another environment are rightly flagged.

The workers are real distributed.Worker objects (one thread each, no dashboard) started all at once in a few
processes on the controller, each with its own TLS connection, heartbeats and task stream: a load generator that is
cheap in memory (one interpreter holds many workers), so several hundred fit on one machine. The scheduler is the
deployed one (its container on the scheduler host, read with `docker stats`). What this does not show: hundreds of
worker processes' own start-up (imports, nannies) on hosts of their own; here they share the controller's cores
with the scheduler, so times are pessimistic.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

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
    async def run() -> None:
        workers = [Worker(env["DASK_SCHEDULER_ADDRESS"], nthreads=1, name=f"load-{first + index}",
                          security=security(env), dashboard=False, memory_limit=memory_limit, host=listen,
                          local_directory=f"/tmp/many-workers-{os.getpid()}") for index in range(count)]
        await asyncio.gather(*(worker.start() for worker in workers))
        while not stop.is_set():
            await asyncio.sleep(0.5)
        await asyncio.gather(*(worker.close(timeout=30) for worker in workers), return_exceptions=True)
    asyncio.run(run())


def scheduler_stats(host: str, container: str) -> dict[str, str]:
    """CPU % and memory of the scheduler's container, read inside the scheduler host with docker stats."""
    out = subprocess.run(["docker", "exec", host, "docker", "stats", "--no-stream", "--format",
                          "{{.CPUPerc}} {{.MemUsage}}", container], capture_output=True, text=True, check=False)
    parts = out.stdout.split()
    return {"cpu": parts[0], "memory": parts[1]} if len(parts) >= 2 else {"error": out.stderr.strip()[:200]}


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bundle", type=Path, required=True, help="the cluster's client/env.sh")
    parser.add_argument("--workers", type=int, default=500)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--listen", default="10.232.0.1",
                        help="address the workers listen on, one the scheduler reaches (default: this machine on the "
                        "fleet network)")
    parser.add_argument("--scheduler-host", default="fleet-sched")
    parser.add_argument("--scheduler-container", default="dask-scheduler")
    parser.add_argument("--dashboard-port", type=int, default=8787,
                        help="the scheduler's HTTP port (dask_dashboard_port), where /metrics is read")
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--memory-limit", default="0",
                        help="each load worker's memory limit (default 0: none. The workers of one process share its "
                        "memory, and a worker's limit is checked against the whole process's: with a limit, every "
                        "worker of a process pauses once the process holds more than it, and no task finishes)")
    parser.add_argument("--verify", action="store_true", help="run dask-gpu-verify against all of them")
    parser.add_argument("--bandwidth-mib", type=int, default=16,
                        help="the verification's per-worker bandwidth probe size (default 16 MiB)")
    parser.add_argument("--out", type=Path, default=Path("reports/fleet/many-workers.json"))
    args = parser.parse_args(argv)
    env = bundle(args.bundle)
    client = Client(env["DASK_SCHEDULER_ADDRESS"], security=security(env), timeout=60)
    before = len(client.scheduler_info(n_workers=-1)["workers"])
    target = before + args.workers
    idle = scheduler_stats(args.scheduler_host, args.scheduler_container)
    metrics_before = scheduler_metrics(args.scheduler_host, args.dashboard_port)
    stop = multiprocessing.Event()
    share = [args.workers // args.processes + (index < args.workers % args.processes)
             for index in range(args.processes)]
    started = time.monotonic()
    procs = [multiprocessing.Process(target=serve,
                                     args=(env, sum(share[:index]), count, args.listen, args.memory_limit, stop))
             for index, count in enumerate(share)]
    for proc in procs:
        proc.start()
    seen, marks, peak = before, {}, idle
    while seen < target and time.monotonic() - started < args.timeout:
        time.sleep(1)
        seen = len(client.scheduler_info(n_workers=-1)["workers"])
        for share_of in (0.5, 0.9, 1.0):
            if seen - before >= share_of * args.workers and share_of not in marks:
                marks[share_of] = round(time.monotonic() - started, 1)
        if int(time.monotonic() - started) % 5 == 0:
            peak = scheduler_stats(args.scheduler_host, args.scheduler_container)
            print(f"[many-workers] {seen - before}/{args.workers} registered after "
                  f"{time.monotonic() - started:.0f} s; scheduler {peak}", flush=True)
    result: dict[str, Any] = {"workers": args.workers, "processes": args.processes, "registered": seen - before,
                              "seconds_to": {f"{int(k * 100)}%": v for k, v in marks.items()},
                              "scheduler_idle": idle, "scheduler_while_registering": peak}
    time.sleep(10)
    result["scheduler_steady"] = scheduler_stats(args.scheduler_host, args.scheduler_container)
    result["scheduler_metrics"] = {f"{before}_workers": metrics_before,
                                   f"{seen}_workers": scheduler_metrics(args.scheduler_host, args.dashboard_port)}
    started = time.monotonic()
    total = client.submit(sum, client.map(lambda x: x + 1, range(4 * args.workers))).result(timeout=300)
    result["map_4_tasks_per_worker"] = {"seconds": round(time.monotonic() - started, 1),
                                        "exact": total == sum(range(1, 4 * args.workers + 1))}
    if args.verify:
        started = time.monotonic()
        run = subprocess.run([str(Path(sys.executable).parent / "dask-gpu-verify"), "--expect-workers", str(target),
                              "--allow-cpu", "--bandwidth-mib", str(args.bandwidth_mib),
                              "--json", str(args.out.with_suffix(".verify.json"))],
                             env={**os.environ, **env}, capture_output=True, text=True, check=False)
        result["verify"] = {"rc": run.returncode, "seconds": round(time.monotonic() - started, 1),
                            "output_lines": len(run.stdout.splitlines()), "tail": run.stdout.splitlines()[-6:],
                            "stderr_tail": run.stderr.splitlines()[-6:]}
    stop.set()
    for proc in procs:
        proc.join(60)
    client.close()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))
    return 0 if result["registered"] == args.workers else 1


if __name__ == "__main__":
    sys.exit(main())
