"""The firewall's rule for dask_firewall_open_ports (issue 64, ports opened by a list that should never hold them):
every port a host's model takes is classed (features/firewall.py: UNAUTHENTICATED or AUTHENTICATED), and an open
port anywhere in the span of a listener without authentication is refused, naming the host's setting and the port;
its neighbours pass. The ports are enumerated from the models of hosts with every feature on, so a listener added
later is covered (or fails the first test) when it is added."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils import checks
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils import model as cluster_model
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils import settings as typing
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.features import firewall

ROOT = Path(__file__).resolve().parents[2]
SPECS = typing.role_specs(str(ROOT / "roles"))
GPU = {"index": 0, "uuid": "GPU-8ee11e14-577c-123d-6055-3792f1f36de5", "name": "NVIDIA H200", "memory_mib": 143771}
GPUS = {"count": 2, "driver_version": "580.159.04", "driver_major": 580, "vcpus": 32, "memory_bytes": 256 * 2 ** 30,
        "gpus": [GPU, {**GPU, "index": 1, "uuid": "GPU-a5a3d0c8-0000-0000-0000-000000000001"}]}
GROUPS = {"all": ["s1", "g1"], "dask_scheduler": ["s1"], "dask_cuda_workers": ["g1"], "dask_cpu_workers": [],
          "dask_workers": ["g1"], "dask_cluster": ["s1", "g1"]}
FACTS = {"default_ipv4": {"address": "10.0.0.6"}, "all_ipv4_addresses": ["10.0.0.6"]}
BASE = {"dask_rapids_release": "26.10", "dask_cuda_major": "13", "dask_image_profile": "lean",
        "dask_base_image": "debian:bookworm-slim", "dask_repo_dir": str(ROOT), "dask_controller_dir": "/ctl",
        "dask_firewall_enabled": True}
# Every feature that takes a port on, with the transport whose workers listen on UCX.
EVERYTHING = {"dask_monitoring_enabled": True, "dask_notebook_enabled": True, "dask_autoscale_enabled": True,
              "dask_images_distribution": "cluster-registry", "dask_transport": "tls-ucx"}


def settings(**values: Any) -> dict[str, Any]:
    return typing.resolve({**BASE, **values}, SPECS)


def ports(host: str, **values: Any) -> dict[str, list[int]]:
    model = cluster_model.host_model(host, settings(**values), FACTS, GPUS if host == "g1" else {}, GROUPS)
    return {str(name): list(span) for name, span in model["ports"].items()}


def problems(host: str, **values: Any) -> list[str]:
    return checks.problems({"host": host, "settings": settings(**values), "specs": SPECS, "groups": GROUPS,
                            "facts": FACTS, "gpus": GPUS if host == "g1" else {}, "set": sorted({**BASE, **values}),
                            "pins": ["rapids-26.10-cuda13.txt"], "inventory_checks": True})


def taken() -> list[tuple[str, str, list[int]]]:
    """(host, setting, span) for every port the two hosts' models take with every feature on."""
    return [(host, name, span) for host in ("s1", "g1") for name, span in ports(host, **EVERYTHING).items()]


def test_every_port_a_model_takes_is_classed() -> None:
    classed = {name for name, _ in firewall.UNAUTHENTICATED} | set(firewall.AUTHENTICATED)
    names = {name for _, name, _ in taken()}
    assert len(names) >= 9, names  # the enumeration reaches the features' ports, not only the core's
    assert names <= classed, f"ports without a class in features/firewall.py: {sorted(names - classed)}"


@pytest.mark.parametrize(("host", "name", "span"),
                         [case for case in taken() if firewall.exposed_without_login(
                             case[1], {"ucx_every_address": True}, lambda _: None)],
                         ids=lambda value: str(value))
def test_each_port_of_a_listener_without_login_is_refused(host: str, name: str, span: list[int]) -> None:
    for port in sorted({span[0], span[1]}):  # each end of a range: the second GPU's worker too
        found = [p for p in problems(host, **EVERYTHING, dask_firewall_open_ports=[22, port]) if name in p]
        assert found and f"dask_firewall_open_ports (22, {port})" in found[0], (host, name, port, found)


def test_the_workers_tls_ports_may_be_open_and_their_ucx_ports_may_not() -> None:
    opened = {"dask_worker_port_range": "40000:40001", "dask_firewall_open_ports": [22, 40001]}
    assert not [p for p in problems("g1", **opened) if "dask_worker_port_range" in p]
    found = [p for p in problems("g1", **opened, dask_transport="tls-ucx") if "dask_worker_port_range" in p]
    assert found and "40001 of dask_worker_port_range (40000-40001)" in found[0], found


def test_an_acknowledged_listener_and_ssh_pass() -> None:
    assert problems("s1", dask_firewall_open_ports=[22, 8787], dask_dashboard_exposed_ack=True) == []
    assert problems("g1", dask_firewall_open_ports=[22]) == []
