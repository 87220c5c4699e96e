"""Filter `gpu_topology`: `nvidia-smi topo -m` text -> the GPU-to-GPU topology (shape: the docstring of
topology() in files/gpu_facts.py). The parser lives in the probe, which also runs alone on the hosts as the
local fact gpus.fact, so the role's probe and the persisted fact read the matrix the same way."""
from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any


def _probe() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpu_facts_probe",
                                                  Path(__file__).resolve().parent.parent / "files" / "gpu_facts.py")
    if spec is None or spec.loader is None:
        raise ImportError("gpu_facts.py, the GPU probe, is missing from the role's files")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_PROBE = _probe()


def gpu_topology(text: Any) -> dict[str, Any]:
    """The topology of `nvidia-smi topo -m`'s output; an empty topology for anything else, never an error."""
    try:
        return dict(_PROBE.topology(text))
    except Exception:  # odd output from a driver must not stop a play
        return dict(_PROBE.empty_topology())


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"gpu_topology": gpu_topology}
