"""daemon.json merges that can be undone: the record (/etc/docker/daemon.json.dask-bundle) keeps, for every
top-level key the bundle merged, whether the host had that key before the bundle first merged it and its value
then. Teardown (tasks_from: teardown) puts those values back and removes the keys the host did not have, so the
operator's own keys are left as they were."""
from __future__ import annotations

import copy
from typing import Any


def docker_engine_record(recorded: dict[str, Any], before: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    """The record after a merge of `config` into `before`: keys seen for the first time are added with the
    host's value then; keys already recorded keep their first record (a later run sees the bundle's values)."""
    record = copy.deepcopy(dict(recorded or {}))
    for key in config:
        if key not in record:
            record[key] = {"had": key in before, "value": copy.deepcopy(before.get(key))}
    return record


def docker_engine_restore(current: dict[str, Any], record: dict[str, Any]) -> dict[str, Any]:
    """daemon.json as the host had it before the bundle: recorded keys restored or removed, the others kept."""
    restored = copy.deepcopy(dict(current or {}))
    for key, entry in (record or {}).items():
        if entry.get("had"):
            restored[key] = copy.deepcopy(entry.get("value"))
        else:
            restored.pop(key, None)
    return restored


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"docker_engine_record": docker_engine_record, "docker_engine_restore": docker_engine_restore}
