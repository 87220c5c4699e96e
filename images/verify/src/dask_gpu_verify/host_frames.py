"""Scheduler preload for dask_transport tls-ucx (`dask scheduler --preload dask_gpu_verify.host_frames`).

Clients reach the scheduler over TLS and gather results through it, while the workers talk UCX. Over UCX a
worker sends CuPy data as device buffers unless the receiver asks for other serializers; the scheduler has no
GPU, cannot receive device buffers, and could not forward them over TLS (TCP carries host memory only). So the
scheduler's own connections ask workers for host-serialized data ("dask" serializes a CuPy array as a host copy
that deserializes to a CuPy array again). Worker-to-worker transfers are not touched: they stay on NVLink.
"""
from __future__ import annotations

from typing import Any

# Serializer families that produce host memory only (distributed.protocol.serialize).
HOST_SERIALIZERS = ["dask", "pickle", "error"]


def dask_setup(scheduler: Any) -> None:
    scheduler.rpc.serializers = list(HOST_SERIALIZERS)
    scheduler.rpc.deserializers = list(HOST_SERIALIZERS)
