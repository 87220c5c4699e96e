"""Jobs and JupyterLab in the model: what a job run refuses on the controller before any host changes (a missing
script, a missing entry point, requirements the cluster's image does not meet), the ephemeral guard, and the
notebook's image packages, folder, port and exposure check."""
from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils import extras, jobs
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.feature import CheckInput, ClusterInput, HostInput
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.features import jobs as job_feature
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.features import notebook

ROOT = Path(__file__).resolve().parents[2]
LOCK = "dask==2026.7.1\ndistributed==2026.7.1\nnumpy==2.4.6\n"
GROUPS = {"dask_scheduler": ["s1"], "dask_cuda_workers": ["g1"], "dask_cpu_workers": []}


def plan_and_problems(tmp: Path, **settings: Any) -> tuple[dict[str, Any], list[str]]:
    lock = tmp / "requirements.lock"
    lock.write_text(LOCK)
    job = jobs.plan(settings, "20261124T130000Z")
    return job, jobs.problems(settings, job, str(lock))


def test_a_file_job_is_named_by_its_script(tmp_path: Path) -> None:
    script = tmp_path / "Nightly ETL.py"
    script.write_text("print(1)\n")
    job, found = plan_and_problems(tmp_path, dask_job_script=str(script), dask_job_args=["a", 2])
    assert found == [] and job["name"] == "nightly-etl" and job["id"] == "nightly-etl-20261124t130000z"
    assert job["entry"] == "Nightly ETL.py" and job["args"] == ["a", "2"] and not job["folder"]


def test_a_folder_job_checks_its_entry_and_requirements_against_the_image(tmp_path: Path) -> None:
    folder = tmp_path / "etl"
    folder.mkdir()
    (folder / "main.py").write_text("print(1)\n")
    (folder / "requirements.txt").write_text("dask==2026.7.1\nnumpy>=2\n# a comment\n")
    job, found = plan_and_problems(tmp_path, dask_job_script=str(folder))
    assert found == [] and job["folder"] and job["entry"] == "main.py" and job["requirements"].endswith(".txt")
    (folder / "requirements.txt").write_text("dask==2020.1.0\nxgboost\n--extra-index-url x\n")
    _, found = plan_and_problems(tmp_path, dask_job_script=str(folder), dask_job_entry="run.py")
    assert "dask_job_entry=run.py is not a file" in found[0]
    assert "line 1: dask==2020.1.0 is not met: the cluster's image has dask==2026.7.1" in found[1]
    assert "line 2: xgboost is not in the cluster's image" in found[2] and "pip option" in found[3]


def test_a_missing_script_or_lock_is_named(tmp_path: Path) -> None:
    assert "dask_job_script is not set" in plan_and_problems(tmp_path)[1][0]
    assert "does not exist" in plan_and_problems(tmp_path, dask_job_script=str(tmp_path / "no.py"))[1][0]
    (tmp_path / "notes.txt").write_text("x")
    assert "neither a folder nor" in plan_and_problems(tmp_path, dask_job_script=str(tmp_path / "notes.txt"))[1][0]
    folder = tmp_path / "f"
    folder.mkdir()
    (folder / "main.py").write_text("")
    (folder / "requirements.lock").write_text("dask==2026.7.1\n")
    job = jobs.plan({"dask_job_script": str(folder)}, "20261124T130000Z")
    found = jobs.problems({"dask_job_script": str(folder)}, job, str(tmp_path / "missing.lock"))
    assert "run site.yml for this cluster first" in found[0]


def check(settings: dict[str, Any], host: str = "s1", facts: dict[str, Any] | None = None) -> CheckInput:
    return CheckInput(host=host, get=settings.get, model={"scheduler": host == "s1"}, cluster={}, groups=GROUPS,
                      facts=facts or {})


def test_an_ephemeral_job_may_not_take_a_running_clusters_name() -> None:
    record = {"ansible_local": {"dask_cluster_nightly": {"name": "nightly"}}}
    settings = {"dask_job_ephemeral": True, "dask_cluster_name": "nightly"}
    assert "cluster nightly already exists" in job_feature.checks(check(settings, facts=record))[0]
    assert job_feature.checks(check({**settings, "dask_cluster_name": "other"}, facts=record)) == []
    assert job_feature.checks(check({**settings, "dask_job_ephemeral": False}, facts=record)) == []


def test_the_notebook_adds_jupyterlab_to_the_images_and_takes_its_port_and_folder() -> None:
    base = {"dask_repo_dir": str(ROOT), "dask_notebook_enabled": True}
    lines = extras.package_lines(base)
    assert any(line.startswith("jupyterlab==") for line in lines) and any("dask-labextension" in x for x in lines)
    assert extras.package_lines({**base, "dask_notebook_enabled": False}) == []
    settings = {**base, "dask_notebook_port": 8888, "dask_container_uid": 10001, "dask_container_gid": 10001,
                "dask_cluster_name": "dask"}
    on_scheduler = notebook.host(HostInput(name="s1", settings=settings, facts={}, gpus={}, groups=GROUPS,
                                           model={"worker": False}))
    assert on_scheduler["ports"] == {"dask_notebook_port": [8888, 8888]} and "services" not in on_scheduler
    assert [f["path"] for f in on_scheduler["folders"]] == ["/var/lib/dask", "/var/lib/dask/notebooks"]
    assert all(f["remove"] == "empty" for f in on_scheduler["folders"])  # your notebooks are never removed
    assert notebook.host(HostInput(name="g1", settings=settings, facts={}, gpus={}, groups=GROUPS)) == {}


def test_the_notebook_beyond_loopback_needs_its_acknowledgement_and_a_cluster_host() -> None:
    settings = {"dask_notebook_enabled": True, "dask_notebook_listen_address": "10.0.0.5"}
    assert "dask_notebook_exposed_ack" in notebook.checks(check(settings))[0]
    assert notebook.checks(check({**settings, "dask_notebook_exposed_ack": True})) == []
    found = notebook.checks(check({"dask_notebook_enabled": True, "dask_notebook_host": "elsewhere"}))
    assert "dask_notebook_host=elsewhere is not a host of this cluster" in found[0]


def test_a_notebook_folder_inside_the_bundles_configuration_folder_is_refused() -> None:
    """JupyterLab's Dask file goes into <config dir>/notebook, and teardown removes the configuration folder."""
    found = notebook.checks(check({"dask_notebook_enabled": True, "dask_notebook_dir": "/etc/dask/notebook"}))
    assert "dask_notebook_dir=/etc/dask/notebook is inside the cluster's configuration folder /etc/dask" in found[0]
    found = notebook.checks(check({"dask_notebook_enabled": True, "dask_cluster_name": "blue",
                                   "dask_config_dir": "/srv/blue-conf", "dask_notebook_dir": "/srv/blue-conf"}))
    assert "inside the cluster's configuration folder /srv/blue-conf" in found[0], found
    assert notebook.checks(check({"dask_notebook_enabled": True, "dask_notebook_dir": "/srv/etc/dask"})) == []
    assert notebook.checks(check({"dask_notebook_enabled": True, "dask_notebook_dir": "/etc/dask-notes"})) == []


def test_a_token_file_the_controller_cannot_write_is_refused(tmp_path: Path) -> None:
    blocked = tmp_path / "file-not-folder"
    blocked.write_text("")
    settings = {"dask_notebook_enabled": True, "dask_controller_dir": str(blocked / "artifacts")}
    found = notebook.checks(check(settings))
    assert "dask_controller_dir=" in found[0] and "token" in found[0] and "cannot be written" in found[0], found
    assert notebook.checks(check({**settings, "dask_controller_dir": str(tmp_path / "new" / "artifacts")})) == []


EXAMPLES = ROOT / "roles" / "dask_notebook" / "files" / "examples"


def found_like_find(folder: Path) -> list[dict[str, Any]]:
    """What module find returns for the folder (recursive, hidden, any type, sha256 checksums of files)."""
    return [{"path": str(path), "isdir": path.is_dir(),
             **({} if path.is_dir() else {"checksum": hashlib.sha256(path.read_bytes()).hexdigest()})}
            for path in sorted(folder.rglob("*"))]


def removed_by_teardown(examples: Path) -> list[str]:
    """roles/dask_notebook/tasks/examples_absent.yml: the filter's paths removed as module file would."""
    paths = notebook.examples_removable(found_like_find(examples), str(examples), str(EXAMPLES))
    for path in map(Path, paths):
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    return paths


@pytest.mark.parametrize("name", ["dask", "blue"])
def test_teardown_removes_the_bundles_examples_and_leaves_the_users_notebooks(tmp_path: Path, name: str) -> None:
    """Issue 64: a second cluster's teardown left NAME's notebooks/examples. The same rule for every cluster, its
    folder on or off: the examples as run.yml wrote them go (a checkpoint JupyterLab made of one too), then the
    examples folder; the user's notebook beside them stays."""
    settings = {"dask_cluster_name": name, "dask_data_dir": str(tmp_path / name)}
    off, on = ({**settings, "dask_notebook_enabled": enabled, "dask_notebook_port": 8888} for enabled in (False, True))
    folder = Path(notebook.cluster(ClusterInput(off, {}, GROUPS, "", "s1", ["s1"]))["notebook"]["dir"])
    assert str(folder) == notebook.cluster(ClusterInput(on, {}, GROUPS, "", "s1", ["s1"]))["notebook"]["dir"]
    assert folder == tmp_path / name / "notebooks"
    examples = folder / "examples"
    shutil.copytree(EXAMPLES, examples)  # run.yml's copy
    (examples / ".ipynb_checkpoints").mkdir()
    shutil.copy(EXAMPLES / "01-arrays.ipynb", examples / ".ipynb_checkpoints" / "01-arrays-checkpoint.ipynb")
    (folder / "mine.ipynb").write_text("{}")
    removed_by_teardown(examples)
    assert sorted(path.name for path in folder.iterdir()) == ["mine.ipynb"]


def test_an_example_the_user_changed_or_a_notebook_of_theirs_keeps_the_examples_folder(tmp_path: Path) -> None:
    examples = tmp_path / "notebooks" / "examples"
    shutil.copytree(EXAMPLES, examples)
    checkpoints = examples / ".ipynb_checkpoints"
    checkpoints.mkdir()
    shutil.copy(EXAMPLES / "02-dataframes.ipynb", checkpoints / "02-dataframes-checkpoint.ipynb")
    (examples / "02-dataframes.ipynb").write_text('{"cells": ["changed"]}')
    (examples / "mine.ipynb").write_text("{}")
    removed = removed_by_teardown(examples)
    assert removed == [str(examples / "01-arrays.ipynb"), str(examples / "03-polars.ipynb")], removed
    # The changed example keeps its checkpoint (JupyterLab's way back to the original).
    assert sorted(str(path.relative_to(examples)) for path in examples.rglob("*")) == [
        ".ipynb_checkpoints", ".ipynb_checkpoints/02-dataframes-checkpoint.ipynb", "02-dataframes.ipynb", "mine.ipynb"]
    (examples / "mine.ipynb").unlink()
    (examples / "02-dataframes.ipynb").unlink()
    # The user deleted their changed copy: the checkpoint, the bundle's content, goes, and the folders with it.
    assert removed_by_teardown(examples)[-1] == str(examples) and not examples.exists()
