"""daemon.json merges that can be undone: the record (/etc/docker/daemon.json.dask-bundle) keeps, for every
top-level key the bundle merged, whether the host had that key before the bundle first merged it and its value
then. Teardown puts those values back and removes the keys the host did not have, so the operator's own keys are
left as they were. Pure functions; the module dask_gpu.bundle.docker_daemon_json reads and writes the files."""
from __future__ import annotations

import copy
from typing import Any


def merged(current: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    """`config` merged into `current`: dictionaries key by key (recursively), any other value replaced."""
    result = copy.deepcopy(dict(current or {}))
    for key, value in (config or {}).items():
        if isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = merged(result[key], value)
        else:
            result[key] = copy.deepcopy(value)
    return result


def record(recorded: dict[str, Any], before: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    """The record after a merge of `config` into `before`: keys seen for the first time are added with the
    host's value then; keys already recorded keep their first record (a later run sees the bundle's values)."""
    result = copy.deepcopy(dict(recorded or {}))
    for key in config:
        if key not in result:
            result[key] = {"had": key in before, "value": copy.deepcopy(before.get(key))}
    return result


def restore(current: dict[str, Any], recorded: dict[str, Any]) -> dict[str, Any]:
    """daemon.json as the host had it before the bundle: recorded keys restored or removed, the others kept."""
    restored = copy.deepcopy(dict(current or {}))
    for key, entry in (recorded or {}).items():
        if entry.get("had"):
            restored[key] = copy.deepcopy(entry.get("value"))
        else:
            restored.pop(key, None)
    return restored
