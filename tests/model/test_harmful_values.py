"""Values that do harm, refused by the checks before any host changes, each naming the host, the variable and the
value (issue 39): lifetimes and windows that cannot both hold, sizes larger than the host has, listeners or sources
that open a host to everyone (also through Docker's own daemon settings), every worker host retired at once, and an
argument that cannot be one argument. Their neighbours that are fine pass."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils import checks
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils import settings as typing

ROOT = Path(__file__).resolve().parents[2]
GPUS = {"count": 1, "driver_version": "580.159.04", "driver_major": 580, "vcpus": 16, "memory_bytes": 64 * 2 ** 30,
        "gpus": [{"index": 0, "uuid": "GPU-8ee11e14-577c-123d-6055-3792f1f36de5", "name": "NVIDIA H200",
                  "memory_mib": 143771}]}
GROUPS = {"all": ["s1", "g1"], "dask_scheduler": ["s1"], "dask_cuda_workers": ["g1"], "dask_cpu_workers": [],
          "dask_workers": ["g1"], "dask_cluster": ["s1", "g1"]}
FACTS = {"default_ipv4": {"address": "10.0.0.6"}, "all_ipv4_addresses": ["10.0.0.6"]}
SPECS = typing.role_specs(str(ROOT / "roles"))


def problems(host: str = "g1", **values: Any) -> list[str]:
    base = {"dask_rapids_release": "26.10", "dask_cuda_major": "13", "dask_image_profile": "lean",
            "dask_base_image": "debian:bookworm-slim", "dask_repo_dir": str(ROOT), "dask_controller_dir": "/ctl"}
    return checks.problems({"host": host, "settings": typing.resolve({**base, **values}, SPECS), "specs": SPECS,
                            "groups": GROUPS, "facts": FACTS, "gpus": GPUS if host == "g1" else {},
                            "set": sorted(values), "pins": ["rapids-26.10-cuda13.txt"], "inventory_checks": True})


FIREWALL = {"dask_firewall_enabled": True}


@pytest.mark.parametrize(("values", "expected"), [
    ({"dask_tls_renew_days": 825}, "dask_tls_renew_days (825) is not below dask_tls_cert_valid_days (825)"),
    ({"dask_tls_cert_valid_days": 5000}, "dask_tls_cert_valid_days (5000) is above dask_tls_ca_valid_days (3650)"),
    ({"dask_worker_memory_limit": "80GB"}, 'dask_worker_memory_limit ("80GB") for each of its 1 worker(s) is more '
                                           "than the host's memory (64.0 GiB)"),
    ({"dask_worker_shm_size": "65GiB"}, 'dask_worker_shm_size ("65GiB") is more than the host\'s memory'),
    ({"docker_engine_daemon_config": {"hosts": ["unix:///run/docker.sock", "tcp://0.0.0.0:2375"]}},
     "makes Docker's API listen on tcp://0.0.0.0:2375 without tlsverify"),
    ({"docker_engine_daemon_config": {"insecure-registries": ["0.0.0.0/0"]}},
     "docker_engine_daemon_config insecure-registries holds 0.0.0.0/0"),
    ({**FIREWALL, "dask_firewall_allowed_sources": ["10.0.0.0/8", "0.0.0.0/0"]},
     "dask_firewall_allowed_sources holds 0.0.0.0/0, which is everyone"),
    ({**FIREWALL, "dask_firewall_open_ports": [8787]}, "must not hold dask_dashboard_port (8787)"),
    ({**FIREWALL, "dask_firewall_open_ports": [8790]}, "must not hold dask_worker_http_port (8790)"),
    ({**FIREWALL, "dask_monitoring_enabled": True, "dask_firewall_open_ports": [9100]},
     "must not hold dask_monitoring_node_exporter_port (9100)"),
    ({"dask_worker_extra_args": ["--nthreads 4"]},
     "dask_worker_extra_args entry '--nthreads 4' is one argument with a space in its option name"),
    ({"dask_host_state": "retired"}, "dask_host_state=retired on every worker host (g1)"),
], ids=["renewal window as long as the lifetime", "certificates outliving their CA", "memory limits over the host's",
        "/dev/shm over the host's memory", "Docker's API on TCP without TLS", "every registry insecure",
        "everyone as an allowed source", "dashboard port open to all", "workers' metrics open to all",
        "node exporter open to all", "two arguments in one", "every worker host retired"])
def test_a_harmful_value_is_refused_naming_host_variable_and_value(values: dict[str, Any], expected: str) -> None:
    found = problems(**values)
    assert [problem for problem in found if expected in problem], found


@pytest.mark.parametrize("values", [
    {"dask_tls_renew_days": 824},
    {"dask_tls_cert_valid_days": 3650},
    {"dask_worker_memory_limit": "64GB"},
    {"dask_worker_shm_size": "16GiB"},
    {"docker_engine_daemon_config": {"hosts": ["unix:///run/docker.sock", "tcp://10.0.0.6:2376"], "tlsverify": True}},
    {"docker_engine_daemon_config": {"insecure-registries": ["10.0.0.0/24"]}},
    {**FIREWALL, "dask_firewall_allowed_sources": ["10.0.0.0/8"]},
    {**FIREWALL, "dask_firewall_open_ports": [8787], "dask_dashboard_exposed_ack": True},
    {"dask_worker_extra_args": ["--resources=GPU=1 MEM=2", "--lifetime", "1 hour"]},
], ids=["renewal a day before expiry", "certificates as long as the CA", "memory limits within the host's",
        "/dev/shm within it", "Docker's API with TLS", "a named insecure network", "a network as allowed source",
        "an exposed dashboard with its acknowledgement", "values with spaces"])
def test_their_neighbours_pass(values: dict[str, Any]) -> None:
    assert problems(**values) == []
