"""One invalid value per variable, generated from the roles' argument specs themselves (tests/unit/invalid_values.py:
out of range, not in the choices, a bad format or the wrong type), all in one inventory: playbooks/check.yml must
fail, name every variable, and change nothing. A variable added to a spec later is covered without a new case.

check.yml enters the dask role through its model entry point, which has no options for Ansible to check, so
Ansible's own argument-spec check cannot stop the run at the first bad role: one ansible-playbook run, and
dask_problems must name every variable."""
from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from typing import Any

from test_bad_input import GOOD, ROOT, inventory, run_check

spec = importlib.util.spec_from_file_location("invalid_values", ROOT / "tests" / "unit" / "invalid_values.py")
assert spec and spec.loader
invalid_values = importlib.util.module_from_spec(spec)
sys.modules["invalid_values"] = invalid_values
spec.loader.exec_module(invalid_values)

SPECS = invalid_values.specs()
CASES = invalid_values.generated()


def good_fill(tmp_path: Path) -> dict[str, Any]:
    """Values for the options without a spec default (their role defaults read .env under dask_repo_dir, which
    a batch may have made invalid)."""
    env = dict(line.split("=", 1) for line in (ROOT / ".env").read_text().splitlines()
               if "=" in line and not line.startswith("#"))
    return {"dask_rapids_release": env["RAPIDS_RELEASE"], "dask_cuda_major": env["CUDA_MAJOR"],
            "dask_image_profile": env["PROFILE"], "dask_base_image": env["BASE_IMAGE"], "dask_repo_dir": str(ROOT),
            "dask_controller_dir": str(tmp_path / "artifacts")}


def test_every_variable_has_a_generated_case() -> None:
    names = [name for options in SPECS.values() for name in options]
    assert sorted(case[1] for case in CASES) == sorted(names)
    print(f"{len(CASES)} generated invalid values, one ansible-playbook run")


def test_generated_invalid_values_are_all_reported(tmp_path: Path) -> None:
    values = {name: value for _, name, value, _ in CASES}
    fill = {name: value for name, value in good_fill(tmp_path).items() if name not in values}
    result = run_check(tmp_path, inventory(GOOD, {**fill, **values}))
    output = re.sub(r"\s+", " ", result.stdout + result.stderr)
    print(f"{len(CASES)} generated invalid values: {', '.join(sorted(values))}")
    assert result.returncode != 0, output[-3000:]
    assert not re.search(r"changed=[1-9]", output)
    # dask_problems itself names each one, with its host.
    missing = [name for name in values if not re.search(rf"host (s1|c1): {name}\b", output)]
    assert not missing, f"not reported: {missing}\n{output[-6000:]}"
