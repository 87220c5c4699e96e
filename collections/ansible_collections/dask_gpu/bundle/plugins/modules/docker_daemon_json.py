#!/usr/bin/python
"""Docker's daemon.json merged with the bundle's keys, or given back, in one task (docker_engine role)."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: docker_daemon_json
short_description: Merge keys into Docker's daemon.json with a record that teardown undoes, or undo it
description:
  - C(state=merged) reads daemon.json and the record beside it (C(path).dask-bundle), writes the record first (for
    each top-level key of C(config) seen for the first time, whether the host had it and its value then), then
    daemon.json with C(config) merged in (dictionaries key by key, other values replaced; the host's other keys
    kept). A file is written only when its parsed content differs, so a file formatted by hand is not rewritten.
  - C(state=restored) puts back the host's own value of every recorded key, removes the keys the host did not
    have, keeps every other key, and removes the record. Without a record nothing changes.
  - With C(service), also returns C(stale) - the service last started before daemon.json was last written (a run
    interrupted before its handlers restarted Docker).
options:
  state:
    description: Merge the keys (C(merged)) or give the host its own settings back (C(restored)).
    type: str
    choices: [merged, restored]
    default: merged
  config:
    description: Keys merged into daemon.json (state merged).
    type: dict
    default: {}
  path:
    description: Docker's daemon.json.
    type: path
    default: /etc/docker/daemon.json
  service:
    description: The systemd unit whose start time is compared with daemon.json's (empty - no comparison).
    type: str
    default: ""
  validate:
    description:
      - A command that checks the merged daemon.json before anything is written, C(%s) standing for a file with
        that content (C(dockerd --validate --config-file %s) - dockerd's own rules, so a key it does not know or a
        value of the wrong type never leaves Docker unable to start). Where it fails, the task fails with its
        output and nothing is written. A dockerd too old for C(--validate) (before 23.0), or a command not on the
        host, checks nothing (C(validated) false). Empty - no check.
    type: str
    default: ""
author: dask-gpu bundle
"""

EXAMPLES = r"""
- name: Daemon.json keeps existing keys and gains the configured ones
  dask_gpu.bundle.docker_daemon_json:
    config: {log-driver: json-file}
    service: docker
  register: merge
  changed_when: merge.changed or merge.stale
  notify: Restart docker
"""

RETURN = r"""
daemon_json:
  description: daemon.json's content after the task.
  type: dict
  returned: always
stale:
  description: Whether C(service) last started before daemon.json was last written.
  type: bool
  returned: always
validated:
  description: Whether C(validate) checked the merged content (false where there was nothing new to check).
  type: bool
  returned: always
"""

import json
import os
import shlex
import tempfile
from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.dask_gpu.bundle.plugins.module_utils import daemon_json
from ansible_collections.dask_gpu.bundle.plugins.module_utils.atomic import write_atomic


def read(module: AnsibleModule, path: str) -> tuple[bool, dict[str, Any]]:
    """(exists, parsed content); a blank file reads as {}, anything but a JSON object fails the task."""
    if not os.path.exists(path):
        return False, {}
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    if not text.strip():
        return True, {}
    try:
        content = json.loads(text)
    except ValueError as error:
        module.fail_json(msg=f"{path} is not valid JSON ({error}): fix or remove it; nothing was changed")
    if not isinstance(content, dict):
        module.fail_json(msg=f"{path} holds {type(content).__name__}, not a JSON object: nothing was changed")
    return True, content


def write(module: AnsibleModule, path: str, content: dict[str, Any]) -> None:
    """Atomically, root-owned 0644."""
    write_atomic(path, (json.dumps(content, indent=4, sort_keys=True) + "\n").encode("utf-8"), 0o644,
                 module.atomic_move)


def attributes(module: AnsibleModule, path: str, changed: bool) -> bool:
    args = module.load_file_common_arguments({"path": path, "mode": "0644", "owner": "root", "group": "root"})
    return bool(module.set_fs_attributes_if_different(args, changed))


def stale(module: AnsibleModule, path: str, service: str) -> bool:
    if not service or not os.path.exists(path):
        return False
    rc, out, _ = module.run_command(["systemctl", "show", "-P", "ActiveEnterTimestamp", "--timestamp=unix", service])
    started = out.strip().lstrip("@")
    return rc != 0 or not started.isdigit() or int(started) < int(os.stat(path).st_mtime)


def validated(module: AnsibleModule, command: str, content: dict[str, Any]) -> bool:
    """The merged content checked by COMMAND (%s: a file holding it); fails the task where the command refuses it.
    False where the command cannot check (not on the host, or a dockerd without --validate)."""
    argv = shlex.split(command)
    if not argv or module.get_bin_path(argv[0]) is None:
        return False
    with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="daemon-json-candidate-") as handle:
        handle.write(json.dumps(content, indent=4, sort_keys=True) + "\n")
        handle.flush()
        rc, out, err = module.run_command([handle.name if word == "%s" else word for word in argv])
    said = " ".join((out + err).split())
    if rc != 0 and "unknown flag: --validate" in said:
        return False
    if rc != 0:
        module.fail_json(msg=f"the keys to merge into {module.params['path']} are not what {argv[0]} accepts: {said} "
                             "(docker_engine_daemon_config, or the keys the bundle adds); nothing was changed")
    return True


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "state": {"type": "str", "choices": ["merged", "restored"], "default": "merged"},
            "config": {"type": "dict", "default": {}},
            "path": {"type": "path", "default": "/etc/docker/daemon.json"},
            "service": {"type": "str", "default": ""},
            "validate": {"type": "str", "default": ""},
        },
        supports_check_mode=True,
    )
    path = module.params["path"]
    record_path = path + ".dask-bundle"
    exists, current = read(module, path)
    recorded_exists, recorded = read(module, record_path)
    changed = False
    if module.params["state"] == "merged":
        config = module.params["config"]
        new_record = daemon_json.record(recorded, current, config)
        new = daemon_json.merged(current, config)
        writes = [(record_path, new_record, not recorded_exists or new_record != recorded),
                  (path, new, not exists or new != current)]
        checked = bool(module.params["validate"]) and writes[1][2] and validated(module, module.params["validate"], new)
        if not os.path.isdir(os.path.dirname(path)) and not module.check_mode:
            os.makedirs(os.path.dirname(path), mode=0o755)
    else:
        new = daemon_json.restore(current, recorded) if recorded_exists else current
        writes = [(path, new, recorded_exists and new != current)]
        checked = False
    for target, content, differs in writes:  # the record first: a run stopped between the two can be undone
        if differs and not module.check_mode:
            write(module, target, content)
        changed = differs or changed
        if not module.check_mode and os.path.exists(target):
            changed = attributes(module, target, changed)
    if module.params["state"] == "restored" and recorded_exists:
        if not module.check_mode:
            os.remove(record_path)
        changed = True
    module.exit_json(changed=changed, daemon_json=new, stale=stale(module, path, module.params["service"]),
                     validated=checked,
                     diff={"before": json.dumps(current, indent=4, sort_keys=True) + "\n",
                           "after": json.dumps(new, indent=4, sort_keys=True) + "\n", "before_header": path,
                           "after_header": path})


if __name__ == "__main__":
    main()
