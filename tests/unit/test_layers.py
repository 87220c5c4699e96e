"""Image formats (plugin_utils/layers.py, filter own_image_layers; roles/dask/tasks/own_image.yml): the layer
compressions read from `docker manifest inspect --verbose` output (one image, an index of platforms, the parsed or
the raw manifest), and what the build host does with a zstd image: pull, convert or refuse, named. The output below
has the shape Docker 20.10's CLI printed for an image pushed here with `skopeo copy --format oci
--dest-compress-format zstd` (tests/images/test_own_image.py pushes and pulls a real one)."""
from __future__ import annotations

import base64
import json
from typing import Any

from ansible_collections.dask_gpu.bundle.plugins.filter.own_image import layer_plan
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils import layers

OCI = "application/vnd.oci.image.layer.v1.tar"
DOCKER_GZIP = "application/vnd.docker.image.rootfs.diff.tar.gzip"


def manifest(*media: str) -> dict[str, Any]:
    return {"schemaVersion": 2, "layers": [{"mediaType": m, "digest": "sha256:00", "size": 1} for m in media]}


def entry(arch: str, body: dict[str, Any], parsed: bool = True) -> dict[str, Any]:
    found: dict[str, Any] = {"Ref": "r", "Descriptor": {"platform": {"architecture": arch, "os": "linux"}},
                             "Raw": base64.b64encode(json.dumps(body).encode()).decode()}
    if parsed:
        found["OCIManifest"] = body
    return found


def test_one_image_parsed_or_raw() -> None:
    zstd = manifest(f"{OCI}+zstd", f"{OCI}+zstd")
    assert layers.compressions(json.dumps(entry("amd64", zstd)), "x86_64") == ["zstd"]
    assert layers.compressions(json.dumps(entry("amd64", zstd, parsed=False)), "x86_64") == ["zstd"]
    assert layers.compressions(json.dumps(entry("amd64", manifest(DOCKER_GZIP, OCI + "+gzip"))), "x86_64") == ["gzip"]
    assert layers.compressions(json.dumps(entry("amd64", manifest(OCI))), "x86_64") == ["none"]


def test_an_index_is_read_for_the_hosts_architecture_only() -> None:
    index = [entry("amd64", manifest(f"{OCI}+gzip")), entry("arm64", manifest(f"{OCI}+zstd"))]
    assert layers.compressions(json.dumps(index), "x86_64") == ["gzip"]
    assert layers.compressions(json.dumps(index), "aarch64") == ["zstd"]
    # no platform of this machine: every platform's layers count
    assert layers.compressions(json.dumps(index), "s390x") == ["gzip", "zstd"]


def test_unreadable_output_gives_nothing() -> None:
    assert layers.compressions("no such manifest: x", "x86_64") == []
    assert layers.compressions(json.dumps({"Raw": "%%%"}), "x86_64") == []


def test_docker_versions() -> None:
    assert layers.pulls_zstd("20.10.24+dfsg1") is False
    assert layers.pulls_zstd("23.0.0") is True and layers.pulls_zstd("26.1.5+dfsg1") is True
    assert layers.pulls_zstd("") is None


def results(*refs_and_bodies: tuple[str, Any]) -> list[dict[str, Any]]:
    return [{"item": {"item": ref}, "rc": 0 if body is not None else 1, "stdout": json.dumps(body) if body else ""}
            for ref, body in refs_and_bodies]


def info(version: str) -> dict[str, Any]:
    """docker_host_info's host_info, as Docker 20.10 reports it with an insecure registry in daemon.json."""
    return {"ServerVersion": version, "RegistryConfig": {"InsecureRegistryCIDRs": ["::1/128", "127.0.0.0/8",
                                                                                   "10.9.0.0/16"],
                                                         "IndexConfigs": {"plain.example:5000": {"Secure": False}}}}


ZSTD = entry("amd64", manifest(f"{OCI}+zstd"))
GZIP = entry("amd64", manifest(f"{OCI}+gzip"))
OWN = {"scheduler": "reg:5000/own:z", "worker": "reg:5000/own:z"}


def test_the_build_host_pulls_converts_or_refuses() -> None:
    old, new = "20.10.24+dfsg1", "26.1.5"
    settings = {"dask_images_build_host": "localhost"}
    refused = layer_plan(results(("reg:5000/own:z", ZSTD)), OWN, settings, "x86_64", info(old), {}, "archive")
    assert refused["convert"] == []
    assert refused["problems"] == [
        "dask_images_worker_image=reg:5000/own:z has zstd-compressed layers, which Docker 20.10.24+dfsg1 on localhost "
        "(the build host) cannot pull (Docker 23.0 can). Set dask_images_convert_layers: true (the build host converts "
        "the layers to gzip with skopeo, then sends the images as usual), install a newer Docker there "
        "(docker_engine_source: upstream), or push the image with gzip layers."]
    on = {**settings, "dask_images_convert_layers": True}
    converted = layer_plan(results(("reg:5000/own:z", ZSTD)), OWN, on, "x86_64", info(old), {}, "cluster-registry")
    assert converted == {"convert": [{"ref": "reg:5000/own:z", "tls_verify": True}], "problems": []}
    # a Docker that pulls zstd, gzip layers, and a manifest that could not be read: nothing to do here
    assert layer_plan(results(("reg:5000/own:z", ZSTD)), OWN, settings, "x86_64", info(new), {}, "archive") == {
        "convert": [], "problems": []}
    assert layer_plan(results(("reg:5000/own:z", GZIP)), OWN, settings, "x86_64", info(old), {}, "archive") == {
        "convert": [], "problems": []}
    assert layer_plan(results(("reg:5000/own:z", None)), OWN, settings, "x86_64", info(old), {}, "archive") == {
        "convert": [], "problems": []}


def test_a_digest_cannot_be_converted_and_the_scheduler_image_is_named_by_its_variable() -> None:
    pinned = "reg:5000/own@sha256:" + "a" * 64
    own = {"scheduler": "reg:5000/sched:z", "worker": pinned}
    on = {"dask_images_build_host": "b1", "dask_images_convert_layers": True}
    plan = layer_plan(results((pinned, ZSTD), ("reg:5000/sched:z", ZSTD)), own, on, "x86_64", info("20.10.5"), {},
                      "archive")
    assert plan["convert"] == [{"ref": "reg:5000/sched:z", "tls_verify": True}]
    assert len(plan["problems"]) == 1 and plan["problems"][0].startswith(
        f"dask_images_worker_image={pinned} has zstd-compressed layers and dask_images_convert_layers is on, but a "
        "converted image has another digest")


def test_registry_distribution_names_every_host_whose_docker_cannot_pull() -> None:
    hosts = {"w1": "20.10.24+dfsg1", "w2": "27.3.1", "w3": ""}
    plan = layer_plan(results(("reg:5000/own:z", ZSTD)), OWN, {"dask_images_convert_layers": True}, "x86_64",
                      info("27.3.1"), hosts, "registry")
    assert plan["convert"] == []
    assert len(plan["problems"]) == 1
    assert "every host pulls it as given: w1 (Docker 20.10.24+dfsg1). " in plan["problems"][0]
    # every host pulls zstd, the build host (which pulls it for the probe) does not: converted there, or refused
    newer = {"w1": "27.3.1", "w2": "27.3.1"}
    converted = layer_plan(results(("reg:5000/own:z", ZSTD)), OWN, {"dask_images_convert_layers": True}, "x86_64",
                           info("20.10.24"), newer, "registry")
    assert converted == {"convert": [{"ref": "reg:5000/own:z", "tls_verify": True}], "problems": []}
    refused = layer_plan(results(("reg:5000/own:z", ZSTD)), OWN, {}, "x86_64", info("20.10.24"), newer, "registry")
    assert refused["convert"] == [] and len(refused["problems"]) == 1
    assert "(the build host) cannot pull" in refused["problems"][0]


def test_tls_is_verified_as_docker_verifies_it() -> None:
    registries = info("20.10.24")["RegistryConfig"]
    for ref in ("127.0.0.1:5000/own:z", "localhost:5000/own:z", "10.9.1.2:5000/team/own:z", "plain.example:5000/own:z",
                "[::1]:5000/own:z"):
        assert layers.plain_http(ref, registries), ref
    for ref in ("reg.example:5000/own:z", "10.10.1.2:5000/own:z", "team/own:z", "own:z", "reg.example/own:z",
                "[fd00::1]:5000/own:z"):
        assert not layers.plain_http(ref, registries), ref
