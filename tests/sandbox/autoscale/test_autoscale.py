"""Adaptive scaling in the sandbox (role dask_autoscale, docs/autoscale.md; molecule's side effect, after the fast
rerun): the inventory leaves the autoscaler off (its default; no other suite pays for it), and this suite turns it on
with a short idle time and a cooldown longer than it (strings, as -e gives them), then: Prometheus scrapes it and
its counts; the idle worker host goes, its data moved first; a rerun of site.yml leaves that scale alone (changed=0 on
every host); work waiting brings the host back within 30 s, cycle after cycle, with exact answers;
playbooks/verify.yml starts a released host for the verification, and passes although the host's worker is killed
while it comes back; no release comes within the cooldown of the change before it; a second autoscaled cluster,
green, shares the hosts (dask_autoscale_share_gpus on both) and the two take turns on a host: green starts where dask
released, dask's waiting work makes dask's agent wait, green idles down, dask scales up onto the host; green is torn
down and dask keeps its turn. At its end every host is up, held
so (the autoscaler's floor) for the rolling suite, next, whose run converges back to the inventory's settings and so
turns the autoscaler off (live.NEXT_TAKES_OVER); run alone, this suite converges back itself.
DASK_SANDBOX_AUTOSCALE_CYCLES sets the cycles (CI: 1, and verify.yml's; by hand: 10)."""
from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Iterator
from typing import Any

import live
import pytest

IDLE, COOLDOWN = 6, 12
# Sharing its hosts' GPUs (here: the CPU worker hosts, one turn each) with cluster green, which takes turns with it.
SETTINGS = ("-e", "dask_autoscale_enabled=true", "-e", f"dask_autoscale_idle={IDLE}",
            "-e", f"dask_autoscale_cooldown={COOLDOWN}", "-e", "dask_autoscale_share_gpus=true")
CYCLES = int(os.environ.get("DASK_SANDBOX_AUTOSCALE_CYCLES", "1"))
# The minimum is one host: one of the two goes. Which one is the autoscaler's choice (the last in inventory order
# among the hosts idle long enough; after a burst the first may be idle sooner), so each test reads it.
AUTOSCALER, AGENT, WORKER = "dask-autoscaler", "dask-autoscale-agent", "dask-worker"
# The burst: tasks of 1 s, more than the kept host's threads run in the time a host takes to come back.
BURST, TASK_SECONDS = 60, 1.0


def journal(host: str, unit: str, since: float) -> list[tuple[float, str]]:
    """(time, message) of a unit's journal lines since a time."""
    out = live.on_host(host, "journalctl", "-u", unit, "-o", "short-unix", "--no-pager", "--since",
                       f"@{int(since)}").stdout
    rows = []
    for line in out.splitlines():
        stamp, _, rest = line.partition(" ")
        if re.fullmatch(r"[0-9.]+", stamp):
            rows.append((float(stamp), rest.split(": ", 1)[-1]))
    return rows


def decisions(since: float) -> list[tuple[float, str]]:
    return [(at, line) for at, line in journal(live.SCHEDULER, AUTOSCALER, since)
            if line.startswith(("scale up:", "scale down:"))]


def state(host: str) -> str:
    return live.unit_property(host, WORKER, "ActiveState")


def released_hosts() -> list[str]:
    return [host for host in live.WORKERS if state(host) in ("inactive", "failed")]


def wait_released(timeout: float = IDLE + COOLDOWN + 40) -> tuple[str, float]:
    """The worker host whose unit its agent stopped, and the seconds waited for it."""
    seconds = live.wait_until(lambda: len(released_hosts()) == 1, timeout, "a worker host's unit stopped by its agent")
    return released_hosts()[0], seconds


FLOOR = "/var/lib/dask/autoscale/floor"


def every_host_up(seconds: int) -> None:
    """Every worker host up, asked for as playbooks/verify.yml asks (the autoscaler's floor, for `seconds`)."""
    live.on_host(live.SCHEDULER, "sh", "-c",
                 f"printf '{{\"workers\": {len(live.WORKERS)}, \"until\": {int(time.time()) + seconds}}}' > {FLOOR}")
    with live.connect(timeout=60) as client:
        client.wait_for_workers(len(live.WORKERS), timeout=120)


def started_at(host: str) -> tuple[str, str]:
    """When the host's worker unit last started, and its unit and env files' checksums (another change restarts it)."""
    files = live.on_host(host, "sha256sum", f"/etc/systemd/system/{WORKER}.service", f"/etc/dask/{WORKER}.env").stdout
    return live.unit_property(host, WORKER, "ExecMainStartTimestampMonotonic"), files


@pytest.fixture(scope="module")
def scaled() -> Iterator[float]:
    since = time.time() - 1
    running = {host: started_at(host) for host in live.WORKERS if state(host) == "active"}
    run = live.playbook("site.yml", *SETTINGS, timeout=1500)
    assert run.returncode == 0, run.stdout[-4000:]
    # Sharing turned on restarts no worker: the turn check is a drop-in read at the next start, and the running
    # workers took their turn there and then. (Run after a suite that left other settings, the workers whose unit or
    # env file changed restart for that: CI runs it after the fast rerun suite, at the inventory's settings.)
    for host in live.WORKERS:
        assert "gpu_turns.py take" in live.unit_property(host, WORKER, "ExecCondition"), host
        assert turn(host) == {"unit": WORKER, "cluster": "dask"}, (host, turn(host))
    now = {host: started_at(host) for host in running}
    restarted = [host for host, (at, files) in running.items() if now[host][1] == files and now[host][0] != at]
    assert not restarted, f"turning dask_autoscale_share_gpus on restarted the workers of {restarted}"
    live.record("autoscale", {"step": "sharing turned on", "workers_running": sorted(running),
                              "restarted_for_other_changes": sorted(host for host in running
                                                                    if now[host][1] != running[host][1])})
    every_host_up(120)  # whatever an earlier run left released
    live.on_host(live.SCHEDULER, "rm", "-f", FLOOR)
    yield since
    if live.next_takes_over():
        # The rolling suite, next, converges back to the inventory's settings (an idle time no suite reaches); every
        # host stays up for it until then (the floor lapses by itself).
        every_host_up(900)
        return
    assert live.playbook("site.yml", timeout=1500).returncode == 0
    every_host_up(300)
    live.on_host(live.SCHEDULER, "rm", "-f", FLOOR)


def test_an_idle_host_goes_after_its_data_moved(scaled: float) -> None:
    # Every host held up (the floor) while the data is put on it: without the floor the autoscaler may release a
    # host between the fixture's wait and this one (its cooldown since the scale-up already past), and nothing would
    # bring it back.
    every_host_up(120)
    with live.connect(timeout=60) as client:
        hosts = live.by_host(client)
        data = [client.submit(lambda n: list(range(n)), n, workers=[worker["address"] for worker in hosts[host]],
                              pure=False) for host in live.WORKERS for n in range(20)]  # data on every host
        client.gather(data)
        # Decisions from here on: the fixture lifts its floor too, and in the moment before this test's floor the
        # autoscaler (fresh, so no cooldown yet) may release a host that the floor then brings back (r23).
        lifted = time.time() - 1
        live.on_host(live.SCHEDULER, "rm", "-f", FLOOR)
        released, seconds = wait_released()  # from the moment its work was done and the floor lifted: idle from then
        assert [len(future.result()) for future in data] == list(range(20)) * len(live.WORKERS)  # moved first
        live.wait_until(lambda: not live.by_host(client)[released], 30, f"{released} gone from the scheduler")
        assert all(len(workers) == 1 for host, workers in live.by_host(client).items() if host != released)
    down = [line for _, line in decisions(lifted) if line.startswith("scale down:")]
    assert down and released in down[0] and f"retired {released} (data moved)" in down[0], down
    stops = [line for _, line in journal(released, AGENT, lifted) if line.startswith(f"stop {WORKER}")]
    assert stops and "exit 0" in stops[-1], stops
    live.record("autoscale", {"step": "idle host released", "idle_s": IDLE, "seconds": round(seconds, 1)})
    assert seconds <= IDLE + 30, f"released {seconds:.1f} s after its work ended (idle {IDLE} s + 30 s at most)"


def test_a_rerun_of_site_yml_leaves_the_scale_alone(scaled: float) -> None:
    run = live.playbook("site.yml", *SETTINGS, timeout=1500)
    assert run.returncode == 0, run.stdout[-4000:]
    counts = {host: count["changed"] for host, count in live.recap(run.stdout).items()}
    assert set(counts) >= {live.SCHEDULER, *live.WORKERS} and not any(counts.values()), counts
    assert len(released_hosts()) == 1, "site.yml started the released host"


def one_cycle(client: Any, cycle: int) -> dict[str, Any]:
    """Work waits on the kept host: the released one comes back and computes; exact answers."""
    seconds = TASK_SECONDS

    def task(value: int) -> tuple[int, str]:  # local: pickled by value (the workers cannot import this module)
        from distributed import get_worker

        time.sleep(seconds)
        return value * value, str(get_worker().name)

    released, _ = wait_released()
    started = time.time()
    futures = client.map(task, range(BURST), pure=False)
    unit_at = live.wait_until(lambda: state(released) in ("active", "activating"), 60,
                              f"{released} started for waiting work") + started
    live.wait_until(lambda: live.by_host(client)[released], 60, f"{released}'s worker registered")
    registered_at = time.time()
    results = client.gather(futures)
    assert sorted(value for value, _ in results) == [n * n for n in range(BURST)]
    ran_there = sum(1 for _, name in results if name.startswith(released))
    assert ran_there > 0, f"cycle {cycle}: no task ran on {released}"
    up = [at for at, line in decisions(started) if line.startswith("scale up:") and released in line]
    assert up, f"cycle {cycle}: no scale-up decision"
    return {"step": f"cycle {cycle}",
            "decision_s": round(up[0] - started, 1), "unit_start_s": round(unit_at - up[0], 1),
            "registered_s": round(registered_at - unit_at, 1), "computing_within_s": round(registered_at - started, 1),
            "released_host": released, "tasks_on_released_host": ran_there, "answers_exact": True}


def test_waiting_work_brings_the_host_back_cycle_after_cycle_with_exact_answers(scaled: float) -> None:
    with live.connect(timeout=60) as client:
        for cycle in range(1, CYCLES + 1):
            row = one_cycle(client, cycle)
            live.record("autoscale", row)
            assert row["computing_within_s"] <= 30, row


def test_verify_without_the_deployed_settings_says_so_at_once(scaled: float) -> None:
    """verify.yml without the dask_autoscale_* settings site.yml ran with (the autoscaler off for this run) stops at
    its first play, naming the host and the variable, instead of waiting for the released host's worker until its
    timeout; nothing is started and no floor is set."""
    released, _ = wait_released()
    run = live.playbook("playbooks/verify.yml", timeout=300)
    text = " ".join((run.stdout + run.stderr).split())  # the failed task's message is on stderr
    assert run.returncode != 0, run.stdout[-3000:]
    assert (f"host {live.SCHEDULER}: dask_autoscale_enabled=false for this run, but the autoscaler runs on this host"
            in text and "-e dask_autoscale_enabled=true" in text), run.stdout[-3000:]
    assert "Verification client runs" not in text, run.stdout[-3000:]
    assert live.on_host(live.SCHEDULER, "test", "-e", FLOOR, check=False).returncode == 1
    assert state(released) not in ("active", "activating"), f"{released} was started"


def test_verify_starts_a_released_host_whose_worker_is_killed_while_it_comes_back(scaled: float) -> None:
    """playbooks/verify.yml (with the settings the cluster was deployed with, as a user runs it) asks for every
    worker; the released host starts, its worker container is killed while it comes back (systemd starts it again),
    and the verification of every worker passes."""
    released, _ = wait_released()
    started = time.time()
    result: dict[str, Any] = {}

    def verify() -> None:
        result["run"] = live.playbook("playbooks/verify.yml", *SETTINGS, timeout=900)

    runner = threading.Thread(target=verify)
    runner.start()
    live.wait_until(lambda: state(released) in ("active", "activating"), 120, f"{released} started for verify.yml")
    live.wait_until(lambda: live.on_host(released, "docker", "kill", WORKER, check=False).returncode == 0, 60,
                    f"{WORKER} killed on {released} while it comes back")
    killed = time.time()
    runner.join(timeout=900)
    run = result["run"]
    assert run.returncode == 0, run.stdout[-4000:]
    assert f"starting the released workers ({released}: 1)" in " ".join(run.stdout.split()), run.stdout[-3000:]
    restarts = int(live.unit_property(released, WORKER, "NRestarts") or 0)
    assert restarts >= 1, f"{WORKER} on {released} was not started again by systemd after the kill"
    up = [at for at, line in decisions(started) if line.startswith("scale up:") and released in line]
    assert up and up[0] < killed, decisions(started)
    assert live.on_host(live.SCHEDULER, "test", "-e", FLOOR, check=False).returncode == 1  # lifted after it
    live.record("autoscale", {"step": "verify.yml with a released host, its worker killed while it came back",
                              "decision_s": round(up[0] - started, 1), "restarts": restarts,
                              "verify_s": round(time.time() - started, 1)})


def test_the_benchmark_starts_a_released_host_and_lets_it_go_again(scaled: float) -> None:
    """playbooks/benchmark.yml, like verify.yml, asks for every worker: the released host starts, the benchmark
    passes on every worker, and its floor is lifted at its end."""
    released, _ = wait_released()
    run = live.playbook("playbooks/benchmark.yml", *SETTINGS, "-e", "dask_bench_etl_rows=200000", timeout=900)
    assert run.returncode == 0, (run.stdout + run.stderr)[-4000:]
    assert f"starting the released workers ({released}: 1)" in " ".join(run.stdout.split()), run.stdout[-3000:]
    assert live.on_host(live.SCHEDULER, "test", "-e", FLOOR, check=False).returncode == 1  # lifted at its end


def test_no_release_comes_within_the_cooldown_of_the_change_before_it(scaled: float) -> None:
    made = decisions(scaled)
    assert len(made) >= 2 + 2 * CYCLES, made
    gaps = [round(at - made[index - 1][0], 1) for index, (at, line) in enumerate(made)
            if index and line.startswith("scale down:")]
    assert gaps and min(gaps) >= COOLDOWN, gaps
    live.record("autoscale", {"step": "cooldown", "cooldown_s": COOLDOWN, "shortest_gap_before_a_release_s": min(gaps),
                              "decisions": len(made)})


GREEN_WORKER = "dask-green-worker"
# Green's cooldown after it gives up the host dask holds (once the test lifts green's floor), before its idle host goes.
GREEN_COOLDOWN = 6
TURNS = "/run/dask-gpu-turns"


def green(*args: str, timeout: float = 1500) -> Any:
    """A playbook run for cluster green: a second autoscaled cluster on the same hosts that shares their GPUs (their
    turns) with dask, on its own ports and controller folder, running dask's images from dask's cluster registry
    (JupyterLab stays on: it is built into the images, so turning it off would make green's images differ), without
    monitoring (one Prometheus per host)."""
    values = live.ephemeral_dir() / "green-vars.json"
    values.write_text(json.dumps({
        "dask_cluster_name": "green", "dask_scheduler_port": 6786, "dask_dashboard_port": 6787,
        "dask_worker_http_port": 6790, "dask_autoscale_port": 6785, "dask_autoscale_metrics_port": 6784,
        "dask_controller_dir": str(live.ephemeral_dir() / "artifacts-green"), "dask_monitoring_enabled": False,
        "dask_notebook_port": 6888, "dask_images_distribution": "registry",
        "dask_images_registry": f"{live.address(live.SCHEDULER)}:5000", "dask_autoscale_enabled": True,
        "dask_autoscale_share_gpus": True, "dask_autoscale_minimum": 0, "dask_autoscale_idle": IDLE,
        "dask_autoscale_cooldown": GREEN_COOLDOWN}))
    return live.playbook(*args, "-e", f"@{values}", timeout=timeout)


GREEN_STATE = "/var/lib/dask-green/autoscale"  # green's autoscaler's state folder on the scheduler host


def hold_green_up(done: threading.Event) -> None:
    """Green's autoscaler wants every host from its first start until the test lets it go (its floor, as verify.yml
    asks for one): without it, green's worker, idle since it registered mid-deploy, goes as green's site.yml ends."""
    while not done.is_set():
        if live.on_host(live.SCHEDULER, "test", "-d", GREEN_STATE, check=False).returncode == 0:
            live.on_host(live.SCHEDULER, "sh", "-c", f"printf '{{\"workers\": {len(live.WORKERS)}, \"until\": "
                         f"{int(time.time()) + 900}}}' > {GREEN_STATE}/floor")
            return
        time.sleep(0.5)


def turn(host: str) -> dict[str, str]:
    """Which unit took the host's turn last (gpu_turns.py's file for a CPU worker host)."""
    out = live.on_host(host, "cat", f"{TURNS}/cpu", check=False).stdout
    return dict(json.loads(out)) if out.strip() else {}


def test_two_clusters_take_turns_one_idles_down_the_other_scales_up_onto_its_host(scaled: float) -> None:
    """Cluster green shares the worker hosts with dask (dask_autoscale_share_gpus on both): deployed while dask holds
    one host and has released the other, green starts only on the released one (site.yml says which cluster holds
    the other) and computes there; dask's waiting work then wants that host back: dask's agent waits while green's
    workers run there, green idles down, and dask's workers start on the host and compute, exact answers. Then
    teardown.yml takes green away and gives up its turns; dask keeps its own."""
    released, _ = wait_released()
    kept = next(host for host in live.WORKERS if host != released)
    seconds = TASK_SECONDS

    def task(value: int) -> tuple[int, str]:  # local: pickled by value (the workers cannot import this module)
        from distributed import get_worker

        time.sleep(seconds)
        return value * value, str(get_worker().name)

    started = time.time()
    done = threading.Event()
    holder = threading.Thread(target=hold_green_up, args=(done,))
    holder.start()
    run = green("site.yml")
    done.set()
    holder.join()
    try:
        assert run.returncode == 0, (run.stdout + run.stderr)[-4000:]
        assert live.on_host(live.SCHEDULER, "test", "-e", f"{GREEN_STATE}/floor", check=False).returncode == 0
        deployed_s = time.time() - started
        with live.connect(timeout=60) as client:
            asked = time.time()
            futures = client.map(task, range(3 * BURST), pure=False)
            text = " ".join(run.stdout.split())
            assert f"{kept}: cpu is in use by cluster dask (unit {WORKER}, active)" in text, run.stdout[-3000:]
            assert live.unit_property(released, GREEN_WORKER, "ActiveState") == "active"
            assert live.unit_property(kept, GREEN_WORKER, "ActiveState") == "inactive"
            assert turn(released) == {"unit": GREEN_WORKER, "cluster": "green"}, turn(released)
            with live.connect(timeout=60, artifacts="artifacts-green") as green_client:
                names = {info["name"] for info in live.workers(green_client).values()}
                assert names and all(name.startswith(released) for name in names), names
                assert green_client.submit(sum, [1, 2, 3], pure=False).result() == 6
            waited = live.wait_until(lambda: any(
                "waiting: cpu is in use by cluster green" in line for _, line in journal(released, AGENT, asked)),
                60, f"dask's agent on {released} waiting for green's workers") + asked
            assert not live.by_host(client)[released], "dask's worker started while green's ran there"
            live.on_host(live.SCHEDULER, "rm", "-f", f"{GREEN_STATE}/floor")  # green may go idle now
            let_go = time.time()
            live.wait_until(lambda: live.unit_property(released, GREEN_WORKER, "ActiveState") == "inactive",
                            IDLE + GREEN_COOLDOWN + 60, f"green's idle worker on {released} released")
            green_down = time.time()
            live.wait_until(lambda: live.by_host(client)[released], 60,
                            f"dask's worker on {released}, the host green released")
            dask_up = time.time()
            results = client.gather(futures)
        assert sorted(value for value, _ in results) == [n * n for n in range(3 * BURST)]
        ran_there = sum(1 for _, name in results if name.startswith(released))
        assert ran_there > 0, f"no task of dask's ran on {released} after green released it"
        assert turn(released) == {"unit": WORKER, "cluster": "dask"}, turn(released)
        gave_up = [line for _, line in journal(live.SCHEDULER, "dask-green-autoscaler", started)
                   if line.startswith("scale down:") and f"give up {kept}" in line]
        assert gave_up, "green's autoscaler did not give up the host dask holds"
    finally:
        down = green("playbooks/teardown.yml")
    assert down.returncode == 0, (down.stdout + down.stderr)[-4000:]
    assert turn(released) == {"unit": WORKER, "cluster": "dask"}, turn(released)
    for host in live.WORKERS:
        assert live.unit_property(host, GREEN_WORKER, "LoadState") == "not-found"
        assert live.on_host(host, "test", "-e", "/etc/dask-green", check=False).returncode == 1
    live.record("autoscale", {"step": "two clusters take turns on a host", "host": released,
                              "green_deployed_s": round(deployed_s, 1),
                              "dask_agent_waiting_after_s": round(waited - asked, 1),
                              "green_released_after_its_floor_s": round(green_down - let_go, 1),
                              "dask_registered_after_green_released_s": round(dask_up - green_down, 1),
                              "dask_tasks_on_that_host": ran_there, "answers_exact": True})
    assert dask_up - green_down <= 30, "dask's worker took more than 30 s to compute on the host green released"


def test_prometheus_scrapes_the_autoscaler_and_its_counts(scaled: float) -> None:
    """The scrape job the monitoring role adds while the autoscaler is on (the monitoring suite runs without it):
    its target up on the scheduler host, and the desired and registered counts that DaskAutoscaleBehind compares."""
    def scraped() -> bool:
        targets = live.prometheus("/api/v1/targets", state="active")["activeTargets"]
        found = [t for t in targets if t["labels"]["job"] == "dask-autoscale"]
        return bool(found) and all(t["health"] == "up" and t["labels"].get("host") == live.SCHEDULER for t in found)

    target_up_s = live.wait_until(scraped, 90, "the dask-autoscale target up in Prometheus")
    counts_s = live.wait_until(lambda: live.prometheus_scalar("dask_autoscale_desired_workers") is not None, 60,
                               "dask_autoscale_desired_workers in Prometheus")
    counts = {name: live.prometheus_scalar(f"dask_autoscale_{name}_workers") for name in ("desired", "registered")}
    assert all(value is not None and value >= 1 for value in counts.values()), counts
    live.record("autoscale", {"step": "scraped by Prometheus", "target_up_s": round(target_up_s, 1),
                              "counts_s": round(counts_s, 1), **counts})


# dask_autoscale_by gpu: each worker is a unit of scale of its own, stopped and started by dask-gpu-worker-slots in
# the host's worker container, which keeps running (a CPU worker host here runs one worker: its own name).
BY_GPU = ("-e", "dask_autoscale_enabled=true", "-e", f"dask_autoscale_idle={IDLE}",
          "-e", f"dask_autoscale_cooldown={COOLDOWN}", "-e", "dask_autoscale_by=gpu")
SLOTS_FILE = "/var/lib/dask/worker-slots/released.json"


def released_workers(host: str) -> list[str]:
    out = live.on_host(host, "cat", SLOTS_FILE, check=False).stdout
    return list(json.loads(out)["released"]) if out.strip() else []


def worker_processes(host: str) -> tuple[int, int]:
    """(dask-gpu-worker-slots processes, Dask worker processes) in the host's worker container."""
    rows = live.on_host(host, "docker", "top", WORKER, "-o", "pid,args").stdout.splitlines()[1:]
    # The processes themselves (/opt/dask/bin/...), not tini's line, which names the command after `--`.
    slots = [row for row in rows if "bin/dask-gpu-worker-slots" in row]
    workers = [row for row in rows if "bin/dask-gpu-worker-slots" not in row and "bin/dask worker" in row]
    return len(slots), len(workers)


def test_by_gpu_a_worker_goes_and_comes_back_while_its_unit_runs(scaled: float) -> None:
    """With dask_autoscale_by=gpu the idle worker's process stops inside its host's worker container (the unit stays
    active, the agent's file names it), a rerun of site.yml leaves that alone (changed=0, the released worker not
    waited for), a change that rolls the workers keeps it released, verify.yml starts it for its run and it goes again,
    waiting work starts it again with exact answers, and turning it back to hosts restores the host's unit as it
    was."""
    run = live.playbook("site.yml", *BY_GPU, timeout=1500)
    assert run.returncode == 0, run.stdout[-4000:]
    for host in live.WORKERS:
        assert "dask-gpu-worker-slots" in live.unit_property(host, WORKER, "ExecStart"), host
    lifted = time.time()

    def one_released() -> list[str]:
        return [host for host in live.WORKERS if released_workers(host)]

    seconds = live.wait_until(lambda: len(one_released()) == 1, IDLE + COOLDOWN + 40, "a worker released by GPU")
    host = one_released()[0]
    assert released_workers(host) == [host]  # a CPU worker host's one worker has the host's name
    assert state(host) == "active", f"{WORKER} on {host} stopped: by GPU only the worker's process goes"
    live.wait_until(lambda: worker_processes(host) == (1, 0), 30, f"no Dask worker process left in {host}'s container")
    with live.connect(timeout=60) as client:
        live.wait_until(lambda: not live.by_host(client)[host], 30, f"{host}'s worker gone from the scheduler")
    down = [line for _, line in decisions(lifted) if line.startswith("scale down:")]
    assert down and f"retired {host} (data moved), their workers stop now" in down[0], down
    agent = [line for _, line in journal(host, AGENT, lifted) if line.startswith("workers released")]
    assert agent and agent[0].startswith(f"workers released {host}, wanted again none"), agent

    rerun = live.playbook("site.yml", *BY_GPU, timeout=1500)
    assert rerun.returncode == 0, rerun.stdout[-4000:]
    counts = {name: count["changed"] for name, count in live.recap(rerun.stdout).items()}
    assert set(counts) >= {live.SCHEDULER, *live.WORKERS} and not any(counts.values()), counts
    assert released_workers(host) == [host] and worker_processes(host) == (1, 0), "site.yml started the released worker"

    # A change that rolls the workers: the released worker is not waited for, and stays released in the new container.
    rolled = live.playbook("site.yml", *BY_GPU, "-e", "dask_worker_death_timeout=61", timeout=1500)
    assert rolled.returncode == 0, rolled.stdout[-4000:]
    assert "Rolling restart of" in " ".join(rolled.stdout.split()), rolled.stdout[-3000:]
    assert released_workers(host) == [host] and worker_processes(host) == (1, 0), "the roll started the released worker"
    assert "--death-timeout 61" in " ".join(live.unit_property(host, WORKER, "ExecStart").split()).replace('"', "")

    # verify.yml needs every worker: its floor starts the released one (the agent's file), and lifts at its end.
    verify = live.playbook("playbooks/verify.yml", *BY_GPU, "-e", "dask_worker_death_timeout=61", timeout=900)
    assert verify.returncode == 0, verify.stdout[-4000:]
    assert f"starting the released workers ({host}: 1)" in " ".join(verify.stdout.split()), verify.stdout[-3000:]
    live.wait_until(lambda: released_workers(host) == [host] and worker_processes(host) == (1, 0), IDLE + COOLDOWN + 40,
                    f"{host}'s worker released again after verify.yml")

    seconds_per_task = TASK_SECONDS

    def task(value: int) -> int:
        time.sleep(seconds_per_task)
        return value * value

    with live.connect(timeout=60) as client:
        started = time.time()
        futures = client.map(task, range(BURST), pure=False)
        back = live.wait_until(lambda: live.by_host(client)[host], 60, f"{host}'s worker started again by GPU")
        registered_s = time.time() - started
        assert sorted(client.gather(futures)) == [n * n for n in range(BURST)]
    assert back and released_workers(host) == [] and worker_processes(host)[1] >= 1
    live.record("autoscale", {"step": "by GPU: a worker released and started again in its running container",
                              "released_after_s": round(seconds, 1), "registered_within_s": round(registered_s, 1),
                              "answers_exact": True})
    assert registered_s <= 30, registered_s

    # Back to hosts while a worker is released: the run removes the agent's file while the agent still runs, which
    # wrote it again within seconds (found on the GPU host of tests/gpu/gpuhost.py): the agent stops first now.
    live.wait_until(lambda: len(one_released()) == 1, IDLE + COOLDOWN + 40, "a worker released again")
    back_to_hosts = live.playbook("site.yml", *SETTINGS, timeout=1500)
    assert back_to_hosts.returncode == 0, back_to_hosts.stdout[-4000:]
    time.sleep(5)  # the agent wrote the file again 3 s after it went
    for name in live.WORKERS:
        assert "dask-gpu-worker-slots" not in live.unit_property(name, WORKER, "ExecStart"), name
        assert live.on_host(name, "test", "-e", SLOTS_FILE, check=False).returncode == 1, name
