"""Feature `images` (role dask_images, docs/images.md): the images' tag and references, how they reach the hosts
(archive, the cluster's registry, your registry), the Dask versions they carry (from the release's pins), and the
checks of the cluster registry."""
from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ansible_collections.dask_gpu.bundle.plugins.plugin_utils import extras, own_image, profiles
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.feature import (
    CheckInput,
    ClusterInput,
    Feature,
    HostInput,
    cluster_hosts,
    scheduler_host,
)
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.ports import span
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.transport import facets

# The Dockerfile's targets: one image each.
TARGETS = ("scheduler", "worker")
# The packages whose versions must be equal on client, scheduler and workers (an upgrade that changes one never
# rolls host by host: docs/upgrades.md).
VERSIONED = ("dask", "distributed", "dask-cuda")
# From this many cluster hosts, cluster-registry distribution is advised over archive (docs/images.md).
REGISTRY_ADVISED_FROM = 3
# dask_images_distribution: auto takes cluster-registry from this many cluster hosts (archive below). From the
# measurements in docs/images.md: on 3 hosts archive finished first (copy + load in parallel, about 2 min; the
# registry's push alone took 98 s), but the controller sends 2.6 GB per host, so on a 1 Gbit/s controller link 8
# hosts are 2.8 min of egress alone and 100 hosts 35 min, while the registry costs the controller one archive at most.
AUTO_REGISTRY_FROM = 8


def distribution(settings: Mapping[str, Any], groups: Mapping[str, Any]) -> str:
    """The distribution this cluster uses: the setting, or for auto cluster-registry from AUTO_REGISTRY_FROM cluster
    hosts when the transport has TLS (the registry's clients are the hosts' certificates), else archive."""
    chosen = str(settings.get("dask_images_distribution") or "auto")
    if chosen != "auto":
        return chosen
    tls = facets(str(settings.get("dask_transport") or "tls"))["tls"]
    return "cluster-registry" if tls and len(cluster_hosts(groups)) >= AUTO_REGISTRY_FROM else "archive"


def registry_host(settings: Mapping[str, Any], groups: Mapping[str, Any]) -> str:
    """Where the cluster-registry runs: dask_images_registry_host, else the scheduler host."""
    return str(settings.get("dask_images_registry_host") or scheduler_host(groups))


def pins_file(settings: Mapping[str, Any]) -> str:
    return "{}/images/pins/rapids-{}-cuda{}.txt".format(
        settings["dask_repo_dir"], settings["dask_rapids_release"], settings["dask_cuda_major"])


def versions(pins: str) -> dict[str, str]:
    """The versions of dask, distributed and dask-cuda a pins file holds ({} when it cannot be read)."""
    try:
        text = Path(pins).read_text()
    except OSError:
        return {}
    found = {name: re.search(rf"(?m)^{re.escape(name)}==(\S+)$", text) for name in VERSIONED}
    return {name: match.group(1) for name, match in found.items() if match}


def host(inp: HostInput) -> dict[str, Any]:
    """The registry's port and service on the host that runs it; the work folder where archives arrive (archive:
    every host; cluster-registry: the registry host), shared by the clusters of a host, removed when empty."""
    chosen = distribution(inp.settings, inp.groups)
    runs_registry = chosen == "cluster-registry" and inp.name == registry_host(inp.settings, inp.groups)
    added: dict[str, Any] = {}
    if (chosen == "archive" or runs_registry) and inp.settings.get("dask_images_work_dir"):
        added["folders"] = [{"path": str(inp.settings["dask_images_work_dir"]), "owner": 0, "group": 0,
                             "mode": "0700", "remove": "empty"}]
    if runs_registry:
        port = int(inp.settings["dask_images_registry_port"])
        added.update(ports={"dask_images_registry_port": span(port)}, services={"docker-registry": port})
    return added


def version_change(inp: ClusterInput, wanted: dict[str, str]) -> dict[str, Any] | None:
    """The member hosts whose record says they last ran other Dask, distributed or dask-cuda versions than this run
    deploys (None when there is none): such a change must not roll host by host (docs/upgrades.md)."""
    return changed_versions(inp.hosts, inp.members, wanted, inp.settings.get("dask_upgrade_restart_all_ack") is True)


def changed_versions(hosts: Mapping[str, Any], members: list[str], wanted: Mapping[str, str],
                     restart_all: bool) -> dict[str, Any] | None:
    """version_change's finding from the hosts' models (their records), the members and the wanted versions."""
    ran = {host: dict((hosts.get(host) or {}).get("deployed", {}).get("versions") or {}) for host in members}
    changed = {host: versions for host, versions in ran.items() if versions and wanted and versions != wanted}
    if not changed:
        return None
    first = changed[sorted(changed)[0]]
    return {"hosts": sorted(changed), "from": first, "to": dict(wanted), "restart_all": restart_all}


def registry_model(inp: ClusterInput) -> dict[str, Any] | None:
    """The registry of dask_images_distribution=cluster-registry (None for the other distributions): the cluster
    host that runs it, its address on the cluster address, and the host that pushes the images to it: the build
    host when that is a cluster host (the controller then sends no image bytes), else the registry host itself,
    which gets the archive from the controller."""
    settings = inp.settings
    if distribution(settings, inp.groups) != "cluster-registry":
        return None
    where = registry_host(settings, inp.groups)
    build = str(settings.get("dask_images_build_host") or "localhost")
    port = int(settings["dask_images_registry_port"])
    address = f"{(inp.hosts.get(where) or {}).get('bind_address', '')}:{port}"
    return {"host": where, "address": address, "port": port,
            "push_host": build if build in inp.members else where}


def cluster(inp: ClusterInput) -> dict[str, Any]:
    """The images' tag, references and distribution. Your own images (own_image.py) get the bundle's names with an
    own-<hash> tag on the build host (archive, cluster-registry), or are pulled by every host as given (registry);
    their Dask versions are known once the inspection ran (roles/dask/tasks/own_image.yml)."""
    settings = inp.settings
    own = own_image.references(settings)
    tag = own_image.tag(own) if own else "{}-cuda{}-{}-{}".format(
        settings["dask_rapids_release"], settings["dask_cuda_major"], settings["dask_image_profile"], inp.image_hash)
    registry = registry_model(inp)
    chosen = distribution(settings, inp.groups)
    prefix = (str(settings["dask_images_registry"]) + "/" if chosen == "registry"
              else f"{registry['address']}/" if registry else "")
    refs = {target: f"{prefix}dask-gpu-{target}:{tag}" for target in TARGETS}
    if own and chosen == "registry":
        refs = dict(own)
    pins = pins_file(settings)
    wanted = {} if own else versions(pins)
    return {"images": {
        "tag": tag, "repositories": {target: f"{prefix}dask-gpu-{target}" for target in TARGETS},
        "scheduler": refs["scheduler"], "worker": refs["worker"], "own": own,
        "distribution": chosen, "distribution_setting": str(settings.get("dask_images_distribution") or "auto"),
        "registry": registry,
        "build_args": {"BASE_IMAGE": settings["dask_base_image"], "RAPIDS_RELEASE": settings["dask_rapids_release"],
                       "CUDA_MAJOR": settings["dask_cuda_major"], "PROFILE": settings["dask_image_profile"]},
        # cuDF and dask-cudf in the images (the full and polars profiles): the scheduler and the clients get a GPU
        # (spec.py).
        "cudf": not own and profiles.has(settings["dask_image_profile"], "cudf"),
        # Bytes the images take before they exist (your own: what the build host's pull measured, read then).
        "expected_bytes": 0 if own else profiles.SIZES.get(str(settings["dask_image_profile"]), 0),
        "pins": pins, "versions": wanted, "version_change": version_change(inp, wanted),
        "extras": extras.summary(settings)}}


EXTRA_SETTINGS = ("dask_images_extra_packages", "dask_images_extra_requirements_file", "dask_images_extra_wheels_dir")


def _pins_text(inp: CheckInput) -> str:
    try:
        return Path(str(inp.cluster.get("images", {}).get("pins") or "")).read_text()
    except OSError:
        return ""


def _shown(versions: dict[str, Any]) -> str:
    return ", ".join(f"{name} {versions.get(name, '?')}" for name in VERSIONED)


def version_change_problems(change: Mapping[str, Any] | None) -> list[str]:
    """The refusal of a version change that is not acknowledged (none when there is no change)."""
    if not change or change.get("restart_all"):
        return []
    return [f"inventory: hosts {', '.join(change['hosts'])} run {_shown(change['from'])}; this run deploys "
            f"{_shown(change['to'])}. A rolling restart would mix versions, which Dask does not support. Deploy the "
            "new versions as a second cluster beside this one (another dask_cluster_name; move the clients, then "
            "tear this one down: blue/green, docs/upgrades.md), or set dask_upgrade_restart_all_ack: true to "
            "restart the scheduler and every worker at once (running work and the data in worker memory are lost)."]


def profile_problems(inp: CheckInput) -> list[str]:
    """What the chosen profile cannot run: cuDF spilling without cuDF, GPU workers or UCX without CUDA (the cpu
    profile). With your own images the profile builds nothing: their inspection says what they lack (own_image.py)."""
    profile = None if inp.get(own_image.WORKER_SETTING) else inp.get("dask_image_profile")
    if profile is None:
        return []
    problems = []
    if inp.get("dask_worker_cudf_spill") is True and not profiles.has(profile, "cudf") and inp.is_worker:
        problems.append(f"dask_worker_cudf_spill=true needs cuDF in the images, which dask_image_profile={profile} "
                        f"does not have. Use dask_image_profile: {profiles.with_part('cudf')}, or leave "
                        "dask_worker_cudf_spill false.")
    if profiles.has(profile, "cuda"):
        return problems
    # A dask_cuda_workers host without a GPU that may fall back to the CPU (dask_worker_allow_cpu) runs `dask worker`,
    # which the cpu profile has; one with GPUs runs `dask cuda worker`.
    if inp.model.get("worker_mode") == "gpu":
        problems.append(f"is in dask_cuda_workers and has {inp.model.get('gpu_count')} GPU(s), but "
                        f"dask_image_profile={profile} has no dask-cuda and no CUDA library (its workers could not "
                        f"start `dask cuda worker`). Use dask_image_profile: {profiles.with_part('cuda')}, or move "
                        "the host to dask_cpu_workers.")
    transport = inp.get("dask_transport")
    if facets(str(transport or "tls"))["ucx_every_address"]:
        problems.append(f"dask_transport={transport} needs UCX (distributed-ucxx), which dask_image_profile={profile} "
                        f"does not have. Use dask_transport: tls, or dask_image_profile: {profiles.with_part('ucx')}.")
    return problems


def checks(inp: CheckInput) -> list[str]:
    problems = version_change_problems(inp.cluster.get("images", {}).get("version_change")) + profile_problems(inp)
    if inp.is_scheduler:  # cluster-wide settings, read on the controller: named once
        problems += extras.problems({name: inp.get(name) for name in EXTRA_SETTINGS}, _pins_text(inp))
        own = {name: inp.get(name) for name in (own_image.SCHEDULER_SETTING, own_image.WORKER_SETTING)}
        problems += own_image.setting_problems(own, any(inp.get(name) for name in EXTRA_SETTINGS))
    chosen = inp.cluster.get("images", {}).get("distribution") or inp.get("dask_images_distribution")
    if chosen == "registry" and inp.get("dask_images_registry") == "" and not inp.get(own_image.WORKER_SETTING):
        return problems + ["dask_images_distribution=registry needs dask_images_registry (host:port[/path])"]
    if chosen != "cluster-registry":
        return problems
    transport = inp.get("dask_transport")
    if facets(str(transport or "tls"))["tls_off"]:
        problems.append(
            f"dask_images_distribution=cluster-registry needs the cluster's TLS certificates (the registry takes "
            f"clients with a certificate of the cluster's CA only); dask_transport={transport} has none. Use "
            "dask_transport tls or tls-ucx, or dask_images_distribution archive or registry.")
    registry = inp.cluster.get("images", {}).get("registry") or {}
    where = str(registry.get("host") or registry_host({"dask_images_registry_host": inp.get(
        "dask_images_registry_host")}, inp.groups))
    members = cluster_hosts(inp.groups)
    if inp.get("dask_images_registry_host") and where not in members:
        problems.append(f"dask_images_registry_host={where} must be a host of the cluster (dask_scheduler, "
                        f"dask_cuda_workers or dask_cpu_workers): {', '.join(members) or 'none'}")
    if inp.host == where and inp.get("dask_host_state") == "retired":
        problems.append(f"dask_images_registry_host={where} is retired (dask_host_state); the other hosts pull the "
                        "images from it. Run the registry on another host first.")
    return problems


def advice(cluster_model: Mapping[str, Any]) -> list[str]:
    """Archive distribution makes the controller send the image archive once per host; from REGISTRY_ADVISED_FROM
    hosts the cluster's registry sends it once."""
    count = len(cluster_model.get("hosts") or {})
    if cluster_model.get("images", {}).get("distribution") != "archive" or count < REGISTRY_ADVISED_FROM:
        return []
    return [f"cluster {cluster_model.get('name')}: {count} hosts with dask_images_distribution=archive, so the "
            f"controller sends the image archive (about 2.5 GB) {count} times, one host after another per fork. "
            "dask_images_distribution: cluster-registry sends it once, to a registry the bundle runs on the "
            "scheduler host (mutual TLS with the cluster's CA); the other hosts pull from it (docs/images.md)."]


# The cluster registry's package and skopeo (the registry's garbage collection, layer conversion); the registry's
# client certificates in Docker's certs.d and its configuration.
FEATURE = Feature(name="images", role="dask_images", host=host, cluster=cluster, checks=checks, advice=advice,
                  packages=("docker-registry", "skopeo"), paths=("/etc/docker/certs.d", "/etc/docker/registry"),
                  tag="images", teardown="after")
