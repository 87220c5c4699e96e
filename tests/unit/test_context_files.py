"""The filter context_files (roles/dask_images/tasks/build.yml's one-task build context): what Docker would send of
images/, with contents and modes, and nothing .dockerignore leaves out."""
from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.dask_gpu.bundle.plugins.filter.context import context_files

ROOT = Path(__file__).resolve().parents[2]


def test_the_repository_images_folder_is_sent_whole_without_what_docker_ignores() -> None:
    files = context_files(str(ROOT / "images"), "/ctx")
    paths = {f["path"] for f in files}
    assert {"/ctx/Dockerfile", "/ctx/.dockerignore", "/ctx/requirements/lean.txt", "/ctx/verify/pyproject.toml",
            "/ctx/extra/README.md"} <= paths
    assert not [p for p in paths if "__pycache__" in p or ".egg-info" in p], paths
    dockerfile = next(f for f in files if f["path"] == "/ctx/Dockerfile")
    assert dockerfile["content"] == (ROOT / "images" / "Dockerfile").read_text()


def test_modes_are_kept_ignored_names_match_at_any_depth_and_binary_files_are_named(tmp_path: Path) -> None:
    (tmp_path / ".dockerignore").write_text("# comment\n**/__pycache__\n**/*.egg-info\nlocal.txt\n")
    (tmp_path / "a" / "__pycache__").mkdir(parents=True)
    (tmp_path / "a" / "__pycache__" / "m.cpython-311.pyc").write_bytes(b"\x00\xff")
    (tmp_path / "a" / "x.egg-info").mkdir()
    (tmp_path / "a" / "x.egg-info" / "PKG-INFO").write_text("n")
    (tmp_path / "local.txt").write_text("kept out")
    (tmp_path / "a" / "run.sh").write_text("#!/bin/sh\n")
    (tmp_path / "a" / "run.sh").chmod(0o755)
    files = context_files(str(tmp_path), "/c")
    assert [(f["path"], f["mode"]) for f in files] == [("/c/.dockerignore", "0644"), ("/c/a/run.sh", "0755")]
    (tmp_path / "a" / "blob.bin").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ValueError, match="blob.bin"):
        context_files(str(tmp_path), "/c")
