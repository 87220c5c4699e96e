"""Filters of your own images (plugin_utils/own_image.py; roles/dask/tasks/own_image.yml): the probe's command
line, the inspection's findings, and what the cluster keeps from it."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.dask_gpu.bundle.plugins.plugin_utils import layers, own_image
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.features import image_needs, images


def probe_argv(_own: Any) -> list[str]:
    """The probe's command line (given to the image's entrypoint)."""
    return ["python", "-c", own_image.PROBE]


def inspected(own: Mapping[str, str], infos: list[Mapping[str, Any]], probes: list[Mapping[str, Any]]
              ) -> dict[str, dict[str, Any]]:
    """scheduler and worker -> {ref, user, output, failed} from the loop results of docker_image_info and of the
    probe containers (each looped over the distinct references)."""
    users = {str(r.get("item")): str(((r.get("images") or [{}])[0].get("Config") or {}).get("User") or "")
             for r in infos}
    runs = {str(r.get("item")): r for r in probes}
    found: dict[str, dict[str, Any]] = {}
    for target, ref in own.items():
        run = runs.get(ref) or {}
        container = run.get("container") or {}
        output = str(container.get("Output") or "")
        failed = "" if own_image.parse(output) else str(run.get("msg") or run.get("stderr") or "")
        found[target] = {"ref": ref, "user": users.get(ref, ""), "output": output, "failed": failed}
    return found


def problems(found: Mapping[str, Any], cluster: Mapping[str, Any], settings: Mapping[str, Any], build_host: str,
             hosts: Mapping[str, Any]) -> list[str]:
    """The contract's findings, then a Dask version change against what the hosts last ran (never rolled)."""
    messages = own_image.problems(found, cluster, settings, build_host, image_needs(cluster, settings))
    if messages:
        return messages
    wanted = own_image.result(found)["versions"]
    change = images.changed_versions(hosts, list(hosts), wanted, settings.get("dask_upgrade_restart_all_ack") is True)
    return images.version_change_problems(change)


def kept(cluster: Mapping[str, Any], found: Mapping[str, Any], settings: Mapping[str, Any],
         hosts: Mapping[str, Any]) -> dict[str, Any]:
    """The cluster model (`dask_cluster | own_image_kept(found, ...)`) with the own images' versions and version
    change (known now), and the lock they carry; everything else of the model as it was."""
    result = own_image.result(found)
    change = images.changed_versions(hosts, list(hosts), result["versions"],
                                     settings.get("dask_upgrade_restart_all_ack") is True)
    model = dict(cluster)
    model["images"] = {**dict(cluster.get("images") or {}), "versions": result["versions"], "version_change": change,
                       "own_lock": {"python": result["python"], "lock": result["lock"]}, "cudf": result["cudf"]}
    return model


def layer_plan(manifests: list[Mapping[str, Any]], own: Mapping[str, str], settings: Mapping[str, Any], machine: str,
               docker_info: Mapping[str, Any], host_dockers: Mapping[str, str], distribution: str) -> dict[str, Any]:
    """From the loop results of `docker manifest inspect --verbose` (item: the docker_image_info result of a
    reference the build host lacks) and the build host's `docker info` (docker_host_info's host_info):
    {"convert": [{ref, tls_verify}], "problems": [...]} (plugin_utils/layers.py)."""
    build_docker = str(docker_info.get("ServerVersion") or "")
    registries = docker_info.get("RegistryConfig") or {}
    formats = {str((run.get("item") or {}).get("item")): layers.compressions(str(run.get("stdout") or ""), machine)
               for run in manifests if run.get("rc") == 0}
    # scheduler, then worker: a reference serving both is named by the worker's variable
    setting_of = {ref: f"dask_images_{target}_image" for target, ref in sorted(own.items())}
    found = layers.plan(formats, setting_of, str(settings.get("dask_images_build_host") or "localhost"), build_docker,
                        settings.get(layers.CONVERT_SETTING) is True, distribution, host_dockers)
    found["convert"] = [{"ref": ref, "tls_verify": not layers.plain_http(ref, registries)} for ref in found["convert"]]
    return found


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"own_image_probe": probe_argv, "own_image_inspected": inspected, "own_image_problems": problems,
                "own_image_kept": kept, "own_image_layers": layer_plan}
