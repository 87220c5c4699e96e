"""Testinfra checks of the molecule sandbox hosts after site.yml (run from molecule's verify step:
pytest tests/sandbox --hosts=docker://dask-sched,docker://dask-w1,docker://dask-w2)."""
from __future__ import annotations

import json

import pytest

CONTAINER_UID = 10001


def role(host) -> str:
    return "scheduler" if "sched" in host.backend.name else "worker"


def unit(host) -> str:
    return f"dask-{role(host)}"


def test_docker_and_dask_units_are_enabled_and_active(host) -> None:
    for name in ("docker", *units(host)):
        service = host.service(name)
        assert service.is_enabled, name
        assert service.is_running, name


def test_unit_restarts_forever_with_a_delay(host) -> None:
    text = host.file(f"/etc/systemd/system/{unit(host)}.service").content_string
    assert "Restart=always" in text and "RestartSec=5" in text and "StartLimitIntervalSec=0" in text
    assert "--restart" not in text and "KillMode=none" not in text


def test_unit_starts_say_nothing_of_a_missing_container(host) -> None:
    """The units' ExecStartPre removes a container left by an earlier start and says nothing where there is none."""
    for name in units(host):
        journal = host.run(f"journalctl -u {name} --no-pager -o cat").stdout
        assert "Started" in journal or "Starting" in journal, (name, journal[-500:])
        assert "No such container" not in journal, (name, journal[-1500:])


def units(host) -> list[str]:
    """The bundle's containers on the host: the scheduler and JupyterLab, or the workers (the autoscaler runs in its
    own suite only, tests/sandbox/autoscale)."""
    return [unit(host), "dask-notebook"] if role(host) == "scheduler" else [unit(host)]


@pytest.mark.parametrize("index", [0, 1, 2])
def test_container_runs_as_non_root_without_capabilities(host, index: int) -> None:
    if index >= len(units(host)):
        pytest.skip("a worker host runs one container")
    name = units(host)[index]
    config = json.loads(host.check_output(f"docker inspect {name}"))[0]
    assert config["Config"]["User"] == f"{CONTAINER_UID}:{CONTAINER_UID}"
    assert config["HostConfig"]["CapDrop"] == ["ALL"]
    assert not config["HostConfig"]["CapAdd"]
    assert not config["HostConfig"]["Privileged"]
    # `docker top` reads the container's processes from the host (docker exec cannot enter nested containers here)
    uids = {line.split()[1] for line in host.check_output(f"docker top {name} -eo pid,uid").splitlines()[1:]}
    assert uids == {str(CONTAINER_UID)}


def listeners(host) -> list[str]:
    out = host.check_output("ss -Hltn")
    return [line.split()[3] for line in out.splitlines() if line.strip()]


def test_nothing_listens_on_all_interfaces(host) -> None:
    wildcard = [addr for addr in listeners(host) if addr.startswith(("0.0.0.0:", "*:", "[::]:"))]
    assert wildcard == []


def test_dask_ports_listen_on_the_cluster_address_and_loopback_only(host) -> None:
    addresses = listeners(host)
    cluster_ip = host.interface("eth0").addresses[0]
    if role(host) == "scheduler":
        assert f"{cluster_ip}:8786" in addresses
        assert "127.0.0.1:8787" in addresses
        assert not any(addr.endswith(":8787") and not addr.startswith("127.0.0.1") for addr in addresses)
    else:
        # The worker's HTTP server: loopback, or the cluster address when monitoring scrapes it (the second verify
        # step runs after the side effect turned monitoring on); its env file's health URL says which.
        env = host.file(f"/etc/dask/{unit(host)}.env").content_string
        expected = f"{cluster_ip}:8790" if f"DASK_HEALTH_URL=http://{cluster_ip}:8790/" in env else "127.0.0.1:8790"
        assert expected in addresses
        dask_ports = [addr for addr in addresses if not addr.startswith(("127.", "[::1]"))]
        assert dask_ports and all(addr.startswith(f"{cluster_ip}:") for addr in dask_ports)


@pytest.mark.parametrize("path", ["/etc/dask/tls/host.key"])
def test_key_files_are_0600_and_owned_by_the_container_user(host, path: str) -> None:
    key = host.file(path)
    assert key.exists and key.mode == 0o600 and key.uid == CONTAINER_UID


def test_env_files_are_0600(host) -> None:
    env = host.file(f"/etc/dask/{unit(host)}.env")
    assert env.exists and env.mode == 0o600 and env.user == "root"


def test_ca_private_key_never_leaves_the_controller(host) -> None:
    assert host.run("grep -rl 'PRIVATE KEY' /etc/dask | grep -v host.key").stdout.strip() == ""
    assert not host.file("/etc/dask/tls/ca.key").exists


def test_pre_existing_daemon_json_key_is_kept(host) -> None:
    config = json.loads(host.file("/etc/docker/daemon.json").content_string)
    assert config["labels"] == ["sandbox=kept"]
    assert config["log-driver"] == "json-file"


def test_tls_is_required_by_the_cluster(host) -> None:
    env = host.file(f"/etc/dask/{unit(host)}.env").content_string
    assert "DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION=True" in env
    unit_text = host.file(f"/etc/systemd/system/{unit(host)}.service").content_string
    assert "tls://" in unit_text or "--protocol\" \"tls\"" in unit_text
