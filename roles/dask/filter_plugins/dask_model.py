"""The cluster model: every derived fact of a deployment, computed once per run from the resolved settings,
the inventory's groups and each host's facts. Published by the `dask` role as `dask_settings`, `dask_host`
(per host) and `dask_cluster` (the same on every host); every role, playbook and test reads these.

Pure functions with no Ansible imports beyond the filter registration, so tests call them directly.
"""
from __future__ import annotations

from typing import Any

WORKER_GROUPS = ("dask_cuda_workers", "dask_cpu_workers")
# The Dockerfile's targets: one image each.
TARGETS = ("scheduler", "worker")
# Paths inside the containers (the images' layout): one place.
CONTAINER_PATHS = {"tls": "/etc/dask/tls", "local": "/var/lib/dask", "reports": "/var/lib/dask-reports"}


def resolve_settings(provided: dict[str, Any], specs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Every variable of every role's argument spec: the value set for the host, else the spec's default."""
    settings: dict[str, Any] = {}
    for options in specs.values():
        for name, spec in options.items():
            if name in provided:
                settings[name] = provided[name]
            elif "default" in spec:
                settings[name] = spec["default"]
    return settings


def _group(groups: dict[str, list[str]], name: str) -> list[str]:
    return list(groups.get(name) or [])


def worker_hosts(groups: dict[str, list[str]]) -> list[str]:
    """GPU and CPU worker hosts, GPU hosts first, each once (inventory order)."""
    hosts: list[str] = []
    for name in WORKER_GROUPS:
        hosts += [host for host in _group(groups, name) if host not in hosts]
    return hosts


def cluster_hosts(groups: dict[str, list[str]]) -> list[str]:
    hosts = _group(groups, "dask_scheduler")
    return hosts + [host for host in worker_hosts(groups) if host not in hosts]


def bind_address(settings: dict[str, Any], facts: dict[str, Any]) -> str:
    """The IPv4 address Dask binds to and advertises on a host ('' when none is found)."""
    if settings.get("dask_cluster_address"):
        return str(settings["dask_cluster_address"])
    interface = str(settings.get("dask_cluster_interface") or "")
    if interface:
        found = facts.get(interface.replace("-", "_")) or {}
        return str((found.get("ipv4") or {}).get("address") or "")
    return str((facts.get("default_ipv4") or {}).get("address") or "")


def host_model(host: str, settings: dict[str, Any], facts: dict[str, Any], gpus: dict[str, Any],
               groups: dict[str, list[str]]) -> dict[str, Any]:
    """What one host runs and how: its address, its worker mode, count and threads."""
    is_cuda = host in _group(groups, "dask_cuda_workers")
    is_worker = host in worker_hosts(groups)
    gpu_count = int(gpus.get("count") or 0)
    mode = ("gpu" if is_cuda and gpu_count > 0 else "cpu") if is_worker else ""
    selected = [str(gpu) for gpu in settings.get("dask_worker_gpus") or []]
    count = (len(selected) or gpu_count) if mode == "gpu" else (1 if mode == "cpu" else 0)
    nthreads = int(settings.get("dask_worker_nthreads") or 0)
    if nthreads <= 0:
        nthreads = 1 if mode == "gpu" else int(facts.get("processor_vcpus") or 1)
    return {
        "name": host,
        "bind_address": bind_address(settings, facts),
        "scheduler": host in _group(groups, "dask_scheduler"),
        "worker": is_worker,
        "worker_mode": mode,
        "worker_count": count,
        "worker_nthreads": nthreads if is_worker else 0,
        "gpu_count": gpu_count,
        "gpus": gpus.get("gpus") or [],
        "driver_version": gpus.get("driver_version"),
        "needs_toolkit": mode == "gpu",
    }


# dask_transport: (the protocol clients use to reach the scheduler, the protocol of the scheduler-worker and
# worker-worker connections). See docs/transport.md.
TRANSPORTS = {"tls": ("tls", "tls"), "tls-ucx": ("tls", "ucx"), "ucx": ("ucx", "ucx"), "tcp": ("tcp", "tcp")}
# Hosts with this many GPUs or more want device data to move over UCX (NVLink), not TCP.
MULTI_GPU = 2


def transport(settings: dict[str, Any]) -> tuple[str, str]:
    """(client protocol, worker protocol) of the settings' dask_transport."""
    return TRANSPORTS[str(settings.get("dask_transport") or "tls")]


def protocol(settings: dict[str, Any]) -> str:
    """The protocol of the scheduler-worker and worker-worker connections."""
    return transport(settings)[1]


def advice(host: dict[str, Any], settings: dict[str, Any]) -> list[str]:
    """What the host's hardware wants from the settings (printed, never refused)."""
    if host.get("worker_mode") == "gpu" and host.get("worker_count", 0) >= MULTI_GPU and protocol(settings) != "ucx":
        return [f"host {host['name']}: {host['worker_count']} GPU workers talk over TCP (dask_transport="
                f"{settings.get('dask_transport', 'tls')}); graphs that move data between GPUs ran 10-100 times "
                "slower than over UCX on 4 x H200 (docs/performance.md). Set dask_transport: tls-ucx to move data "
                "over NVLink while clients keep mutual TLS (docs/transport.md)."]
    return []


def cluster_model(settings: dict[str, Any], hosts: dict[str, dict[str, Any]], groups: dict[str, list[str]],
                  image_hash: str) -> dict[str, Any]:
    """Cluster-wide facts, from the scheduler host's settings and every host's model.

    A worker host without a model (unreachable when the facts were gathered) is expected with one worker,
    so that verification names it rather than skipping it.
    """
    scheduler = _group(groups, "dask_scheduler")[0]
    workers = worker_hosts(groups)
    counts = {host: int((hosts.get(host) or {}).get("worker_count", 1)) for host in workers}
    modes = {host: (hosts.get(host) or {}).get("worker_mode", "") for host in workers}
    scheduler_ip = (hosts.get(scheduler) or {}).get("bind_address", "")
    client_proto, proto = transport(settings)
    worker_port = int(settings["dask_scheduler_ucx_port"] if client_proto != proto else settings["dask_scheduler_port"])
    tag = "{}-cuda{}-{}-{}".format(settings["dask_rapids_release"], settings["dask_cuda_major"],
                                   settings["dask_image_profile"], image_hash)
    prefix = (str(settings["dask_images_registry"]) + "/"
              if settings.get("dask_images_distribution") == "registry" else "")
    return {
        "name": settings["dask_cluster_name"],
        "transport": str(settings.get("dask_transport") or "tls"),
        "protocol": proto,
        "tls": client_proto == "tls",
        "scheduler_host": scheduler,
        "scheduler_address": f"{client_proto}://{scheduler_ip}:{settings['dask_scheduler_port']}",
        "worker_scheduler_address": f"{proto}://{scheduler_ip}:{worker_port}",
        "scheduler_port": int(settings["dask_scheduler_port"]),
        "scheduler_ucx_port": int(settings["dask_scheduler_ucx_port"]) if client_proto != proto else None,
        "dashboard_port": int(settings["dask_dashboard_port"]),
        "dashboard_bind": settings["dask_dashboard_bind"],
        "hosts": {host: (hosts.get(host) or {}).get("bind_address", "") for host in cluster_hosts(groups)},
        "worker_hosts": workers,
        "gpu_hosts": [host for host in workers if modes[host] == "gpu"],
        "cpu_hosts": [host for host in workers if modes[host] != "gpu"],
        "workers_per_host": counts,
        "expected_workers": sum(counts.values()),
        "expected_gpus": sum(counts[host] for host in workers if modes[host] == "gpu"),
        "images": {"tag": tag, "repositories": {target: f"{prefix}dask-gpu-{target}" for target in TARGETS},
                   "scheduler": f"{prefix}dask-gpu-scheduler:{tag}", "worker": f"{prefix}dask-gpu-worker:{tag}",
                   "build_args": {"BASE_IMAGE": settings["dask_base_image"],
                                  "RAPIDS_RELEASE": settings["dask_rapids_release"],
                                  "CUDA_MAJOR": settings["dask_cuda_major"],
                                  "PROFILE": settings["dask_image_profile"]},
                   "pins": "{}/images/pins/rapids-{}-cuda{}.txt".format(
                       settings["dask_repo_dir"], settings["dask_rapids_release"], settings["dask_cuda_major"])},
        "paths": {"config": settings["dask_config_dir"], "data": settings["dask_data_dir"],
                  "controller": settings["dask_controller_dir"], "repo": settings["dask_repo_dir"],
                  "container": dict(CONTAINER_PATHS)},
        "uid": int(settings["dask_container_uid"]),
        "gid": int(settings["dask_container_gid"]),
    }


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"dask_resolve_settings": resolve_settings, "dask_host_model": host_model,
                "dask_cluster_model": cluster_model, "dask_cluster_hosts": cluster_hosts, "dask_advice": advice,
                "dask_worker_hosts": worker_hosts}
