"""docs/variables.md's variable tables are generated from the roles' argument specs and must not drift."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_readme_variable_tables_match_argument_specs() -> None:
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "readme-vars.py"), "--check"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_every_role_has_argument_specs_and_prefixed_variables() -> None:
    import yaml

    for role in sorted((ROOT / "roles").iterdir()):
        spec = yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]
        defaults = role / "defaults" / "main.yml"
        declared = set(yaml.safe_load(defaults.read_text()) or {}) if defaults.exists() else set()
        missing = declared - set(spec["options"])
        assert not missing, f"{role.name}: defaults without a spec: {missing}"
        assert all(name.startswith(role.name + "_") for name in spec["options"]), role.name
