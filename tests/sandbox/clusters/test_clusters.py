"""Two clusters by name on the same sandbox hosts (molecule's side effect, after the certificates suite): cluster
`blue` beside the running cluster `dask`, on its own ports, with its data folder on a folder of the user's that
already holds a file. A second cluster that claims what the first holds is refused before anything changes, naming
both; blue deploys, both verify, an outsider reaches neither; then blue is torn down while a workload runs on dask:
dask keeps answering (its units never restart, its firewall table stays) and the user's file survives."""
from __future__ import annotations

import json
import re
import threading
import time
from typing import Any

import live
import pytest

SIDE_EFFECT = f"@{live.ROOT / 'molecule' / 'default' / 'vars' / 'side-effect.yml'}"
HOSTS = (live.SCHEDULER, *live.WORKERS)
USER_DATA = "/srv/team-data"  # a folder of the user's, on every worker host, given to blue as dask_data_dir


def blue_vars() -> dict[str, Any]:
    """Cluster blue: its own name, ports, controller folder and data folder; the images dask's registry already put
    on every host (your-registry distribution, pointing at it); no monitoring (Prometheus runs once per host)."""
    registry = f"{live.address(live.SCHEDULER)}:5000"
    return {"dask_cluster_name": "blue", "dask_scheduler_port": 9786, "dask_dashboard_port": 9787,
            "dask_worker_http_port": 9790, "dask_data_dir": USER_DATA,
            "dask_controller_dir": str(live.ephemeral_dir() / "artifacts-blue"),
            "dask_images_distribution": "registry", "dask_images_registry": registry,
            "dask_monitoring_enabled": False}


def blue(*args: str, extra: dict[str, Any] | None = None, timeout: float = 1800) -> Any:
    values = live.ephemeral_dir() / "blue-vars.json"
    values.write_text(json.dumps({**blue_vars(), **(extra or {})}))
    return live.playbook(*args, "-e", SIDE_EFFECT, "-e", f"@{values}", timeout=timeout)


def mentions(output: str, text: str) -> bool:
    """Whether the output holds the text, whatever the callback put between its words (a line break, the
    continuation backslash or quote of a wrapped YAML string)."""
    return re.search(r"[\s\\'\"]+".join(re.escape(word) for word in text.split()), output) is not None


def unit_starts(unit: str) -> dict[str, str]:
    return {host: live.unit_property(host, unit, "ActiveEnterTimestamp") for host in HOSTS}


def test_a_second_cluster_that_claims_what_the_first_holds_is_refused_before_anything_changes() -> None:
    run = blue("playbooks/check.yml", extra={"dask_scheduler_port": 8786, "dask_worker_http_port": 8790})
    # Under molecule (the side effect) Ansible writes failures to stderr (its ansible.cfg: display_failed_stderr).
    text = run.stdout + "\n" + run.stderr
    output = " ".join(text.split())
    refusal = "\n".join(line for line in text.splitlines() if "fatal:" in line or "cluster blue" in line
                        or "FAILED" in line)
    assert run.returncode != 0, refusal or run.stdout[-3000:]
    print("[clusters] check's refusal:\n" + refusal[-4000:])
    for claim in ("dask_scheduler_port (8786) of cluster blue is also dask_scheduler_port (8786) of cluster dask",
                  "dask_worker_http_port (8790) of cluster blue is also dask_worker_http_port (8790) of cluster dask"):
        assert mentions(output, claim), refusal[-4000:]
    for host in HOSTS:
        assert live.on_host(host, "test", "-e", "/etc/ansible/facts.d/dask_cluster_blue.fact",
                            check=False).returncode == 1
    print("[clusters] refused: " + "; ".join(line.strip(" '\",-") for line in text.splitlines()
                                            if "of cluster blue is also" in line)[:600])


@pytest.fixture(scope="module")
def deployed() -> dict[str, Any]:
    for host in live.WORKERS:
        live.on_host(host, "mkdir", "-p", USER_DATA)
        live.on_host(host, "sh", "-c", f"echo 'kept by the user' > {USER_DATA}/results.csv")
    dask_units = unit_starts("dask-worker")
    started = time.monotonic()
    run = blue("site.yml")
    assert run.returncode == 0, run.stdout[-4000:]
    seconds = round(time.monotonic() - started, 1)
    live.record("clusters", {"step": "site.yml for cluster blue beside dask", "seconds": seconds})
    return {"dask_units": dask_units, "seconds": seconds}


def test_both_clusters_run_side_by_side_each_with_its_own_names(deployed: dict[str, Any]) -> None:
    assert unit_starts("dask-worker") == deployed["dask_units"], "cluster dask's workers restarted"
    for host in HOSTS:
        facts = live.on_host(host, "ls", "/etc/ansible/facts.d").stdout.split()
        assert {"dask_cluster_dask.fact", "dask_cluster_blue.fact"} <= set(facts), facts
        tables = live.on_host(host, "nft", "list", "tables").stdout
        assert "dask_firewall" in tables and "dask_blue_firewall" in tables, tables
        units = live.on_host(host, "systemctl", "list-units", "--no-legend", "dask-*").stdout
        assert "dask-blue-" in units and "dask-firewall" in units, units
    record = json.loads(live.on_host(live.WORKERS[0], "cat", "/etc/ansible/facts.d/dask_cluster_blue.fact").stdout)
    made = [entry["path"] for entry in record["folders"]]
    assert USER_DATA not in made and f"{USER_DATA}/worker" in made and "/etc/dask-blue" in made, made


def test_each_cluster_verifies(deployed: dict[str, Any]) -> None:
    for name, run in (("blue", blue("playbooks/verify.yml")),
                      ("dask", live.playbook("playbooks/verify.yml", "-e", SIDE_EFFECT))):
        assert run.returncode == 0, run.stdout[-3000:]
        passed = [line.strip() for line in run.stdout.splitlines() if "verification passed" in line]
        assert passed, run.stdout[-2000:]
        print(f"[clusters] {name}: {passed[0][:160]}")


def test_an_outsider_reaches_neither_cluster(deployed: dict[str, Any]) -> None:
    scheduler = live.address(live.SCHEDULER)
    found = live.probe_from_container([(scheduler, 8786), (scheduler, 9786)], "--ip", live.OUTSIDER_IP)
    assert all(result != "open" for result in found.values()), found


def test_blue_leaves_while_dask_keeps_working_and_the_users_file_stays(deployed: dict[str, Any]) -> None:
    def step(value: int) -> int:
        time.sleep(0.1)
        return value + 1

    with live.connect(timeout=60) as client:
        chain: dict[str, Any] = {"future": client.submit(step, 0, pure=False), "links": 1, "error": None}
        done = threading.Event()

        def extend() -> None:
            try:
                while not done.is_set():
                    chain["future"] = client.submit(step, chain["future"], pure=False)
                    chain["links"] += 1
                    chain["future"].result(timeout=300)
            except Exception as error:  # noqa: BLE001 - reported below
                chain["error"] = error

        runner = threading.Thread(target=extend, daemon=True)
        runner.start()
        started = time.monotonic()
        run = blue("playbooks/teardown.yml", timeout=900)
        seconds = round(time.monotonic() - started, 1)
        done.set()
        runner.join(timeout=300)
        assert run.returncode == 0, run.stdout[-4000:]
        assert chain["error"] is None, chain["error"]
        assert chain["future"].result(timeout=60) == chain["links"]
    kept = [line.strip() for line in run.stdout.splitlines() if "[teardown]" in line]
    live.record("clusters", {"step": "teardown.yml of blue while dask computes", "seconds": seconds,
                             "dask_chain_links": chain["links"], "teardown": kept[:3]})
    assert unit_starts("dask-worker") == deployed["dask_units"], "cluster dask's workers restarted"
    for host in HOSTS:
        tables = live.on_host(host, "nft", "list", "tables").stdout
        assert "dask_blue_firewall" not in tables and "dask_firewall" in tables, tables
        for path in ("/etc/dask-blue", "/etc/ansible/facts.d/dask_cluster_blue.fact",
                     "/etc/systemd/system/dask-blue-worker.service"):
            assert live.on_host(host, "test", "-e", path, check=False).returncode == 1, f"{host}: {path} stayed"
        assert live.on_host(host, "test", "-e", "/etc/ansible/facts.d/dask_cluster_dask.fact",
                            check=False).returncode == 0
    for host in live.WORKERS:
        assert live.on_host(host, "cat", f"{USER_DATA}/results.csv").stdout.strip() == "kept by the user"
        assert live.on_host(host, "test", "-e", f"{USER_DATA}/worker", check=False).returncode == 1
    with live.connect() as client:
        assert client.submit(sum, [1, 2, 3], pure=False).result(timeout=60) == 6
