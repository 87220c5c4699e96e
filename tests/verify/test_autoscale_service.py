"""dask-gpu-autoscale against real `dask scheduler` and `dask worker` processes on two loopback "hosts", its agents'
endpoint asked over mutual TLS as the agents ask it. The test stands in for the agents' systemctl: it stops a host's
worker process when the host is marked down and starts one when it is marked up (tests/sandbox/autoscale runs the
real agents and units)."""
from __future__ import annotations

import json
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from conftest import LocalDask, certificates
from distributed import Client

HOSTS = {"w1": "127.0.0.1", "w2": "127.0.0.2"}
COOLDOWN = 4  # seconds; longer than a retirement of w2's ten keys takes here


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def ask(url: str, files: dict[str, Path], who: str = "client") -> dict[str, Any]:
    context = ssl.create_default_context(cafile=str(files["ca"]))
    context.load_cert_chain(str(files[who]), str(files[f"{who}_key"]))
    with urllib.request.urlopen(url, timeout=5, context=context) as answer:  # noqa: S310 (https)
        return dict(json.loads(answer.read()))


def wait_until(check: Any, timeout: float, what: str, log: Path | None = None,
               service: subprocess.Popen[bytes] | None = None) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if service is not None and service.poll() is not None:  # it ended: no point waiting
            said = log.read_text()[-4000:] if log and log.exists() else ""
            raise AssertionError(f"the service exited ({service.returncode}) before: {what}; it said:\n{said}")
        try:
            found = check()
        except (urllib.error.URLError, ConnectionError):  # the service is not listening yet
            found = None
        if found:
            return found
        time.sleep(0.5)
    said = f"; the service said:\n{log.read_text()[-4000:]}" if log and log.exists() else ""
    raise AssertionError(f"not within {timeout} s: {what}{said}")


def test_idle_host_is_retired_then_released_and_work_brings_it_back(cluster: LocalDask, tmp_path: Path) -> None:
    files = certificates(tmp_path)
    address = cluster.start_scheduler()
    workers = {name: cluster.start_worker(name, host=ip) for name, ip in HOSTS.items()}
    port = free_port()
    state = tmp_path / "state"
    state.mkdir()
    url = f"https://127.0.0.1:{port}"
    log = open(tmp_path / "autoscale.log", "wb")  # noqa: SIM115 (closed below)
    service: subprocess.Popen[bytes] | None = None
    try:
        with Client(address, timeout=30) as client:
            client.wait_for_workers(2, timeout=60)
            on_w2 = [w for w, info in client.scheduler_info(n_workers=-1)["workers"].items()
                     if info["host"] == HOSTS["w2"]]
            data = [client.submit(lambda i: list(range(i)), n, pure=False, workers=on_w2) for n in range(10)]
            client.gather(data)
            # The service starts once the data is on w2: both hosts are idle from its first look, and the policy
            # releases the last host in inventory order first (started before, it saw w1 idle while w2 was still
            # registering or computing, and released w1: a slow machine made that race). It starts paused, as a
            # site.yml run leaves it: it holds every decision, and the cooldown starts again when the run ends.
            (state / "paused").write_text("site.yml\n")
            service = subprocess.Popen(
                [sys.executable, "-m", "dask_gpu_verify.autoscale", "--scheduler", address,
                 *[arg for name, ip in HOSTS.items() for arg in ("--host", f"{name},{ip},1")],
                 "--minimum", "1", "--maximum", "2", "--idle", "3", "--cooldown", str(COOLDOWN),
                 "--step-down", "0.5",
                 "--interval", "0.5", "--state", str(state), "--listen", f"127.0.0.1:{port}",
                 "--ca", str(files["ca"]), "--cert", str(files["server"]), "--key", str(files["server_key"])],
                stdout=log, stderr=subprocess.STDOUT)
            wait_until(lambda: "paused: a site.yml run" in (tmp_path / "autoscale.log").read_text(), 60,
                       "the service paused", tmp_path / "autoscale.log", service)
            time.sleep(3 + 1)  # both hosts idle longer than --idle: only the pause holds them
            assert ask(f"{url}/v1/hosts/w2", files)["desired"] == "up", "released while a site.yml run held it"
            (state / "paused").unlink()
            resumed = time.time()
            # Idle: w2 (last) is retired, its keys moved, then marked down; w1 holds the minimum. Not before the
            # cooldown from the resume has passed (the run changed the cluster), though w2 has been idle long enough.
            down = wait_until(lambda: ask(f"{url}/v1/hosts/w2", files)["desired"] == "down", 180, "w2 released",
                              tmp_path / "autoscale.log", service)
            released_after = time.time() - resumed
            assert released_after >= COOLDOWN, f"released {released_after:.1f} s after the resume"
            assert "resumed: no release within the cooldown" in (tmp_path / "autoscale.log").read_text()
            assert down and ask(f"{url}/v1/hosts/w1", files)["desired"] == "up"
            assert [len(f.result()) for f in data] == list(range(10))  # nothing lost: the keys live on w1
            assert all(len(f.result()) == i for i, f in enumerate(data))
            # The agents' stand-in: the unit stops.
            workers["w2"].terminate()
            workers["w2"].wait(timeout=30)
            # Work waits (more than one worker can run at once): w2 is wanted again.
            slow = client.map(lambda i: time.sleep(1.5) or i, range(40), pure=False)
            generation = ask(f"{url}/v1/hosts/w2", files)["generation"]
            wait_until(lambda: ask(f"{url}/v1/hosts/w2", files)["desired"] == "up", 180, "w2 wanted again",
                       tmp_path / "autoscale.log", service)
            assert ask(f"{url}/v1/hosts/w2", files)["generation"] == generation + 1
            cluster.start_worker("w2", host=HOSTS["w2"])  # the stand-in starts the unit
            assert sum(client.gather(slow)) == sum(range(40))
            metrics = urllib_metrics(url, files)
            assert "dask_autoscale_desired_workers 2" in metrics, metrics
        # Only the cluster's certificates are answered.
        with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError)):
            ask(f"{url}/v1/hosts/w1", files, who="stranger")
        lines = (tmp_path / "autoscale.log").read_text()
        assert "scale down:" in lines and "scale up:" in lines and "retired w2 (data moved)" in lines, lines
        assert json.loads((state / "state.json").read_text())["desired"] == {"w1": "up", "w2": "up"}
        # Stopped as `docker stop` stops its unit (SIGTERM): exit 0, so the unit does not end "failed".
        service.terminate()
        assert service.wait(timeout=15) == 0
        assert (tmp_path / "autoscale.log").read_text().rstrip().endswith("stopped")
    finally:
        if service is not None:
            service.terminate()
            service.wait(timeout=15)
        log.close()


def urllib_metrics(url: str, files: dict[str, Path]) -> str:
    context = ssl.create_default_context(cafile=str(files["ca"]))
    context.load_cert_chain(str(files["client"]), str(files["client_key"]))
    with urllib.request.urlopen(f"{url}/metrics", timeout=5, context=context) as answer:  # noqa: S310 (https)
        return str(answer.read().decode())
