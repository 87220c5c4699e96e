"""Retiring a worker host in the sandbox (molecule's side effect, after the transport tests): with
`dask_host_state: retired` for dask-w2 (a second inventory file, as host_vars would), site.yml moves dask-w2's keys to
dask-w1 through the scheduler, removes the cluster from dask-w2 and takes it out of the other hosts' firewall;
then, with the line gone, site.yml adds it back without restarting dask-w1's worker. JupyterLab keeps running through
both (its kernels with it), and a new kernel takes the partitioning advice for the workers the cluster has then."""
from __future__ import annotations

import time
from pathlib import Path

import live
import yaml

RETIRED, KEPT = "dask-w2", "dask-w1"


def notebook_advice_workers() -> int:
    """The workers count a new kernel of JupyterLab takes from the cluster's partitioning advice."""
    code = "from dask_gpu_verify import partitions; print(partitions.advice().workers)"
    return int(live.in_a_new_process_of(live.SCHEDULER, live.NOTEBOOK, code).split()[-1])


def test_a_retired_host_hands_over_its_keys_leaves_and_comes_back(tmp_path: Path) -> None:
    # Local: distributed pickles it by value (a module-level function would be pickled by reference, and the
    # cluster cannot import this module).
    def build(size: int) -> list[int]:
        return list(range(size))

    retire = tmp_path / "retire.yml"
    retire.write_text(yaml.safe_dump({"all": {"hosts": {RETIRED: {"dask_host_state": "retired"}}}}))
    kept_started = live.started_at(KEPT, "dask-worker")
    notebook_started = live.started_at(live.SCHEDULER, live.NOTEBOOK)
    assert notebook_advice_workers() == len(live.WORKERS)
    with live.connect(timeout=60) as client:
        on_retired = [address for address, info in live.workers(client).items() if info["name"].startswith(RETIRED)]
        assert len(on_retired) == 1, live.workers(client)
        data = [client.submit(build, size, pure=False, workers=on_retired) for size in range(30)]
        client.gather(data)
        before = sum(len(keys) for keys in client.has_what(workers=on_retired).values())
        assert before >= 30
        started = time.monotonic()
        run = live.playbook("site.yml", "-i", str(retire), timeout=1500)
        retire_seconds = time.monotonic() - started
        assert run.returncode == 0, run.stdout[-4000:]
        assert [len(future.result(timeout=60)) for future in data] == list(range(30))  # every key survived
        names = sorted(info["name"] for info in live.workers(client).values())
        assert names and all(name.startswith(KEPT) for name in names), names
        holders = {address for keys in [client.who_has()] for address_list in keys.values() for address in address_list}
        assert holders and all(address not in on_retired for address in holders), holders

    # The cluster is gone from dask-w2; the others' firewall no longer lets it in; dask-w1 kept its worker.
    units = live.on_host(RETIRED, "systemctl", "list-unit-files", "--no-legend", "dask-*", check=False).stdout
    assert units.strip() == "", units
    assert live.on_host(RETIRED, "test", "-e", "/etc/dask", check=False).returncode == 1
    gone = live.address(RETIRED)
    for host in (live.SCHEDULER, KEPT):
        table = live.on_host(host, "nft", "list", "set", "inet", "dask_firewall", "cluster").stdout
        assert gone not in table and live.address(KEPT) in table, (host, table)
    assert live.started_at(KEPT, "dask-worker") == kept_started
    # JupyterLab (and every kernel in it) kept running; a new kernel takes the advice for the workers left.
    assert live.started_at(live.SCHEDULER, live.NOTEBOOK) == notebook_started, "retiring dask-w2 restarted JupyterLab"
    assert notebook_advice_workers() == len(live.WORKERS) - 1

    started = time.monotonic()
    run = live.playbook("site.yml", timeout=1500)
    back_seconds = time.monotonic() - started
    assert run.returncode == 0, run.stdout[-4000:]
    with live.connect(timeout=60) as client:
        client.wait_for_workers(len(live.WORKERS), timeout=120)
        assert sorted(info["name"].split("-")[1] for info in live.workers(client).values()) == ["w1", "w2"]
    assert live.started_at(KEPT, "dask-worker") == kept_started, "adding dask-w2 back restarted dask-w1's worker"
    assert live.started_at(live.SCHEDULER, live.NOTEBOOK) == notebook_started, "dask-w2's return restarted JupyterLab"
    assert notebook_advice_workers() == len(live.WORKERS)
    live.record("retire", {"host": RETIRED, "keys moved": before, "site.yml to retire s": round(retire_seconds, 1),
                           "site.yml to add back s": round(back_seconds, 1), "dask-w1 restarted": "no",
                           "JupyterLab restarted": "no"})
