"""The nanny preload that gives each GPU worker its own HTTP port (dask_gpu_verify.worker_ports), with
distributed's real Nanny object built (not started) the way dask-cuda builds one per GPU."""
from __future__ import annotations

import pytest
from dask_gpu_verify import worker_ports
from distributed import Nanny


@pytest.mark.parametrize(("nanny_visible", "host_visible", "expected"), [
    ("0,1,2,3", None, 0), ("2,3,0,1", None, 2), ("3,0,1,2", "", 3),
    # A selection inside a container is numbered from 0; MIG UUIDs come from the process's own list.
    ("MIG-b,MIG-a", "MIG-a,MIG-b", 1), ("7", "7", 0), ("", None, 0), (None, None, 0), ("5,6", "1,2", 0)])
def test_position_is_the_index_of_the_workers_own_gpu(nanny_visible: str | None, host_visible: str | None,
                                                      expected: int) -> None:
    assert worker_ports.position(nanny_visible, host_visible) == expected


@pytest.mark.parametrize(("address", "offset", "expected"), [
    ("127.0.0.1:8790", 3, "127.0.0.1:8793"), ("10.0.0.2:8790", 0, "10.0.0.2:8790"), (":0", 2, ":0"),
    ("10.0.0.2", 1, "10.0.0.2"), ("", 1, "")])
def test_shifted_moves_only_a_fixed_port(address: str, offset: int, expected: str) -> None:
    assert worker_ports.shifted(address, offset) == expected


@pytest.mark.parametrize(("gpu", "port"), [(0, 8790), (1, 8791), (3, 8793)])
def test_preload_moves_a_dask_cuda_nanny_to_its_gpus_port(gpu: int, port: int,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    visible = ",".join(str((gpu + index) % 4) for index in range(4))  # dask-cuda's rotation for worker `gpu`
    nanny = Nanny("tcp://127.0.0.1:1", dashboard_address="127.0.0.1:8790", env={"CUDA_VISIBLE_DEVICES": visible})
    worker_ports.dask_setup(nanny)
    assert nanny.worker_kwargs["dashboard_address"] == f"127.0.0.1:{port}"
