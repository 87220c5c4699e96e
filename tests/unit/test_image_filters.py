"""The images' filters (roles/dask_images): context_files (tasks/build.yml's one-task build context: what Docker would
send of images/, with contents and modes, nothing .dockerignore leaves out) and apt_new_packages
(tasks/registry-host.yml: the packages an install of skopeo added, from apt-get's real output, which a teardown
purges), the retention filters (tasks/retention.yml: which builds a host keeps, which images may go) and
registry_leftovers (tasks/teardown.yml: the registry package's own configuration put back, the bundle's files in its
folders removed). The space
filters are tested in test_disk_space.py."""
from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.dask_gpu.bundle.plugins.filter.images import (
    apt_new_packages,
    archive_tags,
    context_files,
    image_retention,
    registry_leftovers,
    retention_removable,
    tagged,
)

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


REG = "10.0.0.1:5000/"


def build(tag: str, registry: str = REG) -> list[str]:
    return [f"{registry}dask-gpu-scheduler:{tag}", f"{registry}dask-gpu-worker:{tag}"]


def test_the_newest_builds_are_kept_this_runs_first_and_older_ones_go() -> None:
    history = [build("b3"), build("b2"), build("b1")]
    assert image_retention(history, build("b4"), 2, []) == {"builds": [build("b4"), build("b3")],
                                                           "remove": sorted(build("b2") + build("b1"))}
    # A rerun of the newest build changes nothing; a rollback to a kept build puts it first.
    assert image_retention([build("b4"), build("b3")], build("b4"), 2, []) == {"builds": [build("b4"), build("b3")],
                                                                                "remove": []}
    assert image_retention([build("b4"), build("b3")], build("b3"), 2, [])["builds"] == [build("b3"), build("b4")]
    # keep 1: only what runs; a reference another cluster here runs (in_use) stays; a first run knows no older build.
    assert image_retention([build("b3")], build("b4"), 1, build("b3")[:1])["remove"] == build("b3")[1:]
    assert image_retention([], build("b1"), 2, []) == {"builds": [build("b1")], "remove": []}
    # The same tag through another registry (a distribution change) is an older build of its own.
    assert image_retention([build("b1", "")], build("b1"), 1, [])["remove"] == build("b1", "")


def test_only_images_with_the_bundles_label_that_no_container_uses_may_go() -> None:
    label = {"org.opencontainers.image.title": "dask-gpu"}
    images = [{"Id": "sha256:a", "RepoTags": build("b1")[:1], "Config": {"Labels": label}},
              {"Id": "sha256:b", "RepoTags": build("b1")[1:], "Config": {"Labels": label}},
              {"Id": "sha256:c", "RepoTags": [f"{REG}dask-gpu-scheduler:mine"], "Config": {"Labels": {}}}]
    refs = [*build("b1"), f"{REG}dask-gpu-scheduler:mine", "missing:tag"]
    assert retention_removable(refs, images, []) == build("b1")
    # A stopped container made from the worker image keeps it (by image ID, or by the name it was run with).
    assert retention_removable(refs, images, [{"Image": "x", "ImageID": "sha256:b"}]) == build("b1")[:1]
    assert retention_removable(refs, images, [{"Image": build("b1")[0], "ImageID": "sha256:z"}]) == build("b1")[1:]


def test_tags_and_the_names_a_build_host_holds() -> None:
    assert archive_tags([*build("b2"), *build("b1", ""), "no-tag"]) == ["b1", "b2"]
    assert archive_tags([f"{REG}dask-gpu-worker"]) == []
    assert tagged(["b1"], [f"{REG}dask-gpu-scheduler", f"{REG}dask-gpu-worker"]) == sorted(
        build("b1") + build("b1", ""))


CONFIG, DROPIN = "/etc/docker/registry/config.yml", "/etc/systemd/system/docker-registry.service.d/dask.conf"


def test_teardown_gives_the_registry_package_its_own_configuration_back() -> None:
    """Issue 64: teardown left the bundle's config.yml, which names the TLS files it removed. The package's own is the
    oldest of the template's backups (they keep their file's time: the package's from its .deb, the bundle's earlier
    ones from their writes, whatever the process ids in their names); every backup goes, and the drop-in folder the
    bundle made when its drop-in is all it holds."""
    found = [{"path": CONFIG, "mtime": 1_800_000_300.0},
             {"path": f"{CONFIG}.9.2026-12-07@10:05:00~", "mtime": 1_800_000_100.0},  # the bundle's first config
             {"path": f"{CONFIG}.120.2026-12-07@10:00:00~", "mtime": 1_683_991_272.0},  # Debian's, 2023-05-13
             {"path": "/etc/docker/registry/notes.txt", "mtime": 1.0},  # the operator's: no backup
             {"path": DROPIN, "mtime": 1_800_000_000.0}]
    assert registry_leftovers(found, CONFIG, DROPIN) == {
        "restore": f"{CONFIG}.120.2026-12-07@10:00:00~",
        "remove": [f"{CONFIG}.120.2026-12-07@10:00:00~", f"{CONFIG}.9.2026-12-07@10:05:00~",
                   "/etc/systemd/system/docker-registry.service.d"]}
    # An operator's drop-in keeps the folder; no backup, nothing to restore (the bundle's file stays: the unit needs
    # one).
    theirs = [{"path": CONFIG, "mtime": 2.0}, {"path": DROPIN, "mtime": 1.0},
              {"path": "/etc/systemd/system/docker-registry.service.d/limits.conf", "mtime": 1.0}]
    assert registry_leftovers(theirs, CONFIG, DROPIN) == {"restore": "", "remove": []}
