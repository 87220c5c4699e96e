"""The stdout callback dask_gpu.bundle.progress (ansible.cfg): a task that runs longer than the interval prints a
line of progress naming the task (its size, where the name carries one), the time so far and the hosts it still
runs on; quick tasks print none. A real ansible-playbook run on localhost, with the interval at 2 s (the quick task
runs on the controller alone, so that a loaded CI machine cannot stretch it past the interval)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PLAYBOOK = """
- name: Progress
  hosts: localhost
  gather_facts: false
  vars:
    size: "{{ (2700000000 / 1e9) | round(1) }} GB"
  tasks:
    - name: Quick task
      ansible.builtin.debug:
        msg: quick
    - name: Archive is copied, about {{ size }}
      ansible.builtin.command: sleep 6.5
      changed_when: false
"""


def test_a_long_task_prints_progress_with_its_size_time_and_hosts(tmp_path: Path) -> None:
    playbook = tmp_path / "progress.yml"
    playbook.write_text(PLAYBOOK)
    env = {**os.environ, "DASK_PROGRESS_INTERVAL": "2", "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
           "ANSIBLE_COLLECTIONS_PATH": str(ROOT / "collections")}
    bin_dir = Path(sys.executable).parent
    run = subprocess.run([str(bin_dir / "ansible-playbook"), "-i", "localhost,", "-c", "local",
                          "-e", f"ansible_python_interpreter={sys.executable}", str(playbook)],
                         cwd=tmp_path, capture_output=True, text=True, env=env, timeout=120, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    lines = [line for line in run.stdout.splitlines() if line.startswith("[progress] ")]
    pattern = re.compile(r"^\[progress\] Archive is copied, about 2\.7 GB: (\d+) s so far, running on localhost$")
    seconds = [int(m.group(1)) for m in map(pattern.match, lines) if m]
    assert len(seconds) >= 2 and seconds == sorted(seconds) and seconds[-1] >= 4, run.stdout
    assert not any("Quick task" in line for line in lines), lines


def test_the_main_process_preloads_every_filter_and_the_specs_its_forks_read() -> None:
    """plugin_utils/preload.py (called by this callback's constructor): every filter plugin file is imported, and every
    option of every role's spec has its constraint parsed, so Ansible's forks inherit them."""
    from ansible_collections.dask_gpu.bundle.plugins.plugin_utils import options, preload

    folder = ROOT / "collections" / "ansible_collections" / "dask_gpu" / "bundle" / "plugins" / "filter"
    filters = {path.stem for path in folder.glob("*.py")}
    assert set(preload.filters()) == filters - {"__init__"}
    options.parse_constraint.cache_clear()
    count = preload.specs([str(ROOT / "roles"), str(ROOT / "no-such-roles")])
    assert count > 100
    assert options.parse_constraint.cache_info().currsize > 20
