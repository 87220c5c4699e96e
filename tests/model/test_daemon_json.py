"""The daemon.json record and restore of the docker_engine role (filter_plugins/daemon_json.py)."""
from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def module() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "daemon_json", ROOT / "roles" / "docker_engine" / "filter_plugins" / "daemon_json.py")
    assert spec and spec.loader
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded


def test_a_merge_then_teardown_gives_the_operator_their_daemon_json_back() -> None:
    daemon = module()
    operators = {"labels": ["kept"], "log-driver": "journald", "features": {"buildkit": True}}
    config = {"log-driver": "json-file", "storage-driver": "overlay2", "features": {"cdi": True}}
    record = daemon.docker_engine_record({}, operators, config)
    merged = {**operators, **config, "features": {"buildkit": True, "cdi": True}}
    # A second run sees the bundle's values: the first record is kept.
    assert daemon.docker_engine_record(record, merged, config) == record
    # A later release merges one more key: recorded from what the host has then.
    grown = daemon.docker_engine_record(record, merged, {**config, "insecure-registries": ["r:5000"]})
    assert grown["insecure-registries"] == {"had": False, "value": None}
    merged["insecure-registries"] = ["r:5000"]
    merged["debug"] = True  # the operator adds a key while the bundle is deployed: it stays
    assert daemon.docker_engine_restore(merged, grown) == {**operators, "debug": True}


def test_restore_without_a_record_changes_nothing() -> None:
    daemon = module()
    assert daemon.docker_engine_restore({"a": 1}, {}) == {"a": 1}
