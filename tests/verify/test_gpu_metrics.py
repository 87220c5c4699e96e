"""The workers' GPU collector (dask_gpu_verify.gpu_metrics) against a stand-in NVML module: series, labels,
units, left-out values, the owned GPU, and the Prometheus text a scrape returns. (On a GPU: tests/gpu.)"""
from __future__ import annotations

import types
from typing import Any

import pytest
from dask_gpu_verify import gpu_metrics
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families


class NVMLError(Exception):
    pass


def fake_nvml(*, power: bool = True, ecc: bool = True) -> types.SimpleNamespace:
    """NVML's functions and constants as nvidia-ml-py names them; one H200, values in NVML's units."""
    calls: list[Any] = []

    def handle_by_index(index: int) -> str:
        calls.append(("index", index))
        return f"h{index}"

    def handle_by_uuid(uuid: str) -> str:
        calls.append(("uuid", uuid))
        return "h-uuid"

    def unsupported(*_: Any) -> None:
        raise NVMLError("Not Supported")

    return types.SimpleNamespace(
        calls=calls, NVMLError=NVMLError, nvmlInit=lambda: None,
        nvmlDeviceGetHandleByIndex=handle_by_index, nvmlDeviceGetHandleByUUID=handle_by_uuid,
        nvmlDeviceGetUUID=lambda h: b"GPU-a28b07a0-4e77-4642-1c8d-52004e98b9e4",
        nvmlDeviceGetName=lambda h: "NVIDIA H200",
        nvmlDeviceGetUtilizationRates=lambda h: types.SimpleNamespace(gpu=73, memory=40),
        nvmlDeviceGetMemoryInfo=lambda h: types.SimpleNamespace(used=2 << 30, total=141 << 30, free=139 << 30),
        nvmlDeviceGetPowerUsage=(lambda h: 412_500) if power else unsupported,
        nvmlDeviceGetTemperature=lambda h, sensor: 41,
        nvmlDeviceGetClockInfo=lambda h, clock: 1980,
        nvmlDeviceGetTotalEccErrors=(lambda h, kind, counter: 3 if kind == 0 else 0) if ecc else unsupported,
        NVML_TEMPERATURE_GPU=0, NVML_CLOCK_SM=1, NVML_MEMORY_ERROR_TYPE_CORRECTED=0,
        NVML_MEMORY_ERROR_TYPE_UNCORRECTED=1, NVML_VOLATILE_ECC=0)


@pytest.mark.parametrize(("visible", "owned"), [(None, "0"), ("", "0"), ("1,0", "1"), ("3", "3"),
                                                ("GPU-a28b07a0-4e77-4642-1c8d-52004e98b9e4,1",
                                                 "GPU-a28b07a0-4e77-4642-1c8d-52004e98b9e4")])
def test_the_worker_owns_the_first_visible_gpu(visible: str | None, owned: str) -> None:
    assert gpu_metrics.owned_device(visible) == owned


def scrape(nvml: Any, visible: str) -> str:
    registry = CollectorRegistry()
    gpu_metrics.register(registry, nvml, visible)
    return generate_latest(registry).decode()


def samples(text: str) -> dict[tuple[str, str], float]:
    """(sample name, its type label or '') -> value, from the Prometheus text of a scrape."""
    return {(sample.name, sample.labels.get("type", "")): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def test_a_scrape_reports_the_owned_gpu_in_base_units() -> None:
    nvml = fake_nvml()
    text = scrape(nvml, "1,0")
    assert nvml.calls == [("index", 1)]
    assert samples(text) == {
        ("dask_worker_gpu_utilization_ratio", ""): 0.73,
        ("dask_worker_gpu_memory_used_bytes", ""): float(2 << 30),
        ("dask_worker_gpu_memory_total_bytes", ""): float(141 << 30),
        ("dask_worker_gpu_power_watts", ""): 412.5,
        ("dask_worker_gpu_temperature_celsius", ""): 41.0,
        ("dask_worker_gpu_sm_clock_hertz", ""): 1.98e9,
        ("dask_worker_gpu_ecc_errors_total", "corrected"): 3.0,
        ("dask_worker_gpu_ecc_errors_total", "uncorrected"): 0.0}
    labels = 'gpu_index="1",gpu_name="NVIDIA H200",gpu_uuid="GPU-a28b07a0-4e77-4642-1c8d-52004e98b9e4"'
    assert f"dask_worker_gpu_utilization_ratio{{{labels}}} 0.73" in text
    assert "# TYPE dask_worker_gpu_ecc_errors_total counter" in text


def test_values_the_driver_does_not_report_are_left_out_not_zero() -> None:
    text = scrape(fake_nvml(power=False, ecc=False), "GPU-a28b07a0-4e77-4642-1c8d-52004e98b9e4")
    assert "dask_worker_gpu_power_watts" not in text and "dask_worker_gpu_ecc_errors" not in text
    assert 'gpu_index=""' in text and "dask_worker_gpu_utilization_ratio" in text


def test_the_health_rules_give_a_healthy_series_per_gpu() -> None:
    """The reader of dask_gpu_verify.gpu_health replayed: 1 for a fit GPU, 0 for one with uncorrectable errors."""
    for judged, value in (({"healthy": True, "problems": []}, 1.0),
                          ({"healthy": False, "problems": ["3 uncorrectable ECC errors"]}, 0.0)):
        seen: list[str] = []
        registry = CollectorRegistry()
        def reader(device: str, judged: dict[str, Any] = judged, seen: list[str] = seen) -> dict[str, Any]:
            seen.append(device)
            return {"health": judged}

        gpu_metrics.register(registry, fake_nvml(), "1", health=reader)
        assert samples(generate_latest(registry).decode())[("dask_worker_gpu_healthy", "")] == value
        assert seen == ["1"]
