#!/usr/bin/env python3
"""Print this host's NVIDIA GPUs as JSON (also usable as /etc/ansible/facts.d/gpus.fact).

{"nvidia_smi": bool, "count": int, "driver_version": str|null, "driver_major": int|null,
 "gpus": [{"index", "uuid", "name", "memory_mib", "compute_capability", "mig": [uuid, ...]}], "error": str|null}
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

QUERY = "index,uuid,name,memory.total,driver_version,compute_cap"


def gpus(command: str = "nvidia-smi") -> dict[str, object]:
    found: dict[str, object] = {"nvidia_smi": False, "count": 0, "driver_version": None, "driver_major": None,
                                "gpus": [], "error": None}
    smi = shutil.which(command)
    if smi is None:
        found["error"] = f"{command} not found (no NVIDIA driver)"
        return found
    found["nvidia_smi"] = True
    try:
        rows = subprocess.run([smi, f"--query-gpu={QUERY}", "--format=csv,noheader,nounits"], check=True,
                              capture_output=True, text=True, timeout=60).stdout
        listing = subprocess.run([smi, "-L"], check=True, capture_output=True, text=True, timeout=60).stdout
    except (subprocess.SubprocessError, OSError) as error:
        found["error"] = f"nvidia-smi failed: {error}"
        return found
    mig: dict[int, list[str]] = {}
    current = -1
    for line in listing.splitlines():
        gpu = re.match(r"GPU (\d+):", line)
        if gpu:
            current = int(gpu.group(1))
        mig_uuid = re.search(r"\(UUID: (MIG-[^)]+)\)", line)
        if mig_uuid:
            mig.setdefault(current, []).append(mig_uuid.group(1))
    items = []
    for row in rows.strip().splitlines():
        index, uuid, name, memory, driver, capability = [cell.strip() for cell in row.split(",")]
        items.append({"index": int(index), "uuid": uuid, "name": name, "memory_mib": int(float(memory)),
                      "compute_capability": capability, "mig": mig.get(int(index), [])})
        found["driver_version"] = driver
        found["driver_major"] = int(driver.split(".")[0])
    found["gpus"] = items
    found["count"] = len(items)
    return found


if __name__ == "__main__":
    # Usage: gpu_facts.py [--nvidia-smi PATH]
    args = sys.argv[1:]
    print(json.dumps(gpus(args[1] if len(args) == 2 and args[0] == "--nvidia-smi" else "nvidia-smi")))
