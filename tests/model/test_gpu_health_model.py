"""Unfit GPUs in the cluster model (the probe's judgement by UUID, docs/gpu-health.md): left out of the workers by
default (the spec's devices and the expected worker count follow), kept with dask_worker_gpu_health ignore; the
NVLinks a GPU had when the record first saw it are kept in the record."""
from __future__ import annotations

from typing import Any

from ansible_collections.dask_gpu.bundle.plugins.plugin_utils import model, spec
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils import settings as typing
from test_records import FACTS, GROUPS, H200, raw, specs

UUID0, UUID1 = (gpu["uuid"] for gpu in H200["gpus"])


def probe(**health: dict[str, Any]) -> dict[str, Any]:
    fit = {"healthy": True, "problems": [], "notes": [], "nvlink_active": 18}
    judged = {UUID0: {**fit, "index": 0}, UUID1: {**fit, "index": 1}}
    for uuid, changes in health.items():
        judged[uuid].update(changes)
    return {**H200, "health": judged, "health_error": None}


def hosts(gpus: dict[str, Any], facts: dict[str, Any] = FACTS, **values: Any) -> dict[str, Any]:
    settings = typing.typed(raw(**values), specs(), GROUPS["all"]).settings
    found = {name: model.host_model(name, settings, facts, gpus if name == "g1" else {}, GROUPS)
             for name in ("s1", "g1")}
    return {"settings": settings, "hosts": found, "cluster": model.cluster_model(settings, found, GROUPS, "abc")}


def test_an_unfit_gpu_gets_no_worker_and_the_count_follows() -> None:
    unfit = probe(**{UUID1: {"healthy": False, "problems": ["2 uncorrectable ECC errors since the driver loaded"]}})
    built = hosts(unfit)
    g1 = built["hosts"]["g1"]
    assert [gpu["uuid"] for gpu in g1["worker_gpus"]] == [UUID0] and g1["worker_count"] == 1
    assert g1["gpus_left_out"] and g1["gpus_unfit"][0]["uuid"] == UUID1
    assert built["cluster"]["expected_gpus"] == 1 and built["cluster"]["workers_per_host"]["g1"] == 1
    worker = spec.worker_spec(built["cluster"], g1, built["settings"])
    assert worker["gpus"] == "0"  # the container gets the fit GPU only
    assert any("is left out, unfit for work" in line for line in model.advice(g1, built["settings"]))
    kept = hosts(unfit, dask_worker_gpu_health="ignore")["hosts"]["g1"]
    assert kept["worker_count"] == 2 and not kept["gpus_left_out"]


def test_every_gpu_fit_keeps_all_and_the_record_keeps_the_first_nvlink_count() -> None:
    g1 = hosts(probe())["hosts"]["g1"]
    assert g1["worker_gpus_all"] and g1["worker_count"] == 2
    assert g1["record"]["claims"]["gpu_nvlinks"] == {UUID0: 18, UUID1: 18}
    recorded = {**FACTS, "ansible_local": {"dask_cluster_dask": {"name": "dask", "gpu_nvlinks": {UUID1: 18}}}}
    later = hosts(probe(**{UUID1: {"nvlink_active": 17}}), facts=recorded)["hosts"]["g1"]
    assert later["record"]["claims"]["gpu_nvlinks"] == {UUID0: 18, UUID1: 18}


def test_every_hosts_advice_in_one_task_names_each_host() -> None:
    """model.yml prints every host's advice in one controller task (hosts_advice): the lines of advice() for each host
    in order, each naming its host (no second prefix)."""
    unfit = probe(**{UUID1: {"healthy": False, "problems": ["2 uncorrectable ECC errors since the driver loaded"]}})
    built = hosts(unfit)
    hostvars = {name: {"dask_host": host, "dask_settings": built["settings"]} for name, host in built["hosts"].items()}
    lines = model.hosts_advice(["s1", "g1"], hostvars)
    assert lines == [line for name in ("s1", "g1") for line in model.advice(built["hosts"][name], built["settings"])]
    assert lines and all(line.startswith("host g1: ") for line in lines if "left out" in line)
