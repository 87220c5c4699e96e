"""Worker preload: this worker's GPU in its own /metrics (`dask cuda worker --preload dask_gpu_verify.gpu_metrics`).

Dask exports no GPU metrics. This collector reads NVML (nvidia-ml-py, which dask-cuda already needs) each time
Prometheus scrapes the worker's /metrics, for the GPU the worker owns: the first entry of its
CUDA_VISIBLE_DEVICES, which dask-cuda rotates so that each worker's own GPU comes first (an index as NVML numbers
the GPUs the process can see, or a GPU-/MIG- UUID). Nothing runs between scrapes; a value the driver does not
report (power on some boards, ECC on GPUs without it) is left out rather than reported as zero.

Series (labels gpu_uuid, gpu_index, gpu_name):
  dask_worker_gpu_utilization_ratio         GPU busy time over the driver's last sample period, 0-1
  dask_worker_gpu_memory_used_bytes         device memory in use (all processes)
  dask_worker_gpu_memory_total_bytes        device memory
  dask_worker_gpu_power_watts               board power draw
  dask_worker_gpu_temperature_celsius       GPU die temperature
  dask_worker_gpu_sm_clock_hertz            SM clock
  dask_worker_gpu_ecc_errors_total{type}    volatile ECC errors since the driver loaded (corrected, uncorrected)
  dask_worker_gpu_healthy                   1 when the health rules (gpu_health.py) find the GPU fit for work, else 0
XID errors have no NVML counter (they arrive as events); dcgm-exporter reports them.
"""
from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

PREFIX = "dask_worker_gpu"


def owned_device(visible: str | None) -> str:
    """The worker's own GPU: the first CUDA_VISIBLE_DEVICES entry ('0' when unset or empty)."""
    first = (visible or "").split(",")[0].strip()
    return first or "0"


class GPUCollector:
    """A prometheus_client collector for one GPU, read through NVML at each scrape."""

    def __init__(self, nvml: Any, device: str, health: Any = None) -> None:
        self.nvml = nvml
        self.device = device
        # The health rules read NVML themselves (ctypes); tests give a reader of replayed readings.
        self.health = health
        nvml.nvmlInit()
        if device.startswith(("GPU-", "MIG-")):
            self.handle = nvml.nvmlDeviceGetHandleByUUID(device)
        else:
            self.handle = nvml.nvmlDeviceGetHandleByIndex(int(device))
        uuid = nvml.nvmlDeviceGetUUID(self.handle)
        name = nvml.nvmlDeviceGetName(self.handle)
        self.labels = {"gpu_uuid": _text(uuid), "gpu_index": device if not device[0].isalpha() else "",
                       "gpu_name": _text(name)}

    def _read(self, function: str, *args: Any) -> Any:
        try:
            return getattr(self.nvml, function)(self.handle, *args)
        except self.nvml.NVMLError:  # not supported on this GPU or driver: the series is left out
            return None

    def samples(self) -> Iterator[tuple[str, str, str, dict[str, str], float]]:
        """(name, type, help, labels, value) for each series this GPU reports now."""
        nvml, labels = self.nvml, self.labels
        rates = self._read("nvmlDeviceGetUtilizationRates")
        if rates is not None:
            yield "utilization_ratio", "gauge", "GPU busy time over the last sample period (0-1)", labels, \
                rates.gpu / 100.0
        memory = self._read("nvmlDeviceGetMemoryInfo")
        if memory is not None:
            yield "memory_used_bytes", "gauge", "Device memory in use", labels, float(memory.used)
            yield "memory_total_bytes", "gauge", "Device memory", labels, float(memory.total)
        power = self._read("nvmlDeviceGetPowerUsage")
        if power is not None:
            yield "power_watts", "gauge", "Board power draw", labels, power / 1000.0
        temperature = self._read("nvmlDeviceGetTemperature", nvml.NVML_TEMPERATURE_GPU)
        if temperature is not None:
            yield "temperature_celsius", "gauge", "GPU temperature", labels, float(temperature)
        clock = self._read("nvmlDeviceGetClockInfo", nvml.NVML_CLOCK_SM)
        if clock is not None:
            yield "sm_clock_hertz", "gauge", "SM clock", labels, clock * 1e6
        for kind, code in (("corrected", nvml.NVML_MEMORY_ERROR_TYPE_CORRECTED),
                           ("uncorrected", nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED)):
            count = self._read("nvmlDeviceGetTotalEccErrors", code, nvml.NVML_VOLATILE_ECC)
            if count is not None:
                yield "ecc_errors_total", "counter", "Volatile ECC errors since the driver loaded", \
                    {**labels, "type": kind}, float(count)
        judged = self._health()
        if judged is not None:
            yield "healthy", "gauge", "1 when NVML finds the GPU fit for work (docs/gpu-health.md), else 0", labels, \
                1.0 if judged.get("healthy") else 0.0

    def _health(self) -> dict[str, Any] | None:
        if self.health is None:
            from . import gpu_health

            self.health = gpu_health.read_device
        found = self.health(self.device)
        return found.get("health") if isinstance(found, dict) else None

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        families: dict[str, Any] = {}
        for name, kind, text, labels, value in self.samples():
            full = f"{PREFIX}_{name}"
            if full not in families:
                if kind == "counter":  # the family's name drops the _total suffix; the sample keeps it
                    families[full] = CounterMetricFamily(full.removesuffix("_total"), text, labels=list(labels))
                else:
                    families[full] = GaugeMetricFamily(full, text, labels=list(labels))
            families[full].add_metric(list(labels.values()), value)
        yield from families.values()


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def register(registry: Any = None, nvml: Any = None, visible: str | None = None, health: Any = None) -> GPUCollector:
    """Register this process's GPU collector with prometheus_client's registry (distributed's /metrics)."""
    if nvml is None:
        import pynvml

        nvml = pynvml
    if registry is None:
        from prometheus_client import REGISTRY

        registry = REGISTRY
    collector = GPUCollector(nvml, owned_device(os.environ.get("CUDA_VISIBLE_DEVICES") if visible is None
                                               else visible), health)
    registry.register(collector)
    return collector


def dask_setup(worker: Any) -> None:
    """Worker preload entry point: distributed calls it once the worker is created."""
    register()
