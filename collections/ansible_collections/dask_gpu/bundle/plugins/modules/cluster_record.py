#!/usr/bin/python
"""The cluster's record on a host: what the cluster claims there and every folder it made."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: cluster_record
short_description: A cluster's record on a host (its claims, and the folders the bundle made)
description:
  - Keeps /etc/ansible/facts.d/RECORD.fact (read back as ansible_local.RECORD by the next run's checks) for one
    cluster. C(state=present) merges the given sections into the record and creates the cluster's folders,
    recording which ones the bundle made (a folder that existed before is never recorded, so teardown never removes
    it). C(state=absent) removes the recorded folders (a C(tree) folder with its content, an C(empty) one only when
    nothing is left in it), except those another cluster's record also lists, and the record itself.
  - Folders that are system or home folders, or parents of one, are refused (the checks refuse them before any host
    changes; this is the last guard).
options:
  path:
    description: The record file.
    type: path
    required: true
  state:
    description: present (merge and create) or absent (remove what the record lists, then the record).
    type: str
    choices: [present, absent]
    default: present
  claims:
    description: Sections merged into the record (name, units, GPUs, ports, services, firewall, deployed versions).
    type: dict
    default: {}
  folders:
    description:
      - The cluster's folders on this host, each with path, owner, group, mode and remove (tree or empty).
    type: list
    elements: dict
    default: []
  adopt:
    description:
      - A deployment by an earlier release of the bundle (no record yet) has folders at these paths; they count as
        made by the bundle.
    type: list
    elements: str
    default: []
author: dask-gpu bundle
"""

EXAMPLES = r"""
- name: The cluster's record holds its claims and the folders it made
  dask_gpu.bundle.cluster_record:
    path: /etc/ansible/facts.d/dask_cluster_dask.fact
    claims: {name: dask, ports: {dask_scheduler_port: [8786, 8786]}}
    folders:
      - {path: /etc/dask, owner: 0, group: 0, mode: "0755", remove: tree}
"""

RETURN = r"""
record:
  description: The record as written (present).
  type: dict
  returned: always
created:
  description: Folders this run made.
  type: list
  returned: always
removed:
  description: Folders removed (absent).
  type: list
  returned: always
kept:
  description: Recorded folders left in place (absent), with why.
  type: list
  returned: always
"""

import glob
import json
import os
import shutil
import time
from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.dask_gpu.bundle.plugins.module_utils.atomic import write_atomic
from ansible_collections.dask_gpu.bundle.plugins.module_utils.paths import why_unmanageable


def _load(path: str) -> dict[str, Any]:
    try:
        with open(path) as handle:
            loaded = json.load(handle)
        return loaded if isinstance(loaded, dict) else {}
    except (OSError, ValueError):
        return {}


def _write(path: str, record: dict[str, Any]) -> None:
    write_atomic(path, (json.dumps(record, indent=2, sort_keys=True) + "\n").encode(), 0o644, make_folder=True)


def _others(path: str) -> set[str]:
    """Folders that the records of the other clusters on this host list as theirs."""
    listed: set[str] = set()
    for other in glob.glob(os.path.join(os.path.dirname(path), "dask_cluster_*.fact")):
        if os.path.abspath(other) != os.path.abspath(path):
            entries = _load(other).get("folders", [])
            listed.update(str(entry.get("path")) for entry in entries if isinstance(entry, dict))
    return listed


def _ensure(folder: dict[str, Any], check_mode: bool) -> tuple[bool, bool]:
    """(created, changed) for one folder: made when missing, its owner, group and mode set."""
    path, mode = folder["path"], int(str(folder.get("mode", "0755")), 8)
    owner, group = int(folder.get("owner", 0)), int(folder.get("group", 0))
    created = not os.path.isdir(path)
    if created and not check_mode:
        os.makedirs(path, mode=0o755, exist_ok=True)
    changed = created
    if not check_mode and os.path.isdir(path):
        status = os.stat(path)
        if (status.st_uid, status.st_gid) != (owner, group):
            os.chown(path, owner, group)
            changed = True
        if status.st_mode & 0o7777 != mode:
            os.chmod(path, mode)
            changed = True
    return created, changed


def present(module: AnsibleModule) -> None:
    path, claims = module.params["path"], module.params["claims"] or {}
    before = _load(path)
    record = dict(before)
    record.update(claims)
    known = {entry["path"]: entry for entry in before.get("folders", []) if isinstance(entry, dict) and "path" in entry}
    adopt = set(module.params["adopt"] or [])
    created_now: list[str] = []
    changed = False
    for folder in module.params["folders"] or []:
        reason = why_unmanageable(folder["path"])
        if reason:
            module.fail_json(msg=f"{folder['path']} {reason}: the bundle does not manage it")
        existed = os.path.isdir(folder["path"])
        made, folder_changed = _ensure(folder, module.check_mode)
        changed = changed or folder_changed
        entry = {"path": folder["path"], "remove": folder.get("remove", "tree")}
        if made:
            created_now.append(folder["path"])
            known[folder["path"]] = entry
        elif existed and folder["path"] in adopt and folder["path"] not in known:
            known[folder["path"]] = {**entry, "adopted": True}
        elif folder["path"] in known:
            known[folder["path"]] = {**known[folder["path"]], "remove": entry["remove"]}
    record["folders"] = sorted(known.values(), key=lambda entry: entry["path"])
    if record != before:
        record["updated_at"] = int(time.time())
        if not module.check_mode:
            _write(path, record)
        changed = True
    module.exit_json(changed=changed, record=record, created=created_now, removed=[], kept=[])


def absent(module: AnsibleModule) -> None:
    path = module.params["path"]
    record = _load(path)
    theirs = _others(path)
    removed: list[str] = []
    kept: list[str] = []
    folders = [entry for entry in record.get("folders", []) if isinstance(entry, dict) and entry.get("path")]
    for entry in sorted(folders, key=lambda item: item["path"].count("/"), reverse=True):
        folder = entry["path"]
        if why_unmanageable(folder) or not os.path.isdir(folder):
            continue
        if folder in theirs:
            kept.append(f"{folder} (another cluster's record lists it)")
            continue
        if entry.get("remove") == "empty" and os.listdir(folder):
            kept.append(f"{folder} (not empty: {', '.join(sorted(os.listdir(folder))[:5])})")
            continue
        if not module.check_mode and entry.get("remove") == "empty":
            os.rmdir(folder)
        elif not module.check_mode:
            shutil.rmtree(folder)
        removed.append(folder)
    existed = os.path.exists(path)
    if existed and not module.check_mode:
        os.remove(path)
    module.exit_json(changed=bool(removed) or existed, record=record, created=[], removed=removed, kept=kept)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "required": True},
            "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
            "claims": {"type": "dict", "default": {}},
            "folders": {"type": "list", "elements": "dict", "default": []},
            "adopt": {"type": "list", "elements": "str", "default": []},
        },
        supports_check_mode=True,
    )
    if module.params["state"] == "present":
        present(module)
    else:
        absent(module)


if __name__ == "__main__":
    main()
