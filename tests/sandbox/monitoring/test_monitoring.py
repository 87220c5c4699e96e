"""The dask_monitoring role in the sandbox (molecule's side effect turns it on with the firewall, a 5 s scrape and a
30 s alert window): Prometheus on the scheduler host scrapes every target of the inventory, the scheduler's worker
count equals the inventory's, every dashboard panel's query returns series (GPU panels: none, the sandbox has no
GPU; they are checked on a real GPU by tests/gpu), the deployed rules pass promtool, and stopping a worker unit
fires DaskWorkersMissing and DaskHostWorkersGone, which resolve when it is back (Prometheus's /api/v1/alerts)."""
from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import live
import pytest

HOSTS = (live.SCHEDULER, *live.WORKERS)
DASHBOARD_QUERIES = Path(__file__).resolve().parents[2] / "monitoring" / "dashboard_queries.py"
ALERT_WINDOW = 30  # dask_monitoring_alert_for in molecule/default/molecule.yml
STOPPED_HOST = "dask-w2"


def wait_for(what: str, check: Callable[[], Any], timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:.0f} s")
        time.sleep(2)


def alerts(name: str) -> list[dict[str, Any]]:
    return [alert for alert in live.prometheus("/api/v1/alerts")["alerts"] if alert["labels"]["alertname"] == name]


def stamp() -> str:
    return datetime.now(UTC).strftime("%H:%M:%S")


@pytest.fixture(scope="module")
def targets() -> list[dict[str, Any]]:
    """Every active target, once all are up (a first scrape can take an interval)."""
    def all_up() -> list[dict[str, Any]] | None:
        active = list(live.prometheus("/api/v1/targets", state="active")["activeTargets"])
        return active if active and all(target["health"] == "up" for target in active) else None
    try:
        return list(wait_for("every target up", all_up, 90))
    except AssertionError:
        down = [(t["labels"].get("job"), t["scrapeUrl"], t["lastError"])
                for t in live.prometheus("/api/v1/targets", state="active")["activeTargets"] if t["health"] != "up"]
        raise AssertionError(f"targets down: {down}") from None


def test_every_target_of_the_inventory_is_scraped_and_up(targets: list[dict[str, Any]]) -> None:
    jobs: dict[str, list[str]] = {}
    for target in targets:
        jobs.setdefault(target["labels"]["job"], []).append(target["labels"].get("host", ""))
    # One scheduler, one worker per worker host (CPU mode here), node exporter on every host (the autoscaler's job,
    # there while it is on, is checked by tests/sandbox/autoscale).
    assert sorted(jobs) == ["dask-scheduler", "dask-workers", "node", "prometheus"], jobs
    assert jobs["dask-scheduler"] == [live.SCHEDULER]
    assert sorted(jobs["dask-workers"]) == sorted(live.WORKERS)
    assert sorted(jobs["node"]) == sorted(HOSTS)
    workers = [t["scrapeUrl"] for t in targets if t["labels"]["job"] == "dask-workers"]
    assert sorted(workers) == sorted(f"http://{live.address(host)}:8790/metrics" for host in live.WORKERS)
    live.record("monitoring", {"targets up": len(targets), "jobs": ", ".join(f"{job}={len(hosts)}" for job, hosts
                                                                               in sorted(jobs.items()))})
    for target in sorted(targets, key=lambda t: (t["labels"]["job"], t["scrapeUrl"])):
        print(f"[monitoring] target {target['labels']['job']:15} {target['scrapeUrl']:40} {target['health']} "
              f"{1000 * float(target['lastScrapeDuration']):.1f} ms host={target['labels'].get('host', '')}",
              flush=True)


def test_the_schedulers_worker_count_equals_the_inventorys(targets: list[dict[str, Any]]) -> None:
    registered = live.prometheus_scalar('sum(dask_scheduler_workers{job="dask-scheduler"})')
    expected = live.prometheus_scalar('count(up{job="dask-workers"})')
    assert registered == expected == len(live.WORKERS), (registered, expected)


def test_prometheus_listens_on_loopback_only() -> None:
    listening = live.on_host(live.SCHEDULER, "ss", "-ltnH", "sport = :9090").stdout.split()
    assert "127.0.0.1:9090" in listening and not [word for word in listening if word.endswith(":9090")
                                                   and word != "127.0.0.1:9090"], listening


def test_the_deployed_configuration_and_rules_pass_promtool() -> None:
    for argv in (["promtool", "check", "config", "/etc/prometheus/prometheus.yml"],
                 ["promtool", "check", "rules", "/etc/prometheus/dask-alerts.yml"]):
        result = live.on_host(live.SCHEDULER, *argv, check=False)
        assert result.returncode == 0, result.stdout + result.stderr
    rules = live.prometheus("/api/v1/rules")["groups"]
    names = sorted(rule["name"] for group in rules for rule in group["rules"])
    assert len(names) == 12 and {"DaskWorkersMissing", "DaskGPUUnhealthy", "DaskAutoscaleBehind"} <= set(names), names


def test_every_dashboard_panel_returns_series(targets: list[dict[str, Any]]) -> None:
    # rate() over 1m needs two samples of each series: wait a little past the first scrapes.
    time.sleep(12)
    # /var/tmp, not /tmp: the sandbox hosts' /tmp is a tmpfs, which `docker cp` cannot write into.
    live.on_host(live.SCHEDULER, "mkdir", "-p", "/var/tmp/dashboard")
    for path in (DASHBOARD_QUERIES, DASHBOARD_QUERIES.parents[2] / "roles" / "dask_monitoring" / "files"
                 / "grafana-dashboard.json"):
        copied = subprocess.run(["docker", "cp", str(path), f"{live.SCHEDULER}:/var/tmp/dashboard/{path.name}"],
                                capture_output=True, text=True, check=False)
        assert copied.returncode == 0, copied.stderr
    result = live.on_host(live.SCHEDULER, "python3", "/var/tmp/dashboard/dashboard_queries.py", "--prometheus",
                          live.PROMETHEUS, "--dashboard", "/var/tmp/dashboard/grafana-dashboard.json", "--no-gpu",
                          check=False)
    print(result.stdout)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    live.record("monitoring", {"dashboard queries": len(lines),
                               "with series": sum(1 for line in lines if "expected series" in line),
                               "GPU (no GPU here)": sum(1 for line in lines if "expected none" in line)})


def test_a_stopped_worker_fires_the_missing_workers_alert_and_it_resolves() -> None:
    assert not alerts("DaskWorkersMissing"), alerts("DaskWorkersMissing")
    stopped = time.monotonic()
    timeline = {"worker unit stopped": stamp()}
    live.on_host(STOPPED_HOST, "systemctl", "stop", "dask-worker")
    try:
        wait_for("DaskWorkersMissing pending", lambda: [a for a in alerts("DaskWorkersMissing")
                                                        if a["state"] == "pending"], 60)
        timeline["pending"] = stamp()
        firing = wait_for("DaskWorkersMissing firing", lambda: [a for a in alerts("DaskWorkersMissing")
                                                               if a["state"] == "firing"], ALERT_WINDOW + 60)
        timeline["firing"] = stamp()
        fired_after = time.monotonic() - stopped
        gone = wait_for("DaskHostWorkersGone firing for the stopped host",
                        lambda: [a for a in alerts("DaskHostWorkersGone")
                                 if a["state"] == "firing" and a["labels"].get("host") == STOPPED_HOST], 60)
        assert [a["labels"]["host"] for a in alerts("DaskHostWorkersGone")] == [STOPPED_HOST], gone
        assert firing[0]["annotations"]["summary"].startswith("1 workers registered"), firing
    finally:
        live.on_host(STOPPED_HOST, "systemctl", "start", "dask-worker")
    timeline["worker unit started"] = stamp()
    wait_for("DaskWorkersMissing resolved", lambda: not alerts("DaskWorkersMissing")
             and not alerts("DaskHostWorkersGone"), 180)
    timeline["resolved"] = stamp()
    # Firing needs the rule's window after the first evaluation that saw the worker gone.
    assert ALERT_WINDOW <= fired_after <= ALERT_WINDOW + 60, fired_after
    live.record("monitoring", {"alert": "DaskWorkersMissing", **timeline, "fired after s": round(fired_after)})
