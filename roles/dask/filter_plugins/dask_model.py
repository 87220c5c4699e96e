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


def monitoring_enabled(settings: dict[str, Any]) -> bool:
    return settings.get("dask_monitoring_enabled") is True


def monitoring_host(groups: dict[str, list[str]]) -> str:
    """Where Prometheus runs: the host of group dask_monitoring, else the scheduler host."""
    return (_group(groups, "dask_monitoring") or _group(groups, "dask_scheduler") or [""])[0]


def registry_model(settings: dict[str, Any], hosts: dict[str, dict[str, Any]], groups: dict[str, list[str]],
                   scheduler: str, members: list[str]) -> dict[str, Any] | None:
    """The registry of dask_images_distribution=cluster-registry (None for the other distributions): the cluster
    host that runs it (dask_images_registry_host, else the scheduler host), its address on the cluster address,
    and the host that pushes the images to it: the build host when that is a cluster host (the controller then
    sends no image bytes), else the registry host itself, which gets the archive from the controller."""
    if settings.get("dask_images_distribution") != "cluster-registry":
        return None
    host = str(settings.get("dask_images_registry_host") or scheduler)
    build = str(settings.get("dask_images_build_host") or "localhost")
    address = f"{(hosts.get(host) or {}).get('bind_address', '')}:{int(settings['dask_images_registry_port'])}"
    return {"host": host, "address": address, "port": int(settings["dask_images_registry_port"]),
            "push_host": build if build in members else host}


def scheduler_http_host(settings: dict[str, Any], scheduler_address: str) -> str:
    """The address the scheduler's HTTP server (dashboard, /health, /metrics) answers on for a local reader."""
    bind = str(settings.get("dask_dashboard_bind") or "127.0.0.1")
    if bind == "0.0.0.0":  # noqa: S104 - reading the setting, not binding
        return scheduler_address or "127.0.0.1"
    return bind


def _static(target: str, **labels: str) -> dict[str, Any]:
    """One Prometheus static_config: a target and its labels."""
    return {"targets": [target], "labels": labels}


def monitoring_model(settings: dict[str, Any], hosts: dict[str, dict[str, Any]], groups: dict[str, list[str]],
                     scheduler: str, members: list[str]) -> dict[str, Any]:
    """What Prometheus scrapes (docs/monitoring.md), as static_configs per job: the scheduler's /metrics
    (dask-scheduler), every worker's /metrics on its fixed port (dask-workers), node exporter on every cluster host
    (node) and dcgm-exporter on GPU hosts when its port is set (dcgm). Every target is labelled with its host
    (inventory name); a worker also with its position on the host and its mode (gpu, cpu).
    scheduler_target is '' when the scheduler's /metrics cannot be reached from the monitoring host (loopback)."""
    where = monitoring_host(groups)
    scheduler_ip = (hosts.get(scheduler) or {}).get("bind_address", "")
    http_host = scheduler_http_host(settings, scheduler_ip)
    if where != scheduler and http_host.startswith("127."):  # loopback answers only on the scheduler's host
        http_host = ""
    scheduler_target = f"{http_host}:{int(settings['dask_dashboard_port'])}" if http_host else ""
    node_port = int(settings.get("dask_monitoring_node_exporter_port") or 0)
    dcgm_port = int(settings.get("dask_monitoring_dcgm_exporter_port") or 0)
    jobs: dict[str, list[dict[str, Any]]] = {
        "dask-scheduler": [_static(scheduler_target, host=scheduler)] if scheduler_target else [],
        "dask-workers": [], "node": [], "dcgm": []}
    for host in members:
        model = hosts.get(host) or {}
        address = str(model.get("bind_address") or "")
        for index, port in enumerate(model.get("http_ports") or []):
            jobs["dask-workers"].append(_static(f"{model.get('http_bind') or address}:{port}", host=host,
                                                worker=str(index), mode=str(model.get("worker_mode") or "")))
        if node_port and address:
            jobs["node"].append(_static(f"{address}:{node_port}", host=host))
        if dcgm_port and address and model.get("worker_mode") == "gpu":
            jobs["dcgm"].append(_static(f"{address}:{dcgm_port}", host=host))
    listen = "{}:{}".format(settings.get("dask_monitoring_listen_address") or "127.0.0.1",
                            settings.get("dask_monitoring_port") or 9090)
    return {"enabled": monitoring_enabled(settings), "host": where, "listen": listen,
            "scheduler_target": scheduler_target, "jobs": {name: configs for name, configs in jobs.items() if configs}}


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


def interface_of(address: str, facts: dict[str, Any]) -> str:
    """The name of the interface that carries an IPv4 address in Ansible's facts ('' when unknown)."""
    for name in facts.get("interfaces") or []:
        found = facts.get(str(name).replace("-", "_")) or {}
        entries = [found.get("ipv4") or {}] + list(found.get("ipv4_secondaries") or [])
        if address and any(entry.get("address") == address for entry in entries if isinstance(entry, dict)):
            return str(found.get("device") or name)
    return ""


def ucx_net_devices(settings: dict[str, Any], address: str, facts: dict[str, Any]) -> str:
    """UCX_NET_DEVICES for the UCX modes: the setting, else the cluster interface (never docker0 or another
    host network), '' on loopback or when the interface is unknown (UCX's default: every device)."""
    if settings.get("dask_ucx_net_devices"):
        return str(settings["dask_ucx_net_devices"])
    interface = interface_of(address, facts)
    return "" if interface in ("", "lo") else interface


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
    topology = dict(gpus.get("topology") or {})
    address = bind_address(settings, facts)
    http_port = int(settings.get("dask_worker_http_port") or 0)
    return {
        "name": host,
        "bind_address": address,
        "ucx_net_devices": ucx_net_devices(settings, address, facts),
        "scheduler": host in _group(groups, "dask_scheduler"),
        # dask_host_state: retired takes a worker host out of the cluster (site.yml retires and removes it).
        "retired": settings.get("dask_host_state") == "retired",
        "worker": is_worker,
        "worker_mode": mode,
        "worker_count": count,
        "worker_nthreads": nthreads if is_worker else 0,
        # Each worker's HTTP server (/metrics, /health): one fixed port per worker, from dask_worker_http_port.
        "http_ports": [http_port + index for index in range(count)] if is_worker and http_port else [],
        # Loopback, or the cluster address when monitoring scrapes the workers from another host.
        "http_bind": address if monitoring_enabled(settings) else "127.0.0.1",
        "gpu_count": gpu_count,
        "gpus": gpus.get("gpus") or [],
        "driver_version": gpus.get("driver_version"),
        "needs_toolkit": mode == "gpu",
        "topology": topology,
        "nvlink": mode == "gpu" and _nvlink(topology, _worker_gpus(selected, gpus))[0] == "all",
    }


def _worker_gpus(selected: list[str], gpus: dict[str, Any]) -> list[int]:
    """Indices of the GPUs the workers use: dask_worker_gpus (indices, GPU or MIG UUIDs), else every GPU."""
    found = [gpu for gpu in gpus.get("gpus") or [] if isinstance(gpu, dict) and isinstance(gpu.get("index"), int)]
    indices: list[int] = []
    for gpu in found:
        names = {str(gpu["index"]), str(gpu.get("uuid")), *(gpu.get("mig") or [])}
        if not selected or names.intersection(selected):
            indices.append(gpu["index"])
    return indices


def _nvlink(topology: dict[str, Any], indices: list[int]) -> tuple[str, list[str]]:
    """How NVLink joins these GPUs: ("all" | "some" | "none" | "unknown", the NV# link types seen).

    "unknown" when the topology does not cover every pair (nvidia-smi without topo, an older fact).
    """
    links = topology.get("links") or {}
    pairs = [f"{first}-{second}" for first in sorted(indices) for second in sorted(indices) if first < second]
    if not pairs or any(pair not in links for pair in pairs):
        return "unknown", []
    nvlinks = sorted({str(links[pair]) for pair in pairs if str(links[pair]).startswith("NV")})
    nvlinked = sum(str(links[pair]).startswith("NV") for pair in pairs)
    return ("all" if nvlinked == len(pairs) else "some" if nvlinked else "none"), nvlinks


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


def _gpu_list(indices: list[int]) -> str:
    """'0-3' for a run of three or more indices, else '0 and 1', '0, 2 and 5'."""
    ordered = [str(index) for index in sorted(indices)]
    if len(ordered) > 2 and sorted(indices) == list(range(min(indices), max(indices) + 1)):
        return f"{ordered[0]}-{ordered[-1]}"
    return " and ".join(part for part in (", ".join(ordered[:-1]), "".join(ordered[-1:])) if part)


def advice(host: dict[str, Any], settings: dict[str, Any]) -> list[str]:
    """What the host's hardware wants from the settings (printed, never refused).

    A host with two or more GPU workers on a TCP transport is told to move device data over UCX, with what its
    GPUs' interconnect (dask_host.topology) makes of the factor measured on NVLinked GPUs.
    """
    if host.get("worker_mode") != "gpu" or host.get("worker_count", 0) < MULTI_GPU or protocol(settings) == "ucx":
        return []
    topology = dict(host.get("topology") or {})
    indices = _worker_gpus([str(gpu) for gpu in settings.get("dask_worker_gpus") or []],
                           {"gpus": host.get("gpus") or []})
    joined, kinds = _nvlink(topology, indices)
    gpus = _gpu_list(indices)
    start = (f"host {host['name']}: {host['worker_count']} GPU workers talk over TCP (dask_transport="
             f"{settings.get('dask_transport', 'tls')})")
    measured = "10-100 times slower than over UCX on 4 x H200 with NVLink (docs/performance.md)"
    keep_tls = "while clients keep mutual TLS (docs/transport.md)."
    if joined == "none":
        layers = "socket and TLS layers" if protocol(settings) == "tls" else "socket layer"
        return [f"{start}; GPUs {gpus} have no NVLink (PCIe only). UCX gains less here than the 10-100 times "
                f"measured against TCP on 4 x H200 with NVLink (docs/performance.md), but it still moves device "
                f"buffers without Python's {layers}. Set dask_transport: tls-ucx to move data between GPUs over "
                f"UCX {keep_tls}"]
    if joined == "all":
        wired = f"; GPUs {gpus} are connected by NVLink ({', '.join(kinds)})"
    elif joined == "some":
        pairs = [pair for pair in topology.get("nvlink_pairs") or [] if pair[0] in indices and pair[1] in indices]
        wired = (f"; NVLink ({', '.join(kinds)}) connects {len(pairs)} of the "
                 f"{len(indices) * (len(indices) - 1) // 2} pairs of GPUs {gpus}, the others are PCIe only")
    elif not topology.get("gpus"):
        wired = "; their NVLink topology is unknown (nvidia-smi topo -m gave none)"
    else:
        wired = ""  # the workers are MIG instances of one GPU: no pair to name
    return [f"{start}{wired}. Graphs that move data between GPUs ran {measured}. Set dask_transport: tls-ucx to "
            f"move data over {'NVLink' if joined in ('all', 'some') else 'UCX (NVLink where there is one)'} "
            f"{keep_tls}"]


def cluster_model(settings: dict[str, Any], hosts: dict[str, dict[str, Any]], groups: dict[str, list[str]],
                  image_hash: str) -> dict[str, Any]:
    """Cluster-wide facts, from the scheduler host's settings and every host's model.

    A worker host without a model (unreachable when the facts were gathered) is expected with one worker,
    so that verification names it rather than skipping it. Retired hosts (dask_host_state: retired) are left out
    of every list but retired_hosts.
    """
    scheduler = _group(groups, "dask_scheduler")[0]
    retired = [host for host in cluster_hosts(groups) if (hosts.get(host) or {}).get("retired")]
    members = [host for host in cluster_hosts(groups) if host not in retired]
    workers = [host for host in worker_hosts(groups) if host not in retired]
    counts = {host: int((hosts.get(host) or {}).get("worker_count", 1)) for host in workers}
    modes = {host: (hosts.get(host) or {}).get("worker_mode", "") for host in workers}
    scheduler_ip = (hosts.get(scheduler) or {}).get("bind_address", "")
    client_proto, proto = transport(settings)
    worker_port = int(settings["dask_scheduler_ucx_port"] if client_proto != proto else settings["dask_scheduler_port"])
    tag = "{}-cuda{}-{}-{}".format(settings["dask_rapids_release"], settings["dask_cuda_major"],
                                   settings["dask_image_profile"], image_hash)
    registry = registry_model(settings, hosts, groups, scheduler, members)
    prefix = (str(settings["dask_images_registry"]) + "/" if settings.get("dask_images_distribution") == "registry"
              else f"{registry['address']}/" if registry else "")
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
        "hosts": {host: (hosts.get(host) or {}).get("bind_address", "") for host in members},
        "retired_hosts": retired,
        "worker_hosts": workers,
        "gpu_hosts": [host for host in workers if modes[host] == "gpu"],
        "cpu_hosts": [host for host in workers if modes[host] != "gpu"],
        "workers_per_host": counts,
        "expected_workers": sum(counts.values()),
        "expected_gpus": sum(counts[host] for host in workers if modes[host] == "gpu"),
        "images": {"tag": tag, "repositories": {target: f"{prefix}dask-gpu-{target}" for target in TARGETS},
                   "scheduler": f"{prefix}dask-gpu-scheduler:{tag}", "worker": f"{prefix}dask-gpu-worker:{tag}",
                   "distribution": str(settings.get("dask_images_distribution") or "archive"),
                   "registry": registry,
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
        "monitoring": monitoring_model(settings, hosts, groups, scheduler, members),
    }


# From this many cluster hosts, cluster-registry distribution is advised over archive (docs/images.md).
REGISTRY_ADVISED_FROM = 3


def cluster_advice(cluster: dict[str, Any]) -> list[str]:
    """What the cluster's size wants from the settings (printed, never refused): archive distribution makes the
    controller send the image archive once per host; from REGISTRY_ADVISED_FROM hosts the cluster's registry
    sends it once."""
    count = len(cluster.get("hosts") or {})
    if cluster.get("images", {}).get("distribution") != "archive" or count < REGISTRY_ADVISED_FROM:
        return []
    return [f"cluster {cluster.get('name')}: {count} hosts with dask_images_distribution=archive, so the controller "
            f"sends the image archive (about 2.5 GB) {count} times, one host after another per fork. "
            "dask_images_distribution: cluster-registry sends it once, to a registry the bundle runs on the "
            "scheduler host (mutual TLS with the cluster's CA); the other hosts pull from it (docs/images.md)."]


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"dask_resolve_settings": resolve_settings, "dask_host_model": host_model,
                "dask_cluster_model": cluster_model, "dask_cluster_hosts": cluster_hosts, "dask_advice": advice,
                "dask_cluster_advice": cluster_advice,
                "dask_worker_hosts": worker_hosts}
