"""A rolling worker change in the sandbox (molecule's side effect, the first suite): while a workload
keeps data on the workers (a persisted array and a chain of futures that runs for the whole operation),
site.yml changes a worker setting on both worker hosts. The run retires one host's workers at a time through
the scheduler, restarts its unit and waits for its workers before the next; the workload completes with the
exact answer and no KilledWorker, every worker comes back (new processes), and the run reports per host the
retire, restart and re-register times (reports/rolling.jsonl on the controller). The change is left for the faults
suite, next, to converge back from (live.NEXT_TAKES_OVER); run without it, this suite converges back itself."""
from __future__ import annotations

import json
import threading
import time
from typing import Any

import dask.array as da
import live
import numpy as np

# A worker setting that changes both worker hosts' unit (the inventory's is live.THREADS).
CHANGE = f"dask_worker_nthreads={live.CHANGED_THREADS}"


def test_a_worker_change_rolls_host_by_host_without_losing_work() -> None:
    # Local: distributed pickles it by value (a module-level function would be pickled by reference, and the
    # cluster cannot import this module).
    def step(value: int) -> int:
        time.sleep(0.2)
        return value + 1

    with live.connect(timeout=60) as client:
        before = {info["name"]: address for address, info in live.workers(client).items()}
        assert len(before) == len(live.WORKERS), before
        array = da.arange(2_000_000, chunks=100_000, dtype="int64").persist()
        live.wait_until(lambda: len(client.has_what()) == len(live.WORKERS) and all(client.has_what().values()),
                        60, "the array's blocks on both workers")
        held = {address: len(keys) for address, keys in client.has_what().items()}
        chain: dict[str, Any] = {"future": client.submit(step, 0, pure=False), "links": 1, "error": None}
        done = threading.Event()

        def extend() -> None:  # one link at a time, for as long as site.yml runs
            try:
                while not done.is_set():
                    chain["future"] = client.submit(step, chain["future"], pure=False)
                    chain["links"] += 1
                    chain["future"].result(timeout=600)
            except Exception as error:  # noqa: BLE001 - reported by the test below
                chain["error"] = error

        runner = threading.Thread(target=extend, daemon=True)
        runner.start()
        units = {host: live.unit_property(host, "dask-worker", "ActiveEnterTimestamp") for host in live.WORKERS}
        wall, started = time.time(), time.monotonic()
        run = live.playbook("site.yml", "-e", CHANGE, timeout=1500)
        seconds = time.monotonic() - started
        done.set()
        runner.join(timeout=600)
        assert run.returncode == 0, run.stdout[-4000:]
        assert chain["error"] is None, f"the chain of futures failed: {chain['error']!r}"
        assert chain["future"].result(timeout=60) == chain["links"], chain
        assert int(array.sum().compute()) == 2_000_000 * 1_999_999 // 2
        assert np.array_equal(array[-3:].compute(), np.arange(1_999_997, 2_000_000))
        after = {info["name"]: address for address, info in live.workers(client).items()}

    report = live.ephemeral_dir() / "artifacts" / "reports" / "rolling.jsonl"
    rows = [row for row in map(json.loads, report.read_text().splitlines()) if row.get("at", 0) >= int(wall)]
    assert [row["hosts"] for row in rows] == [[host] for host in live.WORKERS], run.stdout[-3000:]
    assert all(row["keys_left"] == 0 and row["retire_timed_out"] is False for row in rows), rows
    assert sum(row["keys_moved"] for row in rows) >= sum(held.values()), (rows, held)
    # Every worker came back, from a restarted unit, and registered.
    assert sorted(after) == sorted(before), (before, after)
    for host in live.WORKERS:
        assert live.unit_property(host, "dask-worker", "ActiveEnterTimestamp") != units[host], host
    # The suite's own rows go to reports/rolling-suite.jsonl: rolling.jsonl is the role's (its median sizes the next
    # roll's estimate).
    for row in rows:
        live.record("rolling-suite", {"host": row["hosts"][0], "retire s": row["retire_seconds"],
                                      "keys moved": row["keys_moved"], "restart s": row["restart_seconds"],
                                      "register s": row["register_seconds"]})
    live.record("rolling-suite", {"site.yml s": round(seconds, 1), "chain links": chain["links"],
                                  "KilledWorker": "none", "answer": "exact"})
    if live.next_takes_over():
        print(f"[rolling] left with {CHANGE}: the faults suite next converges back from it", flush=True)
    else:
        back = live.playbook("site.yml", timeout=1500)
        assert back.returncode == 0, back.stdout[-4000:]


def test_verify_with_the_autoscaler_on_where_none_was_deployed_says_so() -> None:
    """The other way round: verify.yml with -e dask_autoscale_enabled=true on a cluster deployed without it (this
    suite's site.yml turned it off) stops at its first play, naming the host and the variable."""
    run = live.playbook("playbooks/verify.yml", "-e", "dask_autoscale_enabled=true", timeout=300)
    text = " ".join((run.stdout + run.stderr).split())  # the failed task's message is on stderr
    assert run.returncode != 0, run.stdout[-3000:]
    assert (f"host {live.SCHEDULER}: dask_autoscale_enabled=true for this run, but the autoscaler does not run on "
            "this host" in text), run.stdout[-3000:]
    assert "Verification client runs" not in text, run.stdout[-3000:]
