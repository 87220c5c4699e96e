"""The collection (collections/ansible_collections/dask_gpu/bundle) builds with ansible-galaxy from its galaxy.yml, and
the archive holds its plugins and its meta/runtime.yml."""
from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
COLLECTION = ROOT / "collections" / "ansible_collections" / "dask_gpu" / "bundle"


def test_the_collection_builds_from_its_galaxy_yml(tmp_path: Path) -> None:
    meta = yaml.safe_load((COLLECTION / "galaxy.yml").read_text())
    assert (meta["namespace"], meta["name"]) == ("dask_gpu", "bundle")
    galaxy = Path(sys.executable).with_name("ansible-galaxy")
    run = subprocess.run([str(galaxy), "collection", "build", "--output-path", str(tmp_path), str(COLLECTION)],
                         capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    archive = tmp_path / f"dask_gpu-bundle-{meta['version']}.tar.gz"
    with tarfile.open(archive) as built:
        names = set(built.getnames())
    assert {"meta/runtime.yml", "plugins/plugin_utils/model.py", "plugins/filter/model.py", "MANIFEST.json"} <= names
    assert not [name for name in names if "__pycache__" in name], names
