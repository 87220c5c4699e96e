"""dask-gpu-worker-slots (dask_autoscale_by: gpu): its plan of a host's slots, and the real supervisor running real
`dask worker` processes against a real scheduler: a released slot's process goes while the other computes, it comes
back when wanted, a slot whose worker is killed starts again, and SIGTERM stops them all with exit 0. (CPU workers
here; the GPU run is tests/gpu/worker_slots.py, the sandbox's is the autoscale suite's by-GPU test.)"""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from conftest import LocalDask
from dask_gpu_verify import health, slots
from distributed import Client

ARGV = ["dask", "cuda", "worker", "tls://10.0.0.1:8786", "--name", "gpu01", "--dashboard-address", "10.0.0.2:8790"]


def test_each_slot_gets_its_gpu_name_and_http_port() -> None:
    planned = slots.plan("gpu01", 3, ARGV, "")
    assert [slot.name for slot in planned] == ["gpu01-0", "gpu01-1", "gpu01-2"]
    assert [slot.gpu for slot in planned] == ["0", "1", "2"]
    assert [slots.option(slot.argv, "--dashboard-address") for slot in planned] == [
        "10.0.0.2:8790", "10.0.0.2:8791", "10.0.0.2:8792"]
    assert [slots.option(slot.argv, "--name") for slot in planned] == ["gpu01-0", "gpu01-1", "gpu01-2"]
    assert planned[2].health == "http://10.0.0.2:8792/health"
    assert planned[0].argv[:4] == ARGV[:4]


def test_a_mig_selection_gives_each_slot_its_instance_and_one_worker_keeps_the_host_name() -> None:
    planned = slots.plan("gpu01", 2, ARGV, "MIG-a,MIG-b")
    assert [slot.gpu for slot in planned] == ["MIG-a", "MIG-b"]
    single = slots.plan("cpu01", 1, ["dask", "worker", "tcp://s:8786", "--name=cpu01", "--nworkers", "1"], "")
    assert [(slot.name, slot.gpu, slot.health) for slot in single] == [("cpu01", "", "")]
    assert "--name=cpu01" in single[0].argv


def test_the_control_file_is_read_whole_or_not_at_all(tmp_path: Path) -> None:
    path = tmp_path / "released.json"
    assert slots.released(path, {"a", "b"}) == set()  # no file: every slot runs
    path.write_text('{"released": ["b", "zz"]}')
    assert slots.released(path, {"a", "b"}) == {"b"}  # a name of no slot is ignored
    path.write_text('{"released": ["b"')
    assert slots.released(path, {"a", "b"}) is None  # half written: the last reading stays


def free_pair() -> int:
    """A port P with P and P+1 both free on loopback."""
    for _ in range(50):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        try:
            with socket.socket() as other:
                other.bind(("127.0.0.1", port + 1))
            return port
        except OSError:
            continue
    raise AssertionError("no two adjacent free ports")


def wait_until(check: Any, timeout: float, what: str, log: Path) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"not within {timeout} s: {what}; the supervisor said:\n{log.read_text()[-3000:]}")


def names(client: Client) -> set[str]:
    return {str(info["name"]) for info in client.scheduler_info(n_workers=-1)["workers"].values()}


def pid_of(log: Path, slot: str) -> int:
    pattern = rf"\[slots\] {re.escape(slot)}(?: \(GPU [^)]*\))?: started, [^(]*\(pid ([0-9]+)\)"
    found = re.findall(pattern, log.read_text())
    return int(found[-1])


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_released_slot_stops_while_the_other_computes_and_comes_back(cluster: LocalDask, tmp_path: Path) -> None:
    cluster.start_scheduler()
    port = free_pair()
    control, health_file, log = tmp_path / "released.json", tmp_path / "health", tmp_path / "slots.log"
    worker = [sys.executable, "-m", "distributed.cli.dask_worker", "--scheduler-file", str(cluster.scheduler_file),
              "--nthreads", "1", "--name", "h", "--host", "127.0.0.1", "--dashboard-address", f"127.0.0.1:{port}",
              "--local-directory", str(tmp_path / "work")]
    with open(log, "wb") as out:
        supervisor = subprocess.Popen(
            [sys.executable, "-m", "dask_gpu_verify.slots", "--name", "h", "--workers", "2", "--control", str(control),
             "--health-file", str(health_file), "--interval", "0.2", "--restart-delay", "0.5", "--stop-timeout", "20",
             "--", *worker], stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    try:
        with Client(scheduler_file=str(cluster.scheduler_file), timeout=30) as client:
            wait_until(lambda: names(client) == {"h-0", "h-1"}, 60, "both slots registered", log)
            urls = health_file.read_text().split()
            assert urls == [f"http://127.0.0.1:{port}/health", f"http://127.0.0.1:{port + 1}/health"]
            wait_until(lambda: all(health.healthy(url) for url in urls), 30, "both slots healthy", log)
            second = pid_of(log, "h-1")

            control.write_text(json.dumps({"released": ["h-1"]}))
            wait_until(lambda: names(client) == {"h-0"}, 30, "h-1 gone from the scheduler", log)
            wait_until(lambda: not alive(second), 30, "h-1's process gone", log)
            assert health_file.read_text().split() == [urls[0]]
            checked = subprocess.run([sys.executable, "-m", "dask_gpu_verify.health"], capture_output=True, text=True,
                                     env={**os.environ, "DASK_HEALTH_FILE": str(health_file)}, check=False)
            assert checked.returncode == 0, checked.stderr  # the released slot does not make the container unhealthy
            assert client.submit(sum, range(100), workers=["h-0"]).result() == 4950

            control.write_text(json.dumps({"released": []}))
            wait_until(lambda: names(client) == {"h-0", "h-1"}, 60, "h-1 back", log)
            assert client.submit(sum, range(10), workers=["h-1"]).result() == 45

            first = pid_of(log, "h-0")
            os.kill(first, signal.SIGKILL)  # a worker killed: its slot starts again after the restart delay
            again = r"h-0 \(GPU 0\): started, again after its exit"
            wait_until(lambda: re.search(again, log.read_text()), 30, "h-0 started again", log)
            wait_until(lambda: names(client) == {"h-0", "h-1"} and pid_of(log, "h-0") != first, 60,
                       "h-0 registered again", log)
        supervisor.send_signal(signal.SIGTERM)
        assert supervisor.wait(timeout=40) == 0
        said = log.read_text()
        assert "[slots] h-1: stopped, released by the autoscaler" in said
        assert "[slots] h-0: its worker exited (-9); it starts again in 0.5 s" in said
        assert said.rstrip().endswith("[slots] stopped"), said[-2000:]
        assert not alive(pid_of(log, "h-0")) and not alive(pid_of(log, "h-1"))
    finally:
        if supervisor.poll() is None:
            supervisor.kill()
            supervisor.wait()

