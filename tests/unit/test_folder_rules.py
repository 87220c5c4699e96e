"""Folders that hold each other or the system (issue 64): every folder setting the bundle writes into is a managed
folder (no system or home folder, nor a parent of one: module_utils/paths.py), enumerated from the argument specs so
a new one is covered when it is added; and no folder whose content teardown keeps lies inside one that teardown
removes whole (the host's model's folders, so every setting that places one is covered)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ansible_collections.dask_gpu.bundle.plugins.module_utils.paths import kept_inside_trees
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils import checks
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils import settings as typing

ROOT = Path(__file__).resolve().parents[2]
SPECS = typing.role_specs(str(ROOT / "roles"))
# Folders the bundle only reads: its own checkout, and the wheels you give it for the images.
READ_ONLY = {"dask_repo_dir", "dask_images_extra_wheels_dir"}
GROUPS = {"all": ["g1"], "dask_scheduler": ["g1"], "dask_cuda_workers": ["g1"], "dask_cpu_workers": [],
          "dask_workers": ["g1"], "dask_cluster": ["g1"]}
GPU = {"index": 0, "uuid": "GPU-8ee11e14-577c-123d-6055-3792f1f36de5", "name": "NVIDIA H200", "memory_mib": 143771}
GPUS = {"count": 1, "driver_version": "580.159.04", "driver_major": 580, "vcpus": 16, "memory_bytes": 64 * 2 ** 30,
        "gpus": [GPU]}
FACTS = {"default_ipv4": {"address": "10.0.0.6"}, "all_ipv4_addresses": ["10.0.0.6"]}
BASE = {"dask_rapids_release": "26.10", "dask_cuda_major": "13", "dask_image_profile": "lean",
        "dask_base_image": "debian:bookworm-slim", "dask_repo_dir": str(ROOT), "dask_controller_dir": "/ctl"}


def problems(**values: Any) -> list[str]:
    return checks.problems({"host": "g1", "settings": typing.resolve({**BASE, **values}, SPECS), "specs": SPECS,
                            "groups": GROUPS, "facts": FACTS, "gpus": GPUS, "set": sorted({**BASE, **values}),
                            "pins": ["rapids-26.10-cuda13.txt"], "inventory_checks": True})


def folder_options() -> dict[str, str]:
    """Every option that names a folder, with its 'Allowed:' line."""
    found = {}
    for options in SPECS.values():
        for name, spec in options.items():
            if name.endswith("_dir"):
                found[name] = next((line for line in spec.get("description", []) if line.startswith("Allowed:")), "")
    return found


def test_every_folder_the_bundle_writes_into_is_a_managed_folder() -> None:
    options = folder_options()
    assert len(options) >= 7, options
    assert set(READ_ONLY) <= set(options)
    for name, allowed in options.items():
        if name not in READ_ONLY:
            assert allowed.startswith("Allowed: managed folder"), (name, allowed)


@pytest.mark.parametrize("name", sorted(set(folder_options()) - READ_ONLY))
def test_a_system_or_home_folder_is_refused_for_each(name: str) -> None:
    for folder in ("/var", "/home/alice", "/"):
        found = [p for p in problems(**{name: folder}) if name in p]
        assert found, (name, folder)


@pytest.mark.parametrize(("values", "kept", "tree"), [
    ({"dask_data_dir": "/etc/dask/data"}, "/etc/dask/data", "/etc/dask"),
    ({"dask_config_dir": "/srv/dask", "dask_data_dir": "/srv/dask/tls/data"}, "/srv/dask/tls/data", "/srv/dask"),
], ids=["data inside the configuration folder", "data inside the TLS folder of a configuration folder of yours"])
def test_a_kept_folder_inside_a_removed_tree_is_refused(values: dict[str, Any], kept: str, tree: str) -> None:
    found = [p for p in problems(**values) if "teardown removes whole" in p]
    assert found and f"the folder {kept} " in found[0] and f"inside {tree}," in found[0], found


def test_folders_beside_each_other_pass() -> None:
    assert not [p for p in problems(dask_data_dir="/srv/dask-data", dask_config_dir="/srv/dask-config")
                if "teardown removes whole" in p]


def test_the_rule_itself() -> None:
    folders = [{"path": "/a", "remove": "tree"}, {"path": "/a/b", "remove": "empty"},
               {"path": "/ab", "remove": "empty"}, {"path": "/a", "remove": "empty"},
               {"path": "/c/", "remove": "tree"}, {"path": "/c/d/", "remove": "tree"}]
    assert kept_inside_trees(folders) == [("/a/b", "/a")]
