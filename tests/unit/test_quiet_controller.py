"""The controller from `make setup` runs a playbook without warnings the docs do not name: ansible-core's import of
cryptography's DSA classes (its SSH agent) warned on every run until scripts/setup-venv.sh's start-up filter."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_playbook_starts_without_a_warning() -> None:
    playbook = Path(sys.executable).parent / "ansible-playbook"
    done = subprocess.run([str(playbook), "-i", str(ROOT / "inventory" / "single-gpu"), str(ROOT / "site.yml"),
                           "--list-tasks"], capture_output=True, text=True, cwd=ROOT, timeout=300, check=False,
                          env={**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    warned = [line for line in (done.stdout + done.stderr).splitlines()
              if "Warning" in line or "[WARNING]" in line or "DEPRECATION" in line]
    assert not warned, warned
