"""Your own images (dask_images_worker_image, dask_images_scheduler_image): playbooks/check.yml pulls them on the
build host and runs the probe in each as the units would (its entrypoint, the containers' uid, no network) before
any host changes. An image built unlike the bundle's (tests/images/own: another base, user and path) passes; one
that lacks dask_gpu_verify, one whose user is root, a scheduler image with another distributed and a reference
that cannot be pulled are refused, each named with its variable. An OCI image with zstd layers, pushed here with
skopeo to a registry on 127.0.0.1 (Debian's docker-registry in a container), is refused where this Docker cannot pull
it (before 23.0) and converted on the build host with dask_images_convert_layers. The hosts are this machine through a
local connection (check.yml reads facts and asserts); the images and the probes are real containers of this Docker."""
from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from dockerutil import ROOT

LOCAL = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable, "ansible_become": False}
GROUPS = {"dask_scheduler": {"hosts": {"s1": {}}}, "dask_cpu_workers": {"hosts": {"c1": {}}}}


@pytest.fixture(scope="module", autouse=True)
def own_images() -> None:
    built = subprocess.run(["bash", str(ROOT / "tests" / "images" / "own" / "build.sh")], capture_output=True,
                           text=True, timeout=1200)
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-3000:]
    print("\n" + built.stdout.strip())


def check(tmp_path: Path, **variables: Any) -> subprocess.CompletedProcess[str]:
    inventory = {"all": {"vars": {**LOCAL, "dask_notebook_enabled": False, **variables}, "children": GROUPS}}
    path = tmp_path / "hosts.yml"
    path.write_text(yaml.safe_dump(inventory))
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_DISPLAY_FAILED_STDERR="0")
    return subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(path),
                           str(ROOT / "playbooks" / "check.yml")], capture_output=True, text=True, cwd=ROOT, env=env,
                          timeout=600)


def said(run: subprocess.CompletedProcess[str]) -> str:
    """The run's output with its line breaks and the wrapping of long messages folded to single spaces."""
    return " ".join((run.stdout + run.stderr).replace("\\n", " ").split())


def test_an_image_built_unlike_ours_passes_and_no_probe_container_is_left(tmp_path: Path) -> None:
    run = check(tmp_path, dask_images_worker_image="dask-own-test:own")
    assert run.returncode == 0, run.stdout[-4000:]
    assert re.search(r"s1\s+: ok=\d+\s+changed=0", run.stdout), run.stdout[-2000:]
    assert "The probe runs in each own image" in run.stdout
    left = subprocess.run(["docker", "ps", "-a", "--filter", "name=dask-lock-probe", "-q"], capture_output=True,
                          text=True, check=True).stdout.split()
    assert left == [], left
    print("[own-image] dask-own-test:own (another base, user analyst uid 2000, /srv/pyenv, no entrypoint) passes")


def test_what_an_image_lacks_is_named_with_its_variable(tmp_path: Path) -> None:
    run = check(tmp_path, dask_images_worker_image="dask-own-test:lacking",
                dask_images_scheduler_image="dask-own-test:rooted")
    output = said(run)
    assert run.returncode != 0, output[-3000:]
    for text in ("dask_images_worker_image=dask-own-test:lacking (worker image, inspected on localhost): lacks "
                 "dask_gpu_verify, needed by the bundle's verify, benchmark and job clients",
                 "dask_images_scheduler_image=dask-own-test:rooted (scheduler image, inspected on localhost): the "
                 "image's user is root (USER root)", "dask_container_root_ack"):
        assert text in output, output[-4000:]
    named = re.findall(r"dask_images_\w+=dask-own-test:\w+ \([^)]*\): [^.,;]*", output)
    print("[own-image] refused: " + "; ".join(dict.fromkeys(named))[:600])


def test_a_scheduler_image_with_another_distributed_is_refused(tmp_path: Path) -> None:
    run = check(tmp_path, dask_images_worker_image="dask-own-test:own",
                dask_images_scheduler_image="dask-own-test:other-dask")
    output = said(run)
    assert run.returncode != 0, output[-3000:]
    found = re.search(r"carry other versions: distributed 2026\.7\.0 \(scheduler\) vs [0-9.]+ \(worker\)", output)
    assert found, output[-4000:]
    print(f"[own-image] refused: {found.group(0)}")


def test_an_image_that_cannot_be_pulled_is_named(tmp_path: Path) -> None:
    ref = "127.0.0.1:9/nobody/dask:none"
    run = check(tmp_path, dask_images_worker_image=ref)
    output = said(run)
    assert run.returncode != 0, output[-3000:]
    assert f"dask_images_worker_image or dask_images_scheduler_image: {ref} cannot be pulled on localhost" in output, \
        output[-3000:]
    print(f"[own-image] refused: {ref} cannot be pulled")


def docker(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *argv], capture_output=True, text=True, check=check, timeout=600)


REGISTRY_CONTAINER = "dask-own-test-registry"
SKOPEO_CACHE = Path("/var/lib/containers")  # skopeo's cache as root: removed when this test made it


@pytest.fixture(scope="module")
def zstd_image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """dask-own-test:own with a layer of its own (a token of this run: a daemon that has met an image's zstd blobs
    before may take their content from its own store and skip the layer it cannot read) as an OCI image with zstd
    layers (skopeo copy --format oci --dest-compress-format zstd) in a registry on 127.0.0.1 (a free port, HTTP: Docker
    pulls from loopback registries without TLS)."""
    built = subprocess.run(["bash", str(ROOT / "tests" / "images" / "own" / "build.sh"), "registry"],
                           capture_output=True, text=True, timeout=1200)
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-3000:]
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = tmp_path_factory.mktemp("registry") / "config.yml"
    config.write_text(f"version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: /var/lib/docker-registry\n"
                      f"http:\n  addr: 127.0.0.1:{port}\n")
    config.chmod(0o644)
    docker("rm", "-f", REGISTRY_CONTAINER, check=False)
    docker("run", "-d", "--name", REGISTRY_CONTAINER, "--network", "host",
           "-v", f"{config}:/etc/docker/registry/config.yml:ro", "dask-own-test:registry")
    had_cache = SKOPEO_CACHE.exists()
    ref = f"127.0.0.1:{port}/dask-own-test:zstd"
    context = tmp_path_factory.mktemp("token")
    (context / "token").write_text(f"{time.time_ns()}\n")
    (context / "Dockerfile").write_text("FROM dask-own-test:own\nCOPY token /srv/token\n")
    source = "dask-own-test:zstd-source"
    docker("build", "-q", "-t", source, str(context))
    try:
        for _ in range(60):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=2).close()  # noqa: S310 - loopback
                break
            except OSError:
                time.sleep(0.5)
        else:
            logs = docker("logs", REGISTRY_CONTAINER, check=False)
            pytest.fail(f"the registry on 127.0.0.1:{port} did not answer in 30 s: "
                        f"{(logs.stdout + logs.stderr)[-1500:]}")
        pushed = subprocess.run(["skopeo", "copy", "--quiet", "--format", "oci", "--dest-compress-format", "zstd",
                                 "--dest-tls-verify=false", f"docker-daemon:{source}", f"docker://{ref}"],
                                capture_output=True, text=True, timeout=600)
        assert pushed.returncode == 0, pushed.stderr[-2000:]
        manifest = subprocess.run(["skopeo", "inspect", "--raw", "--tls-verify=false", f"docker://{ref}"],
                                  capture_output=True, text=True, check=True).stdout
        assert "application/vnd.oci.image.layer.v1.tar+zstd" in manifest, manifest
        yield ref
    finally:
        docker("rm", "-f", REGISTRY_CONTAINER, check=False)
        docker("image", "rm", ref, source, check=False)
        if not had_cache:
            subprocess.run(["rm", "-rf", str(SKOPEO_CACHE)], check=False)


def test_an_oci_image_with_zstd_layers_is_refused_where_docker_cannot_pull_it_then_converted(
        tmp_path: Path, zstd_image: str) -> None:
    docker("image", "rm", zstd_image, check=False)
    server = docker("version", "-f", "{{.Server.Version}}").stdout.strip()
    if int(server.split(".")[0]) < 23:
        run = check(tmp_path, dask_images_worker_image=zstd_image)
        output = said(run)
        assert run.returncode != 0, output[-3000:]
        refusal = (f"dask_images_worker_image={zstd_image} has zstd-compressed layers, which Docker {server} on "
                   "localhost (the build host) cannot pull (Docker 23.0 can). Set dask_images_convert_layers: true")
        assert refusal in output, output[-4000:]
        assert "The probe runs in each own image" not in run.stdout
        # What the check spares a user: Docker's own pull fails deep inside, with a message that names no format.
        pulled = docker("pull", zstd_image, check=False)
        assert pulled.returncode != 0 and "invalid tar header" in pulled.stderr, pulled.stderr[-1000:]
        print(f"[own-image] refused: {refusal[:200]}; docker pull alone: {pulled.stderr.strip()[-120:]}")
    run = check(tmp_path, dask_images_worker_image=zstd_image, dask_images_convert_layers=True)
    assert run.returncode == 0, said(run)[-4000:]
    if int(server.split(".")[0]) < 23:
        assert re.search(r"TASK \[dask : Converted images are loaded[^\n]*\n(?:[^\n]*\n)*?changed: \[s1 -> localhost\]",
                         run.stdout), run.stdout[-3000:]
    user = docker("image", "inspect", "-f", "{{.Config.User}}", zstd_image).stdout.strip()
    assert user == "analyst", user  # the own image's, kept through the conversion
    assert "The probe runs in each own image" in run.stdout
    print(f"[own-image] {zstd_image} (OCI, zstd layers) converted on the build host, probed and passed")
