"""Feature `firewall` (role dask_firewall, docs/transport.md): the host firewall that keeps the cluster address to
the cluster. Its checks: UCX listeners (no authentication) need it, and it must not open the scheduler to all."""
from __future__ import annotations

from typing import Any

from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.feature import CheckInput, Feature, HostInput


def host(inp: HostInput) -> dict[str, Any]:
    """The cluster's record says whether its firewall is on (the clusters of a host must agree: records.py)."""
    return {"claims": {"firewall": inp.settings.get("dask_firewall_enabled") is True}}


def checks(inp: CheckInput) -> list[str]:
    problems: list[str] = []
    transport = inp.get("dask_transport")
    address = inp.model.get("bind_address") or "the cluster address"
    if transport in ("ucx", "tls-ucx") and inp.get("dask_firewall_enabled") is not True:
        problems.append(f"dask_transport={transport} needs dask_firewall_enabled: true: UCX listeners have no "
                        f"authentication, and the firewall is what lets only the cluster's hosts reach {address} "
                        "(docs/transport.md)")
    open_ports = inp.get("dask_firewall_open_ports")
    if inp.get("dask_firewall_enabled") is True and open_ports is not None:
        guarded: list[tuple[str, Any]] = [("dask_scheduler_port", inp.get("dask_scheduler_port"))]
        if transport == "tls-ucx":
            guarded.append(("dask_scheduler_ucx_port", inp.get("dask_scheduler_ucx_port")))
        for name, port in guarded:
            if port is not None and port in open_ports:
                problems.append(f"dask_firewall_open_ports ({', '.join(str(p) for p in open_ports)}) must not hold "
                                f"{name} ({port}): that port would be open to everyone. List clients in "
                                "dask_firewall_allowed_sources instead.")
    return problems


FEATURE = Feature(name="firewall", role="dask_firewall", host=host, checks=checks)
