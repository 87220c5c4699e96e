#!/usr/bin/python
"""Free space where a host keeps images, and which of the wanted images its Docker already holds (reads only)."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: disk_space
short_description: Free space in folders and under Docker's root, and the images Docker already holds
description:
  - Reads, changes nothing. For each folder, the free bytes and the device of its file system (a folder that does not
    exist yet is read at its nearest existing parent, where it would be made). Docker's root folder is always among
    them; it is the daemon's when the daemon answers, else C(data-root) of /etc/docker/daemon.json, else
    /var/lib/docker (Docker is not installed yet).
  - For each image reference, its size when Docker holds it.
options:
  paths:
    description: Folders whose file system's free space is read.
    type: list
    elements: path
    default: []
  images:
    description: Image references looked up in Docker.
    type: list
    elements: str
    default: []
author: dask-gpu bundle
"""

EXAMPLES = r"""
- name: Free space and the images already there are read
  dask_gpu.bundle.disk_space:
    paths: [/var/lib/dask-images]
    images: [dask-gpu-worker:26.10-cuda12-lean-0123456789ab]
  register: space
"""

RETURN = r"""
docker:
  description: Docker's daemon answered.
  type: bool
  returned: always
docker_root:
  description: Docker's root folder (where images go).
  type: str
  returned: always
images:
  description: The references Docker holds, each with its size in bytes.
  type: dict
  returned: always
space:
  description:
    - For each folder (and Docker's root), free (bytes), device (its file system's) and read_at (the folder read).
  type: dict
  returned: always
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule

DAEMON_JSON = "/etc/docker/daemon.json"
DEFAULT_ROOT = "/var/lib/docker"


def existing(path: str) -> str:
    """The path, or its nearest parent that exists (where the folder would be made)."""
    path = os.path.abspath(path)
    while not os.path.exists(path):
        path = os.path.dirname(path)
    return path


def free_space(path: str) -> dict[str, object]:
    """Free bytes (for an unprivileged writer, as df shows them) and the device of the path's file system."""
    read_at = existing(path)
    stats = os.statvfs(read_at)
    return {"free": stats.f_bavail * stats.f_frsize, "device": os.stat(read_at).st_dev, "read_at": read_at}


def configured_root() -> str:
    """data-root of daemon.json, or Docker's default."""
    try:
        with open(DAEMON_JSON, encoding="utf-8") as handle:
            found = json.load(handle).get("data-root")
    except (OSError, ValueError, AttributeError):
        found = None
    return str(found) if found else DEFAULT_ROOT


def main() -> None:
    module = AnsibleModule(
        argument_spec={"paths": {"type": "list", "elements": "path", "default": []},
                       "images": {"type": "list", "elements": "str", "default": []}},
        supports_check_mode=True,
    )
    docker = module.get_bin_path("docker")
    root, answered, images = configured_root(), False, {}
    if docker:
        rc, out, _ = module.run_command([docker, "info", "--format", "{{.DockerRootDir}}"])
        if rc == 0 and out.strip():
            root, answered = out.strip(), True
    if answered:
        for ref in module.params["images"]:
            rc, out, _ = module.run_command([docker, "image", "inspect", "--format", "{{.Size}}", ref])
            if rc == 0 and out.strip().isdigit():
                images[ref] = int(out.strip())
    space = {path: free_space(path) for path in [*module.params["paths"], root]}
    module.exit_json(changed=False, docker=answered, docker_root=root, images=images, space=space)


if __name__ == "__main__":
    main()
