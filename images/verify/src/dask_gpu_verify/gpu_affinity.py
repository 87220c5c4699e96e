"""Nanny preload: each GPU worker pinned to the CPU cores of its own GPU.

Set with worker_ports in `DASK_DISTRIBUTED__NANNY__PRELOAD` (the spec builder:
collections/ansible_collections/dask_gpu/bundle/plugins/plugin_utils/spec.py).

`dask cuda worker` gives each of its workers a CPUAffinity plugin that pins the worker process to the cores next to a
GPU. dask-cuda 26.10 (and every release since 2021, dask-cuda#671) picks that GPU in `CUDAWorker` as
`nvml_device_index(i, cuda_visible_devices(i))`: entry i of the list already rotated by i, which is GPU 2i mod n,
not the worker's own GPU (entry 0, as LocalCUDACluster takes it). Worker 1 of a 2-GPU host gets GPU 0's cores; on an
8-GPU host with GPUs 0-3 on one socket and 4-7 on the other, workers 2, 3, 4 and 5 run on the other socket's cores,
so every copy between their GPU and host memory (spilling, TCP staging, pinned buffers) crosses the socket link.
On hosts whose GPUs all share one CPU affinity (one socket, or a VM given one NUMA node) nothing changes.

This preload runs in each nanny before it starts its worker process and sets the plugin's cores to those of the
worker's own GPU: the first entry of the CUDA_VISIBLE_DEVICES dask-cuda gives the nanny (an index or a UUID, as
dask-cuda's own NVML lookups take it). A worker without that plugin (a CPU worker, `dask worker`) is left alone.
The device memory limit dask-cuda computes from the same wrong GPU is left as it is: it only differs on a host that
mixes GPU models.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

logger = logging.getLogger("distributed.nanny")
PLUGIN = "CPUAffinity"  # dask_cuda.plugins.CPUAffinity, matched by name: importing dask_cuda needs its GPU stack


def own_gpu(nanny_visible: str | None) -> int | str | None:
    """The worker's own GPU, as NVML is asked for it: the first entry of its nanny's CUDA_VISIBLE_DEVICES (an int
    for an index, else the UUID); None when the nanny has none."""
    first = next((entry.strip() for entry in (nanny_visible or "").split(",") if entry.strip()), "")
    if not first:
        return None
    return int(first) if first.isdigit() else first


def repin(plugins: Iterable[Any], cores: list[int]) -> list[tuple[list[int], list[int]]]:
    """Set the cores of every CPUAffinity plugin among `plugins`; (before, after) for each one that changed."""
    changed = []
    for plugin in plugins:
        if type(plugin).__name__ != PLUGIN or not hasattr(plugin, "cores"):
            continue
        before = list(plugin.cores)
        if sorted(before) != sorted(cores):
            plugin.cores = list(cores)
            changed.append((before, list(cores)))
    return changed


def ranges(cores: Iterable[int]) -> str:
    """0-3,8 for [0, 1, 2, 3, 8]: how the cores are logged."""
    spans: list[list[int]] = []
    for core in sorted(set(cores)):
        if spans and core == spans[-1][1] + 1:
            spans[-1][1] = core
        else:
            spans.append([core, core])
    return ",".join(f"{low}-{high}" if high > low else str(low) for low, high in spans)


def gpu_cores(gpu: int | str) -> list[int]:
    """The cores NVML names for the GPU (dask-cuda's own lookup; every core when NVML cannot tell)."""
    from dask_cuda.utils import get_cpu_affinity  # the worker image's dask-cuda; a GPU worker has it

    return list(get_cpu_affinity(gpu))


def dask_setup(nanny: Any, cores_of: Callable[[int | str], list[int]] = gpu_cores) -> None:
    """Nanny preload entry point: runs before the nanny starts its worker process."""
    gpu = own_gpu(nanny.env.get("CUDA_VISIBLE_DEVICES"))
    plugins = [plugin for plugin in nanny.worker_kwargs.get("plugins") or () if type(plugin).__name__ == PLUGIN]
    if gpu is None or not plugins:
        return
    try:
        cores = cores_of(gpu)
    except Exception as error:  # noqa: BLE001 - the worker starts with dask-cuda's choice rather than not at all
        logger.warning("CPU affinity of the worker of GPU %s left as dask-cuda chose it: %s", gpu, error)
        return
    if not cores:
        return
    for before, after in repin(plugins, cores):
        logger.info("CPU affinity of the worker of GPU %s: cores %s (dask-cuda chose %s, another GPU's)", gpu,
                    ranges(after), ranges(before))
