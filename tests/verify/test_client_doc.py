"""docs/client.md's warnings filter, against distributed's own table and a real scheduler and worker: it hides the
table when the only differences are Python's patch level and pandas absent on the client, and nothing else."""
from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import distributed.versions
import pytest
from conftest import LocalDask
from distributed.versions import VersionMismatchWarning, error_message

DOC = Path(__file__).resolve().parents[2] / "docs" / "client.md"


def doc_snippet() -> str:
    (code,) = [block for block in re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
               if "filterwarnings" in block]
    return str(code)


def packages(python: str, **changed: str | None) -> dict[str, Any]:
    found: dict[str, str | None] = {
        "python": python, "dask": "2026.7.1", "distributed": "2026.7.1", "msgpack": "1.2.4",
        "cloudpickle": "3.1.2", "tornado": "6.6.1", "toolz": "1.2.0", "numpy": "2.4.6", "pandas": "3.0.6",
        "lz4": None}
    return {"packages": {**found, **changed}}


SERVER = packages("3.11.2.final.0")


def shown(message: str) -> bool:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exec(doc_snippet(), {})  # noqa: S102 (the documentation's own code)
        warnings.warn(VersionMismatchWarning(message), stacklevel=1)
    return bool(caught)


@pytest.mark.parametrize(("client", "workers", "hidden"), [
    (packages("3.11.7.final.0", pandas=None), {"w0": SERVER, "w1": SERVER}, True),
    (packages("3.11.7.final.0"), {"w0": SERVER}, True),
    (packages("3.11.2.final.0", pandas=None), {"w0": SERVER}, True),
    (packages("3.11.7.final.0"), {}, True),  # before any worker registered
    (packages("3.12.3.final.0", pandas=None), {"w0": SERVER}, False),
    (packages("3.11.7.final.0", toolz="1.1.0"), {"w0": SERVER}, False),
    (packages("3.11.7.final.0", cloudpickle="3.0.0"), {"w0": SERVER}, False),
    (packages("3.11.7.final.0", pandas="2.2.3"), {"w0": SERVER}, False),
    (packages("3.11.7.final.0"), {"w0": SERVER, "w1": packages("3.11.3.final.0")}, False),
    (packages("3.11.2.final.0", pandas=None), {"w0": SERVER, "w1": packages("3.11.2.final.0", pandas="2.0.0")}, False),
])
def test_filter_hides_only_the_harmless_rows(client: dict[str, Any], workers: dict[str, Any], hidden: bool) -> None:
    message = error_message(SERVER, workers, client)["warning"]
    assert message.startswith("Mismatched versions found")
    assert shown(message) is not hidden


def _client_reporting(monkeypatch: pytest.MonkeyPatch, change: Callable[[dict[str, Any]], None]) -> None:
    real = distributed.versions.get_versions

    def reported(packages: Any = None) -> dict[str, Any]:
        found = real(packages)
        change(found)
        return found

    monkeypatch.setattr(distributed.versions, "get_versions", reported)


def _connect_and_record(address: str) -> list[str]:
    from distributed import Client

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exec(doc_snippet(), {})  # noqa: S102
        with Client(address, timeout=30) as client:
            client.wait_for_workers(1, timeout=60)
    return [str(w.message) for w in caught if issubclass(w.category, VersionMismatchWarning)]


def test_real_connect_patch_level_python_is_silenced_and_a_real_mismatch_is_not(
        cluster: LocalDask, monkeypatch: pytest.MonkeyPatch) -> None:
    address = cluster.start_scheduler()
    cluster.start_worker("w0")
    from distributed import Client

    with Client(address, timeout=30) as first:  # the worker is registered before the clients below connect
        first.wait_for_workers(1, timeout=60)

    def patch_level(found: dict[str, Any]) -> None:
        major, minor, *_ = found["packages"]["python"].split(".")
        found["packages"]["python"] = f"{major}.{minor}.99.final.0"

    _client_reporting(monkeypatch, patch_level)
    assert _connect_and_record(address) == []

    def other_toolz(found: dict[str, Any]) -> None:
        patch_level(found)
        found["packages"]["toolz"] = "0.0.1"

    _client_reporting(monkeypatch, other_toolz)
    (message,) = _connect_and_record(address)
    assert "toolz" in message and "python" in message
