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
    I(paths) (folders walked, missing paths skipped), the I(units) the host is to run (each one enabled or active
    now), the IDs of the I(images), the versions of the I(packages) installed, and, with I(controller), the
    controller's address as the host sees the SSH connection; it is rewritten only when that differs.
  - C(state=check) (after the checks) reads the record and answers C(intact) true only when every part is the same,
    every recorded file is there unchanged, no file was added under a recorded folder, every recorded unit is active
    and as enabled as it was, every recorded image and package is there at the recorded ID and version, and (with
    I(controller)) the controller's address is the recorded one. C(reason) says what differed. A record that differs
    is removed (not in check mode), so a run that then fails half-way leaves no record behind that a later run could
    match.
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
    description: The cluster's systemd units on the host, its services, Docker and the toolkit's; those enabled or
      active are recorded as the ones the host runs, each with its unit-file state (record only).
    type: list
    elements: str
    default: []
  images:
    description: The image references the host's units run; their IDs are recorded (record only).
    type: list
    elements: str
    default: []
  packages:
    description: Debian packages the bundle may install; the versions of those installed are recorded (record only).
    type: list
    elements: str
    default: []
  stopped_ok:
    description: Units that may be stopped at the check, still enabled as recorded (the worker unit of a host the
      autoscaler released; role dask_autoscale). Check only.
    type: list
    elements: str
    default: []
  controller:
    description: Whether the controller's address counts (the firewall lets it in); read from the SSH_CLIENT of the
      connection's login process (this module runs under become, whose environment has none).
    type: bool
    default: false
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
import subprocess
from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.dask_gpu.bundle.plugins.module_utils.atomic import write_atomic


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


# A unit in either state is up (a reload, Prometheus's for one, is not a stop).
RUNNING = ("active", "reloading")


def unit_states(module: AnsibleModule, units: list[str]) -> dict[str, tuple[str, str]]:
    """unit -> (ActiveState, UnitFileState), from one systemctl call for all of them."""
    units = list(dict.fromkeys(units))  # one block per name given, so each name once
    if not units:
        return {}
    systemctl = module.get_bin_path("systemctl", required=True)
    _, out, _ = module.run_command([systemctl, "show", "--property=ActiveState,UnitFileState", "--", *units],
                                   check_rc=True)
    blocks = [dict(line.split("=", 1) for line in block.splitlines() if "=" in line)
              for block in out.strip("\n").split("\n\n")]
    return {unit: (block.get("ActiveState", ""), block.get("UnitFileState", ""))
            for unit, block in zip(units, blocks, strict=True)}


def expected_units(module: AnsibleModule, units: list[str]) -> dict[str, str]:
    """The units the host is to run, each with its unit-file state: enabled (the converge enables every unit it
    starts) or active now. One enabled but down when the record is made is recorded all the same, so the next check
    finds it down; one disabled or masked since is found by its state."""
    return {unit: enabled for unit, (state, enabled) in unit_states(module, units).items()
            if state in RUNNING or enabled.startswith("enabled")}


def image_ids(module: AnsibleModule, images: list[str]) -> dict[str, str]:
    """image -> its ID here ('' when it is not here, or Docker does not answer within 30 s)."""
    if not images:
        return {}
    docker = module.get_bin_path("docker")
    if not docker:
        return dict.fromkeys(images, "")
    found: dict[str, str] = {}
    for image in images:  # one call each (two): inspect's output of several leaves out a missing one unnamed
        try:
            done = subprocess.run([docker, "image", "inspect", "--format", "{{.Id}}", image], capture_output=True,
                                  text=True, timeout=30, check=False)
        except subprocess.TimeoutExpired:
            done = None
        found[image] = done.stdout.strip() if done is not None and done.returncode == 0 else ""
    return found


def package_versions(module: AnsibleModule, packages: list[str]) -> dict[str, str]:
    """package -> version, for those of packages that are installed (one dpkg-query call)."""
    dpkg_query = module.get_bin_path("dpkg-query") if packages else None
    if not dpkg_query:
        return {}
    # Exit 1 when a package is unknown; the known ones are printed all the same.
    _, out, _ = module.run_command([dpkg_query, "-W", "-f=${Package}\t${Version}\t${db:Status-Abbrev}\n", *packages],
                                   check_rc=False)
    return {name: version for name, version, status in
            (line.split("\t") for line in out.splitlines() if line.count("\t") == 2) if status.startswith("ii")}


def controller_address(pid: int | None = None, proc: str = "/proc") -> str | None:
    """The controller's address as this host sees the SSH connection: the first field of SSH_CLIENT in the
    environment of this process or its nearest ancestor that has one (sudo's reset environment has none; the login
    process sshd started does), as the firewall reads it; '' without SSH (a local or docker connection). An ancestor
    whose environment cannot be read (sudo, not dumpable, to a root without CAP_SYS_PTRACE) is passed over; None when
    the process tree itself cannot be read, which the check takes as a difference."""
    pid = os.getpid() if pid is None else pid
    for _ in range(64):  # a process tree is far shallower; the bound only guards a /proc that loops
        if pid <= 1:
            return ""
        try:
            with open(f"{proc}/{pid}/environ", "rb") as handle:
                for entry in handle.read().split(b"\0"):
                    if entry.startswith(b"SSH_CLIENT="):
                        return entry[len(b"SSH_CLIENT="):].decode(errors="replace").split(" ")[0]
        except OSError:
            pass
        try:
            with open(f"{proc}/{pid}/stat", encoding="utf-8") as handle:
                pid = int(handle.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return None
    return None


WHAT = {"code": "the bundle's code", "image_tag": "the images' tag (images/ or the build settings)",
        "controller_files": "the controller's certificates or client bundle",
        "inventory_groups": "the inventory's groups"}


def _part_difference(recorded: dict[str, Any], parts: dict[str, Any]) -> str:
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
    return ""


def differences(record: dict[str, Any], parts: dict[str, Any], module: AnsibleModule,
                stopped_ok: frozenset[str] = frozenset()) -> str:
    """'' when the host is as recorded, else the first difference found."""
    if record.get("unreadable") or not isinstance(record.get("units", {}), dict):
        return "the record of the last converge could not be read"
    found = _part_difference(record.get("parts") or {}, parts)
    if found:
        return found
    files: dict[str, str] = record.get("files") or {}
    now = fingerprint(list(record.get("paths") or []), module.params["path"])
    for path, checksum in files.items():
        if now.get(path) != checksum:
            return f"{path} was changed or removed since the last converge"
    added = sorted(set(now) - set(files))
    if added:
        return f"{added[0]} was added since the last converge"
    units: dict[str, str] = record.get("units") or {}
    for unit, (state, enabled) in unit_states(module, sorted(units)).items():
        if state not in RUNNING and unit not in stopped_ok:
            return f"unit {unit} is not active"
        if enabled != units[unit]:
            return f"unit {unit} is {enabled or 'not installed'}, not {units[unit]} as the last converge left it"
    images: dict[str, str] = record.get("images") or {}
    for image, image_id in image_ids(module, sorted(images)).items():
        if image_id != images[image]:
            return f"image {image} was removed or replaced since the last converge"
    packages: dict[str, str] = record.get("packages") or {}
    versions = package_versions(module, sorted(packages))
    for package in sorted(packages):
        if versions.get(package) != packages[package]:
            return f"package {package} was removed or changed version since the last converge"
    if "controller" in record:
        address = controller_address()
        if address is None or record["controller"] is None:
            return "the controller's address (the firewall lets it in) could not be read from /proc"
        if address != record["controller"]:
            return (f"the controller's address ({address or 'none'}) is not the one the firewall lets in "
                    f"({record['controller'] or 'none'})")
    return ""


def _write(module: AnsibleModule, path: str, record: dict[str, Any]) -> None:
    write_atomic(path, json.dumps(record, indent=1, sort_keys=True).encode("utf-8"), 0o600, module.atomic_move,
                 make_folder=True)
    os.chmod(path, 0o600)  # atomic_move keeps the mode of a file it replaces


def main() -> None:
    module = AnsibleModule(
        argument_spec={"path": {"type": "path", "required": True}, "parts": {"type": "dict", "required": True},
                       "state": {"type": "str", "choices": ["record", "check"], "required": True},
                       "paths": {"type": "list", "elements": "path", "default": []},
                       "units": {"type": "list", "elements": "str", "default": []},
                       "images": {"type": "list", "elements": "str", "default": []},
                       "packages": {"type": "list", "elements": "str", "default": []},
                       "stopped_ok": {"type": "list", "elements": "str", "default": []},
                       "controller": {"type": "bool", "default": False}},
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
        if not isinstance(record, dict) or not record:
            record = {"unreadable": True}
    if module.params["state"] == "check":
        stopped_ok = frozenset(module.params["stopped_ok"])
        reason = (differences(record, module.params["parts"], module, stopped_ok) if record
                  else "no converge was recorded")
        dropped = bool(reason and record)
        if dropped and not module.check_mode:
            os.remove(path)
        module.exit_json(changed=dropped, intact=not reason, reason=reason)
    paths = sorted(module.params["paths"])
    wanted = {"parts": module.params["parts"], "paths": paths, "files": fingerprint(paths, path),
              "units": expected_units(module, module.params["units"]),
              "images": image_ids(module, sorted(module.params["images"])),
              "packages": package_versions(module, sorted(module.params["packages"]))}
    if module.params["controller"]:
        wanted["controller"] = controller_address()
    changed = wanted != record
    if changed and not module.check_mode:
        _write(module, path, wanted)
    module.exit_json(changed=changed, intact=True, reason="")


if __name__ == "__main__":
    main()
