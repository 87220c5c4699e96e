#!/usr/bin/python
"""A running job's new output, read on its host (playbooks/job.yml's wait loop)."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: job_output
short_description: The new lines of a job's output, and whether the job has ended
description:
  - Reads a job folder written by dask-gpu-job (output.log, job.json at the end) on the job's host. Returns the
    lines written since the previous call (the position is kept in the folder, in C(.cursor)), after waiting up to
    C(wait) seconds for new output or the end. The playbook calls it until C(done); the bundle's stdout callback
    (dask_gpu.bundle.progress) prints C(progress_lines) as they come, so the output streams.
  - The job has ended when job.json exists, or when its container is no longer running (a container that stopped
    without writing job.json failed before the script could run; C(container_exit) says how).
options:
  folder:
    description: The job's folder on the host.
    type: path
    required: true
  container:
    description: The job's container (looked up with the docker CLI, read only).
    type: str
    required: true
  wait:
    description: Seconds to wait for new output or the end (a line of progress at least this often).
    type: int
    default: 30
author: dask-gpu bundle
"""

EXAMPLES = r"""
- name: Job runs (its output streams)
  dask_gpu.bundle.job_output:
    folder: /var/lib/dask/reports/jobs/etl-20261124T120000Z
    container: dask-job-etl-20261124T120000Z
  register: job_wait
  until: job_wait.done
  retries: 1000
  delay: 0
"""

RETURN = r"""
progress_lines:
  description: The output lines written since the previous call.
  type: list
  elements: str
  returned: always
done:
  description: Whether the job has ended.
  type: bool
  returned: always
report:
  description: job.json (once the job has ended and written it).
  type: dict
  returned: when done
container_exit:
  description: The container's exit code, when it stopped without job.json.
  type: int
  returned: when the container stopped early
"""

import json
import os
import time

from ansible.module_utils.basic import AnsibleModule

POLL = 1.0
BATCH = 2.0  # new output is returned after at least this long, so lines come in batches


def container_state(module: AnsibleModule, name: str) -> tuple[bool, int | None]:
    """(running, exit code) of the container; (False, None) when it does not exist."""
    rc, out, _ = module.run_command(["docker", "inspect", "-f", "{{.State.Running}} {{.State.ExitCode}}", name])
    if rc != 0:
        return False, None
    running, _, code = out.strip().partition(" ")
    return running == "true", int(code) if code.lstrip("-").isdigit() else None


def read_new(folder: str) -> list[str]:
    """Complete lines of output.log after the cursor; the cursor moves past them."""
    log, cursor_file = os.path.join(folder, "output.log"), os.path.join(folder, ".cursor")
    try:
        with open(cursor_file) as handle:
            cursor = int(handle.read().strip() or 0)
    except (OSError, ValueError):
        cursor = 0
    try:
        with open(log, "rb") as handle:
            handle.seek(cursor)
            data = handle.read()
    except OSError:
        return []
    end = data.rfind(b"\n") + 1
    if end == 0:
        return []
    with open(cursor_file, "w") as out:
        out.write(str(cursor + end))
    return data[:end].decode("utf-8", "replace").splitlines()


def main() -> None:
    module = AnsibleModule(argument_spec={"folder": {"type": "path", "required": True},
                                          "container": {"type": "str", "required": True},
                                          "wait": {"type": "int", "default": 30}},
                           supports_check_mode=False)
    folder, name, wait = module.params["folder"], module.params["container"], max(1, module.params["wait"])
    report_file = os.path.join(folder, "job.json")
    started = time.monotonic()
    lines: list[str] = []
    result: dict[str, object] = {"changed": False, "done": False}
    while True:
        lines += read_new(folder)
        if os.path.exists(report_file):
            lines += read_new(folder)
            with open(report_file) as handle:
                result.update(done=True, report=json.load(handle))
            break
        running, code = container_state(module, name)
        if not running:
            time.sleep(POLL)  # job.json is written just before the container ends
            if os.path.exists(report_file):
                continue
            lines += read_new(folder)
            result.update(done=True, container_exit=code if code is not None else -1)
            break
        waited = time.monotonic() - started
        if waited >= wait or (lines and waited >= BATCH):
            break
        time.sleep(POLL)
    result["progress_lines"] = lines
    module.exit_json(**result)


if __name__ == "__main__":
    main()
