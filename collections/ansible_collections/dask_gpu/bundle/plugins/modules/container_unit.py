#!/usr/bin/python
"""A systemd unit's files written, the unit enabled and running, and whether it predates its files: one task."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: container_unit
short_description: Write a unit's env file and unit file, enable and start it, say whether it is stale
description:
  - Writes the environment file (root, 0600) and /etc/systemd/system/C(name).service (root, 0644) when their
    content or attributes differ, reloads systemd when the unit file changed (or systemd says it needs a reload),
    enables the unit and starts it when it is not active. Does not restart a running unit - it returns C(stale),
    whether the unit last started before the newest of its files and C(watch), and the caller restarts it (a
    handler, or a rolling restart). The dask role's entry point C(tasks_from=unit) calls it.
options:
  name:
    description: The unit's name (without .service).
    type: str
    required: true
  unit:
    description: The unit file's content.
    type: str
    required: true
  env:
    description: The environment file's content (it may hold secrets - never logged).
    type: str
    required: true
  env_path:
    description: Where the environment file goes.
    type: path
    required: true
  watch:
    description: Other files the unit reads at start (a certificate); a newer one makes the unit stale too.
    type: list
    elements: path
    default: []
  start:
    description:
      - Start the unit when it is not active. False leaves it as it is, enabled; so a worker host the autoscaler
        released (role dask_autoscale) stays stopped, and takes these files when its agent starts it.
    type: bool
    default: true
author: dask-gpu bundle
"""

EXAMPLES = r"""
- name: Unit files are installed and the unit runs, for dask-worker
  dask_gpu.bundle.container_unit:
    name: dask-worker
    unit: "{{ lookup('ansible.builtin.template', 'unit.service.j2') }}"
    env: "{{ lookup('ansible.builtin.template', 'unit.env.j2') }}"
    env_path: /etc/dask/dask-worker.env
    watch: [/etc/dask/tls/host.crt]
  register: unit
"""

RETURN = r"""
files_changed:
  description: Whether the env file or the unit file was written.
  type: bool
  returned: always
started:
  description: Whether this task started the unit (it was not active).
  type: bool
  returned: always
stale:
  description: Whether the running unit last started before the newest of its files (a restart is due).
  type: bool
  returned: always
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.dask_gpu.bundle.plugins.module_utils.atomic import differs, write_atomic


def write(module: AnsibleModule, path: str, content: str, mode: int) -> None:
    write_atomic(path, content.encode("utf-8"), mode, module.atomic_move)


def systemctl(module: AnsibleModule, *args: str, check: bool = True) -> str:
    rc, out, err = module.run_command(["systemctl", *args])
    if check and rc != 0:
        module.fail_json(msg=f"systemctl {' '.join(args)} failed (rc {rc}): {err.strip() or out.strip()}")
    return str(out).strip()


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "name": {"type": "str", "required": True},
            "unit": {"type": "str", "required": True},
            "env": {"type": "str", "required": True, "no_log": True},
            "env_path": {"type": "path", "required": True},
            "watch": {"type": "list", "elements": "path", "default": []},
            "start": {"type": "bool", "default": True},
        },
        supports_check_mode=True,
    )
    name = module.params["name"]
    unit_path = f"/etc/systemd/system/{name}.service"
    files = [(module.params["env_path"], module.params["env"], 0o600, "0600"),
             (unit_path, module.params["unit"], 0o644, "0644")]
    changed = False
    unit_changed = False
    for path, content, mode, mode_text in files:
        written = differs(path, content.encode("utf-8"))
        if written and not module.check_mode:
            write(module, path, content, mode)
        if not module.check_mode and os.path.exists(path):
            args = module.load_file_common_arguments({"path": path, "mode": mode_text, "owner": "root",
                                                      "group": "root"})
            written = module.set_fs_attributes_if_different(args, written)
        changed = changed or written
        unit_changed = unit_changed or (written and path == unit_path)
    files_changed = changed
    started = False
    stale = False
    if not module.check_mode:
        if unit_changed or systemctl(module, "show", "-P", "NeedDaemonReload", name, check=False) == "yes":
            systemctl(module, "daemon-reload")
        if systemctl(module, "is-enabled", name, check=False) != "enabled":
            systemctl(module, "enable", name)
            changed = True
        # As systemd_service's state=started: an activating unit (starting, or waiting to restart) is left alone.
        active = systemctl(module, "is-active", name, check=False) in ("active", "activating", "reloading")
        if not active and module.params["start"]:
            systemctl(module, "start", name)
            changed = started = True
        since = systemctl(module, "show", "-P", "ActiveEnterTimestamp", "--timestamp=unix", name, check=False)
        since = since.lstrip("@")
        newest = max(int(os.stat(path).st_mtime) for path in
                     [path for path, *_ in files] + [path for path in module.params["watch"] if os.path.exists(path)])
        # Files written now count too, unless this task started the unit: one that systemd restarted between the
        # writes and this check (the old definition, the new env file) would look fresh to the times alone.
        stale = (files_changed and not started) or not since.isdigit() or int(since) < newest
        # A stopped unit left stopped (start=false) has nothing to restart: it reads its files when it starts.
        stale = stale and (active or started)
    module.exit_json(changed=changed, files_changed=files_changed, started=started, stale=stale)


if __name__ == "__main__":
    main()
