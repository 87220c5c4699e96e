#!/usr/bin/env python3
"""What dask-gpu-autoscale costs the scheduler (issue 41): the no-op task rate of a local scheduler with two workers,
with and without the autoscaler asking it (its scheduler_info, processing and adaptive_target calls), rounds
interleaved, the order swapped every round. Prints each round and the ratio of the medians (with/without).

    .venv/bin/python scripts/bench-autoscale-overhead.py [--rounds 5] [--tasks 4000] [--interval 2]

The autoscaler runs as it does on a cluster (its own process, its HTTPS endpoint up), with a minimum and maximum of
every worker, so it decides nothing and only asks; --interval 2 is its own default, lower is harsher.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def certificates(folder: Path) -> dict[str, str]:
    """A throwaway CA and a certificate for the autoscaler's endpoint (nothing asks it here)."""
    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True)

    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
            str(folder / "ca.key"), "-out", str(folder / "ca.crt"), "-days", "1", "-subj", "/CN=bench CA")
    return {"ca": str(folder / "ca.crt"), "cert": str(folder / "ca.crt"), "key": str(folder / "ca.key")}


def rate(client: Any, tasks: int) -> float:
    started = time.perf_counter()
    client.gather(client.map(lambda i: i, range(tasks), pure=False))
    return tasks / (time.perf_counter() - started)


def main() -> int:
    parse = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parse.add_argument("--rounds", type=int, default=5)
    parse.add_argument("--tasks", type=int, default=4000)
    parse.add_argument("--interval", type=float, default=2.0)
    args = parse.parse_args()
    from distributed import Client

    work = Path(tempfile.mkdtemp(prefix="autoscale-bench-"))
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'images' / 'verify' / 'src'}:{os.environ.get('PYTHONPATH', '')}"}
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    logs = (work / "cluster.log").open("wb")
    procs = [subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port",
                               str(port), "--dashboard-address", "127.0.0.1:0"], stdout=logs, stderr=subprocess.STDOUT)]
    procs += [subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads", "1",
                                "--name", f"w{i}", "--no-dashboard"], stdout=logs, stderr=subprocess.STDOUT)
              for i in (1, 2)]
    tls = certificates(work)
    scaler_argv = [sys.executable, "-m", "dask_gpu_verify.autoscale", "--scheduler", address,
                   "--host", "w1,127.0.0.1,1", "--host", "w2,127.0.0.1,1", "--minimum", "2", "--maximum", "2",
                   "--idle", "3600", "--cooldown", "60", "--step-down", "0.5", "--interval", str(args.interval),
                   "--state", str(work), "--listen", f"127.0.0.1:{free_port()}", "--ca", tls["ca"], "--cert",
                   tls["cert"], "--key", tls["key"]]
    rates: dict[str, list[float]] = {"without": [], "with": []}
    try:
        with Client(address, timeout=60) as client:
            client.wait_for_workers(2, timeout=60)
            rate(client, args.tasks)  # warm-up
            for round_ in range(args.rounds):
                for mode in (("without", "with") if round_ % 2 == 0 else ("with", "without")):
                    scaler = subprocess.Popen(scaler_argv, stdout=logs, stderr=subprocess.STDOUT, env=env) \
                        if mode == "with" else None
                    if scaler is not None:
                        time.sleep(3)  # connected and asking
                    rates[mode].append(rate(client, args.tasks))
                    if scaler is not None:
                        scaler.terminate()
                        scaler.wait(timeout=15)
                    print(f"round {round_ + 1} {mode:8} {rates[mode][-1]:8.0f} tasks/s", flush=True)
    finally:
        for proc in reversed(procs):
            proc.terminate()
            proc.wait(timeout=15)
        logs.close()
        shutil.rmtree(work, ignore_errors=True)
    result = {mode: round(statistics.median(values), 1) for mode, values in rates.items()}
    result["ratio_with_over_without"] = round(result["with"] / result["without"], 3)
    result.update(rounds=args.rounds, tasks=args.tasks, interval_s=args.interval)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
