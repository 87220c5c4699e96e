"""Feature `monitoring` (role dask_monitoring, docs/monitoring.md): Prometheus on the monitoring host, node
exporter on every host, the workers' /metrics on fixed ports. Its model part is `dask_cluster.monitoring` and the
workers' HTTP bind address; its checks are the exposure acknowledgement, a scheduler Prometheus cannot reach, and
its extra scrape jobs."""
from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any

from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.feature import (
    CheckInput,
    ClusterInput,
    Feature,
    HostInput,
    exposed_without_ack,
    group,
    scheduler_host,
)
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.options import show
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.ports import span

OUR_JOBS = ("prometheus", "dask-scheduler", "dask-workers", "node", "dcgm")


def enabled(settings: Mapping[str, Any]) -> bool:
    return settings.get("dask_monitoring_enabled") is True


def monitoring_host(groups: Mapping[str, Any]) -> str:
    """Where Prometheus runs: the host of group dask_monitoring, else the scheduler host."""
    return (group(groups, "dask_monitoring") or [scheduler_host(groups)])[0]


def scheduler_http_host(settings: Mapping[str, Any], scheduler_address: str) -> str:
    """The address the scheduler's HTTP server (dashboard, /health, /metrics) answers on for a local reader."""
    bind = str(settings.get("dask_dashboard_bind") or "127.0.0.1")
    if bind == "0.0.0.0":  # noqa: S104 - reading the setting, not binding
        return scheduler_address or "127.0.0.1"
    return bind


def host(inp: HostInput) -> dict[str, Any]:
    """The workers' HTTP servers bind the cluster address when Prometheus scrapes them, else loopback; the ports
    node exporter and Prometheus take."""
    on = enabled(inp.settings)
    ports: dict[str, list[int]] = {}
    services: dict[str, int] = {}
    node_port = int(inp.settings.get("dask_monitoring_node_exporter_port") or 0)
    if on and node_port:
        ports["dask_monitoring_node_exporter_port"] = span(node_port)
        services["prometheus-node-exporter"] = node_port
    if on and inp.name == monitoring_host(inp.groups):
        ports["dask_monitoring_port"] = span(inp.settings["dask_monitoring_port"])
        services["prometheus"] = int(inp.settings["dask_monitoring_port"])
    # Node exporter is one package per host: clusters that agree on its port share it.
    claims = {"shared_services": ["prometheus-node-exporter"], "shared_ports": ["dask_monitoring_node_exporter_port"]}
    return {"http_bind": inp.model.get("bind_address") if on else "127.0.0.1", "ports": ports, "services": services,
            "claims": claims if on else {}}


def _static(target: str, **labels: str) -> dict[str, Any]:
    """One Prometheus static_config: a target and its labels."""
    return {"targets": [target], "labels": labels}


def cluster(inp: ClusterInput) -> dict[str, Any]:
    """What Prometheus scrapes, as static_configs per job: the scheduler's /metrics (dask-scheduler), every worker's
    /metrics on its fixed port (dask-workers), node exporter on every cluster host (node) and dcgm-exporter on GPU
    hosts when its port is set (dcgm). Every target is labelled with its host (inventory name); a worker also with
    its position on the host and its mode (gpu, cpu). scheduler_target is '' when the scheduler's /metrics cannot
    be reached from the monitoring host (loopback)."""
    settings, hosts = inp.settings, inp.hosts
    where = monitoring_host(inp.groups)
    scheduler_ip = (hosts.get(inp.scheduler) or {}).get("bind_address", "")
    http_host = scheduler_http_host(settings, scheduler_ip)
    if where != inp.scheduler and http_host.startswith("127."):  # loopback answers only on the scheduler's host
        http_host = ""
    scheduler_target = f"{http_host}:{int(settings['dask_dashboard_port'])}" if http_host else ""
    node_port = int(settings.get("dask_monitoring_node_exporter_port") or 0)
    dcgm_port = int(settings.get("dask_monitoring_dcgm_exporter_port") or 0)
    jobs: dict[str, list[dict[str, Any]]] = {
        "dask-scheduler": [_static(scheduler_target, host=inp.scheduler)] if scheduler_target else [],
        "dask-workers": [], "node": [], "dcgm": []}
    for name in inp.members:
        model = hosts.get(name) or {}
        address = str(model.get("bind_address") or "")
        for index, port in enumerate(model.get("http_ports") or []):
            jobs["dask-workers"].append(_static(f"{model.get('http_bind') or address}:{port}", host=name,
                                                worker=str(index), mode=str(model.get("worker_mode") or "")))
        if node_port and address:
            jobs["node"].append(_static(f"{address}:{node_port}", host=name))
        if dcgm_port and address and model.get("worker_mode") == "gpu":
            jobs["dcgm"].append(_static(f"{address}:{dcgm_port}", host=name))
    listen = "{}:{}".format(settings.get("dask_monitoring_listen_address") or "127.0.0.1",
                            settings.get("dask_monitoring_port") or 9090)
    return {"monitoring": {"enabled": enabled(settings), "host": where, "listen": listen,
                           "scheduler_target": scheduler_target,
                           "jobs": {name: configs for name, configs in jobs.items() if configs}}}


def checks(inp: CheckInput) -> list[str]:
    """Prometheus exposed without its acknowledgement, a scheduler /metrics the monitoring host cannot reach,
    extra scrape jobs without a name of their own."""
    if inp.get("dask_monitoring_enabled") is not True:
        return []
    problems: list[str] = []
    listen = exposed_without_ack(inp.get, "dask_monitoring_listen_address", "dask_monitoring_exposed_ack")
    if listen:
        problems.append(f"dask_monitoring_listen_address={listen} exposes Prometheus's UI and API, which have no "
                        "authentication, beyond this host. Keep 127.0.0.1 and use an SSH tunnel, or set "
                        "dask_monitoring_exposed_ack: true to accept that.")
    where = inp.cluster.get("monitoring", {}).get("host") or monitoring_host(inp.groups)
    bind = inp.get("dask_dashboard_bind")
    if inp.is_scheduler and where and where != inp.host and bind is not None \
            and ipaddress.IPv4Address(bind).is_loopback:
        problems.append(
            f"dask_monitoring_enabled with Prometheus on {where} (group dask_monitoring) cannot scrape the "
            f"scheduler's /metrics: dask_dashboard_bind={bind} answers on this host only. Put the scheduler "
            "host in dask_monitoring, or bind the dashboard to the cluster address (dask_dashboard_bind, "
            "dask_dashboard_exposed_ack; the firewall keeps it to the cluster's hosts).")
    names: list[str] = []
    for index, entry in enumerate(inp.get("dask_monitoring_extra_scrape_configs") or []):
        job = entry.get("job_name") if isinstance(entry, Mapping) else None
        if not isinstance(job, str) or not job or job in OUR_JOBS or job in names:
            problems.append(f"dask_monitoring_extra_scrape_configs[{index}] needs a job_name of its own (a string, "
                            f"not {', '.join(OUR_JOBS)} or another entry's); it has {show(job)}")
        names.append(str(job))
    return problems


def image_needs(cluster: Mapping[str, Any], settings: Mapping[str, Any]) -> dict[str, list[tuple[str, str]]]:
    """The scheduler's and the workers' /metrics."""
    if not enabled(settings):
        return {}
    return {"worker": [("prometheus_client", "dask_monitoring_enabled=true (the workers' /metrics)")],
            "scheduler": [("prometheus_client", "dask_monitoring_enabled=true (the scheduler's /metrics)")]}


FEATURE = Feature(name="monitoring", role="dask_monitoring", host=host, cluster=cluster, checks=checks,
                  packages=("prometheus", "prometheus-node-exporter"),
                  paths=("/etc/prometheus", "/etc/default/prometheus", "/etc/default/prometheus-node-exporter"),
                  tag="monitoring", image_needs=image_needs, teardown="after")
