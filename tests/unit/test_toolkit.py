"""Unit tests of the toolkit feature's checks (collection dask_gpu.bundle: plugin_utils/features/toolkit.py) for a
toolkit already on the host (nvidia_container_toolkit_source: installed) and a CDI spec you provide
(nvidia_container_toolkit_cdi_spec), over what the role's probe found (roles/nvidia_container_toolkit/files/
toolkit_probe.py, whose output becomes the host fact nvidia_container_toolkit_found); and the probe itself."""
from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible_collections.dask_gpu.bundle.plugins.filter import features as features_filter
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.features import toolkit
from test_validate import H200, SPECS, context, one, problems

ROOT = Path(__file__).resolve().parents[2]
PROBE = ROOT / "roles" / "nvidia_container_toolkit" / "files" / "toolkit_probe.py"
SPEC_PATH = "/etc/cdi/site-gpus.yaml"
UUID0, UUID1 = H200[0]["uuid"], H200[1]["uuid"]
MIG = "MIG-0f6a4c2d-1111-2222-3333-444455556666"
STRANGER = "GPU-00000000-1111-2222-3333-444444444444"


def device(name: str, *nodes: str) -> dict[str, Any]:
    return {"name": name, "containerEdits": {"deviceNodes": [{"path": node} for node in nodes]}}


def good_devices() -> list[dict[str, Any]]:
    """What nvidia-ctk cdi generate (index and UUID names) writes for the 2 x H200 host g1."""
    return [device("0", "/dev/nvidia0"), device(UUID0, "/dev/nvidia0"), device("1", "/dev/nvidia1"),
            device(UUID1, "/dev/nvidia1"), device("all", "/dev/nvidia0", "/dev/nvidia1")]


def spec_text(devices: list[dict[str, Any]] | None = None, kind: str = "nvidia.com/gpu") -> str:
    return yaml.safe_dump({"cdiVersion": "0.5.0", "kind": kind,
                           "devices": good_devices() if devices is None else devices,
                           "containerEdits": {"deviceNodes": [{"path": "/dev/nvidiactl"}]}})


def probed(ctx: dict[str, Any], *, ctk: str | None = "/usr/bin/nvidia-ctk", version: str = "1.18.0",
           spec: str | None = None, path: str = SPEC_PATH, error: str | None = None) -> dict[str, Any]:
    """The context with the probe's fact: nvidia-ctk (None: not on the host) and its version, the spec's text (None:
    no such file) as toolkit_probe.py prints them."""
    found: dict[str, Any] = {"nvidia_ctk": ctk, "version_error": None if ctk else "nvidia-ctk is not on PATH",
                             "version_output": f"NVIDIA Container Toolkit CLI version {version}\ncommit: 1a2b3c" if ctk
                             else "", "spec": None}
    if ctx["settings"].get("nvidia_container_toolkit_cdi_spec"):
        found["spec"] = {"path": path, "exists": spec is not None, "text": spec or "", "error": error}
    ctx["facts"][toolkit.PROBE_FACT] = found
    return ctx


def cdi(**overrides: Any) -> dict[str, Any]:
    """GPU host g1 asking for CDI devices, with a spec of its own at SPEC_PATH."""
    return context("g1", **{"dask_worker_gpu_request": "cdi", "nvidia_container_toolkit_cdi_spec": SPEC_PATH,
                            **overrides})


# ---------------------------------------------------------------------------------------------- the options

def test_the_options_have_specs_and_defaults() -> None:
    source, spec = SPECS["nvidia_container_toolkit"]["nvidia_container_toolkit_source"], \
        SPECS["nvidia_container_toolkit"]["nvidia_container_toolkit_cdi_spec"]
    assert (source["type"], source["default"], source["choices"]) == ("str", "repository", ["repository", "installed"])
    assert spec["type"] == "str" and spec["default"] == "" and "Allowed: absolute path, or empty" in spec["description"]
    defaults = yaml.safe_load((ROOT / "roles" / "nvidia_container_toolkit" / "defaults" / "main.yml").read_text())
    assert defaults["nvidia_container_toolkit_source"] == "repository"
    assert defaults["nvidia_container_toolkit_cdi_spec"] == ""


def test_wrong_values_of_the_options_are_refused_by_their_specs() -> None:
    one(context("g1", nvidia_container_toolkit_source="dpkg"), "host g1",
        "nvidia_container_toolkit_source (\"dpkg\") must be one of repository, installed")
    one(context("g1", nvidia_container_toolkit_cdi_spec="cdi/site.yaml"), "host g1",
        "nvidia_container_toolkit_cdi_spec", "cdi/site.yaml")
    one(context("g1", nvidia_container_toolkit_cdi_spec=["/etc/cdi/a.yaml"]), "host g1",
        "nvidia_container_toolkit_cdi_spec")


# ---------------------------------------------------------------------------------------------- refusals

def _no_name(name: str) -> Callable[[], dict[str, Any]]:
    return lambda: probed(cdi(), spec=spec_text([d for d in good_devices() if d["name"] != name]))


# (case, the context it makes, fragments of its one problem): every refusal of the toolkit's checks.
REFUSALS: list[tuple[str, Callable[[], dict[str, Any]], list[str]]] = [
    ("installed where it is not", lambda: probed(context("g1", nvidia_container_toolkit_source="installed"), ctk=None),
     ["nvidia_container_toolkit_source=installed, but this host has no nvidia-ctk (nvidia-ctk is not on PATH)",
      "marked installed where it is not", "nvidia_container_toolkit_source: repository"]),
    ("installed too old for the bundle's CDI spec",
     lambda: probed(context("g1", nvidia_container_toolkit_source="installed", dask_worker_gpu_request="cdi"),
                    version="1.14.6"),
     ["nvidia_container_toolkit_source=installed with dask_worker_gpu_request=cdi needs toolkit >= 1.15.0",
      "nvidia-ctk on this host is 1.14.6", "nvidia_container_toolkit_cdi_spec", "dask_worker_gpu_request: gpus"]),
    ("installed with a version that cannot be read",
     lambda: probed(context("g1", nvidia_container_toolkit_source="installed", dask_worker_gpu_request="cdi"),
                    version="unknown"),
     ["needs toolkit >= 1.15.0", "nvidia-ctk on this host is unreadable", "version unknown"]),
    ("the probe failed", lambda: failed_probe(context("g1", nvidia_container_toolkit_source="installed")),
     ["nvidia_container_toolkit_source or nvidia_container_toolkit_cdi_spec could not be checked",
      "its probe failed (python3: not found)"]),
    ("spec missing", lambda: probed(cdi(), spec=None),
     [f"nvidia_container_toolkit_cdi_spec (\"{SPEC_PATH}\") is not a file on this host",
      f"nvidia-ctk cdi generate --output={SPEC_PATH}"]),
    ("spec unreadable", lambda: probed(cdi(), spec="", error="[Errno 13] Permission denied"),
     [f"(\"{SPEC_PATH}\") cannot be read on this host ([Errno 13] Permission denied)"]),
    ("spec that Docker does not read", lambda: probed(cdi(nvidia_container_toolkit_cdi_spec="/etc/cdi/site.yml"),
                                                      spec=spec_text(), path="/etc/cdi/site.yml"),
     ["(\"/etc/cdi/site.yml\"): Docker reads only *.yaml and *.json files as CDI specs"]),
    ("spec not YAML", lambda: probed(cdi(), spec="kind: nvidia.com/gpu\ndevices: [\n"),
     [f"(\"{SPEC_PATH}\") is not valid YAML (", "line 3"]),
    ("spec of another kind", lambda: probed(cdi(), spec=spec_text(kind="amd.com/gpu")),
     ["has kind \"amd.com/gpu\", not nvidia.com/gpu"]),
    ("spec that is no mapping", lambda: probed(cdi(), spec="- nvidia.com/gpu\n"),
     ["has kind none (not a mapping), not nvidia.com/gpu"]),
    ("spec without all", _no_name("all"), ["does not name nvidia.com/gpu=all", "it names 0, "]),
    ("spec without a GPU's index", _no_name("1"), ["does not name nvidia.com/gpu=1,"]),
    ("spec without the selected worker GPU",
     lambda: probed(cdi(dask_worker_gpus=[UUID1]), spec=spec_text([d for d in good_devices() if d["name"] != UUID1])),
     [f"does not name nvidia.com/gpu={UUID1}"]),
    ("spec without the selected MIG device",
     lambda: probed(mig_host(cdi(dask_worker_gpus=[MIG])), spec=spec_text()), [f"does not name nvidia.com/gpu={MIG}"]),
    ("spec without a GPU's device node",
     lambda: probed(cdi(), spec=spec_text([device(d["name"], "/dev/nvidia0") for d in good_devices()])),
     ["gives no device node /dev/nvidia1 in its devices' containerEdits.deviceNodes"]),
    ("spec naming a GPU UUID the host does not have",
     lambda: probed(cdi(), spec=spec_text([*good_devices(), device(STRANGER, "/dev/nvidia0")])),
     [f"names {STRANGER}, which this host does not have", UUID0]),
    ("spec naming an index beyond the GPU count",
     lambda: probed(cdi(), spec=spec_text([*good_devices(), device("2", "/dev/nvidia2"),
                                           device("3:1", "/dev/nvidia3")])),
     ["names 2, 3:1, which this host does not have (it has 2 GPU(s)"]),
    ("spec naming a MIG device the host does not have",
     lambda: probed(cdi(), spec=spec_text([*good_devices(), device(MIG, "/dev/nvidia0")])),
     [f"names {MIG}, which this host does not have"]),
]


def failed_probe(ctx: dict[str, Any]) -> dict[str, Any]:
    ctx["facts"][toolkit.PROBE_FACT] = {"error": "python3: not found"}
    return ctx


def mig_host(ctx: dict[str, Any]) -> dict[str, Any]:
    ctx["gpus"]["gpus"][0]["mig"] = [MIG]
    return ctx


@pytest.mark.parametrize(("case", "make", "fragments"), REFUSALS, ids=[case for case, _, _ in REFUSALS])
def test_each_refusal_names_the_host_the_variable_and_what_was_found(
        case: str, make: Callable[[], dict[str, Any]], fragments: list[str]) -> None:
    problem = one(make(), "host g1: ", *fragments)
    assert "nvidia_container_toolkit_" in problem, problem


def test_a_spec_lists_all_its_problems_at_once() -> None:
    devices = [device(d["name"], "/dev/nvidia0") for d in good_devices() if d["name"] != "all"]
    found = problems(probed(cdi(), spec=spec_text([*devices, device(STRANGER, "/dev/nvidia0")])))
    assert len(found) == 3 and all(problem.startswith(f"host g1: nvidia_container_toolkit_cdi_spec (\"{SPEC_PATH}\")")
                                   for problem in found), found


# ---------------------------------------------------------------------------------------------- accepted

def test_a_spec_naming_all_each_gpu_and_the_selection_passes() -> None:
    assert problems(probed(cdi(), spec=spec_text())) == []
    assert problems(probed(cdi(dask_worker_gpus=[UUID1, "0"]), spec=spec_text())) == []
    # JSON is YAML: a spec in JSON passes too (Docker reads *.json).
    json_spec = json.dumps(yaml.safe_load(spec_text()))
    assert problems(probed(cdi(nvidia_container_toolkit_cdi_spec="/var/run/cdi/gpus.json"), spec=json_spec,
                           path="/var/run/cdi/gpus.json")) == []


def test_a_spec_naming_the_selected_mig_device_passes() -> None:
    devices = [*good_devices(), device(MIG, "/dev/nvidia0", "/dev/nvidia-caps/nvidia-cap21"),
               device("0:0", "/dev/nvidia0", "/dev/nvidia-caps/nvidia-cap21")]
    assert problems(probed(mig_host(cdi(dask_worker_gpus=[MIG])), spec=spec_text(devices))) == []


@pytest.mark.parametrize("version", ["1.15.0", "1.17.8", "1.18.0", "2.0.0-rc.1"])
def test_an_installed_toolkit_new_enough_passes(version: str) -> None:
    ctx = context("g1", nvidia_container_toolkit_source="installed", dask_worker_gpu_request="cdi")
    assert problems(probed(ctx, version=version)) == []


def test_an_older_installed_toolkit_passes_where_it_makes_no_spec() -> None:
    # NVIDIA's runtime (--gpus) needs no nvidia-ctk cdi; a spec you provide needs no nvidia-ctk at all.
    assert problems(probed(context("g1", nvidia_container_toolkit_source="installed"), version="1.10.0")) == []
    assert problems(probed(cdi(nvidia_container_toolkit_source="installed"), version="1.10.0", spec=spec_text())) == []


def test_nothing_is_held_against_what_was_not_probed_or_is_not_used() -> None:
    # No probe (the inventory-only check reaches no host): nothing to say.
    assert problems(cdi(nvidia_container_toolkit_source="installed")) == []
    # A fact of an earlier run (a fact cache) for another path is not this spec's.
    assert problems(probed(cdi(), spec=None, path="/etc/cdi/old.yaml")) == []
    # The spec is for CDI only; a CPU worker host gets no toolkit.
    assert problems(probed(context("g1", nvidia_container_toolkit_cdi_spec=SPEC_PATH), spec=None)) == []
    cpu = context("c1", nvidia_container_toolkit_source="installed")
    cpu["facts"][toolkit.PROBE_FACT] = {"nvidia_ctk": None, "version_output": "", "spec": None}
    assert problems(cpu) == []
    # The default source: the bundle installs the toolkit, whatever is on the host now.
    assert problems(probed(context("g1", dask_worker_gpu_request="cdi"), ctk=None)) == []


def test_the_toolkit_version_is_read_from_nvidia_ctk() -> None:
    assert toolkit.toolkit_version("NVIDIA Container Toolkit CLI version 1.17.8\ncommit: f202b80") == (1, 17, 8)
    assert toolkit.toolkit_version("NVIDIA Container Toolkit CLI version 1.14.0-rc.2") == (1, 14, 0)
    assert toolkit.toolkit_version("") is None
    assert toolkit.TOOLKIT_CDI == (1, 15, 0)


def test_the_role_checks_with_the_same_filters() -> None:
    """The role's checks after install (tasks/cdi.yml) call the same functions as playbooks/check.yml."""
    filters = features_filter.FilterModule().filters()
    assert filters["toolkit_cdi_spec_problems"] is toolkit.spec_problems
    assert filters["toolkit_cdi_devices"] is toolkit.wanted_devices
    host = {"gpus": copy.deepcopy(H200), "worker_gpus": [{"index": 1, "cdi": f"nvidia.com/gpu={UUID1}"}]}
    assert toolkit.wanted_devices(host) == ["nvidia.com/gpu=all", "nvidia.com/gpu=0", "nvidia.com/gpu=1",
                                            f"nvidia.com/gpu={UUID1}"]
    assert toolkit.spec_problems(None, SPEC_PATH, host, "file not found: " + SPEC_PATH) == [
        f"nvidia_container_toolkit_cdi_spec (\"{SPEC_PATH}\") cannot be read on this host (file not found: "
        f"{SPEC_PATH}). Put the spec there (nvidia-ctk cdi generate --output={SPEC_PATH}), or leave "
        "nvidia_container_toolkit_cdi_spec empty for the bundle to make /etc/cdi/nvidia.yaml"]
    cdi_yml = (ROOT / "roles" / "nvidia_container_toolkit" / "tasks" / "cdi.yml").read_text()
    assert "dask_gpu.bundle.toolkit_cdi_spec_problems" in cdi_yml and "dask_gpu.bundle.toolkit_cdi_devices" in cdi_yml


# ---------------------------------------------------------------------------------------------- the probe

def run_probe(tmp_path: Path, *args: str, ctk: str | None = None) -> dict[str, Any]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    if ctk is not None:
        fake = bin_dir / "nvidia-ctk"
        fake.write_text(f"#!/bin/sh\nprintf '%s\\n' {ctk!r}\n")
        fake.chmod(0o755)
    result = subprocess.run([sys.executable, str(PROBE), *args], capture_output=True, text=True, check=True,
                            env={"PATH": str(bin_dir)})
    found: dict[str, Any] = json.loads(result.stdout)
    return found


def test_the_probe_reads_the_toolkits_version_and_the_spec(tmp_path: Path) -> None:
    spec = tmp_path / "site.yaml"
    spec.write_text(spec_text())
    found = run_probe(tmp_path, "--spec", str(spec), ctk="NVIDIA Container Toolkit CLI version 1.17.8")
    assert found["nvidia_ctk"] == str(tmp_path / "bin" / "nvidia-ctk") and found["version_error"] is None
    assert toolkit.toolkit_version(found["version_output"]) == (1, 17, 8)
    assert found["spec"] == {"path": str(spec), "exists": True, "text": spec_text(), "error": None}


def test_the_probe_says_what_is_missing(tmp_path: Path) -> None:
    found = run_probe(tmp_path, "--spec", str(tmp_path / "none.yaml"))
    assert found["nvidia_ctk"] is None and found["version_error"] == "nvidia-ctk is not on PATH"
    assert found["spec"] == {"path": str(tmp_path / "none.yaml"), "exists": False, "text": "", "error": None}
    assert run_probe(tmp_path)["spec"] is None
    (tmp_path / "folder.yaml").mkdir()
    assert run_probe(tmp_path, "--spec", str(tmp_path / "folder.yaml"))["spec"]["error"]


def test_the_probe_fact_is_set_where_the_checks_read_it() -> None:
    """The checks read the probe's result among the host's facts (hosts_problems passes ansible_facts): the probe
    sets it as a cacheable fact, the model imports the probe before its checks, on hosts that get the toolkit, and
    the fact is a published name (not a misspelt option)."""
    tasks = yaml.safe_load((ROOT / "roles" / "nvidia_container_toolkit" / "tasks" / "probe.yml").read_text())
    setters = [task for block in tasks for task in block["block"] if "ansible.builtin.set_fact" in task]
    assert [set(task["ansible.builtin.set_fact"]) for task in setters] == [{toolkit.PROBE_FACT, "cacheable"}]
    assert setters[0]["ansible.builtin.set_fact"]["cacheable"] is True
    model = yaml.safe_load((ROOT / "roles" / "dask" / "tasks" / "model.yml").read_text())
    names = [task.get("ansible.builtin.import_role", task.get("ansible.builtin.import_tasks")) for task in model]
    probe = names.index({"name": "nvidia_container_toolkit", "tasks_from": "probe"})
    assert probe < names.index("validate.yml") and model[probe]["when"] == "dask_host.needs_toolkit"
    assert toolkit.PROBE_FACT in (ROOT / "roles" / "dask" / "vars" / "main.yml").read_text()
