#!/usr/bin/env python3
"""On a GPU machine: does a GPU worker host's model, as the fast rerun hashes it, stay the same between two probes?

    python3 tests/gpu/fast_rerun_model.py [--nvidia-smi nvidia-smi] [--pause 20] [--out result.json]

Probes the GPUs twice as roles/gpu_facts/tasks/probe.yml does (gpu_facts.py, `nvidia-smi topo -m`, the NVML health
rules of gpu_health.py), with a pause between (readings such as temperature and power move), builds the host model
of a dask_cuda_workers host from each (plugin_utils.model.host_model, the inventory's defaults, this host's address)
and its `model HOST` part (filter converge_parts): equal parts mean a rerun finds the host unchanged. Prints both
parts, the judged health and what the raw NVML readings changed between the probes. Standard library only."""
from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "collections"))
sys.path.insert(0, str(ROOT / "roles" / "gpu_facts" / "filter_plugins"))
from ansible_collections.dask_gpu.bundle.plugins.filter.converge import converge_parts  # noqa: E402
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.model import host_model  # noqa: E402
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.settings import role_specs, typed_settings  # noqa: E402
from gpu_topology import gpu_topology  # noqa: E402

HOST = "gpu-host"
HEALTH = ROOT / "images" / "verify" / "src" / "dask_gpu_verify" / "gpu_health.py"


def run(*argv: str) -> str:
    return subprocess.run(list(argv), capture_output=True, text=True, check=True).stdout


def probe(nvidia_smi: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """gpu_facts_found as the role sets it, and the raw NVML readings."""
    found = json.loads(run(sys.executable, str(ROOT / "roles" / "gpu_facts" / "files" / "gpu_facts.py"),
                           "--nvidia-smi", nvidia_smi, "--no-topology"))
    judged = json.loads(run(sys.executable, str(HEALTH), "--summary", "--expect-nvlinks", "{}"))
    found |= {"topology": gpu_topology(run(nvidia_smi, "topo", "-m")), "health": judged["health"],
              "health_error": judged.get("error")}
    return found, json.loads(run(sys.executable, str(HEALTH)))


def model_part(found: dict[str, Any], settings: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    address = socket.gethostbyname(socket.gethostname())
    facts = {"default_ipv4": {"address": address, "interface": "eth0"}, "interfaces": []}
    groups = {"all": [HOST], "dask_cuda_workers": [HOST], "dask_scheduler": []}
    model = host_model(HOST, settings, facts, found, groups)
    parts = converge_parts({HOST: settings}, {HOST: model}, {HOST: ["dask_cuda_workers"]}, "tag", str(ROOT),
                           "/nonexistent", 30)
    return parts[f"model {HOST}"], model


def changed(first: Any, second: Any, path: str = "") -> list[str]:
    if isinstance(first, dict) and isinstance(second, dict):
        return [line for key in sorted(set(first) | set(second))
                for line in changed(first.get(key), second.get(key), f"{path}.{key}")]
    if isinstance(first, list) and isinstance(second, list) and len(first) == len(second):
        pairs = enumerate(zip(first, second, strict=True))
        return [line for index, pair in pairs for line in changed(*pair, f"{path}[{index}]")]
    return [] if first == second else [f"{path}: {first} -> {second}"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nvidia-smi", default="nvidia-smi")
    parser.add_argument("--pause", type=float, default=20)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    settings = typed_settings({}, role_specs(str(ROOT / "roles")), [HOST])
    first, raw_first = probe(args.nvidia_smi)
    time.sleep(args.pause)
    second, raw_second = probe(args.nvidia_smi)
    (part_first, model), (part_second, _) = model_part(first, settings), model_part(second, settings)
    result = {"gpus": [gpu.get("name") for gpu in first.get("gpus") or []], "worker_gpus": len(model["worker_gpus"]),
              "health": first.get("health"), "model_part": [part_first, part_second],
              "unchanged": part_first == part_second, "readings_changed": changed(raw_first, raw_second)}
    print(json.dumps(result, indent=1))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0 if result["unchanged"] else 1


if __name__ == "__main__":
    sys.exit(main())
