#!/usr/bin/python
"""A host's set of small files compared and written in one task (instead of a copy task per file)."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: files
short_description: Write several small files with their content, owner and mode, in one task
description:
  - Each file is written (atomically) only when its content differs, and its owner, group and mode are set when
    they differ; a missing parent folder is made (0755, owned by whoever runs the module). Contents are never
    logged (keys and tokens pass through here). Returns the paths that changed.
options:
  files:
    description: The files.
    type: list
    elements: dict
    required: true
    suboptions:
      path:
        description: Where the file goes.
        type: path
        required: true
      content:
        description: Its content.
        type: str
        required: true
      mode:
        description: Its mode (octal string).
        type: str
        default: "0644"
      owner:
        description: Its owner (name or id); left as it is when not given.
        type: str
      group:
        description: Its group (name or id); left as it is when not given.
        type: str
author: dask-gpu bundle
"""

EXAMPLES = r"""
- name: Host key, certificate and the CA certificate are installed
  dask_gpu.bundle.files:
    files:
      - {path: /etc/dask/tls/host.key, content: "{{ lookup('file', 'host.key') }}", mode: "0600"}
      - {path: /etc/dask/tls/ca.crt, content: "{{ lookup('file', 'ca.crt') }}"}
"""

RETURN = r"""
changed_paths:
  description: The files written, or whose owner, group or mode were set.
  type: list
  elements: str
  returned: always
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.dask_gpu.bundle.plugins.module_utils.atomic import differs, write_atomic


def main() -> None:
    module = AnsibleModule(
        argument_spec={"files": {"type": "list", "elements": "dict", "required": True, "options": {
            "path": {"type": "path", "required": True},
            "content": {"type": "str", "required": True, "no_log": True},
            "mode": {"type": "str", "default": "0644"},
            "owner": {"type": "str"},
            "group": {"type": "str"},
        }}},
        supports_check_mode=True,
    )
    changed_paths: list[str] = []
    for spec in module.params["files"]:
        path = spec["path"]
        content = spec["content"].encode("utf-8")
        changed = differs(path, content)
        if changed and not module.check_mode:
            write_atomic(path, content, int(spec["mode"], 8), module.atomic_move, make_folder=True)
        if not module.check_mode and os.path.exists(path):
            args = module.load_file_common_arguments({"path": path, "mode": spec["mode"], "owner": spec["owner"],
                                                      "group": spec["group"]})
            changed = module.set_fs_attributes_if_different(args, changed)
        if changed:
            changed_paths.append(path)
    module.exit_json(changed=bool(changed_paths), changed_paths=changed_paths)


if __name__ == "__main__":
    main()
