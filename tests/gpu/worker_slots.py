#!/usr/bin/env python3
"""Issue 41 by GPU (dask_autoscale_by gpu) on a real GPU: one worker of a host is released while the other keeps
computing, its process leaves the GPU and the memory its RMM pool held comes back (NVML), and work waiting starts it
again, which computes.

Processes, as the GPU machines allow (no systemd there): `dask scheduler`; the worker container's command as the
bundle renders it by GPU, `dask-gpu-worker-slots` running one `dask cuda worker` per slot (each with an RMM pool, so
the memory is plain to see); dask-gpu-autoscale --by gpu (minimum 1, a short idle time) with its agents' endpoint on
mutual TLS; and the bundle's own agent (roles/dask_autoscale/files/autoscale_agent.py --slots), which writes the file
of released workers that the supervisor reads. STAND-IN: `systemctl`, which the agent asks whether the worker unit
runs, is a script that answers from the supervisor's PID file. With --gpus 0,0 (the default on a one-GPU machine) both
slots are on GPU 0, standing in for two GPUs: each slot's process and pool are still its own on NVML.

    envs=$(python3 tests/gpu/carried.py --require whl) && eval "$envs" &&
        python3 tests/gpu/worker_slots.py --out OUT.json

with the ignored `.whl` carried (dask, distributed, dask-cuda, rmm-cu13, librmm-cu13, rapids-logger and their small
dependencies). Prints one JSON object (and writes it to --out); exits 1 unless every check held. `--cpu` rehearses
the same steps without a GPU (`dask worker`, NumPy, no NVML readings) before a lent machine is used.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from autoscale_release import SYSTEMCTL, _answers, certificates, desired, free_port, nvml, spawn, stop, wait_for

ROOT = Path(__file__).resolve().parents[2]
AGENT = ROOT / "roles" / "dask_autoscale" / "files" / "autoscale_agent.py"


def gpu_count() -> int:
    out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=True).stdout
    return len([line for line in out.splitlines() if line.startswith("GPU ")])


def readings(indices: list[int], cpu: bool) -> dict[str, Any]:
    """NVML's reading of each GPU; none with --cpu (the rehearsal without a GPU)."""
    if cpu:
        return {str(index): {"memory_used_mib": 0, "processes": [], "source": "none (--cpu)"} for index in indices}
    return {str(index): nvml(index) for index in sorted(set(indices))}


def gpu_sum(n: int, module: str = "cupy") -> tuple[float, str]:
    """A CuPy sum on the worker's GPU, and the worker's name (pickled by value: the workers cannot import this)."""
    import importlib

    from distributed import get_worker

    array = importlib.import_module(module)
    return float(array.arange(n, dtype="float64").sum()), str(get_worker().name)


def slow_sum(n: int, module: str = "cupy") -> float:
    import importlib
    import time as clock

    clock.sleep(1.0)
    return float(importlib.import_module(module).arange(n, dtype="float64").sum())


def main() -> int:  # noqa: PLR0915 (one scenario, step after step)
    parse = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parse.add_argument("--out", type=Path, required=True)
    parse.add_argument("--gpus", default="", help="the slots' GPUs (default: every GPU, or 0,0 on a one-GPU machine)")
    parse.add_argument("--pool", default="0.3", help="each worker's RMM pool (share of its GPU)")
    parse.add_argument("--idle", type=int, default=5)
    parse.add_argument("--cpu", action="store_true", help="rehearse without a GPU")
    args = parse.parse_args()
    count = 1 if args.cpu else gpu_count()
    module = "numpy" if args.cpu else "cupy"
    gpus = args.gpus or (",".join(str(index) for index in range(count)) if count > 1 else "0,0")
    entries = gpus.split(",")
    indices = [int(entry) for entry in entries]
    work = Path(tempfile.mkdtemp(prefix="slots-"))
    tls = certificates(work)
    port, agents, http = free_port(), free_port(), free_port()
    address = f"tcp://127.0.0.1:{port}"
    names = [f"gpu-box-{index}" for index in range(len(entries))]
    result: dict[str, Any] = {"gpus": gpus, "machine_gpus": count, "pool": args.pool, "idle_s": args.idle,
                              "stand_in_two_gpus": len(set(entries)) < len(entries), "readings": {}}
    result["readings"]["baseline"] = readings(indices, args.cpu)
    (work / "slots").mkdir()
    control = work / "slots" / "released.json"
    (work / "units").mkdir()
    (work / "bin").mkdir()
    (work / "bin" / "systemctl").write_text(SYSTEMCTL)
    (work / "bin" / "systemctl").chmod(0o755)
    env = {**os.environ, "UNITS": str(work / "units"), "PATH": f"{work / 'bin'}:{os.environ['PATH']}"}
    procs: list[subprocess.Popen[bytes]] = []
    worker = ["dask", "cuda", "worker", address, "--name", "gpu-box", "--dashboard-address", f"127.0.0.1:{http}",
              "--local-directory", str(work / "worker"), "--rmm-pool-size", args.pool]
    if args.cpu:
        worker = ["dask", "worker", address, "--nthreads", "1", "--name", "gpu-box", "--dashboard-address",
                  f"127.0.0.1:{http}", "--local-directory", str(work / "worker")]
    n = 20_000_000
    expected = float(n * (n - 1) // 2)
    try:
        procs.append(spawn(["dask", "scheduler", "--host", "127.0.0.1", "--port", str(port), "--dashboard-address",
                            ":0"], work / "scheduler.log"))
        supervisor = subprocess.Popen(
            [sys.executable, "-m", "dask_gpu_verify.slots", "--name", "gpu-box", "--workers", str(len(entries)),
             "--control", str(control), "--health-file", str(work / "health"), "--stop-timeout", "30", "--",
             *worker], stdout=(work / "slots.log").open("ab"), stderr=subprocess.STDOUT, start_new_session=True,
            env={**os.environ, "CUDA_VISIBLE_DEVICES": gpus})
        procs.append(supervisor)
        (work / "units" / "dask-worker.pid").write_text(str(supervisor.pid))
        import distributed

        client_class: Any = distributed.Client
        with client_class(address, timeout=60) as client:
            client.wait_for_workers(len(entries), timeout=180)
            workers = {str(info["name"]): addr for addr, info in client.scheduler_info(n_workers=-1)["workers"].items()}
            assert sorted(workers) == names, workers
            for name in names:
                answer = client.submit(gpu_sum, n, module, workers=[workers[name]], pure=False).result(120)
                assert answer == (expected, name), answer
            result["readings"]["all_up"] = readings(indices, args.cpu)
            scaler = spawn([sys.executable, "-m", "dask_gpu_verify.autoscale", "--scheduler", address, "--host",
                            f"gpu-box,127.0.0.1,{len(entries)}", "--by", "gpu", "--minimum", "1", "--maximum",
                            str(len(entries)), "--idle", str(args.idle), "--cooldown", "1", "--step-down", "1",
                            "--interval", "0.5", "--state", str(work), "--listen", f"127.0.0.1:{agents}",
                            "--ca", tls["ca"], "--cert", tls["cert"], "--key", tls["key"]], work / "autoscale.log")
            procs.append(scaler)
            url = f"https://127.0.0.1:{agents}/v1/hosts/gpu-box"
            wait_for(lambda: _answers(url, tls), 60, "the autoscaler's endpoint")
            procs.append(subprocess.Popen(
                [sys.executable, str(AGENT), "--url", url, "--unit", "dask-worker", "--ca", tls["ca"], "--cert",
                 tls["cert"], "--key", tls["key"], "--slots", str(control), "--interval", "0.5"],
                stdout=(work / "agent.log").open("ab"), stderr=subprocess.STDOUT, start_new_session=True, env=env))
            idle_from = time.monotonic()
            gone = names[1:]  # the minimum keeps one worker; the others go, last first

            def released() -> bool:
                try:
                    return sorted(json.loads(control.read_text())["released"]) == sorted(gone)
                except (OSError, ValueError, KeyError):
                    return False

            result["released_after_s"] = round(wait_for(released, args.idle + 60, "the agent's file"), 1)
            wait_for(lambda: sorted(client.scheduler_info(n_workers=-1)["workers"][a]["name"]
                                    for a in client.scheduler_info(n_workers=-1)["workers"]) == names[:1], 60,
                     "the released workers gone from the scheduler")
            settle = 0.0 if args.cpu else wait_for(
                lambda: sum(len(r["processes"]) for r in readings(indices, args.cpu).values()) == len(set(indices))
                if result["stand_in_two_gpus"] else all(not nvml(index)["processes"] for index in indices[1:]), 60,
                "the released workers' processes gone from their GPUs")
            result["idle_to_released_s"] = round(time.monotonic() - idle_from, 1)
            result["process_gone_after_file_s"] = round(settle, 1)
            time.sleep(2)
            result["readings"]["released"] = readings(indices, args.cpu)
            kept = client.submit(gpu_sum, n, module, pure=False).result(120)
            assert kept == (expected, names[0]), kept
            result["kept_worker_computes"] = True
            # Work waits: more than one worker's worth of 1 s tasks; the released workers come back.
            started = time.monotonic()
            futures = client.map(slow_sum, [n] * 12 * len(entries), [module] * 12 * len(entries), pure=False)
            result["decision_s"] = round(wait_for(lambda: desired(url, tls)["released"] == [], 60, "scale-up"), 1)
            result["file_s"] = round(wait_for(lambda: not released() and control.exists()
                                              and json.loads(control.read_text())["released"] == [], 30,
                                              "the agent's file") + result["decision_s"], 1)
            wait_for(lambda: len(client.scheduler_info(n_workers=-1)["workers"]) == len(entries), 120,
                     "the workers registered again")
            result["registered_s"] = round(time.monotonic() - started, 1)
            assert client.gather(futures) == [expected] * len(futures)
            workers = {str(info["name"]): addr for addr, info in client.scheduler_info(n_workers=-1)["workers"].items()}
            for name in names:
                answer = client.submit(gpu_sum, n, module, workers=[workers[name]], pure=False).result(120)
                assert answer == (expected, name), answer
            result["work_to_answer_s"] = round(time.monotonic() - started, 1)
            result["readings"]["scaled_up"] = readings(indices, args.cpu)
            result["answers_exact"] = True
        supervisor.send_signal(signal.SIGTERM)  # as docker stop's SIGTERM reaches it through tini: it alone
        result["supervisor_exit"] = supervisor.wait(timeout=60)
        if not args.cpu:
            wait_for(lambda: all(not nvml(index)["processes"] for index in indices), 60, "no process left at the end")
        result["readings"]["stopped"] = readings(indices, args.cpu)
    finally:
        for proc in reversed(procs):
            stop(proc)
        result["logs"] = {name: (work / f"{name}.log").read_text()[-3000:] for name in ("slots", "agent", "autoscale")
                          if (work / f"{name}.log").exists()}
    result["decisions"] = [line for line in (work / "autoscale.log").read_text().splitlines()
                           if line.startswith(("scale up:", "scale down:", "kept up:"))]
    result["agent"] = [line for line in (work / "agent.log").read_text().splitlines()
                       if line.startswith(("workers released", "start "))]
    result["slots"] = [line for line in (work / "slots.log").read_text().splitlines() if line.startswith("[slots]")]
    base, up, gone_reading = (result["readings"][key] for key in ("baseline", "all_up", "released"))
    result["checks"] = checks(base, up, gone_reading, result, indices)
    if args.cpu:  # no GPU readings to judge: the rehearsal checks the steps and the answers
        result["checks"] = {key: result["checks"][key] for key in ("answers_exact", "supervisor_exit_0")}
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({key: value for key, value in result.items() if key != "logs"}, indent=1))
    return 0 if all(result["checks"].values()) else 1


def checks(base: dict[str, Any], up: dict[str, Any], gone: dict[str, Any], result: dict[str, Any],
           indices: list[int]) -> dict[str, bool]:
    """What the run must show: a released worker's process left its GPU and its pool's memory came back, the kept
    one stayed; every answer exact; the supervisor exited 0 and left the GPUs at their baseline."""
    first = str(indices[0])
    stopped = result["readings"].get("stopped", {})
    out = {"answers_exact": bool(result.get("answers_exact")), "supervisor_exit_0": result.get("supervisor_exit") == 0,
           "stopped_at_baseline": all(abs(stopped[key]["memory_used_mib"] - base[key]["memory_used_mib"]) < 64
                                      and not stopped[key]["processes"] for key in base) if stopped else False,
           "kept_worker_stayed": bool(gone[first]["processes"]) and bool(result.get("kept_worker_computes"))}
    if result["stand_in_two_gpus"]:
        held = up[first]["memory_used_mib"] - gone[first]["memory_used_mib"]
        pool = up[first]["memory_used_mib"] - base[first]["memory_used_mib"]
        out["one_process_left"] = len(gone[first]["processes"]) == len(up[first]["processes"]) - 1
        out["released_pool_came_back"] = abs(held - pool / 2) < 0.1 * pool  # half of the two pools
    else:
        out["released_gpus_at_baseline"] = all(
            not gone[str(index)]["processes"]
            and abs(gone[str(index)]["memory_used_mib"] - base[str(index)]["memory_used_mib"]) < 64
            for index in indices[1:])
    return out


if __name__ == "__main__":
    sys.exit(main())
