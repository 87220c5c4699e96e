#!/usr/bin/env python3
"""Issue 41 on a real GPU: a GPU the autoscaler releases has no process left on it and its memory back at the idle
baseline (NVML), and work waiting brings a worker back onto it, which computes.

Processes, as the GPU machines allow (no systemd there): `dask scheduler`, one `dask cuda worker` on GPU 0 with an
RMM pool (so the held memory is plain to see), and dask-gpu-autoscale (minimum 0, maximum 1, a short idle time) with
its agents' HTTPS endpoint on mutual TLS. The agent is stood in for by this script, which stops the worker process
when the autoscaler says down (SIGTERM, as `docker stop` sends) and starts it when it says up: the sandbox suite
tests/sandbox/autoscale runs the real agent and units. Prints one JSON object (and writes it to --out).

    eval "$(python3 tests/gpu/carried.py --require rapids)"; python3 tests/gpu/autoscale_release.py --out OUT.json
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def certificates(folder: Path) -> dict[str, str]:
    """A CA and a certificate for 127.0.0.1 that serves and asks (the cluster's CA signs each host's the same way)."""
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
            str(folder / "ca.key"), "-out", str(folder / "ca.crt"), "-days", "1", "-subj", "/CN=probe Dask CA")
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
            str(folder / "host.key"), "-out", str(folder / "host.csr"), "-subj", "/CN=gpu-box")
    (folder / "ext").write_text("subjectAltName=IP:127.0.0.1\n")
    openssl("x509", "-req", "-in", str(folder / "host.csr"), "-CA", str(folder / "ca.crt"), "-CAkey",
            str(folder / "ca.key"), "-CAcreateserial", "-out", str(folder / "host.crt"), "-days", "1", "-extfile",
            str(folder / "ext"))
    return {"ca": str(folder / "ca.crt"), "cert": str(folder / "host.crt"), "key": str(folder / "host.key")}


def nvml(index: int) -> dict[str, Any]:
    """GPU `index`'s compute processes and used memory, from NVML (nvidia-smi, which reads NVML, without pynvml)."""
    try:
        import pynvml
    except ImportError:
        smi = ["nvidia-smi", "-i", str(index), "--format=csv,noheader,nounits"]
        used_mib = subprocess.run([*smi, "--query-gpu=memory.used"], capture_output=True, text=True,
                                  check=True).stdout.strip()
        pids = subprocess.run([*smi, "--query-compute-apps=pid"], capture_output=True, text=True, check=True).stdout
        return {"memory_used_mib": int(used_mib), "processes": [int(pid) for pid in pids.split()],
                "at": round(time.time(), 1), "source": "nvidia-smi"}

    pynvml.nvmlInit()
    try:
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        used = int(pynvml.nvmlDeviceGetMemoryInfo(handle).used)
        processes = [int(proc.pid) for proc in pynvml.nvmlDeviceGetComputeRunningProcesses(handle)]
    finally:
        pynvml.nvmlShutdown()
    return {"memory_used_mib": round(used / 2**20), "processes": processes, "at": round(time.time(), 1),
            "source": "pynvml"}


def desired(url: str, tls: dict[str, str]) -> dict[str, Any]:
    context = ssl.create_default_context(cafile=tls["ca"])
    context.load_cert_chain(tls["cert"], tls["key"])
    with urllib.request.urlopen(url, timeout=5, context=context) as answer:  # noqa: S310 (https)
        return dict(json.loads(answer.read()))


def wait_for(check: Any, timeout: float, what: str) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if check():
            return time.monotonic() - started
        time.sleep(0.25)
    raise TimeoutError(f"{what}: not within {timeout:.0f} s")


def spawn(argv: list[str], log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(argv, stdout=log.open("ab"), stderr=subprocess.STDOUT, start_new_session=True)


def stop(proc: subprocess.Popen[bytes], timeout: float = 30) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def main() -> int:
    parse = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parse.add_argument("--out", type=Path, required=True)
    parse.add_argument("--gpu", type=int, default=0)
    parse.add_argument("--idle", type=int, default=5)
    parse.add_argument("--pool", default="0.5", help="the worker's RMM pool (share of the GPU); '' for none (no RMM)")
    args = parse.parse_args()
    work = Path(tempfile.mkdtemp(prefix="autoscale-"))
    tls = certificates(work)
    port, agents = free_port(), free_port()
    address = f"tcp://127.0.0.1:{port}"
    result: dict[str, Any] = {"gpu": args.gpu, "pool": args.pool, "idle_s": args.idle, "readings": {}}
    result["readings"]["baseline"] = nvml(args.gpu)
    procs: list[subprocess.Popen[bytes]] = []
    worker_argv = ["dask", "cuda", "worker", address, "--name", "gpu-box", "--no-dashboard", "--local-directory",
                   str(work / "worker")] + (["--rmm-pool-size", args.pool] if args.pool else [])
    env_gpu = {**os.environ, "CUDA_VISIBLE_DEVICES": str(args.gpu)}
    try:
        procs.append(spawn(["dask", "scheduler", "--host", "127.0.0.1", "--port", str(port), "--dashboard-address",
                            ":0"], work / "scheduler.log"))
        import distributed

        client_class: Any = distributed.Client
        worker = subprocess.Popen(worker_argv, stdout=(work / "worker.log").open("ab"), stderr=subprocess.STDOUT,
                                  start_new_session=True, env=env_gpu)
        procs.append(worker)
        with client_class(address, timeout=60) as client:
            client.wait_for_workers(1, timeout=120)

            def gpu_sum(n: int) -> float:  # local: pickled by value
                import cupy

                return float(cupy.arange(n, dtype="float64").sum())

            n = 50_000_000
            expected = float(n * (n - 1) // 2)
            assert client.submit(gpu_sum, n, pure=False).result(timeout=120) == expected
            result["readings"]["worker_up"] = nvml(args.gpu)
            scaler = spawn([sys.executable, "-m", "dask_gpu_verify.autoscale", "--scheduler", address, "--host",
                            "gpu-box,127.0.0.1,1", "--minimum", "0", "--maximum", "1", "--idle", str(args.idle),
                            "--cooldown", "1", "--step-down", "1", "--interval", "0.5", "--state", str(work),
                            "--listen", f"127.0.0.1:{agents}", "--ca", tls["ca"], "--cert", tls["cert"],
                            "--key", tls["key"]], work / "autoscale.log")
            procs.append(scaler)
            url = f"https://127.0.0.1:{agents}/v1/hosts/gpu-box"
            wait_for(lambda: _answers(url, tls), 60, "the autoscaler's endpoint")
            idle_from = time.monotonic()
            result["released_after_s"] = round(wait_for(lambda: desired(url, tls)["desired"] == "down",
                                                        args.idle + 60, "release"), 1)
            stop(worker)  # the agent's stand-in: the unit stops (docker stop sends SIGTERM)
            settle = wait_for(lambda: not nvml(args.gpu)["processes"], 30, "no process left on the GPU")
            result["idle_to_released_s"] = round(time.monotonic() - idle_from, 1)
            result["process_gone_after_stop_s"] = round(settle, 1)
            time.sleep(2)
            result["readings"]["released"] = nvml(args.gpu)
            # Work waits with no worker: the autoscaler wants the host again.
            started = time.monotonic()
            future = client.submit(gpu_sum, n, pure=False)
            result["decision_s"] = round(wait_for(lambda: desired(url, tls)["desired"] == "up", 60, "scale-up"), 1)
            worker = subprocess.Popen(worker_argv, stdout=(work / "worker.log").open("ab"), stderr=subprocess.STDOUT,
                                      start_new_session=True, env=env_gpu)
            procs.append(worker)
            assert future.result(timeout=180) == expected
            result["work_to_answer_s"] = round(time.monotonic() - started, 1)
            result["readings"]["scaled_up"] = nvml(args.gpu)
            result["answer_exact"] = True
        base, released = result["readings"]["baseline"], result["readings"]["released"]
        result["released_no_process"] = not released["processes"]
        result["released_memory_over_baseline_mib"] = released["memory_used_mib"] - base["memory_used_mib"]
        result["decisions"] = [line for line in (work / "autoscale.log").read_text().splitlines()
                               if line.startswith(("scale up:", "scale down:", "kept up:"))]
    finally:
        for proc in reversed(procs):
            stop(proc)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))
    ok = result.get("released_no_process") and abs(result.get("released_memory_over_baseline_mib", 1 << 20)) < 64
    return 0 if ok else 1


def _answers(url: str, tls: dict[str, str]) -> bool:
    try:
        desired(url, tls)
    except OSError:
        return False
    return True


if __name__ == "__main__":
    sys.exit(main())
