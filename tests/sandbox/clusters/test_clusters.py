"""Two clusters by name on the same sandbox hosts (molecule's side effect, after the certificates suite): cluster
`blue` beside the running cluster `dask`, on its own ports, with its data folder on a folder of the user's that
already holds a file. A second cluster that claims what the first holds is refused before anything changes, naming
both, and so is an ephemeral job that takes dask's name. Blue is an ephemeral job's cluster (scripts/job.sh
--ephemeral blue): it deploys, its job computes on it and holds; meanwhile both clusters verify and an outsider
reaches neither; released, the job ends and blue is torn down while a workload runs on dask: dask keeps answering
(its units never restart, its firewall table stays), the user's file survives and the job's reports stay.
Blue runs dask's images (the registry distribution, pointing at dask's cluster registry), and a client made from
blue's lock connects with no version warning. By hand,
DASK_SANDBOX_BLUE_OWN_IMAGE=1 tests/sandbox/suites.py clusters: blue runs the user's own image instead
(dask_images_worker_image: tests/images/own, built unlike the bundle's: another base, user and path), inspected before
any host changes and sent by archive, and a client made from blue's lock (the image's own packages) connects with no
version warning (about 6 minutes more than CI's run: the 594 MB archive to three hosts)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import live
import pytest

HOSTS = (live.SCHEDULER, *live.WORKERS)
USER_DATA = "/srv/team-data"  # a folder of the user's, on every worker host, given to blue as dask_data_dir
BLUE_EXAMPLES = f"{USER_DATA}/notebooks/examples"  # blue's JupyterLab's, on the scheduler host (its data folder's)
# tests/images/own/build.sh; DASK_SANDBOX_BLUE_OWN_REF: another reference of it (an OCI image with zstd layers in a
# registry the controller reaches, say: the build host converts it, dask_images_convert_layers)
OWN_IMAGE = os.environ.get("DASK_SANDBOX_BLUE_OWN_REF") or "dask-own-test:own"
BLUE_OWN = os.environ.get("DASK_SANDBOX_BLUE_OWN_IMAGE") == "1"  # by hand: blue on OWN_IMAGE


def blue_vars() -> dict[str, Any]:
    """Cluster blue: its own name, ports, controller folder and data folder; no monitoring (Prometheus runs once per
    host). Its images: those dask's registry already put on every host (your-registry distribution, pointing at it)
    and its own JupyterLab port (the inventory turns JupyterLab on, and blue's images are dask's); with BLUE_OWN the
    user's own image (OWN_IMAGE, built on the controller, the build host) sent to every host by archive, no
    JupyterLab (the own image has none) and none of the inventory's extra packages (an own image brings its own)."""
    common = {"dask_cluster_name": "blue", "dask_scheduler_port": 9786, "dask_dashboard_port": 9787,
              "dask_worker_http_port": 9790, "dask_autoscale_port": 9785,
              "dask_autoscale_metrics_port": 9784, "dask_data_dir": USER_DATA,
              "dask_controller_dir": str(live.ephemeral_dir() / "artifacts-blue"), "dask_monitoring_enabled": False}
    if BLUE_OWN:
        return {**common, "dask_images_worker_image": OWN_IMAGE, "dask_images_distribution": "archive",
                "dask_images_extra_packages": [], "dask_notebook_enabled": False, "dask_images_convert_layers": True}
    registry = f"{live.address(live.SCHEDULER)}:5000"
    return {**common, "dask_images_distribution": "registry", "dask_images_registry": registry,
            "dask_notebook_port": 9888}


def blue(*args: str, extra: dict[str, Any] | None = None, timeout: float = 1800) -> Any:
    values = live.ephemeral_dir() / "blue-vars.json"
    values.write_text(json.dumps({**blue_vars(), **(extra or {})}))
    return live.playbook(*args, "-e", f"@{values}", timeout=timeout)


def mentions(output: str, text: str) -> bool:
    """Whether the output holds the text, whatever the callback put between its words (a line break, the
    continuation backslash or quote of a wrapped YAML string)."""
    return re.search(r"[\s\\'\"]+".join(re.escape(word) for word in text.split()), output) is not None


def unit_starts(unit: str) -> dict[str, str]:
    return {host: live.unit_property(host, unit, "ActiveEnterTimestamp") for host in HOSTS}


def test_a_second_cluster_that_claims_what_the_first_holds_is_refused_before_anything_changes() -> None:
    # As docs/clusters.md says to make one, on the sandbox's inventory, which sets dask_controller_dir: blue would
    # take dask's controller folder (its CA, certificates, token and client bundle) and its ports.
    controller = str(live.ephemeral_dir() / "artifacts")
    bundle = (live.ephemeral_dir() / "artifacts" / "client" / "env.sh").read_text()
    run = blue("playbooks/check.yml", extra={"dask_scheduler_port": 8786, "dask_worker_http_port": 8790,
                                            "dask_controller_dir": controller})
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
    assert mentions(output, f"dask_controller_dir ({controller}) holds the CA of cluster dask"), refusal[-4000:]
    assert (live.ephemeral_dir() / "artifacts" / "client" / "env.sh").read_text() == bundle
    for host in HOSTS:
        assert live.on_host(host, "test", "-e", "/etc/ansible/facts.d/dask_cluster_blue.fact",
                            check=False).returncode == 1
    print("[clusters] refused: " + "; ".join(line.strip(" '\",-") for line in text.splitlines()
                                            if "of cluster blue is also" in line or "holds the CA" in line)[:900])


# The ephemeral job: it computes on blue, says so with a file in its work folder, and holds until released.
HOLD = """
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from distributed import Client

with Client() as client:
    print("blue computes:", client.submit(sum, [1, 2, 3]).result(), "on", client.scheduler.address)
    Path("ready").touch()
    while not Path("release").exists():
        time.sleep(0.5)
    print("released:", client.submit(sum, [4, 5]).result())
"""


def test_an_ephemeral_job_that_takes_an_existing_clusters_name_is_refused_before_anything_changes(
        tmp_path: Any) -> None:
    script = tmp_path / "hold.py"
    script.write_text(HOLD)
    dask_units = unit_starts("dask-worker")
    run = subprocess.run(["bash", str(live.ROOT / "scripts" / "job.sh"), "--ephemeral", "dask", "-i",
                          str(live.ephemeral_dir() / "inventory"), "-e", f"dask_job_script={script}"],
                         cwd=live.ROOT, capture_output=True, text=True, timeout=600)
    output = " ".join((run.stdout + run.stderr).split())
    assert run.returncode == 2 and mentions(output, "cluster dask already exists on this host"), output[-3000:]
    assert "tearing down" not in output and unit_starts("dask-worker") == dask_units
    print("[clusters] job.sh --ephemeral dask refused: the name is a running cluster's; nothing torn down")


def job_marker(name: str) -> list[str]:
    found = live.on_host(live.WORKERS[0], "sh", "-c", f"ls {USER_DATA}/reports/jobs/*/work/{name} 2>/dev/null",
                         check=False)
    return found.stdout.split()


@pytest.fixture(scope="module")
def deployed(tmp_path_factory: Any) -> Any:
    if BLUE_OWN:
        built = subprocess.run(["bash", str(live.ROOT / "tests" / "images" / "own" / "build.sh"), "own"],
                               capture_output=True, text=True, timeout=1200)
        assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-3000:]
        print("[clusters] " + built.stdout.strip())
    for host in live.WORKERS:
        live.on_host(host, "mkdir", "-p", USER_DATA)
        live.on_host(host, "sh", "-c", f"echo 'kept by the user' > {USER_DATA}/results.csv")
    dask_units = unit_starts("dask-worker")
    script = tmp_path_factory.mktemp("job") / "hold.py"
    script.write_text(HOLD)
    values = live.ephemeral_dir() / "blue-vars.json"
    values.write_text(json.dumps(blue_vars()))
    started = time.monotonic()
    # Its output goes to a file: a pipe read only at the end filled up (64 KiB) and blocked the deploy's playbook.
    output = script.parent / "job-sh.log"
    with output.open("w") as sink:
        job = subprocess.Popen(["bash", str(live.ROOT / "scripts" / "job.sh"), "--ephemeral", "blue", "-i",
                                str(live.ephemeral_dir() / "inventory"), "-e", f"@{values}",
                                "-e", f"dask_job_script={script}", "-e", "dask_job_timeout=1200"],
                               cwd=live.ROOT, stdout=sink, stderr=subprocess.STDOUT, text=True)
    try:
        live.wait_until(lambda: job_marker("ready") or job.poll() is not None, 1500, "blue's job running")
        assert job.poll() is None, output.read_text()[-4000:]
        seconds = round(time.monotonic() - started, 1)
        live.record("clusters", {"step": "job.sh --ephemeral blue: checks, site.yml, the job running",
                                 "seconds": seconds})
        yield {"dask_units": dask_units, "seconds": seconds, "job": job, "output": output}
    finally:
        if job.poll() is None:  # a failed test: release the job, so that blue is torn down all the same
            for marker in job_marker("ready"):
                live.on_host(live.WORKERS[0], "touch", marker.replace("/ready", "/release"))
            job.wait(timeout=900)


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
    if not BLUE_OWN:  # blue's JupyterLab, on the scheduler host, got the bundle's example notebooks
        example = f"{BLUE_EXAMPLES}/01-arrays.ipynb"
        assert live.on_host(live.SCHEDULER, "test", "-f", example, check=False).returncode == 0, example


def test_each_cluster_verifies(deployed: dict[str, Any]) -> None:
    # Both at once: two clusters' verifications on the same hosts do not get in each other's way.
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = (("blue", pool.submit(blue, "playbooks/verify.yml")),
                ("dask", pool.submit(live.playbook, "playbooks/verify.yml")))
        done = [(name, future.result()) for name, future in runs]
    for name, run in done:
        assert run.returncode == 0, run.stdout[-3000:]
        passed = [line.strip() for line in run.stdout.splitlines() if "verification passed" in line]
        assert passed, run.stdout[-2000:]
        print(f"[clusters] {name}: {passed[0][:160]}")


def test_a_client_made_from_blues_lock_connects_cleanly(deployed: dict[str, Any], tmp_path: Any) -> None:
    """Blue's client bundle holds the lock of blue's own images (dask's in CI; with BLUE_OWN the own image's, which
    has no dask-cuda), and a client made from it connects with no version warning."""
    lock = (live.ephemeral_dir() / "artifacts-blue" / "client" / "requirements.lock").read_text()
    assert "\ndistributed==" in lock, lock[:600]
    if BLUE_OWN:
        assert OWN_IMAGE in lock.splitlines()[0] and "dask-cuda" not in lock, lock[:600]
    run, made, seconds = live.lock_client("artifacts-blue", tmp_path / "venv")
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    assert "sum 6" in run.stdout and "Mismatch" not in run.stderr, run.stderr[-2000:]
    lines = dict(line.split(" ", 1) for line in run.stdout.splitlines())
    assert lines["client"] == lines["scheduler"], run.stdout
    print(f"[clusters] blue ({lock.splitlines()[0]}): lock-made client in {seconds:.0f} s ({made}); "
          + run.stdout.strip().replace("\n", "; "))


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
        job = deployed["job"]
        for marker in job_marker("ready"):
            live.on_host(live.WORKERS[0], "touch", marker.replace("/ready", "/release"))
        job.wait(timeout=900)
        out = deployed["output"].read_text()
        seconds = round(time.monotonic() - started, 1)
        done.set()
        runner.join(timeout=300)
        run = subprocess.CompletedProcess(job.args, job.returncode, out, "")
        assert run.returncode == 0, run.stdout[-4000:]
        assert chain["error"] is None, chain["error"]
        assert chain["future"].result(timeout=60) == chain["links"]
    assert "blue computes: 6" in run.stdout and "released: 9" in run.stdout, run.stdout[-4000:]
    assert "[job] cluster blue: tearing down" in run.stdout, run.stdout[-4000:]
    reports = live.ephemeral_dir() / "artifacts-blue" / "reports" / "jobs"
    report = json.loads(next(reports.glob("hold-*/job.json")).read_text())
    assert report["exit_status"] == 0 and report["tasks"]["finished"] >= 2, report
    kept = [line.strip() for line in run.stdout.splitlines() if "[teardown]" in line or line.startswith("[job]")]
    live.record("clusters", {"step": "the job released, then teardown.yml of blue while dask computes",
                             "seconds": seconds,
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
    # Its teardown removed the bundle's example notebooks, as the first cluster's does (issue 64).
    assert live.on_host(live.SCHEDULER, "test", "-e", BLUE_EXAMPLES, check=False).returncode == 1, BLUE_EXAMPLES
    for host in live.WORKERS:
        assert live.on_host(host, "cat", f"{USER_DATA}/results.csv").stdout.strip() == "kept by the user"
        assert live.on_host(host, "test", "-e", f"{USER_DATA}/worker", check=False).returncode == 1
    with live.connect() as client:
        assert client.submit(sum, [1, 2, 3], pure=False).result(timeout=60) == 6
