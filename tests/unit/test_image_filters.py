"""The images' filters (roles/dask_images): context_files (tasks/build.yml's one-task build context: what Docker would
send of images/, with contents and modes, nothing .dockerignore leaves out) and disk_room (tasks/archive.yml: room for
the archive and the images it loads, from df's real output format) and apt_new_packages (tasks/registry-host.yml: the
packages an install of skopeo added, from apt-get's real output, which a teardown purges)."""
from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.dask_gpu.bundle.plugins.filter.images import apt_new_packages, context_files, disk_room

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


GB = 10**9
HEADER = "          Avail Filesystem     Mounted on"


def test_one_device_needs_twice_the_archive_even_through_a_volume() -> None:
    lines = [HEADER, f"{int(5.5 * GB)} /dev/vda /", f"{int(5.5 * GB)} /dev/vda /var/lib/docker"]
    assert disk_room(lines, int(2.7 * GB), "w1", "/var/lib/dask-images", "/var/lib/docker") == ""
    lines = [HEADER, f"{int(5 * GB)} /dev/vda /", f"{int(5 * GB)} /dev/vda /var/lib/docker"]
    assert "5.0 GB free on / and /var/lib/docker (/dev/vda) (dask_images_work_dir" in disk_room(
        lines, int(2.7 * GB), "w1", "/var/lib/dask-images", "/var/lib/docker")
    message = disk_room([HEADER, f"{4 * GB} /dev/vda /", f"{4 * GB} /dev/vda /"], int(2.7 * GB), "w1",
                        "/var/lib/dask-images", "/var/lib/docker")
    assert message.startswith("w1: not enough free disk for the images' archive (2.7 GB)"), message
    assert "4.0 GB free on / (dask_images_work_dir /var/lib/dask-images and Docker's root /var/lib/docker), " \
           "5.4 GB needed" in message and "dask_images_work_dir to a larger file system" in message


def test_two_file_systems_each_need_the_archive_once_and_each_short_one_is_named() -> None:
    ok = [HEADER, f"{3 * GB} /dev/sdb /srv", f"{3 * GB} /dev/sda /var/lib/docker"]
    assert disk_room(ok, int(2.7 * GB), "w2", "/srv/images", "/var/lib/docker") == ""
    short = [HEADER, f"{1 * GB} /dev/sdb /srv", f"{2 * GB} /dev/sda /var/lib/docker"]
    message = disk_room(short, int(2.7 * GB), "w2", "/srv/images", "/var/lib/docker")
    assert "1.0 GB free on /srv (dask_images_work_dir /srv/images), 2.7 GB needed" in message
    assert "2.0 GB free on /var/lib/docker (Docker's root /var/lib/docker), 2.7 GB needed" in message


def test_unreadable_df_output_is_a_problem_not_a_pass() -> None:
    assert disk_room([HEADER], GB, "w3", "/a", "/b").startswith("w3: the free disk space could not be read from df")


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
