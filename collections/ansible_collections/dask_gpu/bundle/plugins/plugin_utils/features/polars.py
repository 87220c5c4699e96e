"""Feature `polars` (dask_image_profile: polars, docs/polars.md): Polars queries on the cluster's GPUs through
cudf-polars' DaskEngine. The engine runs a rank on every worker and starts its own UCXX communicator among them
(rapidsmpf), with its own memory resource: the workers run without an RMM pool and without dask-cuda's UCX flags,
their containers get a large /dev/shm (UCX's shared-memory transport between the GPUs of a host), and the
communicator's traffic, which is not encrypted, stays inside the firewall.

Its facts (dask_cluster.polars): whether the profile is chosen and the workers' /dev/shm size. Its checks refuse what
the engine cannot run with, before anything changes.
"""
from __future__ import annotations

from typing import Any

from ansible_collections.dask_gpu.bundle.plugins.plugin_utils import own_image, profiles
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.feature import CheckInput, ClusterInput, Feature
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.options import parse_size, show

GIB = 2 ** 30
# The workers' /dev/shm with `auto`: Docker's own default is 64 MB; the bundle's was 1 GiB; cudf-polars' benchmark
# guide runs its containers with 16 GiB (cudf_polars/benchmarks.md).
SHM_AUTO = {False: GIB, True: 16 * GIB}
# The least /dev/shm the polars profile accepts, per GPU worker of the container: UCX's shared-memory transport
# keeps a segment for each peer on the host.
SHM_PER_WORKER = GIB
# `dask cuda worker` flags the engine must not meet (cudf_polars/dask_engine.md): a pool of RMM (the engine makes
# its own memory resource) and dask-cuda's UCX set-up (the engine makes its own communicator).
REFUSED_FLAGS = ("--rmm-pool-size", "--rmm-maximum-pool-size", "--rmm-managed-memory", "--rmm-async",
                 "--rmm-release-threshold", "--enable-tcp-over-ucx", "--enable-infiniband", "--enable-nvlink",
                 "--enable-rdmacm")


def enabled(settings: Any) -> bool:
    return profiles.bundle_has(settings, "polars", own_image.WORKER_SETTING)


def shm_bytes(value: Any, polars: bool) -> int | None:
    """The /dev/shm size dask_worker_shm_size means (auto: SHM_AUTO), or None for a value that is not a size."""
    if value in (None, "", "auto"):
        return SHM_AUTO[polars]
    parsed = parse_size(str(value))
    return int(parsed[1]) if parsed and parsed[0] == "bytes" else None


def docker_size(nbytes: int) -> str:
    """A size as Docker's --shm-size reads it (its units are binary): 16g, 512m, or bytes."""
    for unit, size in (("g", GIB), ("m", 2 ** 20)):
        if nbytes % size == 0:
            return f"{nbytes // size}{unit}"
    return str(nbytes)


def cluster(inp: ClusterInput) -> dict[str, Any]:
    on = enabled(inp.settings)
    nbytes = shm_bytes(inp.settings.get("dask_worker_shm_size"), on) or SHM_AUTO[on]
    # Its engine's UCXX communicator runs among the workers whatever the transport (spec.ucx_env, the firewall).
    speaks = bool(inp.model.get("workers_speak_ucx")) or on
    return {"polars": {"enabled": on, "shm_size": docker_size(nbytes)}, "workers_speak_ucx": speaks}


def checks(inp: CheckInput) -> list[str]:
    shm = inp.get("dask_worker_shm_size")
    on = bool((inp.cluster.get("polars") or {}).get("enabled"))
    nbytes = shm_bytes(shm, on)
    problems = []
    if nbytes is not None and nbytes < 2 ** 20:
        problems.append(f"dask_worker_shm_size ({show(shm)}) is under 1 MiB (a bare number is bytes): use auto or "
                        "a size like 16GiB")
    if not on:
        return problems
    where = "dask_image_profile=polars"
    if inp.get("dask_polars_unencrypted_ack") is not True and inp.is_scheduler:
        problems.append(f"{where} starts rapidsmpf's UCXX communicator among the workers, whose traffic is not "
                        "encrypted (the Dask links keep dask_transport). Set dask_polars_unencrypted_ack: true to "
                        "accept that inside the cluster's firewall (docs/polars.md).")
    if inp.get("dask_firewall_enabled") is not True and inp.is_scheduler:
        problems.append(f"{where} needs dask_firewall_enabled: true: the UCXX communicator listens on every "
                        "address of each worker host, without authentication (docs/polars.md)")
    if not inp.is_worker:
        return problems
    if inp.model.get("worker_mode") != "gpu":
        problems.append(f"runs CPU workers, but {where}: DaskEngine runs a rank on every worker of the cluster, and "
                        "each rank needs a GPU. Move the host to dask_cuda_workers, or use dask_image_profile: full.")
    pool = inp.model.get("rmm_pool_size")  # resolved once (profiles.rmm_pool): auto is none with this profile
    if pool:
        problems.append(f"dask_worker_rmm_pool_size ({show(pool)}) with {where}: the engine makes its own memory "
                        "resource on each worker, and a pool would hold the GPU's memory from it. Leave "
                        "dask_worker_rmm_pool_size auto (no pool with this profile) or empty.")
    flags = [arg for arg in inp.get("dask_worker_extra_args") or [] if str(arg).split("=")[0] in REFUSED_FLAGS]
    if flags:
        problems.append(f"dask_worker_extra_args ({', '.join(map(str, flags))}) with {where}: the engine makes its "
                        "own memory resource and UCXX communicator; dask-cuda's RMM and UCX flags conflict with "
                        "them. Remove them.")
    workers = int(inp.model.get("worker_count") or 1)
    if nbytes is not None and nbytes < SHM_PER_WORKER * workers:
        problems.append(f"dask_worker_shm_size ({show(shm)}) is under {workers} GiB (1 GiB for each of the "
                        f"{workers} GPU workers of this host) with {where}: UCX's shared-memory transport between "
                        "the GPUs of the host needs it. Use auto (16 GiB) or a larger size.")
    return problems


FEATURE = Feature(name="polars", role="dask_worker", cluster=cluster, checks=checks)
