"""Golden renders: the units, env files, specs (JSON) and command scripts that playbooks/render-commands.yml
makes from the spec builder for the inventories here (GPU hosts replay a real 2 x H200 machine's nvidia-smi)
are compared with the checked-in files under expected/. A change to a command line shows up as a diff in
review; after a deliberate change, regenerate with GOLDEN_UPDATE=1 pytest tests/golden."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
# The image tag ends in a hash of images/: any change there would touch every golden file.
TAG = re.compile(r"(dask-gpu-(?:scheduler|worker):[0-9.]+-cuda[0-9]+-[a-z]+)-[0-9a-f]{12}")


def render(inventory: Path, out: Path) -> None:
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    result = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory),
                             str(ROOT / "playbooks" / "render-commands.yml"), "-e", f"render_dir={out}",
                             "-e", f"dask_controller_dir={out}/artifacts"],
                            capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


@pytest.mark.parametrize("name", ["multi-host", "single-host-ucx"])
def test_rendered_units_and_specs_match_the_golden_files(name: str, tmp_path: Path) -> None:
    out = tmp_path / "rendered"
    render(HERE / f"{name}.yml", out)
    rendered = {path.name: TAG.sub(r"\1-HASH", path.read_text()) for path in sorted(out.glob("*.*"))}
    expected_dir = HERE / "expected" / name
    if os.environ.get("GOLDEN_UPDATE") == "1":
        shutil.rmtree(expected_dir, ignore_errors=True)
        expected_dir.mkdir(parents=True)
        for file, text in rendered.items():
            (expected_dir / file).write_text(text)
    expected = {path.name: path.read_text() for path in sorted(expected_dir.glob("*.*"))}
    assert sorted(rendered) == sorted(expected)
    for file, text in expected.items():
        assert rendered[file] == text, f"{name}/{file} differs from the golden file (GOLDEN_UPDATE=1 to accept)"
