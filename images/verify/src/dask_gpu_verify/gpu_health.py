"""Is a GPU fit to take work? Read through NVML, judged by rules a fleet needs (docs/gpu-health.md).

Reads every GPU of the machine (or those named) through NVML with ctypes alone, so the same file runs on a host with
only the NVIDIA driver (the gpu_facts role's probe, before a worker unit starts) and inside the worker image
(dask-gpu-verify, the workers' /metrics). Reading and judging are apart: `judge` is a pure function of one GPU's
readings, so recorded or unhealthy readings can be replayed (`--readings FILE`).

Readings per GPU (None where the driver does not report a value):
  ecc_uncorrected_volatile, ecc_uncorrected_aggregate   uncorrectable ECC errors since the driver loaded / ever
  retired_pages_pending                                 a retired page waits for a GPU reset (pre-Ampere)
  remapped_rows {correctable, uncorrectable, pending, failure}   row remapping (Ampere and later)
  pcie {gen, max_gen, gpu_max_gen, width, max_width}    current and maximum PCIe link generation and width
  nvlink_active, nvlink_links                           NVLinks up, and links that report a state at all
  clock_event_reasons                                   the bit mask of why clocks are held down now
  persistence_mode, temperature_c, temperature_slowdown_c

    python3 gpu_health.py                 read and judge every GPU, print JSON
    python3 gpu_health.py --readings F    judge the readings in F (the JSON this prints) instead of reading NVML
    python3 gpu_health.py --expect-nvlinks '{"GPU-...": 18}'   NVLinks each GPU had when it was recorded
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import sys
from typing import Any

# nvmlClocksEventReasons bits (nvml.h): hardware trouble, and the rest (load, power caps, software).
HW_SLOWDOWN, SW_THERMAL, HW_THERMAL, HW_POWER_BRAKE = 0x8, 0x20, 0x40, 0x80
HARDWARE_REASONS = {HW_SLOWDOWN: "hardware slowdown", HW_THERMAL: "hardware thermal slowdown",
                    HW_POWER_BRAKE: "hardware power brake"}
NVLINK_MAX_LINKS = 18
TEMPERATURE_MARGIN_C = 5
SUCCESS = 0


class NVML:
    """The few NVML calls the readings need, through ctypes (libnvidia-ml.so.1 of the driver)."""

    def __init__(self, library: str = "libnvidia-ml.so.1") -> None:
        self.lib = ctypes.CDLL(library)
        self._check(self._call("nvmlInit_v2"), "nvmlInit_v2")

    def _call(self, name: str, *args: Any) -> int:
        function = getattr(self.lib, name, None)
        if function is None:
            return -1
        return int(function(*args))

    @staticmethod
    def _check(status: int, what: str) -> None:
        if status != SUCCESS:
            raise RuntimeError(f"{what} failed (NVML status {status})")

    def count(self) -> int:
        value = ctypes.c_uint()
        self._check(self._call("nvmlDeviceGetCount_v2", ctypes.byref(value)), "nvmlDeviceGetCount_v2")
        return value.value

    def handle(self, index: int) -> ctypes.c_void_p:
        handle = ctypes.c_void_p()
        self._check(self._call("nvmlDeviceGetHandleByIndex_v2", ctypes.c_uint(index), ctypes.byref(handle)),
                    "nvmlDeviceGetHandleByIndex_v2")
        return handle

    def index_of(self, uuid: str) -> int:
        """The NVML index of a GPU-/MIG- UUID (a MIG instance: its GPU's)."""
        handle = ctypes.c_void_p()
        self._check(self._call("nvmlDeviceGetHandleByUUID", uuid.encode(), ctypes.byref(handle)),
                    f"nvmlDeviceGetHandleByUUID({uuid})")
        if uuid.startswith("MIG-"):
            parent = ctypes.c_void_p()
            self._check(self._call("nvmlDeviceGetDeviceHandleFromMigDeviceHandle", handle, ctypes.byref(parent)),
                        "nvmlDeviceGetDeviceHandleFromMigDeviceHandle")
            handle = parent
        index = self.uint("nvmlDeviceGetIndex", handle)
        if index is None:
            raise RuntimeError(f"nvmlDeviceGetIndex({uuid}) failed")
        return index

    def at_pci_bus_id(self, bus_id: str) -> ctypes.c_void_p:
        """The GPU at a PCI bus id as NVML writes it ("00000000:09:00.0")."""
        handle = ctypes.c_void_p()
        self._check(self._call("nvmlDeviceGetHandleByPciBusId_v2", bus_id.encode(), ctypes.byref(handle)),
                    f"nvmlDeviceGetHandleByPciBusId_v2({bus_id})")
        return handle

    def text(self, name: str, handle: ctypes.c_void_p) -> str | None:
        buffer = ctypes.create_string_buffer(96)
        if self._call(name, handle, buffer, ctypes.c_uint(96)) != SUCCESS:
            return None
        return buffer.value.decode()

    def uint(self, name: str, handle: ctypes.c_void_p, *args: int, kind: Any = ctypes.c_uint) -> int | None:
        value = kind()
        if self._call(name, handle, *[ctypes.c_uint(arg) for arg in args], ctypes.byref(value)) != SUCCESS:
            return None
        return int(value.value)

    def ecc(self, handle: ctypes.c_void_p, counter: int) -> int | None:
        value = ctypes.c_ulonglong()
        # errorType 1: uncorrected; counterType 0: volatile, 1: aggregate.
        status = self._call("nvmlDeviceGetTotalEccErrors", handle, ctypes.c_int(1), ctypes.c_int(counter),
                            ctypes.byref(value))
        return int(value.value) if status == SUCCESS else None

    def remapped_rows(self, handle: ctypes.c_void_p) -> dict[str, int] | None:
        values = [ctypes.c_uint() for _ in range(4)]
        if self._call("nvmlDeviceGetRemappedRows", handle, *[ctypes.byref(value) for value in values]) != SUCCESS:
            return None
        correctable, uncorrectable, pending, failure = (value.value for value in values)
        return {"correctable": correctable, "uncorrectable": uncorrectable, "pending": bool(pending),
                "failure": bool(failure)}

    def nvlinks(self, handle: ctypes.c_void_p) -> tuple[int | None, int | None]:
        """(links up, links that report a state); (None, None) on a GPU without NVLink."""
        active = links = 0
        for link in range(NVLINK_MAX_LINKS):
            state = ctypes.c_int()
            if self._call("nvmlDeviceGetNvLinkState", handle, ctypes.c_uint(link), ctypes.byref(state)) != SUCCESS:
                continue
            links += 1
            active += int(state.value == 1)
        return (active, links) if links else (None, None)

    def cpu_cores(self, handle: ctypes.c_void_p) -> list[int] | None:
        """The CPU cores NVML names nearest the GPU (nvmlDeviceGetCpuAffinity: dask-cuda pins a worker to them);
        None when it cannot say."""
        words = max(1, -(-(os.cpu_count() or 64) // 64))
        mask = (ctypes.c_uint64 * words)()
        if self._call("nvmlDeviceGetCpuAffinity", handle, ctypes.c_uint(words), mask) != SUCCESS:
            return None
        return [word * 64 + bit for word in range(words) for bit in range(64) if mask[word] >> bit & 1] or None

    def clock_reasons(self, handle: ctypes.c_void_p) -> int | None:
        for name in ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"):
            value = self.uint(name, handle, kind=ctypes.c_ulonglong)
            if value is not None:
                return value
        return None


def read_gpu(nvml: NVML, index: int) -> dict[str, Any]:
    handle = nvml.handle(index)
    pending = nvml.uint("nvmlDeviceGetRetiredPagesPendingStatus", handle)
    active, links = nvml.nvlinks(handle)
    persistence = nvml.uint("nvmlDeviceGetPersistenceMode", handle)
    return {
        "index": index, "uuid": nvml.text("nvmlDeviceGetUUID", handle), "name": nvml.text("nvmlDeviceGetName", handle),
        "ecc_uncorrected_volatile": nvml.ecc(handle, 0), "ecc_uncorrected_aggregate": nvml.ecc(handle, 1),
        "retired_pages_pending": None if pending is None else bool(pending),
        "remapped_rows": nvml.remapped_rows(handle),
        "pcie": {"gen": nvml.uint("nvmlDeviceGetCurrPcieLinkGeneration", handle),
                 "max_gen": nvml.uint("nvmlDeviceGetMaxPcieLinkGeneration", handle),
                 "gpu_max_gen": nvml.uint("nvmlDeviceGetGpuMaxPcieLinkGeneration", handle),
                 "width": nvml.uint("nvmlDeviceGetCurrPcieLinkWidth", handle),
                 "max_width": nvml.uint("nvmlDeviceGetMaxPcieLinkWidth", handle)},
        "nvlink_active": active, "nvlink_links": links,
        "clock_event_reasons": nvml.clock_reasons(handle),
        "persistence_mode": None if persistence is None else bool(persistence),
        # NVML_TEMPERATURE_GPU 0; threshold 1: the slowdown temperature.
        "temperature_c": nvml.uint("nvmlDeviceGetTemperature", handle, 0),
        "temperature_slowdown_c": nvml.uint("nvmlDeviceGetTemperatureThreshold", handle, 1),
        "cpu_cores": nvml.cpu_cores(handle),
    }


def read(indices: list[int] | None = None, library: str = "libnvidia-ml.so.1") -> dict[str, Any]:
    """{"gpus": [readings per GPU], "error": None} or {"gpus": [], "error": why NVML could not be read}."""
    try:
        nvml = NVML(library)
        wanted = indices if indices is not None else list(range(nvml.count()))
        return {"gpus": [read_gpu(nvml, index) for index in wanted], "error": None}
    except (OSError, RuntimeError) as error:
        return {"gpus": [], "error": f"NVML could not be read: {error}"}


def read_device(device: str, library: str = "libnvidia-ml.so.1") -> dict[str, Any]:
    """The readings of one GPU named as CUDA_VISIBLE_DEVICES names it (an NVML index, or a GPU-/MIG- UUID: a MIG
    instance is read as its GPU), with its judgement; {"error": ...} when it cannot be read."""
    try:
        nvml = NVML(library)
        gpu = read_gpu(nvml, int(device) if device.isdigit() else nvml.index_of(device))
    except (OSError, RuntimeError) as error:
        return {"error": f"NVML could not be read: {error}"}
    return {**gpu, "health": judge(gpu)}


def uuid_at(bus_id: str, library: str = "libnvidia-ml.so.1") -> str | None:
    """The UUID of the GPU at a PCI bus id, None when NVML cannot say."""
    try:
        nvml = NVML(library)
        return nvml.text("nvmlDeviceGetUUID", nvml.at_pci_bus_id(bus_id))
    except (OSError, RuntimeError):
        return None


def judge(gpu: dict[str, Any], expected_nvlinks: int | None = None) -> dict[str, Any]:
    """{"healthy": bool, "problems": [...], "notes": [...]}: problems keep a GPU from work, notes are said only."""
    problems: list[str] = []
    notes: list[str] = []
    volatile, aggregate = gpu.get("ecc_uncorrected_volatile"), gpu.get("ecc_uncorrected_aggregate")
    if volatile:
        problems.append(f"{volatile} uncorrectable ECC errors since the driver loaded")
    elif aggregate:
        notes.append(f"{aggregate} uncorrectable ECC errors in the GPU's lifetime (none since the driver loaded)")
    if gpu.get("retired_pages_pending"):
        problems.append("a retired memory page waits for a GPU reset")
    rows = gpu.get("remapped_rows") or {}
    if rows.get("failure"):
        problems.append("row remapping failed (the GPU needs service)")
    if rows.get("pending"):
        problems.append("a remapped memory row waits for a GPU reset")
    pcie = gpu.get("pcie") or {}
    if pcie.get("width") is not None and pcie.get("max_width") and pcie["width"] < pcie["max_width"]:
        problems.append(f"PCIe link runs at x{pcie['width']}, below its x{pcie['max_width']}")
    if pcie.get("max_gen") and pcie.get("gpu_max_gen") and pcie["max_gen"] < pcie["gpu_max_gen"]:
        problems.append(f"PCIe link trained to Gen{pcie['max_gen']}, below the GPU's Gen{pcie['gpu_max_gen']}")
    elif pcie.get("gen") and pcie.get("max_gen") and pcie["gen"] < pcie["max_gen"]:
        notes.append(f"PCIe at Gen{pcie['gen']} of Gen{pcie['max_gen']} now (idle GPUs lower it to save power)")
    active, links = gpu.get("nvlink_active"), gpu.get("nvlink_links")
    if expected_nvlinks is not None and active is not None and active < expected_nvlinks:
        problems.append(f"{active} of the {expected_nvlinks} NVLinks recorded for this GPU are up")
    elif active is not None and links and active < links:
        notes.append(f"{active} of {links} NVLinks up")
    reasons = int(gpu.get("clock_event_reasons") or 0)
    held = [text for bit, text in HARDWARE_REASONS.items() if reasons & bit]
    if held:
        problems.append("clocks held down by " + ", ".join(held))
    if reasons & SW_THERMAL:
        notes.append("clocks held down by software thermal slowdown")
    if gpu.get("persistence_mode") is False:
        notes.append("persistence mode is off (nvidia-persistenced keeps GPUs ready for containers)")
    temperature, slowdown = gpu.get("temperature_c"), gpu.get("temperature_slowdown_c")
    if temperature is not None and slowdown:
        if temperature >= slowdown:
            problems.append(f"{temperature} C, at or over its slowdown temperature {slowdown} C")
        elif temperature >= slowdown - TEMPERATURE_MARGIN_C:
            notes.append(f"{temperature} C, near its slowdown temperature {slowdown} C")
    return {"healthy": not problems, "problems": problems, "notes": notes}


def report(readings: dict[str, Any], expected_nvlinks: dict[str, int] | None = None) -> dict[str, Any]:
    """The readings with each GPU's judgement added (`health`)."""
    expected = expected_nvlinks or {}
    gpus = [{**gpu, "health": judge(gpu, expected.get(str(gpu.get("uuid"))))} for gpu in readings.get("gpus") or []]
    return {"gpus": gpus, "error": readings.get("error")}


def summary(judged: dict[str, Any]) -> dict[str, Any]:
    """What the cluster model keeps per GPU, by UUID: index, healthy, problems, notes, NVLinks up."""
    health = {str(gpu.get("uuid")): {"index": gpu.get("index"), "nvlink_active": gpu.get("nvlink_active"),
                                     **gpu["health"]} for gpu in judged.get("gpus") or []}
    return {"health": health, "error": judged.get("error")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--readings", help="judge these readings (JSON) instead of reading NVML")
    parser.add_argument("--expect-nvlinks", default="{}", help="JSON {uuid: NVLinks recorded for it}")
    parser.add_argument("--library", default="libnvidia-ml.so.1", help="NVML's shared library")
    parser.add_argument("--summary", action="store_true", help="print {uuid: judgement} only (the cluster model's)")
    args = parser.parse_args(argv)
    if args.readings:
        with open(args.readings) as handle:
            readings = json.load(handle)
    else:
        readings = read(library=args.library)
    judged = report(readings, json.loads(args.expect_nvlinks))
    print(json.dumps(summary(judged) if args.summary else judged))
    return 0


if __name__ == "__main__":
    sys.exit(main())
