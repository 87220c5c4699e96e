"""site.yml's fast rerun in the sandbox (molecule's side effect, first suite): after the converge and molecule's
idempotence step (both with every task: molecule/default/converge.yml turns the fast rerun off; each records the
cluster) and molecule's verify step (which leaves the cluster as it found it: its toolkit test puts dask-w2's
daemon.json back), a rerun with the inventory's settings (the fast rerun is the default) finds every host as the last
converge left it and runs only the checks and the readiness check; each host's record names its units, images and
packages;
then a file the bundle manages is edited on a host (the firewall table of dask-w2), and the next run names it, runs
every task, puts the file back and records every host again, and keeps dask_images_keep builds of the images (two
earlier builds planted in dask-w1's record: the older one's labelled image goes there and on the build host); a worker
image untagged on one host and a unit stopped on another are named by the check of a checks-only run (--tags always),
which drops their records; the worker image gone from one host comes back from the cluster's registry, which has it,
so nothing is pushed; last, a checks-only run with another setting for dask-w1 drops every host's record before
anything changes (what a run that fails half-way leaves)."""
from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import live

FAST, said, recap = live.FAST, live.said, live.recap
TABLE = "/etc/dask/firewall.nft"
RECORD = "/etc/dask/converged.json"


def found(output: str) -> str:
    """What the run's fast-rerun check said (the reason a run was not a fast one), or the output's end."""
    reason = re.search(r"Every task runs: .*?since the last converge|Every task runs: [^']*", said(output))
    return reason.group(0) if reason else output[-4000:]


def test_a_rerun_of_an_unchanged_cluster_skips_to_the_readiness_check() -> None:
    hosts = [live.SCHEDULER, *live.WORKERS]
    if any(live.on_host(host, "test", "-e", RECORD, check=False).returncode for host in hosts):
        # Run alone after this suite's last test (which drops the records): a whole run records the cluster first.
        assert live.playbook("site.yml", timeout=900).returncode == 0
    started = time.monotonic()
    run = live.playbook("site.yml", timeout=900)
    seconds = round(time.monotonic() - started, 1)
    assert run.returncode == 0, run.stdout[-4000:]
    assert f"Every host (3) {FAST}" in said(run.stdout), found(run.stdout)
    assert "Every expected worker has registered with the scheduler" in run.stdout
    assert "Docker Engine is installed" not in run.stdout and "Rolling restart" not in run.stdout
    counts = recap(run.stdout)
    assert set(counts) >= {live.SCHEDULER, *live.WORKERS} and all(c["changed"] == 0 for c in counts.values()), counts
    live.record("fastrerun", {"step": "site.yml, nothing changed (fast rerun)", "seconds": seconds,
                              "tasks_ok": sum(c["ok"] for c in counts.values())})
    worker = json.loads(live.on_host(live.WORKERS[0], "cat", RECORD).stdout)
    units = set(worker["units"])
    assert {"dask-worker", "docker"} <= units and "dask-scheduler" not in units, worker["units"]
    assert len(worker["images"]) == 2 and all(i.startswith("sha256:") for i in worker["images"].values()), worker
    assert {"docker.io", "python3-docker"} <= set(worker["packages"]) or "docker-ce" in worker["packages"], worker
    firewalled = json.loads(live.on_host(live.WORKERS[1], "cat", RECORD).stdout)
    # Ansible reaches the hosts over SSH: the record holds the controller's address as the host sees the connection,
    # which the firewall lets in.
    assert firewalled.get("controller") == live.controller_address(live.WORKERS[1]), firewalled


CLUSTER_RECORD = "/etc/ansible/facts.d/dask_cluster_dask.fact"
RETENTION_TASKS = {f"dask_images : {name}" for name in (
    "Archives of those builds are removed from the build host",
    "Images of those builds are removed from the build host",
    "The registry's manifests of the older builds are deleted (none a kept build's tag points at)",
    "Registry stops for its garbage collection", "Layers no manifest uses any more are removed",
    "Registry runs again")}


def changed_tasks(output: str, host: str) -> list[str]:
    """The names of the tasks that reported `changed` for a host (delegated ones included), in order, once each."""
    names: list[str] = []
    task = ""
    for line in output.splitlines():
        if line.startswith("TASK ["):
            task = line[len("TASK ["):line.rfind("]")]
        elif re.match(rf"changed: \[{re.escape(host)}(\]| ->)", line) and task not in names:
            names.append(task)
    return names
OLD, MID = "sandbox-old", "sandbox-mid"  # tags of two earlier builds, planted below


def retag(ref: str, tag: str) -> str:
    return f"{ref.rsplit(':', 1)[0]}:{tag}"


def plant_older_builds() -> list[str]:
    """Two earlier builds in dask-w1's record, newest first after the one it runs (dask_images_keep is 2: MID stays,
    OLD goes): OLD's scheduler image is the running one tagged again (the bundle's label, removed), its worker image
    an empty image of the same name without the label (kept: not the bundle's). The build host (the controller) holds
    OLD's tag and archive too. Returns the running build's references."""
    host = live.WORKERS[0]
    record = json.loads(live.on_host(host, "cat", CLUSTER_RECORD).stdout)
    current = sorted(record["deployed"]["images"])
    record["builds"] = [current, [retag(ref, MID) for ref in current], [retag(ref, OLD) for ref in current]]
    live.on_host(host, "sh", "-c", f"cat > {CLUSTER_RECORD} <<'EOF'\n{json.dumps(record)}\nEOF")
    scheduler, worker = current
    live.on_host(host, "docker", "tag", scheduler, retag(scheduler, OLD))
    live.on_host(host, "sh", "-c", f"tar cf - --files-from /dev/null | docker import - {retag(worker, OLD)}")
    # The cluster's registry gets OLD's scheduler image as an OCI manifest (a digest of its own; deleting a digest
    # deletes every tag that points at it, so the run keeps one that a kept tag shares).
    registry = scheduler.split("/", 1)[0]
    certs = f"/etc/docker/certs.d/{registry}"
    live.on_host(live.SCHEDULER, "skopeo", "copy", "--format", "oci", "--src-cert-dir", certs, "--dest-cert-dir", certs,
                 f"docker://{scheduler}", f"docker://{retag(scheduler, OLD)}")
    # The build host names the images as the hosts do (the registry's name; tasks/build.yml).
    subprocess.run(["docker", "tag", scheduler, retag(scheduler, OLD)], check=True, capture_output=True)
    (live.ephemeral_dir() / "artifacts" / "images" / f"dask-gpu-{OLD}.tar").write_bytes(b"")
    return current


SKOPEO_CACHE = "/var/lib/containers"  # skopeo's cache as root; teardown's test checks the bundle left none


def test_an_edited_file_makes_every_task_run_and_is_put_back_and_older_builds_go() -> None:
    """The test's own skopeo calls (planting, inspecting) leave no cache on the scheduler host that was not there."""
    had_cache = live.on_host(live.SCHEDULER, "test", "-e", SKOPEO_CACHE, check=False).returncode == 0
    try:
        edited_file_and_older_builds()
    finally:
        if not had_cache:
            live.on_host(live.SCHEDULER, "rm", "-rf", SKOPEO_CACHE)


def edited_file_and_older_builds() -> None:
    original = live.on_host(live.WORKERS[1], "cat", TABLE).stdout
    live.on_host(live.WORKERS[1], "sh", "-c", f"echo '# edited by hand' >> {TABLE}")
    current = plant_older_builds()
    started = time.monotonic()
    run = live.playbook("site.yml", timeout=900)
    seconds = round(time.monotonic() - started, 1)
    assert run.returncode == 0, run.stdout[-4000:]
    # Retention (dask_images_keep 2): dask-w1 keeps the build it runs and MID; OLD's labelled image goes, the image
    # without the bundle's label stays, and the build host lost OLD's tag and archive.
    host, (scheduler, worker) = live.WORKERS[0], current
    kept = json.loads(live.on_host(host, "cat", CLUSTER_RECORD).stdout)["builds"]
    assert kept == [current, [retag(ref, MID) for ref in current]], kept
    images = live.on_host(host, "docker", "image", "ls", "--format", "{{.Repository}}:{{.Tag}}").stdout.split()
    assert retag(scheduler, OLD) not in images and retag(worker, OLD) in images and scheduler in images, images
    assert f"[retention] {host}: keeps 2 build(s) of 2" in said(run.stdout), run.stdout[-3000:]
    assert f"removed: {retag(scheduler, OLD)}" in said(run.stdout), run.stdout[-3000:]
    controller = subprocess.run(["docker", "image", "ls", "--format", "{{.Repository}}:{{.Tag}}"],
                                capture_output=True, text=True, check=True).stdout.split()
    assert retag(scheduler, OLD) not in controller and scheduler in controller, controller
    assert not (live.ephemeral_dir() / "artifacts" / "images" / f"dask-gpu-{OLD}.tar").exists()
    registry = scheduler.split("/", 1)[0]
    assert f"[retention] registry {registry}: deleted {OLD} scheduler" in said(run.stdout), run.stdout[-3000:]

    def in_registry(ref: str) -> bool:
        certs = f"/etc/docker/certs.d/{registry}"
        return live.on_host(live.SCHEDULER, "skopeo", "inspect", "--raw", "--cert-dir", certs, f"docker://{ref}",
                            check=False).returncode == 0
    assert not in_registry(retag(scheduler, OLD)) and in_registry(scheduler) and in_registry(worker)
    live.on_host(host, "docker", "rmi", retag(worker, OLD))
    # Both edits are named: dask-w2's table, and dask-w1's cluster record (the planted builds).
    assert f"Every task runs: {live.WORKERS[0]}: {CLUSTER_RECORD} was changed or removed since the last converge; " \
        f"{live.WORKERS[1]}: {TABLE} was changed or removed since the last converge" in said(run.stdout), \
        found(run.stdout)
    assert FAST not in said(run.stdout)
    for host in [live.SCHEDULER, *live.WORKERS]:
        assert live.on_host(host, "test", "-e", RECORD, check=False).returncode == 0, f"{host} was not recorded"
    assert live.on_host(live.WORKERS[1], "cat", TABLE).stdout == original
    counts = recap(run.stdout)
    assert counts[live.WORKERS[1]]["changed"] >= 1, counts
    # The scheduler host changed nothing of its own: what it reports changed is retention's, on the build host (the
    # controller, delegated) and in the cluster's registry, which it runs.
    assert set(changed_tasks(run.stdout, live.SCHEDULER)) == RETENTION_TASKS, changed_tasks(run.stdout, live.SCHEDULER)
    live.record("fastrerun", {"step": "site.yml after a managed file was edited (every task)", "seconds": seconds,
                              "tasks_ok": sum(c["ok"] for c in counts.values())})


def test_an_image_untagged_and_a_unit_stopped_by_hand_are_found() -> None:
    """A worker image's tag removed on dask-w1 (the image stays, as `docker rmi` of a running container's image
    leaves it) and the node exporter stopped on dask-w2: the check of a checks-only run (--tags always) names both and
    drops those hosts' records; put back by hand, nothing else changed."""
    record = json.loads(live.on_host(live.WORKERS[0], "cat", RECORD).stdout)
    image = next(name for name in record["images"] if "-worker:" in name)
    live.on_host(live.WORKERS[0], "docker", "image", "tag", image, f"{image}-kept")
    live.on_host(live.WORKERS[0], "docker", "image", "rm", image)
    live.on_host(live.WORKERS[1], "systemctl", "stop", "prometheus-node-exporter")
    try:
        run = live.playbook("site.yml", "--tags", "always", timeout=900)
    finally:
        live.on_host(live.WORKERS[0], "docker", "image", "tag", f"{image}-kept", image)
        live.on_host(live.WORKERS[0], "docker", "image", "rm", f"{image}-kept")
        live.on_host(live.WORKERS[1], "systemctl", "start", "prometheus-node-exporter")
    assert run.returncode == 0, run.stdout[-4000:]
    assert f"Every task runs: {live.WORKERS[0]}: image {image} was removed or replaced since the last converge; " \
           f"{live.WORKERS[1]}: unit prometheus-node-exporter is not active" in said(run.stdout), found(run.stdout)
    assert live.on_host(live.SCHEDULER, "test", "-e", RECORD, check=False).returncode == 0
    for host in live.WORKERS:
        assert live.on_host(host, "test", "-e", RECORD, check=False).returncode == 1, f"{host} kept its record"


def task_results(output: str, task: str) -> str:
    """The result lines of the first task whose header starts with `task` (up to the next header), or ''."""
    match = re.search(r"^TASK \[" + re.escape(task) + r".*?\n(.*?)(?=^TASK \[|^PLAY RECAP)", output, re.M | re.S)
    return match.group(1) if match else ""


def test_an_image_gone_from_one_host_comes_back_from_the_registry_which_has_it_so_nothing_is_pushed() -> None:
    """The worker image's tag removed on dask-w1 (its layers kept under another tag): the images step
    (--tags images) finds dask-w1 without it; the cluster's registry has both tags (the converge pushed them), so
    the push host (dask-sched, no archive: a host added later has the same) pushes nothing, and dask-w1 pulls."""
    image = live.on_host(live.WORKERS[0], "docker", "inspect", "-f", "{{.Config.Image}}", "dask-worker").stdout.strip()
    live.on_host(live.WORKERS[0], "docker", "image", "tag", image, f"{image}-kept")
    live.on_host(live.WORKERS[0], "docker", "image", "rm", image)
    try:
        run = live.playbook("site.yml", "--tags", "images", timeout=900)
        back = live.on_host(live.WORKERS[0], "docker", "image", "inspect", "-f", "{{.Id}}", image, check=False)
    finally:
        if live.on_host(live.WORKERS[0], "docker", "image", "inspect", image, check=False).returncode:
            live.on_host(live.WORKERS[0], "docker", "image", "tag", f"{image}-kept", image)
        live.on_host(live.WORKERS[0], "docker", "image", "rm", f"{image}-kept")
    assert run.returncode == 0, run.stdout[-4000:]
    assert back.returncode == 0, back.stderr
    assert "has both images already: nothing pushed" in said(run.stdout), run.stdout[-4000:]
    for task in ("dask_images : Images are pushed to the registry (timeout",
                 "dask_images : Images are pushed to the registry from the archive"):
        results = task_results(run.stdout, task)
        assert not re.search(r"^(ok|changed): ", results, re.M), (task, results)
    assert f"{live.WORKERS[0]}: " in said(run.stdout) and "GB of images pulled in" in said(run.stdout)


def test_a_run_with_other_settings_drops_every_record_before_anything_changes(tmp_path: Path) -> None:
    """Every host's record holds the parts of all (the scheduler's configuration names the workers, and so on), so
    another setting for dask-w1 drops them all, at the check, before anything changes: a run that then failed
    half-way would leave no record for a later run back at these settings to take for the hosts' state. Last: the
    cluster keeps the inventory's settings, and the next run is a whole one that records it again."""
    # host_vars beside a second inventory: above molecule's inventory's host_vars, as an operator's edit would be
    other = tmp_path / "other.yml"
    other.write_text(json.dumps({"all": {"hosts": {live.WORKERS[0]: {}}}}))
    (tmp_path / "host_vars").mkdir()
    (tmp_path / "host_vars" / f"{live.WORKERS[0]}.yml").write_text("dask_worker_nthreads: 7\n")
    hosts = [live.SCHEDULER, *live.WORKERS]
    had = {host: live.on_host(host, "test", "-e", RECORD, check=False).returncode == 0 for host in hosts}
    assert had[live.SCHEDULER], "the scheduler host has no record to drop"
    run = live.playbook("site.yml", "-i", str(other), "--tags", "always", timeout=900)
    assert run.returncode == 0, run.stdout[-4000:]
    why = f"{live.WORKERS[0]}'s settings or groups changed since the last converge"
    reasons = "; ".join(f"{host}: {why if had[host] else 'no converge was recorded'}" for host in hosts)
    assert f"Every task runs: {reasons}" in said(run.stdout), found(run.stdout)
    counts = recap(run.stdout)
    assert all(counts[host]["changed"] == int(had[host]) for host in hosts), (counts, had)  # the drop, no more
    for host in hosts:
        assert live.on_host(host, "test", "-e", RECORD, check=False).returncode == 1, f"{host} kept its record"
