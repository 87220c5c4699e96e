#!/usr/bin/python
"""What a host looked like after its last whole converge, recorded and compared in one task (site.yml's fast rerun)."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: converged
short_description: Record a host's converged state, or tell whether it is still intact
description:
  - C(state=record) (site.yml's last play) writes a record of the converge's parts (named hashes of its inputs and
    the bundle's code, worked out on the controller by the filter converge_parts), a SHA-256 of every file under
    I(paths) (folders walked, missing paths skipped) and the I(units) that are active; it is rewritten only when that
    differs.
  - C(state=check) (after the checks) reads the record and answers C(intact) true only when every part is the same,
    every recorded file is there unchanged, no file was added under a recorded folder, and every recorded unit is
    still active. C(reason) says what differed. It changes nothing.
options:
  path:
    description: The record (a JSON file; itself left out of the fingerprint).
    type: path
    required: true
  parts:
    description: The converge's parts (name -> hash, or a reason where the value names one).
    type: dict
    required: true
  state:
    description: record or check.
    type: str
    choices: [record, check]
    required: true
  paths:
    description: Files and folders the converge manages on the host (record only).
    type: list
    elements: path
    default: []
  units:
    description: The cluster's systemd units on the host; those active are recorded (record only).
    type: list
    elements: str
    default: []
author: dask-gpu bundle
"""

RETURN = r"""
intact:
  description: check only; the host is as the last converge left it, with the same parts.
  type: bool
  returned: always
reason:
  description: check only; why it is not intact ('' when it is).
  type: str
  returned: always
"""

import hashlib
import json
import os
import tempfile
from typing import Any

from ansible.module_utils.basic import AnsibleModule


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fingerprint(paths: list[str], skip: str) -> dict[str, str]:
    """path -> SHA-256 of every file under paths (folders walked in order), `skip` left out."""
    found: dict[str, str] = {}
    for root in paths:
        if os.path.isfile(root):
            found[root] = _sha256(root)
            continue
        for folder, subfolders, names in os.walk(root):
            subfolders.sort()
            for name in sorted(names):
                path = os.path.join(folder, name)
                if path != skip and os.path.isfile(path):
                    found[path] = _sha256(path)
    return found


def active(module: AnsibleModule, units: list[str]) -> list[str]:
    systemctl = module.get_bin_path("systemctl", required=True)
    return [unit for unit in units
            if module.run_command([systemctl, "is-active", "--quiet", unit], check_rc=False)[0] == 0]


WHAT = {"code": "the bundle's code", "image_tag": "the images' tag (images/ or the build settings)",
        "controller_files": "the controller's certificates or client bundle",
        "inventory_groups": "the inventory's groups"}


def differences(record: dict[str, Any], parts: dict[str, Any], module: AnsibleModule) -> str:
    """'' when the host is as recorded, else the first difference found."""
    recorded: dict[str, Any] = record.get("parts") or {}
    for name in sorted(set(recorded) | set(parts)):
        if recorded.get(name) == parts.get(name):
            continue
        if name == "renewal_due":
            return f"a certificate is due for renewal ({parts.get(name) or recorded.get(name)})"
        if name.startswith("host ") and name not in recorded:
            return f"{name[5:]} joined the cluster since the last converge"
        if name.startswith("host ") and name not in parts:
            return f"{name[5:]} left the cluster since the last converge"
        if name.startswith("host "):
            return f"{name[5:]}'s settings or groups changed since the last converge"
        if name.startswith("model "):
            return f"{name[6:]}'s model changed since the last converge (what its facts give: addresses, CPUs, GPUs)"
        return f"{WHAT.get(name, name)} changed since the last converge"
    files: dict[str, str] = record.get("files") or {}
    now = fingerprint(list(record.get("paths") or []), module.params["path"])
    for path, checksum in files.items():
        if now.get(path) != checksum:
            return f"{path} was changed or removed since the last converge"
    added = sorted(set(now) - set(files))
    if added:
        return f"{added[0]} was added since the last converge"
    units = list(record.get("units") or [])
    stopped = sorted(set(units) - set(active(module, units)))
    if stopped:
        return f"unit {stopped[0]} is not active"
    return ""


def main() -> None:
    module = AnsibleModule(
        argument_spec={"path": {"type": "path", "required": True}, "parts": {"type": "dict", "required": True},
                       "state": {"type": "str", "choices": ["record", "check"], "required": True},
                       "paths": {"type": "list", "elements": "path", "default": []},
                       "units": {"type": "list", "elements": "str", "default": []}},
        supports_check_mode=True,
    )
    path = module.params["path"]
    record: dict[str, Any] = {}
    if os.path.isfile(path):
        try:
            with open(path, encoding="utf-8") as handle:
                record = json.load(handle)
        except ValueError:
            record = {}
    if module.params["state"] == "check":
        reason = differences(record, module.params["parts"], module) if record else "no converge was recorded"
        module.exit_json(changed=False, intact=not reason, reason=reason)
    paths = sorted(module.params["paths"])
    wanted = {"parts": module.params["parts"], "paths": paths, "files": fingerprint(paths, path),
              "units": active(module, module.params["units"])}
    changed = wanted != record
    if changed and not module.check_mode:
        folder = os.path.dirname(path)
        if not os.path.isdir(folder):
            os.makedirs(folder, mode=0o755)
        descriptor, temp = tempfile.mkstemp(dir=folder, prefix=".dask-bundle-")
        with os.fdopen(descriptor, "w", encoding="utf-8") as out:
            json.dump(wanted, out, indent=1, sort_keys=True)
        module.atomic_move(temp, path)
        os.chmod(path, 0o600)
    module.exit_json(changed=changed, intact=True, reason="")


if __name__ == "__main__":
    main()
