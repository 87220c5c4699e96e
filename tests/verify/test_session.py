"""The session both clients share: HOST=COUNT parsing, waiting for workers in all and per host (against a fake
client and against real scheduler and worker processes), the backend choice, and the rule that neither CLI
module imports the other."""
from __future__ import annotations

import argparse
import ast
import socket
import time
from pathlib import Path

import dask_gpu_verify
import pytest
from conftest import FakeClient, LocalDask
from dask_gpu_verify import session

GPU = {"uuid": "GPU-a", "hostname": "gpu-a"}
NO_GPU = {"error": "no CUDA device visible"}


def test_parse_host_count() -> None:
    assert session.parse_host_count("gpu-a=4") == ("gpu-a", 4)
    assert session.parse_host_count("10.0.0.2=1") == ("10.0.0.2", 1)
    assert session.parse_host_count("odd=name=2") == ("odd=name", 2)
    for bad in ("gpu-a", "=2", "gpu-a=", "gpu-a=two", "gpu-a=-1"):
        with pytest.raises(argparse.ArgumentTypeError, match="expected HOST=COUNT"):
            session.parse_host_count(bad)


def test_connect_without_a_scheduler_is_refused() -> None:
    with pytest.raises(ValueError, match="no scheduler"):
        session.connect(None, None, 1.0)


def test_wait_returns_at_once_when_hostname_expectations_are_met() -> None:
    client = FakeClient({"tcp://10.0.0.2:1": {"host": "10.0.0.2", "name": "w0"},
                         "tcp://10.0.0.2:2": {"host": "10.0.0.2", "name": "w1"}},
                        {"tcp://10.0.0.2:1": "gpu-a", "tcp://10.0.0.2:2": "gpu-a"})
    started = time.monotonic()
    registered = session.wait_for_workers(client, session.Expected(2, {"gpu-a": 2}), timeout=30)
    assert registered.complete and registered.missing == []
    assert time.monotonic() - started < 5
    assert registered.host_of("tcp://10.0.0.2:1") == "gpu-a"
    assert client.asked == [["tcp://10.0.0.2:1", "tcp://10.0.0.2:2"]]  # each worker asked once


def test_wait_times_out_naming_the_short_host_and_its_counts() -> None:
    client = FakeClient({"tcp://10.0.0.2:1": {"host": "10.0.0.2", "name": "gpu-a-0"}},
                        {"tcp://10.0.0.2:1": "gpu-a"})
    expected = session.Expected(3, {"gpu-a": 2, "gpu-b": 1})
    registered = session.wait_for_workers(client, expected, timeout=1.0, poll=0.1)
    assert not registered.complete and registered.seconds >= 1.0
    lines = [finding.line() for finding in registered.missing]
    assert lines == ["FAIL [workers] 1 of 3 expected workers registered",
                     "FAIL [workers] host=gpu-a: expected 2 workers on this host, found 1",
                     "FAIL [workers] host=gpu-b: expected 1 workers on this host, found 0"]
    assert client.asked == [["tcp://10.0.0.2:1"]]  # not asked again on every poll
    assert expected.describe() == "3 workers (gpu-a=2, gpu-b=1)"


def test_worker_that_does_not_answer_is_matched_by_ip_and_asked_again() -> None:
    client = FakeClient({"tcp://10.0.0.2:1": {"host": "10.0.0.2", "name": "w0"}}, {})
    registered = session.wait_for_workers(client, session.Expected(1, {"gpu-a": 1}), timeout=0.3, poll=0.1)
    assert [f.host for f in registered.missing] == ["gpu-a"]
    assert registered.host_of("tcp://10.0.0.2:1") == "10.0.0.2"
    assert len(client.asked) >= 2
    assert session.wait_for_workers(client, session.Expected(1, {"10.0.0.2": 1}), timeout=5).complete


def test_pick_backend() -> None:
    gpus = {"w0": GPU, "w1": NO_GPU}
    mixed = session.pick_backend(gpus, ["w1", "w0"], allow_cpu=False)
    assert mixed is not None and (mixed.name, mixed.targets) == ("cupy", ["w0"])
    assert mixed.left_out == {"w1": "no usable GPU: no CUDA device visible"}
    cpu = session.pick_backend({"w0": NO_GPU, "w1": NO_GPU}, ["w1", "w0"], allow_cpu=True)
    assert cpu is not None and (cpu.name, cpu.targets, cpu.left_out) == ("numpy", ["w0", "w1"], {})
    assert session.pick_backend({"w0": NO_GPU}, ["w0"], allow_cpu=False) is None
    assert session.pick_backend({}, [], allow_cpu=True) is None
    # A worker that registered after the GPU probe is not a target.
    late = session.pick_backend({"w0": GPU}, ["w0", "w9"], allow_cpu=True)
    assert late is not None and late.targets == ["w0"] and "not probed" in late.left_out["w9"]


def test_real_cluster_per_host_wait_times_out_naming_the_host(cluster: LocalDask) -> None:
    address = cluster.start_scheduler()
    cluster.start_worker("w0")
    from distributed import Client

    with Client(address, timeout=30) as client:
        client.wait_for_workers(1, timeout=60)
        here = session.wait_for_workers(client, session.Expected(1, {socket.gethostname(): 1}), timeout=30)
        assert here.complete and here.seconds < 30  # the hostname is known while waiting
        registered = session.wait_for_workers(client, session.Expected(1, {"gpu-node-7": 1}), timeout=2)
    assert registered.seconds >= 2 and len(registered.workers) == 1
    (finding,) = registered.missing
    assert finding.line() == "FAIL [workers] host=gpu-node-7: expected 1 workers on this host, found 0"


def test_no_cli_module_imports_another() -> None:
    package = Path(dask_gpu_verify.__file__).parent
    clis = {"cli", "bench", "health"}
    for name in clis:
        tree = ast.parse((package / f"{name}.py").read_text())
        imported: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                module = (node.module or "").removeprefix("dask_gpu_verify").lstrip(".")
                imported |= {module} if module else {alias.name for alias in node.names}
            elif isinstance(node, ast.Import):
                imported |= {alias.name.removeprefix("dask_gpu_verify.") for alias in node.names}
        assert not imported & (clis - {name}), f"{name}.py imports {imported & clis}"
