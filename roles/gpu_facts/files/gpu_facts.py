#!/usr/bin/env python3
"""Print this host's NVIDIA GPUs as JSON (also usable as /etc/ansible/facts.d/gpus.fact).

{"nvidia_smi": bool, "count": int, "driver_version": str|null, "driver_major": int|null,
 "gpus": [{"index", "uuid", "name", "memory_mib", "compute_capability", "mig": [uuid, ...]}], "error": str|null,
 "topology": see topology(), "vcpus": int, "memory_bytes": int|null}

`vcpus` is the host's CPUs online (os.cpu_count()): a CPU worker's default threads. Ansible's hardware facts count
/proc/cpuinfo instead (processor_vcpus), which can differ with CPUs offline or under lxcfs. `memory_bytes` is the
host's memory (MemTotal of /proc/meminfo), against which the checks hold the workers' memory limits and /dev/shm.
It is read here so that the checks need not gather the hardware facts, whose size (every CPU, disk and mount) every
later task of a run pays for on the controller (docs/fleets.md).

`topology` is left out with --no-topology (the gpu_facts role's probe runs `nvidia-smi topo -m` as a task of
its own and parses it with the `gpu_topology` filter, which is topology() below).
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys

QUERY = "index,uuid,name,memory.total,driver_version,compute_cap"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# A device column of the matrix: GPU0, NIC0 (or a NIC's own name, mlx5_0, on older drivers).
DEVICE = re.compile(r"[A-Za-z][A-Za-z0-9_]*\d")
GPU = re.compile(r"GPU(\d+)")
# A cell: X (self), NV# (a bonded set of # NVLinks), PIX, PXB, PHB, NODE, SYS (SOC on older drivers).
LINK = re.compile(r"X|N/A|[A-Z][A-Z0-9]*")
NVLINK = re.compile(r"NV\d+")


def empty_topology() -> dict[str, object]:
    return {"gpus": [], "matrix": {}, "links": {}, "nvlink_pairs": [], "all_pairs_nvlink": False}


def _table(text: str) -> tuple[list[str], dict[str, list[str]]]:
    """The matrix's device columns and its GPU rows (cells under those columns), ANSI codes stripped."""
    columns: list[str] = []
    rows: dict[str, list[str]] = {}
    for line in ANSI.sub("", text).splitlines():
        words = line.split()
        if not columns:
            if words and words[0] == "GPU0":  # the header; then CPU Affinity, NUMA Affinity, GPU NUMA ID
                for word in words:
                    if not DEVICE.fullmatch(word):
                        break
                    columns.append(word)
            continue
        if not words or words[0].rstrip(":") == "Legend":
            break
        cells = words[1:len(columns) + 1]
        if GPU.fullmatch(words[0]) and len(cells) == len(columns) and all(LINK.fullmatch(c) for c in cells):
            rows[words[0]] = cells
    return columns, rows


def topology(text: object) -> dict[str, object]:
    """The GPU-to-GPU part of `nvidia-smi topo -m`; an empty topology for anything else, never an error.

    {"gpus": [0, 1],                                       GPU indices, in the matrix's order
     "matrix": {"GPU0": {"GPU1": "NV18"}, "GPU1": {...}},  each GPU's link to every other GPU (self left out)
     "links": {"0-1": "NV18"},                             each pair once, lower index first
     "nvlink_pairs": [[0, 1]],                             the pairs whose link is NVLink (NV#)
     "all_pairs_nvlink": true}                             two or more GPUs and every pair NVLinked

    NIC rows and columns, the affinity columns and the legend are read past.
    """
    if not isinstance(text, str):
        return empty_topology()
    columns, rows = _table(text)
    gpus = [name for name in columns if GPU.fullmatch(name)]
    # All or nothing: a GPU without its row, or whose own cell is not X, means this is not a topology matrix.
    if not gpus or any(name not in rows or rows[name][columns.index(name)] != "X" for name in gpus):
        return empty_topology()
    matrix = {row: {column: rows[row][columns.index(column)] for column in gpus if column != row} for row in gpus}
    index = {name: int(name[3:]) for name in gpus}
    links = {f"{index[first]}-{index[second]}": matrix[first][second]
             for first in gpus for second in gpus if index[first] < index[second]}
    pairs = [[int(gpu) for gpu in pair.split("-")] for pair, link in links.items() if NVLINK.fullmatch(link)]
    return {"gpus": [index[name] for name in gpus], "matrix": matrix, "links": links, "nvlink_pairs": pairs,
            "all_pairs_nvlink": bool(links) and len(pairs) == len(links)}


def memory_bytes(meminfo: str = "/proc/meminfo") -> int | None:
    """The host's memory (MemTotal), None where it cannot be read."""
    with contextlib.suppress(OSError, ValueError), open(meminfo, encoding="ascii") as lines:
        for line in lines:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    return None


def gpus(command: str = "nvidia-smi", with_topology: bool = True) -> dict[str, object]:
    found: dict[str, object] = {"nvidia_smi": False, "count": 0, "driver_version": None, "driver_major": None,
                                "gpus": [], "error": None, "vcpus": os.cpu_count() or 1,
                                "memory_bytes": memory_bytes()}
    if with_topology:
        found["topology"] = empty_topology()
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
    if with_topology and items:
        # A driver without `topo` leaves the topology empty, as the role's probe does.
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            found["topology"] = topology(subprocess.run([smi, "topo", "-m"], check=True, capture_output=True,
                                                        text=True, timeout=60).stdout)
    return found


if __name__ == "__main__":
    # Usage: gpu_facts.py [--nvidia-smi PATH] [--no-topology]
    args = sys.argv[1:]
    smi_path = args[args.index("--nvidia-smi") + 1] if "--nvidia-smi" in args[:-1] else "nvidia-smi"
    print(json.dumps(gpus(smi_path, with_topology="--no-topology" not in args)))
