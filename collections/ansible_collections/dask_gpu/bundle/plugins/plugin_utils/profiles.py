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
