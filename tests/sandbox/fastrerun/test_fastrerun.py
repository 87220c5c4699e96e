"""site.yml's fast rerun in the sandbox (molecule's side effect, first suite): after the converge and molecule's
idempotence step (both with every task: molecule/default/converge.yml turns the fast rerun off; each records the
cluster) and molecule's verify step (which leaves the cluster as it found it: its toolkit test puts dask-w2's
daemon.json back), a rerun with the inventory's settings and the fast rerun asked for (it is opt-in) finds every host
as the last converge left it and runs only the checks and the readiness check;
then a file the bundle manages is edited on a host (the firewall table of dask-w2), and the next run names it, runs
every task and puts the file back."""
from __future__ import annotations

import re
import time

import live

FAST = "is as the last converge left it: nothing to change"
TABLE = "/etc/dask/firewall.nft"
OPT_IN = ("-e", "dask_fast_rerun=true")  # opt-in (roles/dask/defaults/main.yml)


def said(output: str) -> str:
    """The run's output with its line wrapping undone (the YAML callback wraps long messages)."""
    return " ".join(output.split())


def recap(output: str) -> dict[str, dict[str, int]]:
    return {host: {"ok": int(ok), "changed": int(changed)}
            for host, ok, changed in re.findall(r"^(\S+)\s+: ok=(\d+)\s+changed=(\d+)", output, re.M)}


def found(output: str) -> str:
    """What the run's fast-rerun check said (the reason a run was not a fast one), or the output's end."""
    reason = re.search(r"Every task runs: .*?since the last converge|Every task runs: [^']*", said(output))
    return reason.group(0) if reason else output[-4000:]


def test_a_rerun_of_an_unchanged_cluster_skips_to_the_readiness_check() -> None:
    started = time.monotonic()
    run = live.playbook("site.yml", *OPT_IN, timeout=900)
    seconds = round(time.monotonic() - started, 1)
    assert run.returncode == 0, run.stdout[-4000:]
    assert f"Every host (3) {FAST}" in said(run.stdout), found(run.stdout)
    assert "Every expected worker has registered with the scheduler" in run.stdout
    assert "Docker Engine is installed" not in run.stdout and "Rolling restart" not in run.stdout
    counts = recap(run.stdout)
    assert set(counts) >= {live.SCHEDULER, *live.WORKERS} and all(c["changed"] == 0 for c in counts.values()), counts
    live.record("fastrerun", {"step": "site.yml, nothing changed (fast rerun)", "seconds": seconds,
                              "tasks_ok": sum(c["ok"] for c in counts.values())})


def test_an_edited_file_makes_every_task_run_and_is_put_back() -> None:
    original = live.on_host(live.WORKERS[1], "cat", TABLE).stdout
    live.on_host(live.WORKERS[1], "sh", "-c", f"echo '# edited by hand' >> {TABLE}")
    started = time.monotonic()
    run = live.playbook("site.yml", *OPT_IN, timeout=900)
    seconds = round(time.monotonic() - started, 1)
    assert run.returncode == 0, run.stdout[-4000:]
    assert f"Every task runs: {live.WORKERS[1]}: {TABLE} was changed or removed since the last converge" \
        in said(run.stdout), run.stdout[-4000:]
    assert FAST not in said(run.stdout)
    assert live.on_host(live.WORKERS[1], "cat", TABLE).stdout == original
    counts = recap(run.stdout)
    assert counts[live.WORKERS[1]]["changed"] >= 1 and counts[live.SCHEDULER]["changed"] == 0, counts
    live.record("fastrerun", {"step": "site.yml after a managed file was edited (every task)", "seconds": seconds,
                              "tasks_ok": sum(c["ok"] for c in counts.values())})
