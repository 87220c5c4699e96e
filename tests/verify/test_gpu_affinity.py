"""The nanny preload that pins each GPU worker to its own GPU's cores (dask_gpu_verify.gpu_affinity), with
distributed's real Nanny built (not started) as dask-cuda 26.10's CUDAWorker builds one per GPU: the rotated
CUDA_VISIBLE_DEVICES and a CPUAffinity plugin holding the cores of GPU 2i mod n (its choice, see the module)."""
from __future__ import annotations

import logging
from collections.abc import Callable

import pytest
from dask_gpu_verify import gpu_affinity
from distributed import Nanny

GPUS = 8


def socket_cores(gpu: int | str) -> list[int]:
    """A dual-socket 8-GPU host: GPUs 0-3 next to cores 0-15, GPUs 4-7 next to cores 16-31."""
    return list(range(16)) if int(gpu) < 4 else list(range(16, 32))


class CPUAffinity:  # dask_cuda.plugins.CPUAffinity's shape (matched by name)
    def __init__(self, cores: list[int]) -> None:
        self.cores = cores


class RMMSetup:  # another of dask-cuda's plugins: left alone
    cores = [99]


def dask_cuda_nanny(worker: int, gpus: int = GPUS, cores: Callable[[int], list[int]] = socket_cores) -> Nanny:
    visible = [str((worker + index) % gpus) for index in range(gpus)]  # cuda_visible_devices(worker)
    chosen = int(visible[worker])  # nvml_device_index(worker, cuda_visible_devices(worker)): GPU 2i mod n
    return Nanny("tcp://127.0.0.1:1", env={"CUDA_VISIBLE_DEVICES": ",".join(visible)},
                 plugins={CPUAffinity(cores(chosen)), RMMSetup()})


def affinity(nanny: Nanny) -> list[int]:
    return next(plugin.cores for plugin in nanny.worker_kwargs["plugins"] if isinstance(plugin, CPUAffinity))


@pytest.mark.parametrize("worker", range(GPUS))
def test_every_worker_is_pinned_to_its_own_gpus_socket(worker: int, caplog: pytest.LogCaptureFixture) -> None:
    nanny = dask_cuda_nanny(worker)
    wrong = affinity(nanny) != socket_cores(worker)
    assert wrong == (worker in (2, 3, 4, 5))  # what dask-cuda hands workers 2-5 on such a host
    with caplog.at_level(logging.INFO, logger="distributed.nanny"):
        gpu_affinity.dask_setup(nanny, cores_of=socket_cores)
    assert affinity(nanny) == socket_cores(worker)
    assert next(plugin for plugin in nanny.worker_kwargs["plugins"] if isinstance(plugin, RMMSetup)).cores == [99]
    assert (f"CPU affinity of the worker of GPU {worker}: cores" in caplog.text) == wrong


def test_the_second_worker_of_a_two_gpu_host_gets_its_own_gpus_cores() -> None:
    def cores(gpu: int | str) -> list[int]:
        return [0, 1] if int(gpu) == 0 else [2, 3]

    nanny = dask_cuda_nanny(1, gpus=2, cores=cores)
    assert affinity(nanny) == [0, 1]  # GPU 2 mod 2 = 0
    gpu_affinity.dask_setup(nanny, cores_of=cores)
    assert affinity(nanny) == [2, 3]


@pytest.mark.parametrize(("visible", "expected"), [
    ("3,0,1,2", 3), (" 5 ", 5), ("GPU-a5a3d0c8,GPU-b", "GPU-a5a3d0c8"), ("MIG-1", "MIG-1"), ("", None), (None, None),
    (",", None)])
def test_own_gpu_is_the_first_entry_as_nvml_takes_it(visible: str | None, expected: int | str | None) -> None:
    assert gpu_affinity.own_gpu(visible) == expected


def test_a_uuid_is_looked_up_as_a_uuid() -> None:
    asked: list[int | str] = []

    def cores(gpu: int | str) -> list[int]:
        asked.append(gpu)
        return [4, 5]

    nanny = Nanny("tcp://127.0.0.1:1", env={"CUDA_VISIBLE_DEVICES": "GPU-b,GPU-a"}, plugins={CPUAffinity([0])})
    gpu_affinity.dask_setup(nanny, cores_of=cores)
    assert asked == ["GPU-b"] and affinity(nanny) == [4, 5]


@pytest.mark.parametrize("kwargs", [
    {"env": {}, "plugins": {CPUAffinity([0])}},  # no CUDA_VISIBLE_DEVICES from dask-cuda: nothing to go by
    {"env": {"CUDA_VISIBLE_DEVICES": "1,0"}},  # a worker without the plugin (not dask-cuda's)
    {"env": {"CUDA_VISIBLE_DEVICES": "1,0"}, "plugins": {CPUAffinity([0])}, "empty": True}])  # NVML names no core
def test_nothing_to_go_by_leaves_the_worker_alone(kwargs: dict) -> None:
    empty = kwargs.pop("empty", False)
    looked: list[int | str] = []

    def cores(gpu: int | str) -> list[int]:
        looked.append(gpu)
        return [] if empty else [7]

    nanny = Nanny("tcp://127.0.0.1:1", **kwargs)
    before = {id(plugin): list(plugin.cores) for plugin in nanny.worker_kwargs.get("plugins") or ()}
    gpu_affinity.dask_setup(nanny, cores_of=cores)
    assert {id(plugin): list(plugin.cores) for plugin in nanny.worker_kwargs.get("plugins") or ()} == before
    assert looked == ([1] if empty else [])


def test_ranges_are_logged_compactly() -> None:
    assert gpu_affinity.ranges([8, 0, 1, 2, 3, 10, 11]) == "0-3,8,10-11"
    assert gpu_affinity.ranges([]) == ""


def test_a_failing_lookup_leaves_dask_cudas_choice_and_the_worker_starts(caplog: pytest.LogCaptureFixture) -> None:
    def cores(gpu: int | str) -> list[int]:
        raise RuntimeError("NVML: not supported")

    nanny = dask_cuda_nanny(2)
    before = affinity(nanny)
    with caplog.at_level(logging.WARNING, logger="distributed.nanny"):
        gpu_affinity.dask_setup(nanny, cores_of=cores)
    assert affinity(nanny) == before
    assert "left as dask-cuda chose it: NVML: not supported" in caplog.text
