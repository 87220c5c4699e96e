"""Feature `firewall` (role dask_firewall, docs/transport.md): the host firewall that keeps the cluster address to
the cluster. Its checks: UCX listeners (no authentication) need it, and it must not open the scheduler, or a listener
without authentication, to all, nor let everyone in as an allowed source."""
from __future__ import annotations

import ipaddress
from typing import Any

from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.feature import CheckInput, Feature, HostInput
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
            if ack is None or inp.get(ack) is not True:
                guarded.append((name, inp.get(name)))
        for name, port in guarded:
            if port is not None and port in open_ports:
                problems.append(f"dask_firewall_open_ports ({', '.join(str(p) for p in open_ports)}) must not hold "
                                f"{name} ({port}): that port would be open to everyone. List clients in "
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


# Ports whose listeners have no authentication, and the acknowledgement that exposes each (None: none can).
UNAUTHENTICATED: tuple[tuple[str, str | None], ...] = (
    ("dask_dashboard_port", "dask_dashboard_exposed_ack"), ("dask_monitoring_port", "dask_monitoring_exposed_ack"),
    ("dask_notebook_port", "dask_notebook_exposed_ack"), ("dask_worker_http_port", None),
    ("dask_monitoring_node_exporter_port", None))


FEATURE = Feature(name="firewall", role="dask_firewall", units=(("firewall", "firewall"),), host=host, checks=checks,
                  packages=("nftables",), tag="firewall", teardown="after")
