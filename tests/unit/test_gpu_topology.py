"""Unit tests of the gpu_topology filter (roles/gpu_facts/filter_plugins/gpu_topology.py, the parser in
roles/gpu_facts/files/gpu_facts.py): `nvidia-smi topo -m` as recorded on a 2 x H200 machine and as printed on
NVLinked, NVSwitch (with NICs), PCIe-only and single-GPU machines, garbage, and the probe's persisted-fact path."""
from __future__ import annotations

import importlib.util
import json
import stat
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
ROLE = ROOT / "roles" / "gpu_facts"
EMPTY = {"gpus": [], "matrix": {}, "links": {}, "nvlink_pairs": [], "all_pairs_nvlink": False}
LEGEND = """
Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
"""


def load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


plugin = load("gpu_topology", ROLE / "filter_plugins" / "gpu_topology.py")
probe = load("gpu_facts", ROLE / "files" / "gpu_facts.py")
topology = plugin.FilterModule().filters()["gpu_topology"]


def matrix(links: list[list[str]], nics: list[list[str]] | None = None, sep: str = "\t") -> str:
    """A topo -m table as the driver prints it: header underlined (ANSI), tab-separated, affinity columns."""
    names = [f"GPU{i}" for i in range(len(links))] + [f"NIC{i}" for i in range(len(nics or []))]
    lines = [sep + "\x1b[4m" + sep.join([*names, "CPU Affinity", "NUMA Affinity", "GPU NUMA ID"]) + "\x1b[0m"]
    for i, row in enumerate(links):
        cells = [" X " if j == i else row[j] for j in range(len(links))] + [nic[i] for nic in nics or []]
        lines.append(sep.join([f"GPU{i}", *cells, "0-55,112-167" if i < 4 else "56-111,168-223",
                               "0" if i < 4 else "1", "", "N/A"]))
    for k, nic in enumerate(nics or []):
        cells = nic + [" X " if j == k else "SYS" for j in range(len(nics or []))]
        lines.append(sep.join([f"NIC{k}", *cells]))
    text = "\n".join(lines) + "\n" + LEGEND
    if nics:
        text += "\nNIC Legend:\n\n" + "".join(f"  NIC{k}: mlx5_{k}\n" for k in range(len(nics)))
    return text


def every(count: int, link: str) -> list[list[str]]:
    return [[link] * count for _ in range(count)]


def test_the_recorded_2_x_h200_matrix() -> None:
    found = topology((ROOT / "tests" / "gpu" / "results" / "h200x2-topo.txt").read_text())
    assert found == {"gpus": [0, 1], "matrix": {"GPU0": {"GPU1": "NV18"}, "GPU1": {"GPU0": "NV18"}},
                     "links": {"0-1": "NV18"}, "nvlink_pairs": [[0, 1]], "all_pairs_nvlink": True}
    json.dumps(found)  # a fact: JSON all the way down


def test_four_gpus_every_pair_nv18() -> None:
    found = topology(matrix(every(4, "NV18")))
    assert found["gpus"] == [0, 1, 2, 3]
    assert found["links"] == {pair: "NV18" for pair in ("0-1", "0-2", "0-3", "1-2", "1-3", "2-3")}
    assert found["nvlink_pairs"] == [[0, 1], [0, 2], [0, 3], [1, 2], [1, 3], [2, 3]]
    assert found["all_pairs_nvlink"] is True
    assert found["matrix"]["GPU2"] == {"GPU0": "NV18", "GPU1": "NV18", "GPU3": "NV18"}


def test_eight_gpus_with_nic_rows_and_columns() -> None:
    nics = [["PXB", "PXB", "NODE", "NODE", "SYS", "SYS", "SYS", "SYS"],
            ["SYS", "SYS", "SYS", "SYS", "PXB", "PXB", "NODE", "NODE"]]
    found = topology(matrix(every(8, "NV18"), nics))
    assert found["gpus"] == list(range(8))
    assert len(found["links"]) == 28 and set(found["links"].values()) == {"NV18"}
    assert found["all_pairs_nvlink"] is True
    assert all(not name.startswith("NIC") for row in found["matrix"].values() for name in row)
    assert not any(name.startswith("NIC") for name in found["matrix"])


def test_pcie_only_gpus_have_no_nvlink_pairs() -> None:
    links = [["X", "PIX", "NODE", "SYS"], ["PIX", "X", "NODE", "SYS"],
             ["NODE", "NODE", "X", "SYS"], ["SYS", "SYS", "SYS", "X"]]
    found = topology(matrix(links, sep="    "))  # spaces, as a copy from a terminal has them
    assert found["links"] == {"0-1": "PIX", "0-2": "NODE", "0-3": "SYS", "1-2": "NODE", "1-3": "SYS", "2-3": "SYS"}
    assert found["nvlink_pairs"] == [] and found["all_pairs_nvlink"] is False


def test_some_pairs_nvlinked() -> None:
    links = [["X", "NV4", "SYS", "SYS"], ["NV4", "X", "SYS", "SYS"],
             ["SYS", "SYS", "X", "NV4"], ["SYS", "SYS", "NV4", "X"]]
    found = topology(matrix(links))
    assert found["nvlink_pairs"] == [[0, 1], [2, 3]] and found["all_pairs_nvlink"] is False


def test_a_single_gpu_is_a_matrix_of_one() -> None:
    found = topology(matrix([["X"]]))
    assert found == {"gpus": [0], "matrix": {"GPU0": {}}, "links": {}, "nvlink_pairs": [], "all_pairs_nvlink": False}


@pytest.mark.parametrize("text", [
    "", "\n\n", None, 42, b"\tGPU0\tGPU1", ["GPU0"], {"GPU0": "X"},
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
    "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.",
    "\tGPU0\tGPU1\nGPU0\tbanana\tsplit\nGPU1\tNV18\t X \n",   # cells that are not links
    "\tGPU0\tGPU1\nGPU0\tNV18\tNV18\nGPU1\tNV18\tNV18\n",      # no X on the diagonal: not a topology
    "\tGPU0\tGPU1\nGPU0\t X \n",                               # a short row
    LEGEND, "\x1b[4m\x1b[0m", "GPU0",
])
def test_anything_else_is_an_empty_topology(text: object) -> None:
    assert topology(text) == EMPTY


def fake_smi(tmp_path: Path, topo: str | None) -> str:
    """A stand-in nvidia-smi: the 2 x H200 fixtures for the probe's queries, `topo -m` as given (None: fails)."""
    fixtures = ROOT / "tests" / "inventory" / "fixtures"
    (tmp_path / "topo.txt").write_text(topo or "")
    script = tmp_path / "nvidia-smi"
    script.write_text(f"""#!/bin/sh
case "$*" in
  "-L") cat {fixtures / "h200x2-nvidia-smi-L.txt"} ;;
  --query-gpu=*) cat {fixtures / "h200x2-nvidia-smi-query.csv"} ;;
  "topo -m") {"cat " + str(tmp_path / "topo.txt") if topo is not None else "echo 'not supported' >&2; exit 3"} ;;
  *) exit 2 ;;
esac
""")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


def test_the_persisted_fact_carries_the_topology(tmp_path: Path) -> None:
    """gpus.fact (the probe alone on a host) reports the same topology as the role's probe task."""
    recorded = (ROOT / "tests" / "gpu" / "results" / "h200x2-topo.txt").read_text()
    found = probe.gpus(fake_smi(tmp_path, recorded))
    assert found["count"] == 2 and found["topology"] == topology(recorded)
    assert "topology" not in probe.gpus(fake_smi(tmp_path, recorded), with_topology=False)


def test_a_driver_without_topo_gives_an_empty_topology(tmp_path: Path) -> None:
    found = probe.gpus(fake_smi(tmp_path, None))
    assert found["count"] == 2 and found["error"] is None and found["topology"] == EMPTY
    assert probe.gpus(str(tmp_path / "missing"))["topology"] == EMPTY
