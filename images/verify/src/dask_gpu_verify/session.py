"""A client's session with a running cluster, shared by dask-gpu-verify and dask-gpu-bench.

Connect to the scheduler, wait until the expected workers have registered (in total and per host) or the
time is up, and pick the backend the workers compute with (CuPy on GPU workers, NumPy only when allowed).
"""
from __future__ import annotations

import argparse
import socket
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import checks
from .findings import Finding

# Exit statuses of both command-line clients.
EXIT_OK, EXIT_FAILED, EXIT_UNREACHABLE = 0, 1, 2


def parse_host_count(text: str) -> tuple[str, int]:
    """HOST=COUNT from the command line (the last `=` splits, so the host part may hold one)."""
    host, sep, count = text.rpartition("=")
    if not sep or not host or not count.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST=COUNT, got {text!r}")
    return host, int(count)


def connect(scheduler: str | None, scheduler_file: Path | None, timeout: float) -> Any:
    """A distributed.Client; TLS comes from the Dask configuration (DASK_DISTRIBUTED__COMM__TLS__*)."""
    from distributed import Client

    if scheduler_file is not None:
        return Client(scheduler_file=str(scheduler_file), timeout=timeout)
    if not scheduler:
        raise ValueError("no scheduler: give --scheduler, --scheduler-file or DASK_SCHEDULER_ADDRESS")
    return Client(scheduler, timeout=timeout)


@dataclass(frozen=True)
class Expected:
    """Workers that must register: in all, and per host (hostname, IP or worker name, see checks)."""

    workers: int = 1
    per_host: Mapping[str, int] = field(default_factory=dict)

    def describe(self) -> str:
        hosts = ", ".join(f"{host}={count}" for host, count in sorted(self.per_host.items()))
        return f"{self.workers} workers" + (f" ({hosts})" if hosts else "")


@dataclass
class Registered:
    """The workers found when the wait ended, and what the expectation still lacked then."""

    workers: dict[str, dict[str, Any]]
    missing: list[Finding]
    seconds: float

    @property
    def complete(self) -> bool:
        return not self.missing

    def host_of(self, address: str) -> str:
        """The worker's hostname, or its IP when it did not answer."""
        info = self.workers[address]
        return str(info.get("hostname") or info.get("host"))


def wait_for_workers(client: Any, expected: Expected, timeout: float, poll: float = 0.5) -> Registered:
    """Poll the scheduler until `expected` is met or `timeout` seconds have passed.

    Workers map address -> {"host": IP, "name": worker name, "hostname": the worker's own hostname}; the
    hostname is asked of each new worker once, so expectations written as hostnames are met while waiting."""
    started = time.monotonic()
    hostnames: dict[str, str] = {}
    while True:
        workers = _registered(client, hostnames)
        missing = checks.worker_counts(workers, expected.workers, expected.per_host)
        elapsed = time.monotonic() - started
        if not missing or elapsed > timeout:
            return Registered(workers, missing, elapsed)
        time.sleep(poll)


def _registered(client: Any, hostnames: dict[str, str]) -> dict[str, dict[str, Any]]:
    info = client.scheduler_info(n_workers=-1)
    new = [address for address in info["workers"] if address not in hostnames]
    if new:  # a worker that goes away meanwhile is simply asked again next time
        hostnames.update(client.run(socket.gethostname, workers=new, on_error="ignore"))
    return {address: {"host": worker.get("host"), "name": worker.get("name"), "hostname": hostnames.get(address)}
            for address, worker in info["workers"].items()}


@dataclass(frozen=True)
class Backend:
    """What the workloads run with, on which workers, and the workers left out with the reason."""

    name: str
    targets: list[str]
    left_out: dict[str, str] = field(default_factory=dict)


def pick_backend(gpus: Mapping[str, Mapping[str, Any]], workers: Iterable[str], allow_cpu: bool) -> Backend | None:
    """CuPy on the workers with a usable GPU (`gpus` is probes.gpu_info per worker); with none, NumPy on
    every worker when `allow_cpu`, else None: there is nothing to run on."""
    every = sorted(workers)
    gpu_workers = [address for address in every if "uuid" in gpus.get(address, {})]
    if gpu_workers:
        left_out = {address: f"no usable GPU: {gpus.get(address, {}).get('error', 'not probed')}"
                    for address in every if address not in gpu_workers}
        return Backend("cupy", gpu_workers, left_out)
    if allow_cpu and every:
        return Backend("numpy", every)
    return None
