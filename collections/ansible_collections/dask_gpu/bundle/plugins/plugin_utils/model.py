"""The cluster model: every derived fact of a deployment, computed once per run from the typed settings
(settings.py), the inventory's groups and each host's facts. Published by the `dask` role as `dask_settings`,
`dask_host` (per host) and `dask_cluster` (the same on every host); every role, playbook, check and test reads these
(docs/model.md). The core facts are built here; each feature (features/) adds its own.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.dask_gpu.bundle.plugins.plugin_utils import gpus as gpu_selection
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils import own_image, profiles, records
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.feature import (
    ClusterInput,
    HostInput,
    cluster_hosts,
    group,
    scheduler_host,
    worker_hosts,
)
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.features import FEATURES, identity, managed
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.identity import cluster_paths
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.options import as_mapping, as_sequence, parse_size
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.ports import span
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.transport import facets

# Paths inside the containers (the images' layout): one place.
CONTAINER_PATHS = {"tls": "/etc/dask/tls", "local": "/var/lib/dask", "reports": "/var/lib/dask-reports"}
# Hosts with this many GPUs or more want device data to move over UCX (NVLink), not TCP.
MULTI_GPU = 2


def _int(value: Any, default: int = 0) -> int:
    """A count or size from a fact or a typed setting; `default` for anything that is not a whole number (a broken
    probe or fact: the checks say what is wrong, the model stays buildable)."""
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return default


def bind_address(settings: Mapping[str, Any], facts: Mapping[str, Any]) -> str:
    """The IPv4 address Dask binds to and advertises on a host ('' when none is found)."""
    if settings.get("dask_cluster_address"):
        return str(settings["dask_cluster_address"])
    interface = str(settings.get("dask_cluster_interface") or "")
    if interface:
        found = as_mapping(facts.get(interface.replace("-", "_")))
        return str(as_mapping(found.get("ipv4")).get("address") or "")
    return str(as_mapping(facts.get("default_ipv4")).get("address") or "")


def interface_of(address: str, facts: Mapping[str, Any]) -> str:
    """The name of the interface that carries an IPv4 address in Ansible's facts ('' when unknown)."""
    for name in as_sequence(facts.get("interfaces")):
        found = as_mapping(facts.get(str(name).replace("-", "_")))
        entries = [as_mapping(found.get("ipv4")),
                   *(as_mapping(entry) for entry in as_sequence(found.get("ipv4_secondaries")))]
        if address and any(entry.get("address") == address for entry in entries):
            return str(found.get("device") or name)
    return ""


def ucx_net_devices(settings: Mapping[str, Any], address: str, facts: Mapping[str, Any]) -> str:
    """UCX_NET_DEVICES for the UCX modes: the setting, else the cluster interface (never docker0 or another
    host network), '' on loopback or when the interface is unknown (UCX's default: every device)."""
    if settings.get("dask_ucx_net_devices"):
        return str(settings["dask_ucx_net_devices"])
    interface = interface_of(address, facts)
    return "" if interface in ("", "lo") else interface


def _core_ports(settings: Mapping[str, Any], is_scheduler: bool, is_worker: bool, count: int) -> dict[str, list[int]]:
    """The TCP ports the core takes on a host, by setting."""
    ports: dict[str, list[int]] = {}
    if is_scheduler:
        ports["dask_scheduler_port"] = span(settings["dask_scheduler_port"])
        ports["dask_dashboard_port"] = span(settings["dask_dashboard_port"])
        if facets(str(settings.get("dask_transport") or "tls"))["scheduler_second_listener"]:
            ports["dask_scheduler_ucx_port"] = span(settings["dask_scheduler_ucx_port"])
    if is_worker and count:
        ports["dask_worker_http_port"] = span(settings["dask_worker_http_port"], count)
        text = str(settings.get("dask_worker_port_range") or "")
        if ":" in text:
            first, _, last = text.partition(":")
            if first.strip().isdigit() and last.strip().isdigit():
                ports["dask_worker_port_range"] = [int(first), int(last)]
    return ports


def folders(settings: Mapping[str, Any], is_member: bool, is_worker: bool) -> list[dict[str, Any]]:
    """The cluster's folders on a host (module cluster_record makes them and records those it made): the
    configuration folder (TLS material inside it when TLS is on) on every member host, and on worker hosts the data
    folder with the workers' local directory and the clients' reports. Teardown removes a `tree` folder with its
    content, an `empty` one (a data folder, which may be the user's disk) only when nothing is left in it."""
    if not is_member:
        return []
    paths = cluster_paths(settings)
    uid, gid = _int(settings.get("dask_container_uid"), 10001), _int(settings.get("dask_container_gid"), 10001)
    found = [{"path": paths["config"], "owner": 0, "group": 0, "mode": "0755", "remove": "tree"}]
    if facets(str(settings.get("dask_transport") or "tls"))["tls"]:
        found.append({"path": f"{paths['config']}/tls", "owner": 0, "group": gid, "mode": "0750", "remove": "tree"})
    if is_worker:
        found += [{"path": paths["data"], "owner": 0, "group": 0, "mode": "0755", "remove": "empty"},
                  {"path": f"{paths['data']}/worker", "owner": uid, "group": gid, "mode": "0750", "remove": "tree"},
                  {"path": f"{paths['data']}/reports", "owner": uid, "group": gid, "mode": "0750", "remove": "tree"}]
    return found


def frames_images(settings: Mapping[str, Any]) -> bool:
    """The bundle's images carry cuDF (the full and polars profiles; your own images are not judged here)."""
    return profiles.bundle_has(settings, "cudf", own_image.WORKER_SETTING)


def frames_possible(settings: Mapping[str, Any]) -> bool:
    """The images may carry cuDF: the full profile, or your own images (the probe of playbooks/check.yml tells, after
    the hosts' models are made; a GPU scheduler host gets the toolkit either way, so its GPU can be given)."""
    return frames_images(settings) or bool(settings.get(own_image.WORKER_SETTING))


def host_model(host: str, settings: Mapping[str, Any], facts: Mapping[str, Any], gpus: Mapping[str, Any],
               groups: Mapping[str, Any]) -> dict[str, Any]:
    """What one host runs and how: its address, its workers and their GPUs, the ports it takes (and the features'
    facts)."""
    facts, gpus = as_mapping(facts), as_mapping(gpus)
    is_cuda = host in group(groups, "dask_cuda_workers")
    is_worker = host in worker_hosts(groups)
    is_scheduler = host in group(groups, "dask_scheduler")
    gpu_count = max(_int(gpus.get("count")), 0)
    mode = ("gpu" if is_cuda and gpu_count > 0 else "cpu") if is_worker else ""
    wanted = [str(gpu) for gpu in settings.get("dask_worker_gpus") or []]
    selection = gpu_selection.select(wanted, gpus) if mode == "gpu" else gpu_selection.Selection()
    # The health rules' judgement of each GPU (the probe's, by UUID): an unfit GPU gets no worker (exclude).
    health = {str(uuid): dict(judged) for uuid, judged in as_mapping(gpus.get("health")).items()
              if isinstance(judged, Mapping)}
    unfit = [gpu for gpu in selection.gpus if not health.get(str(gpu.get("uuid")), {}).get("healthy", True)]
    policy = str(settings.get("dask_worker_gpu_health") or "exclude")
    if unfit and policy == "exclude":
        selection.gpus = [gpu for gpu in selection.gpus if gpu not in unfit]
    count = len(selection.gpus) if mode == "gpu" else (1 if mode == "cpu" else 0)
    nthreads = _int(settings.get("dask_worker_nthreads"))
    if nthreads <= 0:
        nthreads = 1 if mode == "gpu" else max(_int(gpus.get("vcpus"), 1), 1)
    topology = dict(as_mapping(gpus.get("topology")))
    address = bind_address(settings, facts)
    http_port = _int(settings.get("dask_worker_http_port"))
    indices = [int(gpu["index"]) for gpu in selection.gpus]
    model: dict[str, Any] = {
        "name": host,
        "bind_address": address,
        "ucx_net_devices": ucx_net_devices(settings, address, facts),
        "scheduler": is_scheduler,
        # dask_host_state: retired takes a worker host out of the cluster (site.yml retires and removes it).
        "retired": settings.get("dask_host_state") == "retired",
        "worker": is_worker,
        "worker_mode": mode,
        "worker_count": count,
        "worker_nthreads": nthreads if is_worker else 0,
        # The GPU workers' RMM pool ("" for none) and whether CuPy allocates from RMM (auto: profiles.AUTO_POOL).
        **dict(zip(("rmm_pool_size", "rmm_for_cupy"), profiles.rmm_pool(settings, own_image.WORKER_SETTING),
                   strict=True)),
        # Each worker's HTTP server (/metrics, /health): one fixed port per worker, from dask_worker_http_port.
        "http_ports": [http_port + index for index in range(count)] if is_worker and http_port else [],
        "http_bind": "127.0.0.1",
        "gpu_count": gpu_count,
        "gpus": as_sequence(gpus.get("gpus")),
        # The GPUs the workers use, resolved once: index, uuid, name, memory_mib, device (as --gpus device= and
        # the spec's `gpus` name it), cdi (its CDI device name); entries naming no GPU or one GPU twice are kept
        # for the checks.
        "worker_gpus": selection.gpus,
        "worker_gpus_all": mode == "gpu" and not wanted and not (unfit and policy == "exclude"),
        "gpu_health": health,
        "gpu_health_error": gpus.get("health_error"),
        # Unfit GPUs among those selected: left out (exclude), or named by the checks (fail), or used (ignore).
        "gpus_unfit": [{"index": gpu.get("index"), "uuid": gpu.get("uuid"),
                        "problems": health.get(str(gpu.get("uuid")), {}).get("problems", [])} for gpu in unfit],
        "gpus_left_out": policy == "exclude" and bool(unfit),
        "gpu_selection_unknown": selection.unknown,
        "gpu_selection_twice": [list(pair) for pair in selection.twice],
        "driver_version": gpus.get("driver_version"),
        # GPU workers, or a scheduler that gets a GPU because the images carry cuDF (spec.frames_gpu).
        "needs_toolkit": mode == "gpu" or (is_scheduler and gpu_count > 0 and frames_possible(settings)),
        "topology": topology,
        "nvlink": mode == "gpu" and gpu_selection.nvlink(topology, indices)[0] == "all",
        "ports": _core_ports(settings, is_scheduler, is_worker, count),
    }
    model["services"], extra_folders, extra_claims = {}, [], {}
    inp = HostInput(name=host, settings=settings, facts=facts, gpus=gpus, groups=groups, model=model)
    for feature in FEATURES:
        if feature.host is None:
            continue
        added = dict(feature.host(inp))
        model["ports"].update(added.pop("ports", {}))
        model["services"].update(added.pop("services", {}))
        extra_folders += added.pop("folders", [])
        extra_claims.update(added.pop("claims", {}))
        model.update(added)
    name = str(settings.get("dask_cluster_name") or "dask")
    ident, paths = identity(name), cluster_paths(settings)
    before = records.mine(facts, name)  # this cluster's record as the run found it ({} before its first run)
    model["folders"] = folders(settings, is_scheduler or is_worker, is_worker) + (
        extra_folders if is_scheduler or is_worker else [])
    # What this cluster holds on the host (module cluster_record keeps it; other clusters' checks read it).
    model["record"] = {
        "path": records.path(name),
        "claims": {"name": name, "prefix": ident["prefix"], "units": sorted(ident["units"].values()),
                   "containers": sorted(ident["containers"].values()), "firewall_table": ident["firewall_table"],
                   "config": paths["config"], "data": paths["data"],
                   "gpus": records.gpu_claims(selection.gpus) if mode == "gpu" and is_member_host(model) else [],
                   "ports": model["ports"], "services": model["services"],
                   # The NVLinks up when this cluster's record first saw each GPU (fewer later is a fault).
                   "gpu_nvlinks": {**{uuid: judged["nvlink_active"] for uuid, judged in health.items()
                                      if judged.get("nvlink_active") is not None},
                                   **dict(before.get("gpu_nvlinks") or {})},
                   **extra_claims},
        "adopt": records.adoptable(settings, facts)}
    model["other_clusters"] = records.others(facts, name)
    # The name in the record this cluster's name leads to: another where two names normalise to the same record
    model["record_name"] = str(before.get("name") or name)
    model["legacy"] = records.legacy(facts)
    # This cluster's record was on the host when the run began (or an earlier release deployed there): only then can
    # a unit or container of a feature now off or moved be on it, so site.yml's removals of those run only then (a
    # run that stops half-way has written the record first, roles/dask_record).
    model["recorded_before"] = bool(before) or model["legacy"]
    model["deployed"] = dict(before.get("deployed") or {})
    # The builds of the bundle's images this host keeps for the cluster, newest first (each a list of references),
    # from its record (roles/dask_images/tasks/retention.yml writes them; your own images are never listed).
    kept = before.get("builds")
    model["builds"] = [list(build) for build in kept if isinstance(build, list)] if isinstance(kept, list) else []
    return model


def is_member_host(model: Mapping[str, Any]) -> bool:
    """A host that runs part of the cluster (retired hosts hold nothing)."""
    return not model.get("retired")


def health_lines(host: Mapping[str, Any]) -> list[str]:
    """What the health rules found on the host's GPUs, as the run prints it (never refused here: the checks refuse)."""
    lines = []
    if host.get("gpus_left_out"):
        lines += [f"host {host['name']}: GPU {gpu['index']} ({gpu['uuid']}) is left out, unfit for work: "
                  f"{', '.join(gpu['problems'])} (dask_worker_gpu_health: exclude; docs/gpu-health.md)"
                  for gpu in host.get("gpus_unfit") or []]
    if host.get("worker_mode") == "gpu" and host.get("gpu_health_error"):
        lines.append(f"host {host['name']}: GPU health not known ({host['gpu_health_error']}); every GPU is used")
    for uuid, judged in (host.get("gpu_health") or {}).items():
        lines += [f"host {host['name']}: GPU {judged.get('index')} ({uuid}): {note}"
                  for note in judged.get("notes") or []]
    return lines


def frames_advice(host: Mapping[str, Any], settings: Mapping[str, Any]) -> list[str]:
    """A scheduler host without a GPU under images with cuDF: dask-cudf work will fail there (printed, not refused:
    CuPy work runs)."""
    if not host.get("scheduler") or not frames_images(settings) or int(host.get("gpu_count") or 0) > 0:
        return []
    return [f"host {host['name']}: the scheduler host has no GPU, but dask_image_profile="
            f"{settings.get('dask_image_profile')} deploys cuDF: dask-cudf "
            "graphs hold cuDF objects that the scheduler unpickles, which needs a GPU (RAPIDS' advice; docs/images.md, "
            "\"Data frames\"). dask-cudf work will fail on this cluster; put the scheduler on a GPU host for it."]


def advice(host: Mapping[str, Any], settings: Mapping[str, Any]) -> list[str]:
    """What the host's hardware wants from the settings (printed, never refused).

    A host with two or more GPU workers on a TCP transport is told to move device data over UCX, with what its
    GPUs' interconnect (dask_host.topology) makes of the factor measured on NVLinked GPUs.
    """
    transport = facets(str(settings.get("dask_transport") or "tls"))
    said = health_lines(host) + frames_advice(host, settings)
    if host.get("worker_mode") != "gpu" or host.get("worker_count", 0) < MULTI_GPU or transport["protocol"] == "ucx":
        return said
    topology = dict(host.get("topology") or {})
    indices = sorted({int(gpu["index"]) for gpu in host.get("worker_gpus") or []})
    joined, kinds = gpu_selection.nvlink(topology, indices)
    gpus = gpu_selection.gpu_list(indices)
    start = (f"host {host['name']}: {host['worker_count']} GPU workers talk over TCP (dask_transport="
             f"{transport['transport']})")
    measured = "10-100 times slower than over UCX on 4 x H200 with NVLink (docs/performance.md)"
    keep_tls = "while clients keep mutual TLS (docs/transport.md)."
    if joined == "none":
        layers = "socket and TLS layers" if transport["protocol"] == "tls" else "socket layer"
        return said + [f"{start}; GPUs {gpus} have no NVLink (PCIe only). UCX gains less here than the 10-100 times "
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
    return said + [f"{start}{wired}. Graphs that move data between GPUs ran {measured}. Set dask_transport: tls-ucx to "
            f"move data over {'NVLink' if joined in ('all', 'some') else 'UCX (NVLink where there is one)'} "
            f"{keep_tls}"]


# The partition size auto publishes: the fastest measured on 1 and 4 x H100 (0.6 GB of CSV, about 1 GB in GPU
# memory, a partition: tests/gpu/results/scaling-h100x4/), at most 1/64 of a smaller GPU; CPU-only clusters 256 MiB.
PARTITION_CAP = 2 ** 30
PARTITION_SHARE = 64
PARTITION_CPU = 256 * 2 ** 20


def dataframe_advice(settings: Mapping[str, Any], hosts: Mapping[str, Mapping[str, Any]],
                     gpu_hosts: list[str], workers: int) -> dict[str, int]:
    """How clients should cut data frames for this cluster (dask-gpu.dataframe.*): the bytes of GPU memory a
    partition holds, the fewest partitions per worker, and the workers expected. Checks refuse a size above a GPU."""
    memory = [int(gpu.get("memory_mib") or 0) * 2 ** 20 for host in gpu_hosts
              for gpu in (hosts.get(host) or {}).get("worker_gpus") or []]
    smallest = min((size for size in memory if size), default=0)
    parsed = parse_size(str(settings.get("dask_dataframe_partition_size") or "auto"))
    if parsed is None:  # auto
        size = min(PARTITION_CAP, smallest // PARTITION_SHARE) if smallest else PARTITION_CPU
    elif parsed[0] == "fraction":
        size = int(parsed[1] * smallest) if smallest else PARTITION_CPU
    else:
        size = int(parsed[1])
    return {"partition_bytes": max(1, size),
            "partitions_per_worker": int(settings["dask_dataframe_partitions_per_worker"]), "workers": workers}


def cluster_model(settings: Mapping[str, Any], hosts: Mapping[str, Mapping[str, Any]], groups: Mapping[str, Any],
                  image_hash: str) -> dict[str, Any]:
    """Cluster-wide facts, from the scheduler host's settings and every host's model.

    A worker host without a model (unreachable when the facts were gathered) is expected with one worker,
    so that verification names it rather than skipping it. Retired hosts (dask_host_state: retired) are left out
    of every list but retired_hosts.
    """
    scheduler = scheduler_host(groups)
    retired = [host for host in cluster_hosts(groups) if (hosts.get(host) or {}).get("retired")]
    members = [host for host in cluster_hosts(groups) if host not in retired]
    workers = [host for host in worker_hosts(groups) if host not in retired]
    counts = {host: int((hosts.get(host) or {}).get("worker_count", 1)) for host in workers}
    modes = {host: (hosts.get(host) or {}).get("worker_mode", "") for host in workers}
    scheduler_ip = (hosts.get(scheduler) or {}).get("bind_address", "")
    transport = facets(str(settings.get("dask_transport") or "tls"))
    worker_port = int(settings["dask_scheduler_ucx_port"] if transport["scheduler_second_listener"]
                      else settings["dask_scheduler_port"])
    name = str(settings["dask_cluster_name"])
    ident = identity(name)
    dashboard_bind = str(settings["dask_dashboard_bind"])
    http_host = "127.0.0.1" if dashboard_bind in ("0.0.0.0", "127.0.0.1", "") else dashboard_bind  # noqa: S104
    http = f"http://{http_host}:{int(settings['dask_dashboard_port'])}"
    model: dict[str, Any] = {
        "name": name,
        **{key: value for key, value in ident.items() if key not in ("config_dir", "data_dir")},
        **transport,
        "scheduler_host": scheduler,
        # The workers speak UCX (UCX_NET_DEVICES, every address guarded by the firewall): the ucx transports, and
        # features that run a UCX communicator of their own (they set it too).
        "workers_speak_ucx": bool(transport["ucx_every_address"]),
        "scheduler_address": f"{transport['client_protocol']}://{scheduler_ip}:{settings['dask_scheduler_port']}",
        "worker_scheduler_address": f"{transport['protocol']}://{scheduler_ip}:{worker_port}",
        "scheduler_port": int(settings["dask_scheduler_port"]),
        "scheduler_ucx_port": int(settings["dask_scheduler_ucx_port"]) if transport["scheduler_second_listener"]
        else None,
        "dashboard_port": int(settings["dask_dashboard_port"]),
        "dashboard_bind": dashboard_bind,
        # The scheduler's HTTP endpoints as read on the scheduler host (its liveness, and the readiness count).
        "scheduler_urls": {"health": f"{http}/health", "counts": f"{http}/json/counts.json"},
        "hosts": {host: (hosts.get(host) or {}).get("bind_address", "") for host in members},
        "retired_hosts": retired,
        "worker_hosts": workers,
        "gpu_hosts": [host for host in workers if modes[host] == "gpu"],
        "cpu_hosts": [host for host in workers if modes[host] != "gpu"],
        "workers_per_host": counts,
        "expected_workers": sum(counts.values()),
        "expected_gpus": sum(counts[host] for host in workers if modes[host] == "gpu"),
        "paths": {**cluster_paths(settings),
                  "controller": settings["dask_controller_dir"], "repo": settings["dask_repo_dir"],
                  "container": dict(CONTAINER_PATHS)},
        # cuDF spilling on the GPU workers (and CUDF_SPILL=on wherever their frames are read): one decision.
        "cudf_spill": settings.get("dask_worker_cudf_spill") is True,
        "dataframe": dataframe_advice(settings, hosts, [host for host in workers if modes[host] == "gpu"],
                                      sum(counts.values())),
        "uid": int(settings["dask_container_uid"]),
        "gid": int(settings["dask_container_gid"]),
        # What the features' roles manage on a host (packages, paths, site.yml tags: role dask_record's record) and
        # when their teardown entry points run (role dask_teardown).
        "managed": managed(),
    }
    inp = ClusterInput(settings=settings, hosts=hosts, groups=groups, image_hash=image_hash, scheduler=scheduler,
                       members=members, model=model)
    for feature in FEATURES:
        if feature.cluster is not None:
            model.update(feature.cluster(inp))
    return model


def hosts_advice(hosts: list[str], hostvars: Mapping[str, Any]) -> list[str]:
    """advice() of every host in order (each line names its host): one controller task prints them all (hostvars:
    each host's dask_host and dask_settings)."""
    return [line for host in hosts for line in advice(hostvars[host]["dask_host"], hostvars[host]["dask_settings"])]


def cluster_advice(cluster: Mapping[str, Any]) -> list[str]:
    """What the cluster's size wants from the settings (printed, never refused), from every feature."""
    return [line for feature in FEATURES if feature.advice is not None for line in feature.advice(cluster)]
