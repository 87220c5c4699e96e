"""A host's GPUs as its workers use them: dask_worker_gpus resolved once against the probe (gpu_facts), each
selected GPU with the names Docker and CDI know it by, and how NVLink joins them."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# The CDI device kind of NVIDIA GPUs (nvidia-ctk cdi generate); each GPU is named by its index and its UUID.
CDI_KIND = "nvidia.com/gpu"


@dataclass
class Selection:
    """The GPUs the workers use (`gpus`, in the order given), the entries that name no GPU of the host
    (`unknown`), and those that name one already selected (`twice`: (entry, the first entry for that GPU))."""

    gpus: list[dict[str, Any]] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    twice: list[tuple[str, str]] = field(default_factory=list)


def probed(gpus: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The probe's GPUs with an index (the others cannot be selected)."""
    found = gpus.get("gpus") if isinstance(gpus, Mapping) else None
    entries: list[Any] = list(found) if isinstance(found, (list, tuple)) else []
    return [dict(gpu) for gpu in entries if isinstance(gpu, Mapping) and isinstance(gpu.get("index"), int)]


def select(wanted: list[str], gpus: Mapping[str, Any]) -> Selection:
    """dask_worker_gpus (indices, GPU or MIG UUIDs; [] for every GPU) against the probe. Each selected GPU carries
    `device` (the name given, or its index when all are used: what `--gpus device=` and CDI take) and `cdi`."""
    found = probed(gpus)
    selection = Selection()
    if not wanted:
        selection.gpus = [{**gpu, "device": str(gpu["index"]), "cdi": f"{CDI_KIND}={gpu['index']}"} for gpu in found]
        return selection
    owner: dict[str, dict[str, Any]] = {}
    for gpu in found:
        migs: list[Any] = list(gpu["mig"]) if isinstance(gpu.get("mig"), (list, tuple)) else []
        for name in (str(gpu["index"]), str(gpu.get("uuid")), *[str(mig) for mig in migs]):
            if name not in ("", "None"):
                owner[name] = gpu
    seen: dict[str, str] = {}
    for entry in (str(item) for item in wanted):
        owned = owner.get(entry)
        if owned is None:
            selection.unknown.append(entry)
            continue
        device = entry if entry.startswith("MIG-") else str(owned.get("uuid") or owned["index"])
        if device in seen:
            selection.twice.append((entry, seen[device]))
            continue
        seen[device] = entry
        selection.gpus.append({**owned, "device": entry, "cdi": f"{CDI_KIND}={entry}"})
    return selection


def known_names(gpus: Mapping[str, Any]) -> list[str]:
    """Every name that selects a GPU of the host (for messages)."""
    names: list[str] = []
    for gpu in probed(gpus):
        migs: list[Any] = list(gpu["mig"]) if isinstance(gpu.get("mig"), (list, tuple)) else []
        names += [str(gpu["index"]), str(gpu.get("uuid")), *[str(mig) for mig in migs]]
    return [name for name in names if name not in ("", "None")]


def nvlink(topology: Mapping[str, Any], indices: list[int]) -> tuple[str, list[str]]:
    """How NVLink joins these GPUs: ("all" | "some" | "none" | "unknown", the NV# link types seen).

    "unknown" when the topology does not cover every pair (nvidia-smi without topo, an older fact).
    """
    links = topology.get("links") or {}
    ordered = sorted(set(indices))
    pairs = [f"{first}-{second}" for first in ordered for second in ordered if first < second]
    if not pairs or any(pair not in links for pair in pairs):
        return "unknown", []
    nvlinks = sorted({str(links[pair]) for pair in pairs if str(links[pair]).startswith("NV")})
    nvlinked = sum(str(links[pair]).startswith("NV") for pair in pairs)
    return ("all" if nvlinked == len(pairs) else "some" if nvlinked else "none"), nvlinks


def gpu_list(indices: list[int]) -> str:
    """'0-3' for a run of three or more indices, else '0 and 1', '0, 2 and 5'."""
    ordered = [str(index) for index in sorted(indices)]
    if len(ordered) > 2 and sorted(indices) == list(range(min(indices), max(indices) + 1)):
        return f"{ordered[0]}-{ordered[-1]}"
    return " and ".join(part for part in (", ".join(ordered[:-1]), "".join(ordered[-1:])) if part)
