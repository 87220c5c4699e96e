"""Rolling restart on real GPUs (issue 12), as plain processes: a TLS scheduler and two dask-cuda "hosts" on one
machine (GPU 0's worker advertises 127.0.0.2, GPU 1's 127.0.0.3, so `dask-gpu-roll --host` tells them apart as it
tells hosts apart). A CuPy array persisted on both GPUs and a chain of GPU futures run while each "host" in turn
is retired through the scheduler with the bundle's `dask-gpu-roll retire` (retire_workers with
close_workers=False, remove=False: its device data moves to the other GPU), stopped with SIGTERM (what systemd's
stop does to the unit's container), started again, and waited for with `dask-gpu-roll wait`. Then the array's
sum and the chain's result must be exact, with no KilledWorker and both workers registered. Prints PASS/FAIL lines
and one JSON summary; exit 1 on any FAIL.

    python3 tests/gpu/rolling_probe.py --certs .gpucerts --out /tmp/rolling
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

SCHEDULER = "tls://127.0.0.1:8786"
HOSTS = {"127.0.0.2": "0", "127.0.0.3": "1"}  # advertised address: CUDA device
CHUNK = 2**25  # float64 elements per chunk: 256 MiB
CHUNKS = 32  # 8 GiB in all
CHAIN = 90  # chained GPU tasks of about a second each
failures: list[str] = []


def check(ok: bool, what: str) -> None:
    print(f"{'PASS' if ok else 'FAIL'} {what}", flush=True)
    if not ok:
        failures.append(what)


def tls_env(certs: Path) -> dict[str, str]:
    env = {"DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION": "True",
           "DASK_DISTRIBUTED__COMM__TLS__CA_FILE": str(certs / "ca.crt")}
    for role in ("SCHEDULER", "WORKER", "CLIENT"):
        env[f"DASK_DISTRIBUTED__COMM__TLS__{role}__CERT"] = str(certs / "gpu-box.crt")
        env[f"DASK_DISTRIBUTED__COMM__TLS__{role}__KEY"] = str(certs / "gpu-box.key")
    return env


def spawn(argv: list[str], log: Path, **env: str) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, **env})


def stop(proc: subprocess.Popen[bytes]) -> float:
    """SIGTERM to the process's session (as systemd stops a unit), SIGKILL after 30 s; seconds it took."""
    started = time.monotonic()
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    except ProcessLookupError:
        pass
    return time.monotonic() - started


def start_worker(host: str, out: Path) -> subprocess.Popen[bytes]:
    return spawn(["dask", "cuda", "worker", SCHEDULER, "--host", host, "--local-directory", str(out / host),
                  "--nthreads", "1"], out / f"worker-{host}.log", CUDA_VISIBLE_DEVICES=HOSTS[host])


def roll(*args: str) -> tuple[int, dict[str, Any], float]:
    started = time.monotonic()
    run = subprocess.run([sys.executable, "-c", "import sys; from dask_gpu_verify.rolling import main; "
                          "sys.exit(main())", *args], capture_output=True, text=True)
    seconds = time.monotonic() - started
    try:
        result = json.loads(run.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        result = {"stdout": run.stdout[-2000:], "stderr": run.stderr[-2000:]}
    return run.returncode, result, seconds


def step(previous: int) -> int:
    import cupy

    x = cupy.ones((4096, 4096))
    end = time.monotonic() + 1.0
    while time.monotonic() < end:
        x = x @ x / 4096.0
    return previous + int(round(float(x[0, 0])))  # x stays all ones: +1 per step


def held_by_host(client: Any, keys: set[str]) -> dict[str, int]:
    count: dict[str, int] = {}
    for key, holders in client.who_has().items():
        if str(key) in keys:  # who_has's keys are the chunks' tuples
            for holder in holders:
                host = holder.split("://", 1)[1].rsplit(":", 1)[0]
                count[host] = count.get(host, 0) + 1
    return count


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--certs", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ.update(tls_env(args.certs.resolve()))

    import cupy
    import dask.array as da
    from distributed import Client, KilledWorker, futures_of, wait

    procs: dict[str, subprocess.Popen[bytes]] = {
        "scheduler": spawn(["dask", "scheduler", "--host", "127.0.0.1", "--port", "8786", "--protocol", "tls",
                            "--dashboard-address", "127.0.0.1:8787"], args.out / "scheduler.log")}
    summary: dict[str, Any] = {"hosts": []}
    try:
        for host in HOSTS:
            procs[host] = start_worker(host, args.out)
        client = Client(SCHEDULER, timeout=60)
        client.wait_for_workers(len(HOSTS), timeout=180)
        x = da.arange(CHUNK * CHUNKS, chunks=CHUNK, dtype="f8").map_blocks(cupy.asarray).persist()
        wait(x)
        keys = {str(future.key) for future in futures_of(x)}
        expected = float(CHUNK * CHUNKS * (CHUNK * CHUNKS - 1) // 2)
        before = held_by_host(client, keys)
        summary["keys_before"] = before
        check(len(before) == len(HOSTS), f"the persisted CuPy array lies on both GPUs: {before}")
        chain = client.submit(step, 0, pure=False)
        for _ in range(CHAIN - 1):
            chain = client.submit(step, chain, pure=False)
        time.sleep(3)

        for host in HOSTS:
            code, retired, retire_s = roll("retire", "--scheduler", SCHEDULER, "--host", host, "--timeout", "300")
            check(code == 0 and retired.get("keys_only_there") == 0,
                  f"{host}: retired in {retire_s:.1f} s, its keys moved to the other GPU: {retired}")
            moved = held_by_host(client, keys)
            other = next(name for name in HOSTS if name != host)
            # The retired worker may keep its own copies until it stops; the other GPU must hold every chunk.
            check(moved.get(other, 0) == CHUNKS, f"{host}: after retiring, {other} holds all {CHUNKS} chunks: {moved}")
            stop_s = stop(procs[host])
            procs[host] = start_worker(host, args.out)
            code, registered, wait_s = roll("wait", "--scheduler", SCHEDULER, "--host", f"{host}=1",
                                            *[f"--exclude={d}" for d in retired.get("retired", [])],
                                            "--timeout", "180")
            check(code == 0, f"{host}: stopped in {stop_s:.1f} s, its new worker registered in {wait_s:.1f} s")
            summary["hosts"].append({"host": host, "gpu": HOSTS[host], "retire_s": round(retire_s, 1),
                                     "keys_moved": retired.get("keys_before"), "stop_s": round(stop_s, 1),
                                     "register_s": round(wait_s, 1), "retire": retired, "wait": registered})

        try:
            total = float(x.sum().compute())
            check(total == expected, f"the array's sum after both restarts is exact: {total} (want {expected})")
            steps = chain.result(timeout=300)
            check(steps == CHAIN, f"the chain of {CHAIN} GPU futures ran through both restarts: {steps}")
        except KilledWorker as error:
            check(False, f"KilledWorker: {error}")
        workers = client.scheduler_info(n_workers=-1)["workers"]
        hosts = sorted(str(info.get("host")) for info in workers.values())
        check(hosts == sorted(HOSTS), f"both workers registered at the end: {hosts}")
        summary["keys_after"] = held_by_host(client, keys)
        client.close()
    finally:
        for name in [*HOSTS, "scheduler"]:
            if name in procs:
                stop(procs[name])
    summary["failures"] = failures
    (args.out / "rolling.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps({key: value for key, value in summary.items() if key != "hosts"}))
    for row in summary["hosts"]:
        print(f"[rolling] host {row['host']} (GPU {row['gpu']}): retire {row['retire_s']} s "
              f"({row['keys_moved']} keys moved), stop {row['stop_s']} s, register {row['register_s']} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
