"""The dask_firewall role in the sandbox (after molecule's side effect turned it on): a container outside the
allow list cannot open a connection to any Dask port, cluster hosts and the controller still can."""
from __future__ import annotations

import live
import pytest

HOSTS = (live.SCHEDULER, *live.WORKERS)


@pytest.fixture(scope="module")
def dask_ports() -> list[tuple[str, int]]:
    """Every Dask listener: the scheduler, each worker and each nanny (the nannies' ports are ephemeral), and the
    monitoring ports on the cluster address (node exporter, the workers' HTTP servers)."""
    with live.connect() as client:
        info = client.scheduler_info(n_workers=-1)["workers"]
    ports = [(live.address(live.SCHEDULER), 8786)]
    for addr, worker in info.items():
        host, port = addr.removeprefix("tls://").rsplit(":", 1)
        ports.append((host, int(port)))
        nanny = str(worker.get("nanny") or "")
        if nanny:
            nanny_host, nanny_port = nanny.removeprefix("tls://").rsplit(":", 1)
            ports.append((nanny_host, int(nanny_port)))
    assert len(ports) == 5  # scheduler + 2 workers + 2 nannies
    # Monitoring is on in the side effect: node exporter on every host, each worker's /metrics on the cluster address.
    ports += [(live.address(host), 9100) for host in HOSTS] + [(live.address(host), 8790) for host in live.WORKERS]
    # The cluster's registry (dask_images_distribution cluster-registry) on the scheduler host.
    ports.append((live.address(live.SCHEDULER), 5000))
    return ports


def test_every_host_has_the_table_and_its_unit() -> None:
    for host in HOSTS:
        table = live.on_host(host, "nft", "list", "table", "inet", "dask_firewall").stdout
        assert "reject with tcp reset" in table and live.address(host) in table
        assert live.on_host(host, "systemctl", "is-enabled", "dask-firewall").stdout.strip() == "enabled"
        # it orders itself before the cluster's units this host has, and names none it has not (a not-found unit)
        before = live.unit_property(host, "dask-firewall", "Before").split()
        states = {unit: live.unit_property(host, unit, "LoadState") for unit in before}
        assert all(state == "loaded" for state in states.values()), (host, states)
        assert ("dask-scheduler.service" in before) == (host == live.SCHEDULER), (host, before)
        assert ("dask-worker.service" in before) == (host in live.WORKERS), (host, before)


def test_an_outsider_cannot_connect_to_any_dask_port(dask_ports: list[tuple[str, int]]) -> None:
    results = live.probe_from_container(dask_ports, "--ip", live.OUTSIDER_IP)
    assert set(results.values()) == {"ConnectionRefusedError"}, results
    live.record("firewall", {"from": live.OUTSIDER_IP, "refused": ", ".join(sorted(results))})


def test_a_cluster_host_and_the_controller_still_connect(dask_ports: list[tuple[str, int]]) -> None:
    probe = ("import socket, sys; [socket.create_connection((h, int(p)), timeout=5).close() "
             "for h, p in (t.split(':') for t in sys.argv[1:])]")
    targets = [f"{h}:{p}" for h, p in dask_ports]
    assert live.on_host("dask-w1", "python3", "-c", probe, *targets, check=False).returncode == 0
    with live.connect() as client:  # the controller (the network's gateway) is on the allow list
        assert client.submit(sum, [1, 2], pure=False).result(timeout=60) == 3


def test_the_refusals_were_the_firewall_s(dask_ports: list[tuple[str, int]]) -> None:
    # Every port above listens (a cluster host connects), so the resets came from the reject rule: its counter moved.
    for host in HOSTS:
        table = live.on_host(host, "nft", "list", "table", "inet", "dask_firewall").stdout
        packets = [int(line.split("packets ")[1].split()[0]) for line in table.splitlines() if "reject" in line]
        assert packets and packets[0] > 0, (host, table)


def test_ssh_stays_open_to_everyone() -> None:
    """dask_firewall_open_ports (22 by default) stays open to an outsider too: Ansible reaches the sandbox's hosts over
    SSH, as it reaches servers, and the table must never cut that way in."""
    results = live.probe_from_container([(live.address(host), 22) for host in HOSTS], "--ip", live.OUTSIDER_IP)
    assert set(results.values()) == {"open"}, results
