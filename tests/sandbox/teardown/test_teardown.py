"""playbooks/teardown.yml in the sandbox (molecule's side effect, last): every host is left without the cluster's
units, containers, firewall table, /etc/dask, /var/lib/dask and the keys the bundle merged into daemon.json, while
Docker, the operator's own daemon.json key and the images stay; then site.yml deploys again and a client
computes. (Molecule's verify step runs after this, against the redeployed cluster.)"""
from __future__ import annotations

import json
import time

import live
import pytest

VARS = f"@{live.ROOT / 'molecule' / 'default' / 'vars' / 'side-effect.yml'}"
HOSTS = (live.SCHEDULER, *live.WORKERS)
# molecule/default/prepare.yml writes it before the first converge: the operator's own daemon.json.
OPERATORS_DAEMON_JSON = {"labels": ["sandbox=kept"]}


@pytest.fixture(scope="module")
def torn_down() -> float:
    started = time.monotonic()
    run = live.playbook("playbooks/teardown.yml", "-e", VARS, timeout=900)
    assert run.returncode == 0, run.stdout[-4000:]
    seconds = time.monotonic() - started
    live.record("teardown", {"step": "teardown.yml", "seconds": round(seconds, 1)})
    return seconds


@pytest.mark.parametrize("host", HOSTS)
def test_the_host_is_clean_of_the_cluster(torn_down: float, host: str) -> None:
    units = live.on_host(host, "systemctl", "list-unit-files", "--no-legend", "dask-*").stdout.strip()
    assert units == "", units
    containers = live.on_host(host, "docker", "ps", "-a", "--format", "{{.Names}}").stdout.split()
    assert not [name for name in containers if name.startswith("dask-")], containers
    for path in ("/etc/dask", "/var/lib/dask", "/etc/docker/daemon.json.dask-bundle",
                 "/etc/ansible/facts.d/gpus.fact", "/etc/systemd/system/dask-firewall.service"):
        assert live.on_host(host, "test", "-e", path, check=False).returncode == 1, f"{host}: {path} is still there"
    tables = live.on_host(host, "nft", "list", "tables").stdout
    assert "dask_firewall" not in tables, tables


@pytest.mark.parametrize("host", HOSTS)
def test_docker_the_operators_daemon_json_and_the_images_stay(torn_down: float, host: str) -> None:
    assert live.on_host(host, "systemctl", "is-active", "docker").stdout.strip() == "active"
    daemon = json.loads(live.on_host(host, "cat", "/etc/docker/daemon.json").stdout)
    assert daemon == OPERATORS_DAEMON_JSON, daemon
    images = live.on_host(host, "docker", "image", "ls", "--format", "{{.Repository}}").stdout.split()
    assert any("dask-gpu-worker" in image for image in images), images


def test_site_yml_deploys_again_after_teardown(torn_down: float) -> None:
    started = time.monotonic()
    run = live.playbook("site.yml", "-e", VARS, timeout=1500)
    assert run.returncode == 0, run.stdout[-4000:]
    live.record("teardown", {"step": "site.yml after teardown", "seconds": round(time.monotonic() - started, 1)})
    with live.connect() as client:
        client.wait_for_workers(len(live.WORKERS), timeout=120)
        assert client.submit(sum, [1, 2, 3], pure=False).result(timeout=60) == 6
