"""Feature `toolkit` (role nvidia_container_toolkit, docs/gpu-request.md): GPUs reach the worker containers through
NVIDIA's runtime (--gpus) or as CDI devices; CDI needs Docker >= 25. The toolkit comes from NVIDIA's repository or
is already on the host (nvidia_container_toolkit_source: installed), and the CDI spec is the bundle's or one you
provide (nvidia_container_toolkit_cdi_spec); the checks hold both against the host as its probe found it."""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import yaml
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.feature import CheckInput, Feature
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.gpus import CDI_KIND, probed
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.options import as_int, as_mapping, as_sequence, show

# The oldest Docker with CDI devices (dask_worker_gpu_request: cdi).
DOCKER_CDI = 25
# The oldest toolkit that makes the bundle's CDI spec and checks it (NVIDIA/nvidia-container-toolkit, CHANGELOG.md):
# `nvidia-ctk cdi generate` came in v1.12.0, `nvidia-ctk cdi list` in v1.14.0 (v1.14.0-rc.1), and one spec naming
# each device by index and by UUID (--device-name-strategy given twice, as tasks/cdi.yml does) in v1.15.0
# (v1.15.0-rc.4); before it the last strategy given won, and the spec had no index names.
TOOLKIT_CDI = (1, 15, 0)
# Docker's CDI cache reads only these files of a folder (container-device-interface, pkg/cdi/spec-dirs.go).
SPEC_SUFFIXES = (".yaml", ".json")
# The fact the role's probe sets (tasks/probe.yml) and the checks read among the host's facts.
PROBE_FACT = "nvidia_container_toolkit_found"
SOURCE, SPEC = "nvidia_container_toolkit_source", "nvidia_container_toolkit_cdi_spec"
VERSION = re.compile(r"version\s+v?([0-9]+)\.([0-9]+)\.([0-9]+)")
INDEX_NAME = re.compile(r"([0-9]+)(?::[0-9]+)?")


def toolkit_version(output: str) -> tuple[int, int, int] | None:
    """The version `nvidia-ctk --version` prints ("NVIDIA Container Toolkit CLI version 1.17.8"), or None."""
    match = VERSION.search(str(output or ""))
    return (int(match.group(1)), int(match.group(2)), int(match.group(3))) if match else None


def wanted_devices(host: Mapping[str, Any]) -> list[str]:
    """The CDI devices a host's containers may ask for: all GPUs, each GPU by index, each selected worker GPU (a
    UUID or a MIG device as dask_worker_gpus names it)."""
    gpus = probed({"gpus": as_sequence(host.get("gpus"))})
    names = [f"{CDI_KIND}=all"] + [f"{CDI_KIND}={gpu['index']}" for gpu in gpus]
    names += [str(gpu["cdi"]) for gpu in as_sequence(host.get("worker_gpus"))
              if isinstance(gpu, Mapping) and "cdi" in gpu]
    return list(dict.fromkeys(names))


def _foreign(names: list[str], gpus: list[dict[str, Any]]) -> list[str]:
    """The spec's device names that name a GPU the host does not have: a GPU or MIG UUID not among the host's, an
    index (or a MIG device's GPU index) beyond its GPU count."""
    uuids = {str(gpu.get("uuid")) for gpu in gpus}
    migs = {str(mig) for gpu in gpus for mig in as_sequence(gpu.get("mig"))}
    found = []
    for name in names:
        index = INDEX_NAME.fullmatch(name)
        if (name.startswith("GPU-") and name not in uuids) or (name.startswith("MIG-") and name not in migs) or (
                index and int(index.group(1)) >= len(gpus)):
            found.append(name)
    return found


def spec_problems(text: Any, path: str, host: Mapping[str, Any], error: Any = None) -> list[str]:
    """What is wrong with a CDI spec you provide, for this host (its model: GPUs and worker GPUs): `text` is the
    spec's text (None: there is no such file; `error` says why it could not be read). The checks of
    playbooks/check.yml run it on the probe's copy, the role (filter toolkit_cdi_spec_problems) on the host's file
    before the workers start."""
    name = f"{SPEC} ({show(path)})"
    if text is None or error:
        why = f"cannot be read on this host ({error})" if error else "is not a file on this host"
        return [f"{name} {why}. Put the spec there (nvidia-ctk cdi generate --output={path}), or leave "
                f"{SPEC} empty for the bundle to make /etc/cdi/nvidia.yaml"]
    if not str(path).endswith(SPEC_SUFFIXES):
        return [f"{name}: Docker reads only *.yaml and *.json files as CDI specs; rename it"]
    try:
        loaded = yaml.safe_load(str(text))
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        return [f"{name} is not valid YAML ({getattr(err, 'problem', None) or err}{where})"]
    spec = as_mapping(loaded)
    if spec.get("kind") != CDI_KIND:
        return [f"{name} has kind {show(spec.get('kind')) if spec else 'none (not a mapping)'}, not {CDI_KIND}: "
                f"the workers ask for {CDI_KIND}=... devices"]
    devices = [as_mapping(device) for device in as_sequence(spec.get("devices"))]
    names = [str(device.get("name")) for device in devices if device.get("name") is not None]
    problems = []
    missing = [device for device in wanted_devices(host) if device.split("=", 1)[1] not in names]
    if missing:
        problems.append(f"{name} does not name {', '.join(missing)}, which this host's containers ask for (it names "
                        f"{', '.join(names) or 'no device'})")
    gpus = probed({"gpus": as_sequence(host.get("gpus"))})
    nodes = {str(as_mapping(node).get("path")) for device in devices
             for node in as_sequence(as_mapping(device.get("containerEdits")).get("deviceNodes"))}
    absent = [f"/dev/nvidia{index}" for index in range(len(gpus)) if f"/dev/nvidia{index}" not in nodes]
    if absent:
        problems.append(f"{name} gives no device node {', '.join(absent)} in its devices' containerEdits.deviceNodes, "
                        f"so no container would get that GPU (this host has {len(gpus)} GPU(s), /dev/nvidia0 to "
                        f"/dev/nvidia{len(gpus) - 1})")
    foreign = _foreign(names, gpus)
    if foreign:
        problems.append(f"{name} names {', '.join(foreign)}, which this host does not have (it has {len(gpus)} "
                        f"GPU(s): {', '.join(str(gpu.get('uuid')) for gpu in gpus) or 'none'}); it was made for "
                        "another host, or before its GPUs or MIG devices changed: make it again")
    return problems


def _docker(inp: CheckInput) -> list[str]:
    """CDI devices need Docker >= 25. Docker's version is known from role docker_engine's local fact
    (ansible_local.docker_engine) once it has run on the host; the toolkit role checks again after installing."""
    if inp.model.get("worker_mode") != "gpu" or inp.get("dask_worker_gpu_request") != "cdi":
        return []
    docker = as_mapping(as_mapping(inp.facts.get("ansible_local")).get("docker_engine"))
    version = str(docker.get("server_version") or "")
    major = as_int(version.split(".")[0]) if version else None
    # With docker_engine_source upstream this run installs Docker CE first (the toolkit role checks the version
    # again once Docker is installed), so an older recorded version is no reason to stop.
    if major is not None and major < DOCKER_CDI and inp.get("docker_engine_source") != "upstream":
        return [f"dask_worker_gpu_request=cdi needs Docker >= {DOCKER_CDI} (CDI devices), but Docker on this host is "
                f"{version} (ansible_local.docker_engine). Install a newer Docker (docker_engine_source: upstream) "
                "or set dask_worker_gpu_request: gpus (NVIDIA's runtime) for this host."]
    return []


def _installed(found: Mapping[str, Any], generates: bool) -> list[str]:
    """A toolkit marked installed: it is there (nvidia-ctk), and new enough where the bundle makes the CDI spec."""
    if not found.get("nvidia_ctk"):
        return [f"{SOURCE}=installed, but this host has no nvidia-ctk ({found.get('version_error') or 'not found'}): "
                "it is marked installed where it is not. Install the NVIDIA container toolkit there (your mirror, "
                f"the vendor's image), or set {SOURCE}: repository for the bundle to install it"]
    if not generates:
        return []
    output = str(found.get("version_output") or "")
    version = toolkit_version(output)
    needed = ".".join(str(part) for part in TOOLKIT_CDI)
    if version is None or version < TOOLKIT_CDI:
        seen = ".".join(str(part) for part in version) if version else f"unreadable ({show(output[:200])})"
        return [f"{SOURCE}=installed with dask_worker_gpu_request=cdi needs toolkit >= {needed} (the bundle makes "
                f"/etc/cdi/nvidia.yaml with nvidia-ctk cdi generate, devices by index and by UUID, and checks it "
                f"with nvidia-ctk cdi list), but nvidia-ctk on this host is {seen}. Upgrade the toolkit, give a spec "
                f"of your own ({SPEC}), or set dask_worker_gpu_request: gpus"]
    return []


def checks(inp: CheckInput) -> list[str]:
    """Docker for CDI; then, on hosts that get the toolkit, what its probe (tasks/probe.yml, run by the model only
    where one of the two options asks for it) found: the toolkit marked installed, and the spec you provide. Without
    the probe's fact (the inventory-only check reaches no host) there is nothing to hold them against."""
    problems = _docker(inp)
    found = as_mapping(inp.facts.get(PROBE_FACT))
    if not inp.model.get("needs_toolkit") or not found:
        return problems
    cdi = inp.get("dask_worker_gpu_request") == "cdi"
    path = str(inp.get(SPEC) or "")
    if found.get("error"):
        return [*problems, f"{SOURCE} or {SPEC} could not be checked on this host: its probe failed "
                           f"({found['error']})"]
    if inp.get(SOURCE) == "installed":
        problems += _installed(found, cdi and not path)
    spec = as_mapping(found.get("spec"))
    # The probe read this path (an older fact of a fact cache may hold another one).
    if cdi and path and spec.get("path") == path:
        problems += spec_problems(spec.get("text") if spec.get("exists") else None, path, inp.model,
                                  spec.get("error"))
    return problems


FEATURE = Feature(name="toolkit", role="nvidia_container_toolkit", checks=checks,
                  packages=("nvidia-container-toolkit", "nvidia-container-toolkit-base", "libnvidia-container-tools",
                            "libnvidia-container1"),
                  paths=("/etc/cdi",),
                  # nvidia-persistenced, and the path unit that regenerates the CDI spec (not the service it starts,
                  # which is inactive between runs).
                  host_units=("nvidia-persistenced", "nvidia-cdi-refresh.path"), tag="toolkit", teardown="after",
                  filters=(("toolkit_cdi_spec_problems", spec_problems), ("toolkit_cdi_devices", wanted_devices)))
