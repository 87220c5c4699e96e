"""playbooks/teardown.yml in the sandbox (molecule's side effect, last): every host is left without the cluster's
units, containers, firewall table, registry, /etc/dask, /var/lib/dask (but for JupyterLab's working folder with the
user's notebook in it) and the keys the bundle merged into daemon.json, while Docker, the operator's own daemon.json
key and the images stay; then site.yml deploys again and a client computes. (Molecule's verify step runs after this,
against the redeployed cluster.)"""
from __future__ import annotations

import json
import time

import live
import pytest

VARS = f"@{live.ROOT / 'molecule' / 'default' / 'vars' / 'side-effect.yml'}"
HOSTS = (live.SCHEDULER, *live.WORKERS)
# molecule/default/prepare.yml writes it before the first converge: the operator's own daemon.json.
OPERATORS_DAEMON_JSON = {"labels": ["sandbox=kept"]}


NOTEBOOKS = "/var/lib/dask/notebooks"  # JupyterLab's working folder on the scheduler host (on in the sandbox)
USERS_NOTEBOOK = '{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}'


@pytest.fixture(scope="module")
def torn_down() -> float:
    live.on_host(live.SCHEDULER, "sh", "-c", f"printf '%s' '{USERS_NOTEBOOK}' > {NOTEBOOKS}/mine.ipynb")
    started = time.monotonic()
    run = live.playbook("playbooks/teardown.yml", "-e", VARS, "-e", "dask_teardown_images=true", timeout=900)
    assert run.returncode == 0, run.stdout[-4000:]
    seconds = time.monotonic() - started
    live.record("teardown", {"step": "teardown.yml", "seconds": round(seconds, 1)})
    return seconds


@pytest.mark.parametrize("host", HOSTS)
def test_the_host_is_clean_of_the_cluster(torn_down: float, host: str) -> None:
    units = live.on_host(host, "systemctl", "list-unit-files", "--no-legend", "dask-*", check=False).stdout.strip()
    assert units == "", units
    containers = live.on_host(host, "docker", "ps", "-a", "--format", "{{.Names}}").stdout.split()
    assert not [name for name in containers if name.startswith("dask-")], containers
    registry = f"{live.address(live.SCHEDULER)}:5000"  # the cluster's registry (cluster-registry distribution)
    # JupyterLab's working folder holds the user's notebooks: it stays, and with it the data folder above it.
    data = live.on_host(host, "ls", "-A", "/var/lib/dask", check=False).stdout.split()
    assert data == (["notebooks"] if host == live.SCHEDULER else []), f"{host}: /var/lib/dask holds {data}"
    if host == live.SCHEDULER:
        kept = live.on_host(host, "cat", f"{NOTEBOOKS}/mine.ipynb", check=False).stdout
        assert kept == USERS_NOTEBOOK, f"{host}: the user's notebook was not kept"
    for path in ("/etc/dask", "/etc/docker/daemon.json.dask-bundle",
                 "/etc/ansible/facts.d/gpus.fact", "/etc/systemd/system/dask-firewall.service",
                 f"/etc/docker/certs.d/{registry}", "/etc/docker/registry/tls",
                 "/etc/systemd/system/docker-registry.service.d/dask.conf"):
        assert live.on_host(host, "test", "-e", path, check=False).returncode == 1, f"{host}: {path} is still there"
    registry_state = live.on_host(host, "systemctl", "is-active", "docker-registry", check=False).stdout.strip()
    assert registry_state != "active", f"{host}: the cluster's registry still runs"
    tables = live.on_host(host, "nft", "list", "tables").stdout
    assert "dask_firewall" not in tables, tables


@pytest.mark.parametrize("host", HOSTS)
def test_docker_and_the_operators_daemon_json_stay_the_images_go_when_asked(torn_down: float, host: str) -> None:
    assert live.on_host(host, "systemctl", "is-active", "docker").stdout.strip() == "active"
    daemon = json.loads(live.on_host(host, "cat", "/etc/docker/daemon.json").stdout)
    assert daemon == OPERATORS_DAEMON_JSON, daemon
    images = live.on_host(host, "docker", "image", "ls", "--format", "{{.Repository}}").stdout.split()
    assert not [image for image in images if "dask-gpu-" in image], images
    registry = live.on_host(host, "test", "-e", "/var/lib/docker-registry", check=False).returncode
    assert registry == 1, f"{host}: the registry's storage is still there"


def net_bytes(host: str) -> tuple[int, int]:
    """(sent, received) bytes on the host's eth0 so far."""
    stats = "/sys/class/net/eth0/statistics"
    out = live.on_host(host, "cat", f"{stats}/tx_bytes", f"{stats}/rx_bytes")
    sent, received = out.stdout.split()
    return int(sent), int(received)


def test_site_yml_deploys_again_after_teardown_through_the_cluster_registry(torn_down: float) -> None:
    """Hosts without the images: the controller sends the archive to the registry host only, it pushes, the workers
    pull every layer from it. The controller's bytes come from the role's report (the copy results), the
    registry host's and the workers' from their network counters."""
    before = {host: net_bytes(host) for host in HOSTS}
    started = time.monotonic()
    run = live.playbook("site.yml", "-e", VARS, timeout=1500)
    assert run.returncode == 0, run.stdout[-4000:]
    seconds = round(time.monotonic() - started, 1)
    after = {host: net_bytes(host) for host in HOSTS}
    reports = live.ephemeral_dir() / "artifacts" / "reports" / "images.jsonl"
    row = json.loads(reports.read_text().splitlines()[-1])
    assert row["distribution"] == "cluster-registry" and row["hosts_missing"] == len(HOSTS), row
    assert row["archive_from_controller_to"] == [live.SCHEDULER] and row["pushed_by"] == live.SCHEDULER, row
    sent = after[live.SCHEDULER][0] - before[live.SCHEDULER][0]
    received = {host: after[host][1] - before[host][1] for host in live.WORKERS}
    # Every worker pulled the image layers (compressed) from the registry host.
    assert all(value > 300_000_000 for value in received.values()), received
    assert sent >= sum(received.values()) * 0.9, (sent, received)
    progress = [line.strip().strip('"') for line in run.stdout.splitlines()
                if "pushed to" in line or "pulled in" in line or "archive copied" in line]
    live.record("images", {"step": "site.yml onto hosts without images (cluster-registry)", "seconds": seconds,
                           "controller_bytes_out": row["controller_bytes_out"],
                           "registry_host_bytes_out": sent, "worker_bytes_in": received, "progress": progress})
    with live.connect() as client:
        client.wait_for_workers(len(live.WORKERS), timeout=120)
        assert client.submit(sum, [1, 2, 3], pure=False).result(timeout=60) == 6
