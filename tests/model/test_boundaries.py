"""Grep-level checks of the code's joints: no role, playbook or test reads another role's private (`ROLE__`)
variables, and derived facts come from the cluster model's public facts, not from other roles' internals."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ROLES = sorted(path.name for path in (ROOT / "roles").iterdir() if path.is_dir())
PRIVATE = re.compile(r"\b(" + "|".join(sorted(ROLES, key=len, reverse=True)) + r")__[a-z0-9_]+")
SOURCES = ("*.yml", "*.j2", "*.py", "*.sh")


def files() -> list[Path]:
    tracked = subprocess.run(["git", "ls-files", *SOURCES], cwd=ROOT, capture_output=True, text=True, check=True)
    return [ROOT / line for line in tracked.stdout.split() if (ROOT / line).exists()]


def test_private_variables_stay_inside_their_role() -> None:
    leaks = []
    for path in files():
        relative = path.relative_to(ROOT)
        owner = relative.parts[1] if relative.parts[0] == "roles" else None
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for match in PRIVATE.finditer(line):
                if match.group(1) != owner:
                    leaks.append(f"{relative}:{number}: {match.group(0)}")
    assert not leaks, "private variables read outside their role:\n" + "\n".join(leaks)


def test_roles_do_not_include_each_other_except_public_entry_points() -> None:
    """Cross-role entry points are the documented ones: each has its own argument spec entry."""
    entry = re.compile(r"name: (\w+)\n\s+tasks_from: (\w+)")
    for path in files():
        for role, tasks in entry.findall(path.read_text()):
            specs = (ROOT / "roles" / role / "meta" / "argument_specs.yml").read_text()
            assert re.search(rf"^  {tasks}:", specs, re.M), f"{path.relative_to(ROOT)}: {role}/{tasks} is undocumented"


def test_the_spec_builder_makes_the_compose_command_lines() -> None:
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "compose-gen.py"), "--check"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
