#!/usr/bin/env python3
"""Issue 41 on a real GPU: a GPU the autoscaler releases has no process left on it and its memory back at the idle
baseline (NVML), and work waiting brings a worker back onto it, which computes.

Processes, as the GPU machines allow (no systemd there): `dask scheduler`, one `dask cuda worker` on GPU 0 with an
RMM pool (so the held memory is plain to see), and dask-gpu-autoscale (minimum 0, maximum 1, a short idle time) with
its agents' HTTPS endpoint on mutual TLS. The agent is stood in for by this script, which stops the worker process
when the autoscaler says down (SIGTERM, as `docker stop` sends) and starts it when it says up: the sandbox suite
tests/sandbox/autoscale runs the real agent and units. Prints one JSON object (and writes it to --out).

Then a second cluster takes its turn on the released GPU (dask_autoscale_share_gpus), as two clusters trade GPUs:
every start goes through the bundle's own turn check (roles/dask_autoscale/files/gpu_turns.py take, the worker unit's
ExecCondition), with systemd's answer about a unit's state stood in for by a `systemctl` script that reads the
stand-in units' PID files (no systemd there). The second cluster (its own scheduler and autoscaler, minimum 0) is
refused the GPU while the first's worker runs, takes it once released, starts a worker with an RMM pool of
--second-pool of the GPU (more than the first's pool leaves free) and computes; work waiting on the first cluster
then finds the GPU held (its start refused), the second idles down and is released, and the first's worker starts on
the GPU again and computes. NVML readings at each step.

    envs=$(python3 tests/gpu/carried.py --require whl) && eval "$envs" &&
        python3 tests/gpu/autoscale_release.py --out OUT.json

with the ignored `.whl` carried (dask, distributed, dask-cuda, rmm-cu13, librmm-cu13, rapids-logger wheels; no cuDF
needed). `eval "$(...)"` alone would go on when carried.py refuses.
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


TURNS = Path(__file__).resolve().parents[2] / "roles" / "dask_autoscale" / "files" / "gpu_turns.py"
# Stand-in for `systemctl show --property=ActiveState --value UNIT.service`, which gpu_turns.py asks: a stand-in
# unit is active while the process in $UNITS/UNIT.pid runs (the GPU machines have no systemd).
SYSTEMCTL = """#!/bin/sh
unit=""
for arg in "$@"; do case "$arg" in *.service) unit="${arg%.service}";; esac; done
pid=$(cat "$UNITS/$unit.pid" 2>/dev/null) && kill -0 "$pid" 2>/dev/null && echo active || echo inactive
"""


RUN_TURNS = ("import runpy, sys; from pathlib import Path; module = runpy.run_path(sys.argv[1]); "
             "sys.exit(module['main'](sys.argv[3:], folder=Path(sys.argv[2])))")


class Turns:
    """gpu_turns.py, the bundle's own, on one GPU, with the systemctl stand-in on PATH and its own turn folder."""

    def __init__(self, work: Path, key: str) -> None:
        self.units, self.key = work / "units", key
        self.units.mkdir()
        (work / "bin").mkdir()
        (work / "bin" / "systemctl").write_text(SYSTEMCTL)
        (work / "bin" / "systemctl").chmod(0o755)
        self.env = {**os.environ, "UNITS": str(self.units), "PATH": f"{work / 'bin'}:{os.environ['PATH']}"}
        self.folder = work / "turns"

    def take(self, unit: str, cluster: str) -> tuple[int, str]:
        """`gpu_turns.py take` as the worker unit's ExecCondition runs it (its turn folder here, not /run's)."""
        run = subprocess.run([sys.executable, "-c", RUN_TURNS, str(TURNS), str(self.folder), "take", "--unit", unit,
                              "--cluster", cluster, self.key],
                             capture_output=True, text=True, env=self.env, check=False)
        return run.returncode, (run.stdout + run.stderr).strip()

    def started(self, unit: str, proc: subprocess.Popen[bytes]) -> None:
        (self.units / f"{unit}.pid").write_text(str(proc.pid))


def gpu_uuid(index: int) -> str:
    return subprocess.run(["nvidia-smi", "-i", str(index), "--query-gpu=uuid", "--format=csv,noheader"],
                          capture_output=True, text=True, check=True).stdout.strip()


def main() -> int:  # noqa: PLR0915 (one scenario, step after step)
    parse = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parse.add_argument("--out", type=Path, required=True)
    parse.add_argument("--gpu", type=int, default=0)
    parse.add_argument("--idle", type=int, default=5)
    parse.add_argument("--pool", default="0.5", help="the worker's RMM pool (share of the GPU); '' for none (no RMM)")
    parse.add_argument("--second-pool", default="0.9", help="the second cluster's worker's RMM pool; '' for none")
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
    turns = Turns(work, gpu_uuid(args.gpu))
    result["turn_key"] = turns.key
    try:
        code, said = turns.take("dask-worker", "dask")
        assert code == 0, said
        procs.append(spawn(["dask", "scheduler", "--host", "127.0.0.1", "--port", str(port), "--dashboard-address",
                            ":0"], work / "scheduler.log"))
        import distributed

        client_class: Any = distributed.Client
        worker = subprocess.Popen(worker_argv, stdout=(work / "worker.log").open("ab"), stderr=subprocess.STDOUT,
                                  start_new_session=True, env=env_gpu)
        procs.append(worker)
        turns.started("dask-worker", worker)
        with client_class(address, timeout=60) as client:
            client.wait_for_workers(1, timeout=120)

            def gpu_sum(n: int) -> float:  # local: pickled by value
                import cupy

                return float(cupy.arange(n, dtype="float64").sum())

            n = 50_000_000
            expected = float(n * (n - 1) // 2)
            assert client.submit(gpu_sum, n, pure=False).result(timeout=120) == expected
            result["readings"]["worker_up"] = nvml(args.gpu)
            code, said = turns.take("dask-green-worker", "green")  # the other cluster, while dask's worker runs
            assert code == 1, said
            result["second_cluster_refused_while_held"] = said
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
            green_worker = second_cluster_takes_its_turn(args, work, tls, turns, gpu_sum, n, expected, result, procs)
            # Work waits with no worker: the autoscaler wants the host again; the GPU is green's now.
            started = time.monotonic()
            future = client.submit(gpu_sum, n, pure=False)
            result["decision_s"] = round(wait_for(lambda: desired(url, tls)["desired"] == "up", 60, "scale-up"), 1)
            code, said = turns.take("dask-worker", "dask")
            assert code == 1, said
            result["first_cluster_waits_while_the_second_computes"] = said
            # Green idles down: its autoscaler releases it, and its stand-in agent stops its worker.
            green_url = result.pop("_green_url")
            result["second_released_after_s"] = round(wait_for(
                lambda: desired(green_url, tls)["desired"] == "down", args.idle + 60, "green's release"), 1)
            stop(green_worker)
            wait_for(lambda: not nvml(args.gpu)["processes"], 30, "no process of green's left on the GPU")
            result["readings"]["second_released"] = nvml(args.gpu)
            code, said = turns.take("dask-worker", "dask")
            assert code == 0, said
            worker = subprocess.Popen(worker_argv, stdout=(work / "worker.log").open("ab"), stderr=subprocess.STDOUT,
                                      start_new_session=True, env=env_gpu)
            procs.append(worker)
            turns.started("dask-worker", worker)
            assert future.result(timeout=180) == expected
            result["work_to_answer_s"] = round(time.monotonic() - started, 1)
            result["readings"]["scaled_up"] = nvml(args.gpu)
            result["answer_exact"] = True
        base, released = result["readings"]["baseline"], result["readings"]["released"]
        result["released_no_process"] = not released["processes"]
        result["released_memory_over_baseline_mib"] = released["memory_used_mib"] - base["memory_used_mib"]
        result["decisions"] = [line for line in (work / "autoscale.log").read_text().splitlines()
                               if line.startswith(("scale up:", "scale down:", "kept up:"))]
        second = result["readings"]["second_released"]
        result["second_released_no_process"] = not second["processes"]
        result["second_released_memory_over_baseline_mib"] = second["memory_used_mib"] - base["memory_used_mib"]
        result["second_decisions"] = [line for line in (work / "green-autoscale.log").read_text().splitlines()
                                      if line.startswith(("scale up:", "scale down:", "kept up:"))]
    finally:
        for proc in reversed(procs):
            stop(proc)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))
    ok = result.get("released_no_process") and abs(result.get("released_memory_over_baseline_mib", 1 << 20)) < 64 \
        and result.get("second_released_no_process") \
        and abs(result.get("second_released_memory_over_baseline_mib", 1 << 20)) < 64
    return 0 if ok else 1


def second_cluster_takes_its_turn(args: argparse.Namespace, work: Path, tls: dict[str, str], turns: Turns,
                                  gpu_sum: Any, n: int, expected: float, result: dict[str, Any],
                                  procs: list[subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
    """Cluster green (its own scheduler and autoscaler, minimum 0) takes the GPU dask released: its start's turn
    check passes, its worker's RMM pool (--second-pool) fits, it computes; its worker keeps running (returned)."""
    import distributed

    client_class: Any = distributed.Client
    port, agents = free_port(), free_port()
    address = f"tcp://127.0.0.1:{port}"
    code, said = turns.take("dask-green-worker", "green")
    assert code == 0, said
    procs.append(spawn(["dask", "scheduler", "--host", "127.0.0.1", "--port", str(port), "--dashboard-address",
                        ":0"], work / "green-scheduler.log"))
    argv = ["dask", "cuda", "worker", address, "--name", "gpu-box", "--no-dashboard", "--local-directory",
            str(work / "green-worker")] + (["--rmm-pool-size", args.second_pool] if args.second_pool else [])
    worker = subprocess.Popen(argv, stdout=(work / "green-worker.log").open("ab"), stderr=subprocess.STDOUT,
                              start_new_session=True, env={**os.environ, "CUDA_VISIBLE_DEVICES": str(args.gpu)})
    procs.append(worker)
    turns.started("dask-green-worker", worker)
    started = time.monotonic()
    with client_class(address, timeout=60) as client:
        client.wait_for_workers(1, timeout=120)
        assert client.submit(gpu_sum, n, pure=False).result(timeout=120) == expected
    result["second_cluster"] = {"pool": args.second_pool, "start_to_answer_s": round(time.monotonic() - started, 1),
                                "answer_exact": True}
    result["readings"]["second_up"] = nvml(args.gpu)
    (work / "green").mkdir()
    procs.append(spawn([sys.executable, "-m", "dask_gpu_verify.autoscale", "--scheduler", address, "--host",
                        "gpu-box,127.0.0.1,1", "--minimum", "0", "--maximum", "1", "--idle", str(args.idle),
                        "--cooldown", "1", "--step-down", "1", "--interval", "0.5", "--state", str(work / "green"),
                        "--listen", f"127.0.0.1:{agents}", "--ca", tls["ca"], "--cert", tls["cert"],
                        "--key", tls["key"]], work / "green-autoscale.log"))
    result["_green_url"] = f"https://127.0.0.1:{agents}/v1/hosts/gpu-box"
    wait_for(lambda: _answers(result["_green_url"], tls), 60, "green's autoscaler's endpoint")
    return worker


def _answers(url: str, tls: dict[str, str]) -> bool:
    try:
        desired(url, tls)
    except OSError:
        return False
    return True


if __name__ == "__main__":
    sys.exit(main())
