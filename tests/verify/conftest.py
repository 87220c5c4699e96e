"""A real local Dask cluster (scheduler and worker processes on 127.0.0.1) for the client's tests."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def _wait_for(path: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists() or not path.read_text().strip():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} not written within {timeout} s")
        time.sleep(0.2)


class LocalDask:
    """Start `dask scheduler` and `dask worker` as the deployed cluster would, on loopback."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.procs: list[subprocess.Popen[bytes]] = []
        self.scheduler_file = tmp / "scheduler.json"

    def _spawn(self, args: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        log = open(self.tmp / f"proc-{len(self.procs)}.log", "wb")  # noqa: SIM115 (closed with the process)
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env or os.environ.copy())
        self.procs.append(proc)
        return proc

    def start_scheduler(self) -> str:
        self._spawn([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", "0",
                     "--dashboard-address", "127.0.0.1:0", "--scheduler-file", str(self.scheduler_file)])
        _wait_for(self.scheduler_file)
        return str(json.loads(self.scheduler_file.read_text())["address"])

    def start_worker(self, name: str, extra_env: dict[str, str] | None = None,
                     host: str = "127.0.0.1") -> subprocess.Popen[bytes]:
        env = os.environ.copy()
        env.update(extra_env or {})
        return self._spawn([sys.executable, "-m", "distributed.cli.dask_worker", "--scheduler-file",
                            str(self.scheduler_file), "--nthreads", "1", "--name", name, "--no-dashboard", "--host",
                            host, "--local-directory", str(self.tmp / name)], env)

    def stop(self) -> None:
        for proc in reversed(self.procs):
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()


@contextmanager
def local_dask(tmp: Path) -> Iterator[LocalDask]:
    cluster = LocalDask(tmp)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalDask]:
    with local_dask(tmp_path) as c:
        yield c


def run_verify(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dask_gpu_verify", *args], capture_output=True, text=True,
                          timeout=240, env=env)


class FakeClient:
    """Stands in for distributed.Client where a test needs only what the scheduler reports and what
    `client.run` returns: workers by address ({"host", "name"}), their hostnames and their GPU probes."""

    def __init__(self, workers: dict[str, dict[str, str]], hostnames: dict[str, str],
                 gpus: dict[str, dict[str, object]] | None = None) -> None:
        self.workers, self.hostnames, self.gpus = workers, hostnames, gpus or {}
        self.asked: list[list[str]] = []

    def scheduler_info(self, n_workers: int = -1) -> dict[str, object]:
        return {"workers": dict(self.workers)}

    def run(self, function: object, workers: list[str] | None = None, on_error: str = "raise") -> dict[str, object]:
        import socket

        from dask_gpu_verify import probes

        targets = list(self.workers) if workers is None else workers
        if function is socket.gethostname:
            self.asked.append(targets)
            return {a: self.hostnames[a] for a in targets if a in self.hostnames}
        if function is probes.gpu_info:
            return {a: self.gpus.get(a, {"error": "cupy is not importable: test"}) for a in targets}
        raise AssertionError(f"unexpected client.run({function!r})")


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def certificates(folder: Path) -> dict[str, Path]:
    """A CA, a server certificate for 127.0.0.1, a client certificate (as the cluster's CA signs host ones) and a
    stranger's, signed by itself. Calling it again in the same folder keeps the CA and issues new certificates."""
    ca_key, ca = folder / "ca.key", folder / "ca.crt"
    if not ca.exists():
        _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
                 str(ca_key), "-out", str(ca), "-days", "1", "-subj", "/CN=test Dask CA")
    made = {"ca": ca}
    for name in ("server", "client", "stranger"):
        key, csr, crt = folder / f"{name}.key", folder / f"{name}.csr", folder / f"{name}.crt"
        _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", str(key),
                 "-out", str(csr), "-subj", f"/CN={name}")
        ext = folder / f"{name}.ext"
        ext.write_text("subjectAltName=IP:127.0.0.1\n")
        if name == "stranger":  # signed by itself: not the cluster's
            _openssl("x509", "-req", "-in", str(csr), "-signkey", str(key), "-out", str(crt), "-days", "1")
        else:
            _openssl("x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key), "-CAcreateserial",
                     "-out", str(crt), "-days", "1", "-extfile", str(ext))
        made[f"{name}_key"], made[name] = key, crt
    return made
