"""A rolling restart's batches (a number of hosts, a share of the worker hosts, a cap of GPUs out at once) and its
expected time from the batches measured before (plugin_utils/rolling.py)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ansible_collections.dask_gpu.bundle.plugins.plugin_utils import rolling


def fleet(hosts: int, gpus: int = 8) -> dict[str, Any]:
    names = [f"g{index:03d}" for index in range(hosts)]
    return {"worker_hosts": names, "gpu_hosts": names, "workers_per_host": dict.fromkeys(names, gpus),
            "paths": {"controller": "/nonexistent"}}


def test_a_count_and_a_share_of_the_worker_hosts() -> None:
    cluster = fleet(100)
    pending = cluster["worker_hosts"]
    assert [len(batch) for batch in rolling.batches(pending, cluster, {"dask_worker_rolling_batch": "1"})] == [1] * 100
    by_share = rolling.batches(pending, cluster, {"dask_worker_rolling_batch": "25%"})
    assert [len(batch) for batch in by_share] == [25] * 4 and by_share[0][0] == "g000"
    # A share of a small cluster is still at least one host.
    assert rolling.batches(["g000"], fleet(3), {"dask_worker_rolling_batch": "10%"}) == [["g000"]]


def test_a_batch_never_takes_every_worker_host() -> None:
    """Their workers' data must have other workers to go to: 100 % (or more hosts than there are) leaves one out."""
    cluster = fleet(3)
    for setting in ("100%", "3", "50"):
        cut = rolling.batches(cluster["worker_hosts"], cluster, {"dask_worker_rolling_batch": setting})
        assert [len(batch) for batch in cut] == [2, 1], (setting, cut)
    assert rolling.batches(["g000"], fleet(1), {"dask_worker_rolling_batch": "100%"}) == [["g000"]]


def test_a_cap_of_gpus_out_at_once() -> None:
    cluster = fleet(10)
    cut = rolling.batches(cluster["worker_hosts"], cluster, {"dask_worker_rolling_batch": "50%",
                                                             "dask_worker_rolling_max_gpus": 16})
    assert [len(batch) for batch in cut] == [2] * 5  # 16 GPUs = two 8-GPU hosts, although 50% would be 5
    alone = rolling.batches(cluster["worker_hosts"][:2], cluster, {"dask_worker_rolling_batch": "2",
                                                                   "dask_worker_rolling_max_gpus": 4})
    assert alone == [["g000"], ["g001"]]  # a host with more GPUs than the cap goes alone


def test_the_expected_time_comes_from_the_batches_measured_before(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    reports.mkdir()
    rows = [{"retire_seconds": 3.5, "restart_seconds": 1.9, "register_seconds": 1.0},
            {"retire_seconds": 25.5, "restart_seconds": 0.3, "register_seconds": 4.2},
            {"retire_seconds": 2.7, "restart_seconds": 1.7, "register_seconds": 1.5}]
    (reports / "rolling.jsonl").write_text("\n".join(json.dumps(row) for row in rows) + "\n")
    cluster = {**fleet(100), "paths": {"controller": str(tmp_path)}}
    plan = rolling.plan(cluster["worker_hosts"], cluster, {"dask_worker_rolling_batch": "10%"})
    assert len(plan["batches"]) == 10 and plan["per_batch_s"] == 6.4 and plan["expected_s"] == 64
    assert plan["measured"] is True
    unmeasured = rolling.plan(["g000"], fleet(1), {})
    assert unmeasured["per_batch_s"] == rolling.DEFAULT_BATCH_SECONDS and unmeasured["measured"] is False


def test_hosts_the_autoscaler_released_take_no_data_and_one_host_alone_hands_nothing_over() -> None:
    """A batch leaves a host that runs workers (released hosts' units are stopped); with none left, the plan says the
    batch restarts without a retirement that could not move its data (rolling-batch.yml skips it)."""
    cluster = fleet(4)
    released = ["g002", "g003"]
    cut = rolling.batches(["g000", "g001"], cluster, {"dask_worker_rolling_batch": "100%"}, released)
    assert cut == [["g000"], ["g001"]]  # 2 hosts hold workers: a batch of 1, the other takes its data
    assert rolling.plan(["g000", "g001"], cluster, {}, released)["retire"] is True
    assert rolling.plan(["g000"], cluster, {}, ["g001", "g002", "g003"])["retire"] is False
    assert rolling.plan(["g000"], fleet(1), {})["retire"] is False
    assert rolling.plan(["g000"], fleet(2), {})["retire"] is True
