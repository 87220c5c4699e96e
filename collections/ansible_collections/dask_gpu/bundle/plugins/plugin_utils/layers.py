"""Image formats (docs/images.md, "Any image format"): the compression of an own image's layers, read from its registry
(`docker manifest inspect --verbose` on the build host, before any pull), against the Docker that has to pull it.

Docker pulls zstd-compressed layers from 23.0 on; an earlier daemon (Debian 12's docker.io is 20.10) downloads them
and fails inside the pull with `failed to register layer: ... archive/tar: invalid tar header`. OCI media types with
gzip layers pull everywhere. What pulls the reference as given: the build host (archive and cluster-registry: it
then sends the images, whose layers `docker save` writes uncompressed), or every host (distribution registry)."""
from __future__ import annotations

import base64
import binascii
import ipaddress
import json
from collections.abc import Mapping
from typing import Any

ZSTD_DOCKER = 23  # the first Docker whose daemon pulls zstd layers (moby 41759)
CONVERT_SETTING = "dask_images_convert_layers"
ARCH = {"x86_64": "amd64", "aarch64": "arm64", "ppc64le": "ppc64le", "s390x": "s390x"}


def _manifests(inspected: Any) -> list[Mapping[str, Any]]:
    """The image manifests of `docker manifest inspect --verbose` output: one entry (an image) or a list (an index,
    one per platform); each with its platform and its manifest (decoded from `Raw` when no parsed form is there)."""
    entries = inspected if isinstance(inspected, list) else [inspected]
    found: list[Mapping[str, Any]] = []
    for entry in entries:
        if not isinstance(entry, Mapping):
            continue
        manifest = entry.get("OCIManifest") or entry.get("SchemaV2Manifest")
        if not isinstance(manifest, Mapping):
            try:
                manifest = json.loads(base64.b64decode(str(entry.get("Raw") or "")))
            except (binascii.Error, ValueError):
                manifest = {}
        platform = (entry.get("Descriptor") or {}).get("platform") or {}
        found.append({"platform": platform, "manifest": manifest if isinstance(manifest, Mapping) else {}})
    return found


def compressions(text: str, machine: str) -> list[str]:
    """The layer compressions (gzip, zstd, none) of the image a host of this machine (ansible_architecture) pulls,
    from `docker manifest inspect --verbose`'s output; [] when it cannot be read (the pull then says why)."""
    try:
        inspected = json.loads(text)
    except ValueError:
        return []
    arch = ARCH.get(machine, machine)
    images = _manifests(inspected)
    mine = [image for image in images if not image["platform"] or image["platform"].get("architecture") == arch]
    found: set[str] = set()
    for image in mine or images:
        for layer in image["manifest"].get("layers") or []:
            media = str(layer.get("mediaType") or "")
            found.add("zstd" if media.endswith("zstd") else "gzip" if media.endswith("gzip") else "none")
    return sorted(found)


def pulls_zstd(version: str) -> bool | None:
    """Whether a Docker of this server version pulls zstd layers; None when the version is unknown."""
    head = str(version or "").split(".")[0]
    return int(head) >= ZSTD_DOCKER if head.isdigit() else None


def plain_http(ref: str, registry_config: Mapping[str, Any]) -> bool:
    """Whether Docker reaches the reference's registry without TLS verification (its insecure registries: the
    daemon's InsecureRegistryCIDRs, 127.0.0.0/8 by default, and IndexConfigs marked not secure): skopeo then reads it
    the same way, and only then."""
    first = ref.split("/", 1)[0]
    if "/" not in ref or not ("." in first or ":" in first or first == "localhost"):
        return False  # Docker Hub
    index = (registry_config.get("IndexConfigs") or {}).get(first) or {}
    if index.get("Secure") is False:
        return True
    name = first[1:first.index("]")] if first.startswith("[") and "]" in first else first.rsplit(":", 1)[0]
    if name == "localhost":
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    return any(address in ipaddress.ip_network(cidr, strict=False)
               for cidr in registry_config.get("InsecureRegistryCIDRs") or [])


def plan(formats: Mapping[str, list[str]], setting_of: Mapping[str, str], build_host: str, build_docker: str,
         convert: bool, distribution: str, host_dockers: Mapping[str, str]) -> dict[str, Any]:
    """What the build host does with each own reference it lacks (formats: ref -> compressions) and what is refused:
    {"convert": [refs the build host converts], "problems": [...]}. A zstd reference that the build host's Docker
    cannot pull is converted when dask_images_convert_layers is on (skopeo: zstd to gzip, then into the daemon), else
    refused; with distribution registry every host also pulls it as given, so a host whose Docker cannot is refused
    (the build host, which pulls it for the probe, is judged as in the other modes)."""
    converts: list[str] = []
    problems: list[str] = []
    for ref, found in formats.items():
        if "zstd" not in found:
            continue
        variable = setting_of.get(ref, "dask_images_worker_image")
        old = sorted(f"{host} (Docker {version})" for host, version in host_dockers.items()
                     if pulls_zstd(version) is False)
        if distribution == "registry" and old:
            problems.append(
                f"{variable}={ref} has zstd-compressed layers, which Docker before {ZSTD_DOCKER}.0 cannot pull, "
                f"and with dask_images_distribution=registry every host pulls it as given: {', '.join(old)}. "
                f"Use dask_images_distribution archive or cluster-registry with {CONVERT_SETTING}: true (the "
                f"build host converts the layers once), install a newer Docker (docker_engine_source: upstream), "
                f"or push the image with gzip layers.")
        if pulls_zstd(build_docker) is not False:
            continue
        if convert and "@" not in ref:
            converts.append(ref)
            continue
        if convert:
            problems.append(
                f"{variable}={ref} has zstd-compressed layers and {CONVERT_SETTING} is on, but a converted image has "
                f"another digest: give a tagged reference (name:tag) to convert, or push the image with gzip layers.")
            continue
        problems.append(
            f"{variable}={ref} has zstd-compressed layers, which Docker {build_docker} on {build_host} (the build "
            f"host) cannot pull (Docker {ZSTD_DOCKER}.0 can). Set {CONVERT_SETTING}: true (the build host converts "
            f"the layers to gzip with skopeo, then sends the images as usual), install a newer Docker there "
            f"(docker_engine_source: upstream), or push the image with gzip layers.")
    return {"convert": converts, "problems": problems}
