"""lookup dask_gpu.bundle.playbook_command, which builds site.yml's `Verify:` line
(roles/dask_scheduler/tasks/ready.yml): the run's inventory and every `-e` it was given, an `@file` too, shell-quoted,
so that a second cluster's line, run as printed, verifies that cluster and not the first (issue 64)."""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import yaml
from ansible_collections.dask_gpu.bundle.plugins.lookup.playbook_command import command

ROOT = Path(__file__).resolve().parents[2]


def test_the_line_repeats_every_extra_var_shell_quoted_and_a_file_by_its_absolute_path() -> None:
    line = command("playbooks/verify.yml", ["/srv/inventory/blue"],
                   ["dask_cluster_name=blue dask_scheduler_port=9786", "@vars/blue.json", "@/abs/b.yml",
                    '{"dask_worker_gpus": [2, 3]}'], "/home/me/bundle")
    assert line == ("ansible-playbook -i /srv/inventory/blue playbooks/verify.yml"
                    " -e 'dask_cluster_name=blue dask_scheduler_port=9786' -e @/home/me/bundle/vars/blue.json"
                    """ -e @/abs/b.yml -e '{"dask_worker_gpus": [2, 3]}'""")
    assert command("playbooks/verify.yml", ["/srv/inventory/dask"], [], "/x") == (
        "ansible-playbook -i /srv/inventory/dask playbooks/verify.yml")


def test_site_yml_prints_its_verify_line_with_the_lookup() -> None:
    tasks = yaml.safe_load((ROOT / "roles" / "dask_scheduler" / "tasks" / "ready.yml").read_text())
    message = next(task for task in tasks if task["name"] == "How to connect")["ansible.builtin.debug"]["msg"]
    verify = [item for item in message if item.startswith("Verify:")]
    assert verify == ["Verify: {{ lookup('dask_gpu.bundle.playbook_command', 'playbooks/verify.yml') }}"], verify


PRINTS = """
- name: Writes the verify line, then the settings it was given
  hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: Line
      ansible.builtin.copy:
        dest: "{{ playbook_dir }}/line.txt"
        content: "{{ lookup('dask_gpu.bundle.playbook_command', 'show.yml') }}"
        mode: "0644"
    - name: Settings
      ansible.builtin.copy:
        dest: "{{ playbook_dir }}/seen-{{ run }}.json"
        content: "{{ {'name': dask_cluster_name, 'port': dask_scheduler_port, 'gpus': dask_worker_gpus} | to_json }}"
        mode: "0644"
      vars:
        run: "{{ 'again' if lookup('ansible.builtin.env', 'AGAIN') else 'first' }}"
"""


def test_the_printed_line_runs_as_printed_with_the_same_settings(tmp_path: Path) -> None:
    """A real run with key=value (a quoted value with a space), JSON and @file extra vars (the file given relative to
    the run's folder): its line, run by a shell, sees the same settings."""
    (tmp_path / "show.yml").write_text(PRINTS)
    (tmp_path / "vars").mkdir()
    (tmp_path / "vars" / "blue.json").write_text(json.dumps({"dask_scheduler_port": 9786}))
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
           "ANSIBLE_COLLECTIONS_PATH": str(ROOT / "collections"),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    first = subprocess.run(["ansible-playbook", "-i", "localhost,", "show.yml",
                            "-e", f"ansible_python_interpreter={sys.executable} dask_cluster_name='blue green'",
                            "-e", "@vars/blue.json", "-e", '{"dask_worker_gpus": [2, 3]}'],
                           cwd=tmp_path, capture_output=True, text=True, env=env, timeout=120, check=False)
    assert first.returncode == 0, first.stdout + first.stderr
    line = (tmp_path / "line.txt").read_text()
    assert f"@{tmp_path}/vars/blue.json" in shlex.split(line), line
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "show.yml").write_text(PRINTS)
    again = subprocess.run(["bash", "-c", line], cwd=elsewhere, capture_output=True, text=True,
                           env={**env, "AGAIN": "1"}, timeout=120, check=False)
    assert again.returncode == 0, line + "\n" + again.stdout + again.stderr
    seen = json.loads((tmp_path / "seen-first.json").read_text())
    assert seen == {"name": "blue green", "port": 9786, "gpus": [2, 3]}, seen
    assert json.loads((elsewhere / "seen-again.json").read_text()) == seen, line
