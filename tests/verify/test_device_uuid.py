"""A GPU's UUID from its CUDA properties: whole when CuPy gives all 16 bytes; through NVML at the device's PCI
address when a zero byte cut them short (seen on a lent 4 x H200). NVML itself is not on this machine: the NVML
lookup is replaced by a stand-in that records the PCI bus id it was asked for."""
from __future__ import annotations

import pytest
from dask_gpu_verify import gpu_health, probes

WHOLE = bytes.fromhex("4a931cc9bfc4019664e0998d984df0c6")


def props(raw: bytes) -> dict[str, object]:
    return {"uuid": raw, "pciDomainID": 0, "pciBusID": 9, "pciDeviceID": 0}


def test_sixteen_bytes_are_the_uuid() -> None:
    assert probes.device_uuid(props(WHOLE)) == "GPU-4a931cc9-bfc4-0196-64e0-998d984df0c6"


def test_a_uuid_cut_short_is_read_through_nvml_at_the_pci_address(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []

    def nvml_stand_in(bus_id: str) -> str:
        asked.append(bus_id)
        return "GPU-007a355d-7e59-1825-18b4-850e69cfa66c"

    monkeypatch.setattr(gpu_health, "uuid_at", nvml_stand_in)
    assert probes.device_uuid(props(b"")) == "GPU-007a355d-7e59-1825-18b4-850e69cfa66c"
    assert asked == ["00000000:09:00.0"]


def test_a_uuid_nvml_cannot_read_stays_distinct_per_device(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gpu_health, "uuid_at", lambda bus_id: None)
    assert probes.device_uuid(props(b"\x12\x34")) == "GPU-unread-at-00000000:09:00.0"


def test_without_nvml_uuid_at_says_none() -> None:
    assert gpu_health.uuid_at("00000000:09:00.0", library="libnvidia-ml-absent.so.1") is None
