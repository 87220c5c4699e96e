"""dask_transport tls-ucx in the sandbox (molecule's side effect, after the firewall tests): site.yml moves the
cluster to clients over mutual TLS, scheduler and workers over UCX (UCX over TCP: the sandbox has no GPU), the
firewall on. A client with the cluster's certificate computes and gathers through tls://; an outsider reaches
none of the UCX listeners; the controller, an allowed client address, reaches the scheduler's TLS port and
nothing else, and that port refuses it without a certificate. The cluster goes back to tls at the end, unless the
suite runner says the next suite (teardown) removes it and deploys tls again."""
from __future__ import annotations

import socket
from collections.abc import Iterator

import dask.array as da
import live
import numpy as np
import pytest

SCHEDULER_UCX_PORT = 8788  # dask_scheduler_ucx_port's default


def converge(transport: str) -> None:
    run = live.playbook("site.yml", "-e", f"dask_transport={transport}", timeout=1500)
    assert run.returncode == 0, run.stdout[-4000:]
    # What the run restarted, and how: a change of transport restarts the scheduler, whose workers close with it, so
    # the worker hosts restart at once (nothing to hand over), not a batch at a time.
    for line in run.stdout.splitlines():
        if "Rolling restart of" in line or "[rolling]" in line or "restarts now" in line or "restart now" in line:
            print(f"[transport] {line.strip()}", flush=True)
    text = " ".join(run.stdout.split())
    assert "The scheduler of cluster dask restarted in this run" in text, run.stdout[-4000:]
    assert "[rolling]" not in text and "Rolling restart of dask-" not in text, run.stdout[-4000:]
    print(f"[transport] site.yml with dask_transport={transport}: ok", flush=True)


def worker_count() -> int:
    with live.connect() as client:
        return len(live.workers(client))


@pytest.fixture(scope="module")
def ucx_cluster() -> Iterator[dict[str, list[tuple[str, int]]]]:
    try:
        converge("tls-ucx")
        live.wait_until(lambda: worker_count() == 2, 180, "2 workers over UCX")
        with live.connect() as client:
            info = client.scheduler_info(n_workers=-1)["workers"]
        ucx = [(live.address(live.SCHEDULER), SCHEDULER_UCX_PORT)]
        for addr, worker in info.items():
            for url in (addr, str(worker.get("nanny") or "")):
                if url:
                    host, port = url.split("://", 1)[1].rsplit(":", 1)
                    ucx.append((host, int(port)))
        yield {"addresses": list(info), "ucx": ucx}
    finally:
        if live.next_takes_over():
            print("[transport] left in tls-ucx: the teardown suite next removes it and deploys tls", flush=True)
        else:
            converge("tls")


def test_workers_talk_ucx_and_a_tls_client_computes_and_gathers(ucx_cluster: dict) -> None:
    assert sorted(a.split("://")[0] for a in ucx_cluster["addresses"]) == ["ucx", "ucx"], ucx_cluster
    assert live.scheduler_address().startswith("tls://")
    for host, unit in ((live.SCHEDULER, "dask-scheduler"), (live.WORKERS[0], "dask-worker")):
        env = live.on_host(host, "cat", f"/etc/dask/{unit}.env").stdout  # UCX keeps off docker0
        assert "UCX_NET_DEVICES=eth0" in env, (host, env)
    x = np.arange(400 * 400, dtype="f8").reshape(400, 400)
    with live.connect() as client:
        y = client.persist(da.from_array(x, chunks=100))  # blocks on both workers: x + x.T moves them over UCX
        total = client.compute((y + y.T).sum()).result(timeout=120)
        block = client.compute((y + y.T)[:100, :100]).result(timeout=120)  # the scheduler gathers it over UCX
    assert total == (x + x.T).sum()
    assert np.array_equal(block, (x + x.T)[:100, :100])
    live.record("transport", {"mode": "tls-ucx", "workers": " ".join(sorted(ucx_cluster["addresses"])),
                              "compute and gather over tls://": "exact"})


def test_an_outsider_reaches_no_ucx_listener(ucx_cluster: dict) -> None:
    results = live.probe_from_container(ucx_cluster["ucx"], "--ip", live.OUTSIDER_IP)
    assert set(results.values()) == {"ConnectionRefusedError"}, results
    live.record("transport", {"from": live.OUTSIDER_IP, "refused": ", ".join(sorted(results))})


def test_a_cluster_host_reaches_the_ucx_listeners(ucx_cluster: dict) -> None:
    # The control for the refusals: every listener above is there and open to the cluster's hosts.
    probe = ("import socket, sys; [socket.create_connection((h, int(p)), timeout=5).close() "
             "for h, p in (t.split(':') for t in sys.argv[1:])]")
    targets = [f"{h}:{p}" for h, p in ucx_cluster["ucx"]]
    assert live.on_host("dask-w1", "python3", "-c", probe, *targets, check=False).returncode == 0


def test_an_allowed_client_without_a_certificate_gets_nothing(ucx_cluster: dict) -> None:
    # The controller is on the allow list: the scheduler's TLS port only. Without a certificate TLS refuses it,
    # and the UCX listeners (no authentication) refuse its connections at the firewall.
    outcome = live.tls_exchange(None)
    assert "certificate required" in outcome or outcome == "closed", outcome
    refused = {}
    for host, port in ucx_cluster["ucx"]:
        try:
            socket.create_connection((host, port), timeout=5).close()
            refused[f"{host}:{port}"] = "open"
        except OSError as exc:
            refused[f"{host}:{port}"] = type(exc).__name__
    assert set(refused.values()) == {"ConnectionRefusedError"}, refused
    live.record("transport", {"from": "controller, no certificate", "TLS": outcome,
                              "UCX listeners": ", ".join(sorted(refused))})


def test_the_verify_playbook_passes_over_tls_ucx(ucx_cluster: dict) -> None:
    run = live.playbook("playbooks/verify.yml", "-e", "dask_transport=tls-ucx")
    assert run.returncode == 0, run.stdout[-4000:]
