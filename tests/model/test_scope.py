"""Cluster-wide options (their argument spec's 'Scope: cluster' item) are read from the scheduler host: a host that
gives one another value is refused naming the host, the variable and both values, where before the value was
checked and then silently ignored (issue 40: a worker's host_vars with dask_transport tls-ucx deployed tls)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils import checks, options
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils import settings as typing

ROOT = Path(__file__).resolve().parents[2]
SPECS = typing.role_specs(str(ROOT / "roles"))
GROUPS = {"all": ["s1", "c1", "c2"], "dask_scheduler": ["s1"], "dask_cuda_workers": [],
          "dask_cpu_workers": ["c1", "c2"], "dask_workers": ["c1", "c2"], "dask_cluster": ["s1", "c1", "c2"]}
BASE = {"dask_rapids_release": "26.10", "dask_cuda_major": "13", "dask_image_profile": "lean",
        "dask_base_image": "debian:bookworm-slim", "dask_repo_dir": str(ROOT), "dask_controller_dir": "/ctl"}


def hosts_problems(per_host: dict[str, dict[str, Any]]) -> list[str]:
    given = {host: {**BASE, **per_host.get(host, {})} for host in GROUPS["all"]}
    hostvars = {host: {"ansible_facts": {"default_ipv4": {"address": f"10.0.0.{index}"},
                                         "all_ipv4_addresses": [f"10.0.0.{index}"]},
                       "gpu_facts_found": {"count": 0, "vcpus": 8}}
                for index, host in enumerate(GROUPS["all"], start=2)}
    return checks.hosts_problems(GROUPS["all"], hostvars, {
        "specs": SPECS, "groups": GROUPS, "pins": ["rapids-26.10-cuda13.txt"], "given": given,
        "given_names": {host: sorted(values) for host, values in per_host.items()}})


def test_the_cluster_wide_options_are_marked_in_their_specs() -> None:
    scoped = {name for role in SPECS.values() for name, spec in role.items() if options.cluster_scoped(spec)}
    assert {"dask_transport", "dask_scheduler_port", "dask_cluster_name", "dask_image_profile",
            "dask_tls_cert_valid_days", "dask_dataframe_partition_size"} <= scoped
    assert not {name for name in scoped if name.startswith(("dask_worker_", "gpu_facts_", "docker_engine_"))}


@pytest.mark.parametrize(("values", "expected"), [
    ({"dask_transport": "tls-ucx", "dask_firewall_enabled": True},
     'host c1: dask_transport ("tls-ucx") differs from the cluster\'s ("tls", as the scheduler host s1 has it)'),
    ({"dask_scheduler_port": "9999"}, "host c1: dask_scheduler_port (9999) differs from the cluster's (8786"),
    ({"dask_dataframe_partitions_per_worker": 2}, "host c1: dask_dataframe_partitions_per_worker (2) differs"),
], ids=["transport", "scheduler port given as a string", "partitions per worker"])
def test_a_worker_host_with_its_own_value_of_a_cluster_wide_option_is_refused(values: dict[str, Any],
                                                                           expected: str) -> None:
    found = hosts_problems({"c1": values})
    assert [problem for problem in found if expected in problem], found
    assert not [problem for problem in found if problem.startswith(("host s1:", "host c2:"))], found


def test_the_same_value_everywhere_and_per_host_options_pass() -> None:
    everywhere = {"dask_scheduler_port": 9999, "dask_transport": "tls"}
    per_host = {"dask_worker_nthreads": 3, "dask_worker_memory_limit": "2GiB"}
    assert hosts_problems({"s1": everywhere, "c1": {**everywhere, **per_host},
                           "c2": {**everywhere, "dask_scheduler_port": "9999"}}) == []
