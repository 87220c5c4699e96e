"""GPU health (dask_gpu_verify.gpu_health): a healthy reading recorded on a real H100 passes; replayed unhealthy
readings (each fault a fleet meets) are named; the command line judges replayed readings; a machine without NVML
says so instead of failing."""
from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from dask_gpu_verify import gpu_health

# Read through NVML on the lent H100 (tests/gpu/results/health-h100/summary.md).
H100: dict[str, Any] = {
    "index": 0, "uuid": "GPU-5fc8458c-6cea-1fa4-b8b0-acaa75985341", "name": "NVIDIA H100 80GB HBM3",
    "ecc_uncorrected_volatile": 0, "ecc_uncorrected_aggregate": 0, "retired_pages_pending": None,
    "remapped_rows": {"correctable": 0, "uncorrectable": 0, "pending": False, "failure": False},
    "pcie": {"gen": 5, "max_gen": 5, "gpu_max_gen": 5, "width": 16, "max_width": 16},
    "nvlink_active": None, "nvlink_links": None, "clock_event_reasons": 1, "persistence_mode": True,
    "temperature_c": 40, "temperature_slowdown_c": 89}


def reading(**changes: Any) -> dict[str, Any]:
    found = copy.deepcopy(H100)
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(found.get(key), dict):
            found[key].update(value)
        else:
            found[key] = value
    return found


def test_the_real_h100_reading_is_healthy() -> None:
    assert gpu_health.judge(H100) == {"healthy": True, "problems": [], "notes": []}


@pytest.mark.parametrize(("changes", "problem"), [
    ({"ecc_uncorrected_volatile": 3}, "3 uncorrectable ECC errors since the driver loaded"),
    ({"retired_pages_pending": True}, "a retired memory page waits for a GPU reset"),
    ({"remapped_rows": {"pending": True}}, "a remapped memory row waits for a GPU reset"),
    ({"remapped_rows": {"failure": True}}, "row remapping failed"),
    ({"pcie": {"width": 8}}, "PCIe link runs at x8, below its x16"),
    ({"pcie": {"max_gen": 4, "gen": 4}}, "PCIe link trained to Gen4, below the GPU's Gen5"),
    ({"clock_event_reasons": 0x8 | 0x1}, "clocks held down by hardware slowdown"),
    ({"clock_event_reasons": 0x40}, "clocks held down by hardware thermal slowdown"),
    ({"clock_event_reasons": 0x80}, "clocks held down by hardware power brake"),
    ({"temperature_c": 90}, "90 C, at or over its slowdown temperature 89 C"),
])
def test_each_fault_keeps_the_gpu_from_work_and_is_named(changes: dict[str, Any], problem: str) -> None:
    judged = gpu_health.judge(reading(**changes))
    assert not judged["healthy"]
    assert any(problem in text for text in judged["problems"]), judged


def test_an_nvlink_down_against_the_recorded_count() -> None:
    linked = reading(nvlink_active=17, nvlink_links=18)
    assert gpu_health.judge(linked, expected_nvlinks=18)["problems"] == [
        "17 of the 18 NVLinks recorded for this GPU are up"]
    assert gpu_health.judge(linked)["healthy"]  # nothing recorded yet: a note only
    assert gpu_health.judge(linked)["notes"] == ["17 of 18 NVLinks up"]


@pytest.mark.parametrize(("changes", "note"), [
    ({"ecc_uncorrected_aggregate": 2}, "2 uncorrectable ECC errors in the GPU's lifetime"),
    ({"pcie": {"gen": 1}}, "PCIe at Gen1 of Gen5 now"),
    ({"persistence_mode": False}, "persistence mode is off"),
    ({"temperature_c": 86}, "near its slowdown temperature"),
    ({"clock_event_reasons": 0x20}, "software thermal slowdown"),
])
def test_what_is_not_a_fault_is_said_but_keeps_the_gpu(changes: dict[str, Any], note: str) -> None:
    judged = gpu_health.judge(reading(**changes))
    assert judged["healthy"] and any(note in text for text in judged["notes"]), judged


def test_the_command_line_judges_replayed_readings(tmp_path: Path) -> None:
    replay = tmp_path / "readings.json"
    replay.write_text(json.dumps({"gpus": [H100, reading(index=1, uuid="GPU-b", ecc_uncorrected_volatile=1)],
                                  "error": None}))
    out = subprocess.run([sys.executable, "-m", "dask_gpu_verify.gpu_health", "--readings", str(replay)],
                         capture_output=True, text=True, check=True)
    judged = {gpu["uuid"]: gpu["health"]["healthy"] for gpu in json.loads(out.stdout)["gpus"]}
    assert judged == {H100["uuid"]: True, "GPU-b": False}


def test_a_machine_without_nvml_says_so() -> None:
    found = gpu_health.read(library="libnvidia-ml-not-here.so.1")
    assert found["gpus"] == [] and found["error"].startswith("NVML could not be read")


class AffinityLib:
    """libnvidia-ml's nvmlDeviceGetCpuAffinity as ctypes calls it: fills an array of 64-bit words."""

    def __init__(self, cores: list[int], status: int = 0) -> None:
        self.cores, self.status = cores, status

    def nvmlDeviceGetCpuAffinity(self, handle: Any, words: Any, mask: Any) -> int:  # noqa: N802 - NVML's name
        for core in self.cores:
            if core // 64 < words.value:
                mask[core // 64] |= 1 << (core % 64)
        return self.status


@pytest.mark.parametrize(("cores", "status", "expected"), [
    ([0, 1, 2, 63], 0, [0, 1, 2, 63]), ([], 0, None), ([1], 3, None)])
def test_cpu_cores_are_read_from_nvmls_bitmask(cores: list[int], status: int, expected: list[int] | None,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gpu_health.os, "cpu_count", lambda: 64)
    nvml = object.__new__(gpu_health.NVML)
    nvml.lib = AffinityLib(cores, status)  # type: ignore[assignment]
    assert nvml.cpu_cores(None) == expected  # type: ignore[arg-type]


def test_cpu_cores_beyond_64_use_more_words(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gpu_health.os, "cpu_count", lambda: 192)
    nvml = object.__new__(gpu_health.NVML)
    nvml.lib = AffinityLib([64, 65, 191])  # type: ignore[assignment]
    assert nvml.cpu_cores(None) == [64, 65, 191]  # type: ignore[arg-type]
