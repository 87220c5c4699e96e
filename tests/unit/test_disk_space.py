"""The space check before a converge (roles/dask_images/tasks/space.yml): the disk_space module, run in-process as
Ansible runs it against this machine's own file systems, and the filters that turn its report into what a host needs
(space_needs) and one message naming the host, the folders, what is needed and what is free (space_shortfall)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from ansible.module_utils.testing import patch_module_args
from ansible_collections.dask_gpu.bundle.plugins.filter.images import space_needs, space_shortfall
from ansible_collections.dask_gpu.bundle.plugins.modules import disk_space
from dockerutil import docker, image

GB = 10**9
REFS = ["dask-gpu-scheduler:t", "dask-gpu-worker:t"]


def run(capsys: pytest.CaptureFixture[str], **args: object) -> dict[str, object]:
    with patch_module_args(args), pytest.raises(SystemExit) as exited:
        disk_space.main()
    assert exited.value.code == 0
    return json.loads(capsys.readouterr().out)


def test_a_folder_not_made_yet_is_read_where_it_would_be_made(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    wanted = tmp_path / "not" / "yet"
    report = run(capsys, paths=[str(wanted)], images=[])
    found = report["space"][str(wanted)]
    stats = os.statvfs(tmp_path)
    assert found["read_at"] == str(tmp_path) and found["device"] == os.stat(tmp_path).st_dev
    assert abs(found["free"] - stats.f_bavail * stats.f_frsize) < 64 * 2**20  # the same file system, read twice
    assert report["changed"] is False and report["docker_root"] in report["space"]
    assert not wanted.exists()


def test_docker_root_is_daemon_json_s_when_the_daemon_does_not_answer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    daemon = tmp_path / "daemon.json"
    daemon.write_text(json.dumps({"data-root": str(tmp_path / "docker"), "log-driver": "journald"}))
    monkeypatch.setattr(disk_space, "DAEMON_JSON", str(daemon))
    monkeypatch.setenv("PATH", str(tmp_path))  # no docker on PATH: Docker not installed yet
    report = run(capsys, paths=[], images=REFS)
    assert report["docker"] is False and report["images"] == {}
    assert report["docker_root"] == str(tmp_path / "docker")
    assert report["space"][str(tmp_path / "docker")]["read_at"] == str(tmp_path)
    daemon.write_text("{not json")
    assert run(capsys, paths=[], images=REFS)["docker_root"] == "/var/lib/docker"


def test_docker_s_own_root_and_the_images_it_holds_with_their_sizes(capsys: pytest.CaptureFixture[str]) -> None:
    """This machine's Docker and the lean image that the image tests build (they run first in CI's pytest)."""
    built = image("worker")
    root = docker("info", "--format", "{{.DockerRootDir}}").stdout.strip()
    size = int(docker("image", "inspect", "--format", "{{.Size}}", built).stdout)
    found = run(capsys, paths=[], images=[built, "dask-gpu-worker:no-such-tag"])
    assert found["docker"] is True and found["docker_root"] == root
    assert found["images"] == {built: size}


def report(images: dict[str, int], free: dict[str, tuple[int, int]]) -> dict[str, object]:
    """A disk_space report: free[path] = (device, free bytes)."""
    return {"docker_root": "/var/lib/docker", "images": images,
            "space": {path: {"device": device, "free": size, "read_at": path} for path, (device, size) in free.items()}}


def test_a_host_that_holds_the_images_needs_nothing_even_on_a_full_disk() -> None:
    full = report({ref: 3 * GB for ref in REFS}, {"/var/lib/docker": (1, 0), "/var/lib/dask-images": (1, 0)})
    assert space_needs(full, REFS, 3 * GB, work_dir="/var/lib/dask-images") == []
    assert space_shortfall(full, [], "w1") == ""


def test_needs_on_one_device_add_up_and_the_message_names_host_folders_needed_and_free() -> None:
    one_disk = report({REFS[0]: 3 * GB}, {"/var/lib/docker": (1, 5 * GB), "/var/lib/dask-images": (1, 5 * GB)})
    needs = space_needs(one_disk, REFS, int(2.7 * GB), work_dir="/var/lib/dask-images")
    assert [(n["path"], n["bytes"]) for n in needs] == [("/var/lib/docker", int(2.7 * GB)),
                                                        ("/var/lib/dask-images", int(2.7 * GB))]
    message = space_shortfall(one_disk, needs, "dask-w2")
    assert message.startswith("dask-w2: not enough free disk for this converge's images: 5.0 GB free on the file "
                              "system of /var/lib/docker, 5.4 GB needed for the images in /var/lib/docker (2.7 GB); "
                              "the images' archive (dask_images_work_dir) in /var/lib/dask-images (2.7 GB)."), message
    assert "Nothing was changed" in message
    # Two file systems of 3 GB each hold one 2.7 GB need each.
    apart = report({}, {"/var/lib/docker": (1, 3 * GB), "/srv/images": (2, 3 * GB)})
    assert space_shortfall(apart, space_needs(apart, REFS, int(2.7 * GB), work_dir="/srv/images"), "w") == ""
    # Only the short one is named.
    short = report({}, {"/var/lib/docker": (1, 9 * GB), "/srv/images": (2, GB)})
    message = space_shortfall(short, space_needs(short, REFS, int(2.7 * GB), work_dir="/srv/images"), "w3")
    assert "1.0 GB free on the file system of /srv/images, 2.7 GB needed" in message
    assert "/var/lib/docker" not in message.split("Nothing")[0]
    # Just before an archive's copy (tasks/archive-load.yml) the run has changed hosts: the message does not say not.
    late = space_shortfall(short, space_needs(short, REFS, int(2.7 * GB), work_dir="/srv/images"), "w3", before=False)
    assert late.startswith("w3: not enough free disk") and "Nothing was changed" not in late, late


def test_a_build_needs_its_cache_an_export_its_archive_and_the_registry_half() -> None:
    empty = report({}, {"/var/lib/docker": (1, 100 * GB), "/ctl/images": (1, 100 * GB),
                        "/var/lib/docker-registry": (1, 100 * GB)})
    needs = space_needs(empty, REFS, 4 * GB, build=True, export_dir="/ctl/images")
    assert [(n["path"], n["bytes"]) for n in needs] == [("/var/lib/docker", 8 * GB), ("/ctl/images", 4 * GB)]
    needs = space_needs(empty, REFS, 4 * GB, registry_storage="/var/lib/docker-registry")
    assert [(n["path"], n["bytes"]) for n in needs] == [("/var/lib/docker", 4 * GB),
                                                        ("/var/lib/docker-registry", 2 * GB)]
    assert space_shortfall(report({}, {"/var/lib/docker": (1, 11 * GB), "/ctl/images": (1, 11 * GB)}),
                           space_needs(empty, REFS, 4 * GB, build=True, export_dir="/ctl/images"), "localhost") != ""


def test_a_folder_the_report_lacks_is_named_not_passed() -> None:
    assert space_shortfall(report({}, {}), [{"path": "/x", "bytes": 1, "what": "y"}], "w") == (
        "w: the free disk space of /x was not read")
