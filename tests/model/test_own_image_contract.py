"""Your own images' contract (plugin_utils/own_image.py): what a cluster needs of each image, named per setting; the
probe itself runs here in the controller's Python (the real probe in real images: tests/images/test_own_image.py)."""
from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from ansible_collections.dask_gpu.bundle.plugins.plugin_utils import own_image
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.features import FEATURES, image_needs

ALL_MODULES = {name: True for name in own_image.MODULES}
COMMANDS = {name: f"/env/bin/{name}" for name in ("dask", *own_image.BUNDLE_COMMANDS)}
VERSIONS = {"dask": "2026.7.1", "distributed": "2026.7.1", "dask-cuda": "26.10.0"}


def report(modules: dict[str, bool] | None = None, versions: dict[str, str] | None = None,
           cli: tuple[str, ...] = ("cuda",)) -> str:
    found = {"python": "3.11.2", "uid": 10001, "commands": COMMANDS, "modules": {**ALL_MODULES, **(modules or {})},
             "dask_cli": list(cli), "versions": versions or VERSIONS, "lock": ["dask==2026.7.1"]}
    return "banner of an entrypoint\n" + own_image.MARKER + json.dumps(found) + "\n"


def inspected(scheduler: str, worker: str, user: str = "analyst") -> dict[str, Any]:
    return {"scheduler": {"ref": "team/sched:1", "user": user, "output": scheduler, "failed": ""},
            "worker": {"ref": "team/work:1", "user": user, "output": worker, "failed": ""}}


CLUSTER = {"gpu_hosts": [], "cudf_spill": False, "uid": 10001}
SETTINGS = {"dask_transport": "tls", "dask_images_worker_image": "team/work:1",
            "dask_images_scheduler_image": "team/sched:1"}


def test_an_image_with_everything_passes() -> None:
    assert own_image.problems(inspected(report(), report()), CLUSTER, SETTINGS, "ctl") == []


def test_gpu_workers_need_dask_cuda_and_the_preloads() -> None:
    worker = report({"dask_cuda": False, "dask_gpu_verify.gpu_metrics": False}, cli=())
    found = own_image.problems(inspected(report(), worker), {**CLUSTER, "gpu_hosts": ["g1"]}, SETTINGS, "ctl")
    text = "\n".join(found)
    assert "dask_images_worker_image=team/work:1 (worker image, inspected on ctl): lacks dask_cuda" in text
    assert "GPU worker hosts g1" in text and "gpu_metrics" in text and "the `dask cuda` command" in text
    assert not [line for line in found if "scheduler image" in line]
    assert own_image.problems(inspected(report(), worker), CLUSTER, SETTINGS, "ctl") == []


def test_transport_spilling_monitoring_and_notebook_needs_are_named() -> None:
    bare = report({name: False for name in ("distributed_ucxx", "dask_gpu_verify.host_frames", "cudf",
                                            "prometheus_client", "jupyterlab", "dask_labextension")})
    settings = {**SETTINGS, "dask_transport": "tls-ucx", "dask_monitoring_enabled": True,
                "dask_notebook_enabled": True}
    cluster = {**CLUSTER, "cudf_spill": True}
    text = "\n".join(own_image.problems(inspected(bare, bare), cluster, settings, "ctl",
                                        image_needs(cluster, settings)))
    for need in ("lacks distributed_ucxx, needed by dask_transport=tls-ucx",
                 "lacks dask_gpu_verify.host_frames, needed by dask_transport=tls-ucx (the scheduler's preload)",
                 "lacks cudf, needed by dask_worker_cudf_spill=true", "lacks prometheus_client",
                 "lacks jupyterlab, needed by dask_notebook_enabled=true"):
        assert need in text, text


def test_root_needs_the_acknowledgement() -> None:
    found = own_image.problems(inspected(report(), report(), user=""), CLUSTER, SETTINGS, "ctl")
    assert len(found) == 2 and all("the image's user is root (USER unset)" in line for line in found)
    acked = {**SETTINGS, "dask_container_root_ack": True}
    assert own_image.problems(inspected(report(), report(), user="0:0"), CLUSTER, acked, "ctl") == []


def test_versions_must_agree_and_one_image_serves_both() -> None:
    other = report(versions={**VERSIONS, "dask": "2026.6.0"})
    found = own_image.problems(inspected(other, report()), CLUSTER, SETTINGS, "ctl")
    assert found == ["dask_images_scheduler_image=team/sched:1 and dask_images_worker_image=team/work:1 carry other "
                     "versions: dask 2026.6.0 (scheduler) vs 2026.7.1 (worker). Dask needs the same versions on the "
                     "scheduler, the workers and the clients."]
    assert own_image.references({"dask_images_worker_image": "team/work:1"}) == {"scheduler": "team/work:1",
                                                                                 "worker": "team/work:1"}
    assert own_image.references({"dask_images_worker_image": ""}) is None


def test_a_probe_that_could_not_run_is_named_with_what_the_image_said() -> None:
    failed = {"ref": "team/work:1", "user": "x", "output": "", "failed": 'exec: "python": executable file not found'}
    found = own_image.problems({"scheduler": failed, "worker": failed}, CLUSTER,
                               {"dask_images_worker_image": "team/work:1"}, "ctl")
    assert found and all("dask_images_worker_image=team/work:1" in line and "executable file not found" in line
                         and "`python` and `dask` of one environment on its PATH" in line for line in found)


def test_setting_problems_and_the_tag() -> None:
    assert own_image.setting_problems({"dask_images_scheduler_image": "a/b:1"}, False)[0].startswith(
        "dask_images_scheduler_image is set without dask_images_worker_image")
    assert "build your packages into your image" in own_image.setting_problems(
        {"dask_images_worker_image": "a/b:1"}, True)[0]
    refs = {"scheduler": "a/b:1", "worker": "a/b:1"}
    assert own_image.tag(refs) == own_image.tag(dict(refs)) != own_image.tag({**refs, "worker": "a/b:2"})
    assert own_image.tag(refs).startswith("own-")


def test_the_probe_runs_in_a_python_with_dask() -> None:
    run = subprocess.run([sys.executable, "-c", own_image.PROBE], capture_output=True, text=True, check=True)
    found = own_image.parse(run.stdout)
    assert found and found["modules"]["dask"] and found["modules"]["distributed"]
    assert found["versions"]["distributed"] and any(line.startswith("distributed==") for line in found["lock"])
    assert own_image.parse("no marker here") is None


def test_the_model_keeps_everything_and_takes_the_images_versions_and_lock() -> None:
    """`dask_cluster | own_image_kept(found, settings, hosts)`: the model first, as the task passes it (the sandbox's
    cluster blue found the arguments swapped: a model without `paths` after check.yml)."""
    from ansible_collections.dask_gpu.bundle.plugins.filter.own_image import FilterModule

    kept = FilterModule().filters()["own_image_kept"]
    model = {**CLUSTER, "paths": {"config": "/etc/dask-blue"}, "images": {"tag": "own-0123456789ab", "own": {}}}
    result = kept(model, inspected(report(), report()), SETTINGS, {})
    assert result["paths"] == {"config": "/etc/dask-blue"} and result["images"]["tag"] == "own-0123456789ab"
    assert result["images"]["versions"] == VERSIONS
    assert result["images"]["own_lock"] == {"python": "3.11.2", "lock": ["dask==2026.7.1"]}
    # A worker image with cuDF and dask-cudf: the scheduler and the clients get a GPU (spec.py's frames_gpu).
    assert result["images"]["cudf"] is True
    without = kept(model, inspected(report(), report({"dask_cudf": False})), SETTINGS, {})
    assert without["images"]["cudf"] is False


def test_every_module_a_feature_needs_is_one_the_probe_looks_for() -> None:
    """The features' image needs (features.image_needs, a loop over the registry) reach the check, and the probe
    run in the image looks for each module they name (own_image.MODULES): one it did not would pass unseen."""
    settings = {**SETTINGS, **{feature.switch: True for feature in FEATURES if feature.switch},
                "dask_monitoring_enabled": True}
    needed = image_needs(CLUSTER, settings)
    named = {module for pairs in needed.values() for module, _ in pairs}
    assert {"jupyterlab", "dask_labextension", "prometheus_client"} <= named, needed
    assert named <= set(own_image.MODULES), named - set(own_image.MODULES)
    bare = report({name: False for name in named})
    text = "\n".join(own_image.problems(inspected(bare, bare), CLUSTER, settings, "ctl", needed))
    assert all(f"lacks {module}" in text for module in named), text
    assert image_needs(CLUSTER, {**SETTINGS, "dask_notebook_enabled": False}) == {"scheduler": [], "worker": []}
