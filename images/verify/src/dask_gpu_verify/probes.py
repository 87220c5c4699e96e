"""Functions that run inside the scheduler and worker processes and report what they see.

They import nothing heavy at module level so the client can import this module without CuPy.
"""
from __future__ import annotations

import importlib
import importlib.metadata
import os
import platform
import socket
import time
from typing import Any

# The packages whose versions must agree across client, scheduler and workers (docs/client.md): Dask itself,
# the wire format and pickling distributed relies on (msgpack, cloudpickle, tornado, toolz), and NumPy.
VERSIONED_PACKAGES = ("dask", "distributed", "dask-cuda", "numpy", "msgpack", "cloudpickle", "tornado", "toolz")


def _cupy_distribution() -> str | None:
    """Return 'cupy-cudaXXx==V' for whichever CuPy wheel is installed, or None."""
    for dist in importlib.metadata.distributions():
        name = (dist.metadata["Name"] or "").lower()
        if name == "cupy" or name.startswith("cupy-cuda"):
            return f"{name}=={dist.version}"
    return None


def versions() -> dict[str, str | None]:
    """Versions of python and of the packages a Dask-CUDA cluster must agree on (None: absent)."""
    found: dict[str, str | None] = {"python": platform.python_version()}
    for package in VERSIONED_PACKAGES:
        try:
            found[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            found[package] = None
    found["cupy"] = _cupy_distribution()
    return found


def _format_uuid(raw: bytes) -> str:
    text = raw.hex()
    return f"GPU-{text[0:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:32]}"


def device_uuid(props: dict[str, Any]) -> str:
    """The UUID of the GPU whose CUDA properties these are. CuPy hands CUDA's 16 UUID bytes over as a C string, so
    a zero byte cuts them short (a GPU of a lent 4 x H200, GPU-007a355d-..., came back as no bytes at all): then
    NVML names the GPU at the device's PCI address."""
    raw = bytes(props["uuid"])
    if len(raw) == 16:
        return _format_uuid(raw)
    from . import gpu_health

    bus_id = f"{int(props.get('pciDomainID', 0)):08x}:{int(props['pciBusID']):02x}:{int(props['pciDeviceID']):02x}.0"
    return gpu_health.uuid_at(bus_id) or f"GPU-unread-at-{bus_id}"


def gpu_info() -> dict[str, Any]:
    """What the calling process computes on: device 0 of its CUDA_VISIBLE_DEVICES."""
    info: dict[str, Any] = {
        "hostname": socket.gethostname(),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "device_count": 0,
    }
    try:
        cupy = importlib.import_module("cupy")
    except ImportError as error:
        info["error"] = f"cupy is not importable: {error}"
        return info
    try:
        info["device_count"] = int(cupy.cuda.runtime.getDeviceCount())
        if info["device_count"] == 0:
            info["error"] = "no CUDA device visible"
            return info
        props = cupy.cuda.runtime.getDeviceProperties(0)
        info.update(
            uuid=device_uuid(props),
            name=props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"]),
            memory_bytes=int(props["totalGlobalMem"]),
            compute_capability=f"{props['major']}.{props['minor']}",
            driver_version=int(cupy.cuda.runtime.driverGetVersion()),
            runtime_version=int(cupy.cuda.runtime.runtimeGetVersion()),
        )
    except Exception as error:  # a CUDA error of any kind means this worker has no usable GPU
        info["error"] = f"CUDA error: {error}"
    return info


def gpu_health() -> dict[str, Any]:
    """This worker's own GPU (the first of its CUDA_VISIBLE_DEVICES) read through NVML and judged (gpu_health.py),
    and the CPU cores this worker process may run on."""
    from . import gpu_health as health

    device = (os.environ.get("CUDA_VISIBLE_DEVICES") or "0").split(",")[0].strip() or "0"
    return {**health.read_device(device), "worker_cores": sorted(os.sched_getaffinity(0))}


def memory_bandwidth(nbytes: int, repeats: int, backend: str) -> dict[str, Any]:
    """Best-of-N GB/s for an fp64 sum (reads nbytes) and a copy (reads and writes nbytes)."""
    xp = importlib.import_module(backend)
    count = max(nbytes // 8, 1)
    a = xp.ones(count, dtype=xp.float64)
    b = xp.empty_like(a)

    if backend == "cupy":
        stream = xp.cuda.get_current_stream()

        def timed(operation: Any) -> float:
            start, stop = xp.cuda.Event(), xp.cuda.Event()
            start.record(stream)
            operation()
            stop.record(stream)
            stop.synchronize()
            return float(xp.cuda.get_elapsed_time(start, stop)) / 1000.0
    else:
        def timed(operation: Any) -> float:
            begin = time.perf_counter()
            operation()
            return time.perf_counter() - begin

    def do_sum() -> None:
        total = a.sum()
        if float(total) != float(count):
            raise ArithmeticError(f"bandwidth sum gave {float(total)}, expected {count}")

    def do_copy() -> None:
        xp.copyto(b, a)

    do_sum()  # warm-up: kernel compilation, page faults
    do_copy()
    sum_seconds = min(timed(do_sum) for _ in range(repeats))
    copy_seconds = min(timed(do_copy) for _ in range(repeats))
    return {
        "backend": backend,
        "bytes": count * 8,
        "sum_gbps": count * 8 / sum_seconds / 1e9,
        "copy_gbps": 2 * count * 8 / copy_seconds / 1e9,
    }


def matmul_tflops(n: int, dtype: str, repeats: int, backend: str) -> float:
    """Best-of-N TFLOP/s of an n x n x n matrix product (2 n^3 flops) in `dtype`, on this worker's device."""
    xp = importlib.import_module(backend)
    a = xp.ones((n, n), dtype=dtype)
    b = xp.ones((n, n), dtype=dtype)
    c = a @ b  # warm-up: library load, kernel choice
    if backend == "cupy":
        xp.cuda.get_current_stream().synchronize()
    best = float("inf")
    for _ in range(repeats):
        begin = time.perf_counter()
        c = a @ b
        if backend == "cupy":
            xp.cuda.get_current_stream().synchronize()
        best = min(best, time.perf_counter() - begin)
    if float(c[0, 0]) != float(n):
        raise ArithmeticError(f"matmul gave {float(c[0, 0])}, expected {n}")
    return 2.0 * n ** 3 / best / 1e12


def transfer_log(since: float, dask_worker: Any = None) -> dict[str, float]:
    """Worker-to-worker transfers this worker received since `since` (wall clock): bytes, seconds, count."""
    entries = [entry for entry in dask_worker.transfer_incoming_log if entry.get("start", 0) >= since]
    return {"bytes": float(sum(entry.get("total", 0) for entry in entries)),
            "seconds": float(sum(entry.get("duration", 0) for entry in entries)),
            "count": float(len(entries))}
