"""dask_autoscale_by gpu in the cluster model: the worker container runs its workers under dask-gpu-worker-slots with
the agent's file of released workers mounted read-only, the autoscaler is told, and site.yml's reading of the
autoscaler's state (autoscale_released) counts released workers per host (by host: whole hosts); a health-excluded
GPU gets no slot."""
from __future__ import annotations

from ansible_collections.dask_gpu.bundle.plugins.plugin_utils import rolling, spec
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.features import autoscale
from test_gpu_health_model import UUID1, hosts, probe

BY_GPU = {"dask_autoscale_enabled": True, "dask_autoscale_by": "gpu"}


def test_by_gpu_the_worker_container_runs_one_process_per_gpu_under_the_slots_supervisor() -> None:
    built = hosts(probe(), **BY_GPU)
    g1, scale = built["hosts"]["g1"], built["cluster"]["autoscale"]
    assert scale["per_gpu"] and scale["slots_file"] == "/var/lib/dask/worker-slots/released.json"
    # One of the cluster's folders on a worker host (made by its record, removed with a tree by teardown).
    assert {"path": "/var/lib/dask/worker-slots", "owner": 0, "group": 0, "mode": "0755",
            "remove": "tree"} in g1["folders"]
    worker = spec.worker_spec(built["cluster"], g1, built["settings"])
    argv = worker["argv"]
    assert argv[:5] == ["dask-gpu-worker-slots", "--name", "g1", "--workers", "2"]
    assert argv[argv.index("--control") + 1] == f"{spec.SLOTS_MOUNT}/{spec.SLOTS_FILE}"
    assert argv[argv.index("--") + 1:argv.index("--") + 4] == ["dask", "cuda", "worker"]
    assert f"/var/lib/dask/worker-slots:{spec.SLOTS_MOUNT}:ro" in worker["volumes"]
    assert worker["env"]["DASK_HEALTH_FILE"] == spec.SLOTS_HEALTH
    assert worker["gpus"] == "all"  # every GPU's device node in the one container: CUDA IPC between its workers
    told = autoscale.autoscale_spec(built["cluster"])["argv"]
    assert told[told.index("--by") + 1] == "gpu"


def test_by_host_the_worker_runs_as_before_and_an_excluded_gpu_gets_no_slot() -> None:
    built = hosts(probe(), dask_autoscale_enabled=True)
    worker = spec.worker_spec(built["cluster"], built["hosts"]["g1"], built["settings"])
    assert worker["argv"][:3] == ["dask", "cuda", "worker"] and "DASK_HEALTH_FILE" not in worker["env"]
    assert "--by" not in autoscale.autoscale_spec(built["cluster"])["argv"]
    assert not [folder for folder in built["hosts"]["g1"]["folders"] if folder["path"].endswith("/worker-slots")]
    unfit = hosts(probe(**{UUID1: {"healthy": False, "problems": ["ECC"]}}), **BY_GPU)
    argv = spec.worker_spec(unfit["cluster"], unfit["hosts"]["g1"], unfit["settings"])["argv"]
    assert argv[argv.index("--workers") + 1] == "1"


def test_what_the_autoscaler_released_is_counted_per_host() -> None:
    cluster = hosts(probe(), **BY_GPU)["cluster"]
    state = {"by": "gpu", "desired": {"g1-0": "up", "g1-1": "down", "gone-0": "down"},
             "machines": {"g1-0": "g1", "g1-1": "g1", "gone-0": "gone"}}
    assert autoscale.released(state, cluster) == {"hosts": [], "workers": {"g1": 1}}
    assert rolling.counts(["g1"], cluster, {"g1": 1}) == [1]
    # A state of the other unit of scale releases nothing (the autoscaler forgets it and wants every worker up).
    assert autoscale.released({"desired": {"g1": "down"}}, cluster) == {"hosts": [], "workers": {}}
    by_host = hosts(probe(), dask_autoscale_enabled=True)["cluster"]
    assert autoscale.released({"desired": {"g1": "down"}}, by_host) == {"hosts": ["g1"], "workers": {"g1": 2}}
    assert autoscale.released(None, by_host) == {"hosts": [], "workers": {}}
    assert rolling.counts(["g1"], by_host) == [2]
