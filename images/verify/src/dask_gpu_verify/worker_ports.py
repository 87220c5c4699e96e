"""Nanny preload: one fixed HTTP port per GPU worker.

Set as `DASK_DISTRIBUTED__NANNY__PRELOAD='["dask_gpu_verify.worker_ports"]'` (dask cuda worker has no --preload-nanny).

`dask cuda worker --dashboard-address HOST:PORT` gives every one of its workers the same address; the first takes
PORT and the others fall back to a random port, so Prometheus could not find them. This preload runs in each
worker's nanny before the worker process starts and moves that worker to PORT + N, where N is the worker's
position on the host: the position of its GPU (the first entry of the CUDA_VISIBLE_DEVICES that dask-cuda gives
each nanny, rotated so that the worker's own GPU comes first) in the host's list of GPUs (the process's own
CUDA_VISIBLE_DEVICES when it is set, for example MIG UUIDs; else 0..count-1).

A port of 0 (random), or an address without a port, is left alone. The bundle's units set this preload for GPU
workers only (the spec builder: collections/ansible_collections/dask_gpu/bundle/plugins/plugin_utils/spec.py); a
CPU worker host runs one worker on PORT.
"""
from __future__ import annotations

import os
from typing import Any


def position(nanny_visible: str | None, host_visible: str | None) -> int:
    """The worker's position on its host from its nanny's CUDA_VISIBLE_DEVICES (0 when it cannot tell)."""
    rotated = [entry.strip() for entry in (nanny_visible or "").split(",") if entry.strip()]
    if not rotated:
        return 0
    listed = [entry.strip() for entry in (host_visible or "").split(",") if entry.strip()]
    order = listed or [str(index) for index in range(len(rotated))]
    return order.index(rotated[0]) if rotated[0] in order else 0


def shifted(address: str, offset: int) -> str:
    """HOST:PORT moved to HOST:PORT+offset; other forms ('', ':0', no port) unchanged."""
    host, separator, port = str(address).rpartition(":")
    if not separator or not port.isdigit() or int(port) == 0 or offset == 0:
        return address
    return f"{host}:{int(port) + offset}"


def dask_setup(nanny: Any) -> None:
    """Nanny preload entry point: runs before the nanny starts its worker process."""
    address = nanny.worker_kwargs.get("dashboard_address")
    if not address:
        return
    offset = position(nanny.env.get("CUDA_VISIBLE_DEVICES"), os.environ.get("CUDA_VISIBLE_DEVICES"))
    nanny.worker_kwargs["dashboard_address"] = shifted(str(address), offset)
