"""The daemon.json merge, record and restore (module_utils/daemon_json.py, used by the module docker_daemon_json)."""
from __future__ import annotations

from ansible_collections.dask_gpu.bundle.plugins.module_utils import daemon_json as daemon


def test_a_merge_then_teardown_gives_the_operator_their_daemon_json_back() -> None:
    operators = {"labels": ["kept"], "log-driver": "journald", "features": {"buildkit": True}}
    config = {"log-driver": "json-file", "storage-driver": "overlay2", "features": {"cdi": True}}
    record = daemon.record({}, operators, config)
    merged = daemon.merged(operators, config)
    assert merged == {**operators, **config, "features": {"buildkit": True, "cdi": True}}
    # A second run sees the bundle's values: the first record is kept.
    assert daemon.record(record, merged, config) == record
    # A later release merges one more key: recorded from what the host has then.
    grown = daemon.record(record, merged, {**config, "insecure-registries": ["r:5000"]})
    assert grown["insecure-registries"] == {"had": False, "value": None}
    merged["insecure-registries"] = ["r:5000"]
    merged["debug"] = True  # the operator adds a key while the bundle is deployed: it stays
    assert daemon.restore(merged, grown) == {**operators, "debug": True}


def test_merge_replaces_lists_and_leaves_its_inputs_alone() -> None:
    current = {"runtimes": {"runc": {"path": "runc"}}, "dns": ["10.0.0.1"]}
    config = {"runtimes": {"nvidia": {"path": "nvidia-container-runtime", "args": []}}, "dns": ["10.0.0.2"]}
    assert daemon.merged(current, config) == {
        "runtimes": {"runc": {"path": "runc"}, "nvidia": {"path": "nvidia-container-runtime", "args": []}},
        "dns": ["10.0.0.2"]}
    assert current == {"runtimes": {"runc": {"path": "runc"}}, "dns": ["10.0.0.1"]}


def test_restore_without_a_record_changes_nothing() -> None:
    assert daemon.restore({"a": 1}, {}) == {"a": 1}
