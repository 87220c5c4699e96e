"""The image profiles (images/requirements/<profile>.txt) and what each carries: one table, read by the model, the
checks and the specs. Each profile is a superset of the one before it, except cpu."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

PROFILES: dict[str, frozenset[str]] = {
    "cpu": frozenset(),
    "lean": frozenset({"cuda", "ucx"}),
    "full": frozenset({"cuda", "ucx", "cudf"}),
    "polars": frozenset({"cuda", "ucx", "cudf", "polars"}),
}

# Each profile's image size in Docker with the pinned RAPIDS release (measured: docs/images.md; the scheduler and worker
# images share all but their last layers): what the space check asks room for before the images exist
# (roles/dask_images/tasks/space.yml). Your own packages add to it; once built, the images' own size counts.
SIZES: dict[str, int] = {"cpu": 340_000_000, "lean": 2_710_000_000, "full": 5_360_000_000, "polars": 5_560_000_000}

# The RMM pool each profile's GPU workers get with dask_worker_rmm_pool_size: auto (measured: docs/performance.md,
# "RMM pool"). full: 0.8 of the GPU, and CuPy allocates from it too (it would get only the rest otherwise): the
# seeds-like ETL on one GPU ran 1.10 x faster in 6 interleaved rounds on 2 x H200 (GPUs swapped halfway) and 1.11 x
# in 4 on 4 x H100. lean: no pool (CuPy keeps its own allocator). polars: no pool (its engine makes its own memory
# resource; a pool is refused there). cpu: no GPU.
AUTO_POOL: dict[str, str] = {"full": "0.8"}


def rmm_pool(settings: Mapping[str, Any], own_setting: str) -> tuple[str, bool]:
    """(the RMM pool size a host's GPU workers get, "" for none; whether CuPy allocates through RMM), from
    dask_worker_rmm_pool_size and dask_worker_rmm_for_cupy: auto follows the bundle's profile (your own images: no
    pool)."""
    size = str(settings.get("dask_worker_rmm_pool_size") or "")
    for_cupy = settings.get("dask_worker_rmm_for_cupy") is True
    if size != "auto":
        return size, for_cupy
    profile = "" if settings.get(own_setting) else str(settings.get("dask_image_profile"))
    size = AUTO_POOL.get(profile, "")
    return size, for_cupy or bool(size)


def has(profile: Any, part: str) -> bool:
    """The profile's images carry `part` (cuda: dask-cuda and CUDA; ucx: distributed-ucxx; cudf: cuDF and
    dask-cudf; polars: cudf-polars, rapidsmpf and Polars)."""
    return part in PROFILES.get(str(profile), frozenset())


def with_part(part: str) -> str:
    """The profiles that carry a part, for messages: 'full or polars'."""
    names = [name for name, parts in PROFILES.items() if part in parts]
    return ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else names[0]


def bundle_has(settings: Mapping[str, Any], part: str, own_setting: str) -> bool:
    """The bundle's own images carry a part (your own images, own_setting, are judged by their inspection)."""
    return has(settings.get("dask_image_profile"), part) and not settings.get(own_setting)
