"""Feature `toolkit` (role nvidia_container_toolkit, docs/gpu-request.md): GPUs reach the worker containers through
NVIDIA's runtime (--gpus) or as CDI devices; CDI needs Docker >= 25."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.feature import CheckInput, Feature
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.options import as_int

# The oldest Docker with CDI devices (dask_worker_gpu_request: cdi).
DOCKER_CDI = 25


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def checks(inp: CheckInput) -> list[str]:
    """CDI devices need Docker >= 25. Docker's version is known from role docker_engine's local fact
    (ansible_local.docker_engine) once it has run on the host; the toolkit role checks again after installing."""
    if inp.model.get("worker_mode") != "gpu" or inp.get("dask_worker_gpu_request") != "cdi":
        return []
    docker = _mapping(_mapping(inp.facts.get("ansible_local")).get("docker_engine"))
    version = str(docker.get("server_version") or "")
    major = as_int(version.split(".")[0]) if version else None
    # With docker_engine_source upstream this run installs Docker CE first (the toolkit role checks the version
    # again once Docker is installed), so an older recorded version is no reason to stop.
    if major is not None and major < DOCKER_CDI and inp.get("docker_engine_source") != "upstream":
        return [f"dask_worker_gpu_request=cdi needs Docker >= {DOCKER_CDI} (CDI devices), but Docker on this host is "
                f"{version} (ansible_local.docker_engine). Install a newer Docker (docker_engine_source: upstream) "
                "or set dask_worker_gpu_request: gpus (NVIDIA's runtime) for this host."]
    return []


FEATURE = Feature(name="toolkit", role="nvidia_container_toolkit", checks=checks,
                  packages=("nvidia-container-toolkit", "nvidia-container-toolkit-base", "libnvidia-container-tools",
                            "libnvidia-container1"),
                  paths=("/etc/cdi",),
                  # nvidia-persistenced, and the path unit that regenerates the CDI spec (not the service it starts,
                  # which is inactive between runs).
                  host_units=("nvidia-persistenced", "nvidia-cdi-refresh.path"), tag="toolkit", teardown="after")
