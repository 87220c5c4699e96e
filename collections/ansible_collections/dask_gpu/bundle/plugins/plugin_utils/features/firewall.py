"""Feature `firewall` (role dask_firewall, docs/transport.md): the host firewall that keeps the cluster address to
the cluster. Its checks: UCX listeners (no authentication) need it, and it must not open the scheduler, or a listener
without authentication, to all, nor let everyone in as an allowed source."""
from __future__ import annotations

import ipaddress
from collections.abc import Callable, Mapping
from typing import Any

from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.feature import CheckInput, Feature, HostInput
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.options import as_mapping
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.ports import describe
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.transport import facets


def host(inp: HostInput) -> dict[str, Any]:
    """The cluster's record says whether its firewall is on (the clusters of a host must agree: records.py)."""
    return {"claims": {"firewall": inp.settings.get("dask_firewall_enabled") is True}}


def checks(inp: CheckInput) -> list[str]:
    problems: list[str] = []
    transport = inp.get("dask_transport")
    decoded = facets(str(transport or "tls"))
    address = inp.model.get("bind_address") or "the cluster address"
    if decoded["ucx_every_address"] and inp.get("dask_firewall_enabled") is not True:
        problems.append(f"dask_transport={transport} needs dask_firewall_enabled: true: UCX listeners have no "
                        f"authentication, and the firewall is what lets only the cluster's hosts reach {address} "
                        "(docs/transport.md)")
    open_ports = inp.get("dask_firewall_open_ports")
    if inp.get("dask_firewall_enabled") is True and open_ports is not None:
        guarded: list[tuple[str, Any]] = [("dask_scheduler_port", inp.get("dask_scheduler_port"))]
        if decoded["scheduler_second_listener"]:
            guarded.append(("dask_scheduler_ucx_port", inp.get("dask_scheduler_ucx_port")))
        # Listeners without authentication: open to everyone only with the acknowledgement that exposes them
        # (the workers' /metrics and node exporter have none).
        for name, ack in UNAUTHENTICATED:
            if name != "dask_scheduler_ucx_port" and (ack is None or inp.get(ack) is not True):  # that one: above
                guarded.append((name, inp.get(name)))
        named = set()
        for name, port in guarded:
            if port is not None and port in open_ports:
                named.add(name)
                problems.append(f"dask_firewall_open_ports ({', '.join(str(p) for p in open_ports)}) must not hold "
                                f"{name} ({port}): that port would be open to everyone. List clients in "
                                "dask_firewall_allowed_sources instead.")
        # Every port this host's model takes (the core's and each feature's, ranges whole), by the rule of its class.
        for name, span in as_mapping(inp.model.get("ports")).items():
            if name in named or not exposed_without_login(name, decoded, inp.get):
                continue
            hits = [port for port in open_ports if isinstance(port, int) and span[0] <= port <= span[1]]
            if hits:
                problems.append(f"dask_firewall_open_ports ({', '.join(str(p) for p in open_ports)}) must not hold "
                                f"{', '.join(str(p) for p in hits)} of {describe(name, list(span))}: its listener "
                                "takes no certificate, so the port would be open to everyone. List clients in "
                                "dask_firewall_allowed_sources instead.")
    for source in (str(item) for item in inp.get("dask_firewall_allowed_sources") or []):
        try:
            everyone = ipaddress.ip_network(source, strict=False).prefixlen == 0
        except ValueError:
            continue  # reported by the option's own check
        if everyone and inp.get("dask_firewall_enabled") is True:
            problems.append(f"dask_firewall_allowed_sources holds {source}, which is everyone: every port of the "
                            "cluster would be open to all, as with no firewall. List your clients' networks")
    return problems


# Every port a host's model takes is in one of two classes (tests/unit/test_firewall_ports.py fails for a port the
# model lists that is in neither, so a new listener is classed when it is added). Listeners without authentication
# (HTTP without a login, JupyterLab's token, UCX), with the acknowledgement that exposes each (None: none can):
UNAUTHENTICATED: tuple[tuple[str, str | None], ...] = (
    ("dask_dashboard_port", "dask_dashboard_exposed_ack"), ("dask_monitoring_port", "dask_monitoring_exposed_ack"),
    ("dask_notebook_port", "dask_notebook_exposed_ack"), ("dask_worker_http_port", None),
    ("dask_monitoring_node_exporter_port", None), ("dask_autoscale_metrics_port", None),
    ("dask_scheduler_ucx_port", None))
# Listeners that take only the cluster's certificates (mutual TLS): the scheduler and the workers over tls (the
# scheduler's port stays closed to all anyway), the autoscaler's port for its agents, the cluster's registry. The
# workers' ports are UCX, without authentication, where the transport makes them so.
AUTHENTICATED = ("dask_scheduler_port", "dask_worker_port_range", "dask_autoscale_port", "dask_images_registry_port")


def exposed_without_login(name: str, decoded: Mapping[str, Any], get: Callable[[str], Any]) -> bool:
    """Whether opening the port named to everyone would expose a listener without authentication, as its class and
    the transport say (an acknowledged one aside)."""
    if name == "dask_worker_port_range":
        return bool(decoded["ucx_every_address"])
    acks = dict(UNAUTHENTICATED)
    if name not in acks:
        return False
    ack = acks[name]
    return ack is None or get(ack) is not True


FEATURE = Feature(name="firewall", role="dask_firewall", units=(("firewall", "firewall"),), host=host, checks=checks,
                  packages=("nftables",), tag="firewall", teardown="after")
