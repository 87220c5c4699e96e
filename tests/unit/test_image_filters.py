"""The images' filters (roles/dask_images): context_files (tasks/build.yml's one-task build context: what Docker would
send of images/, with contents and modes, nothing .dockerignore leaves out) and apt_new_packages
(tasks/registry-host.yml: the packages an install of skopeo added, from apt-get's real output, which a teardown
purges). The space filters are tested in test_disk_space.py."""
from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.dask_gpu.bundle.plugins.filter.images import apt_new_packages, context_files

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


# apt-get install --no-install-recommends skopeo on Debian 12, as printed (the head of its output).
APT_OUTPUT = """Reading package lists...
Building dependency tree...
Reading state information...
The following additional packages will be installed:
  containernetworking-plugins golang-github-containers-common
  golang-github-containers-image libgpgme11
Recommended packages:
  netavark
The following NEW packages will be installed:
  containernetworking-plugins golang-github-containers-common
  golang-github-containers-image libgpgme11 skopeo
0 upgraded, 5 newly installed, 0 to remove and 138 not upgraded.
Setting up skopeo (1.9.3+ds1-1+b10) ...
"""


def test_the_packages_an_install_added_are_read_from_apt_gets_output() -> None:
    assert apt_new_packages(APT_OUTPUT, "skopeo") == [
        "containernetworking-plugins", "golang-github-containers-common", "golang-github-containers-image",
        "libgpgme11", "skopeo"]
    # Recommended and suggested packages are not installed: not named. Output without the list names the package only.
    assert apt_new_packages("Reading package lists...\nskopeo is already the newest version.\n", "skopeo") == ["skopeo"]
    assert apt_new_packages("The following NEW packages will be installed:\n  skopeo:amd64\n", "skopeo") == [
        "skopeo", "skopeo:amd64"]
