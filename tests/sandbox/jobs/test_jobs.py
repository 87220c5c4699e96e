"""Jobs on the sandbox cluster (playbooks/job.yml, molecule's side effect): three jobs at once (one that succeeds
from a folder with a requirements file the image satisfies, one that exits 3, one stopped at its timeout), each
with its output streamed into the run, its log and report kept on the controller and its container gone; bad input
refused before anything on a host changes."""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import live

JOB_HOST = live.WORKERS[0]  # the first worker host runs jobs
JOBS_ON_HOST = "/var/lib/dask/reports/jobs"

SCRIPT = """
import json
import os
import sys
import time

import dask.array as da
from distributed import Client

client = Client()  # no argument: the job's environment names the scheduler and the TLS files
# Each job its own graph (identical keys would be shared between the jobs' clients, and computed once).
offset = len(os.environ["DASK_JOB_NAME"])
total = float((da.ones((400, 400), chunks=100) + offset).sum().compute()) - offset * 160000
print("args", json.dumps(sys.argv[1:]))
print("total", total)
with open("result.json", "w") as out:
    json.dump({"total": total}, out)
mode = sys.argv[1] if len(sys.argv) > 1 else ""
if mode == "fail":
    sys.exit(3)
if mode == "sleep":
    time.sleep(600)
"""


def job_vars(tmp: Path, name: str, **values: Any) -> str:
    path = tmp / f"{name}-vars.json"
    path.write_text(json.dumps({"dask_job_name": name, **values}))
    return f"@{path}"


def start(tmp: Path, name: str, **values: Any) -> subprocess.Popen[str]:
    inventory = live.ephemeral_dir() / "inventory"
    return subprocess.Popen(["ansible-playbook", "-i", str(inventory), "playbooks/job.yml",
                             "-e", job_vars(tmp, name, **values)], cwd=live.ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def finish(process: subprocess.Popen[str]) -> tuple[int, str]:
    """The run's status and its output (stdout and stderr: under molecule's settings failures go to stderr), with
    YAML's line folding undone."""
    out, err = process.communicate(timeout=600)
    return process.returncode, unfold(out + "\n" + err)


def unfold(text: str) -> str:
    return re.sub(r"\\?\n\s*(\\ )?", " ", text)


# The slow job's timeout: the job wrapper's 30 s heartbeat must come before it even when the script's last line came
# late (a loaded CI machine took 8 s to start the script's client; with 40 s the heartbeat was missed once).
SLOW_TIMEOUT = 55


def kept(output: str, name: str) -> tuple[str, dict[str, Any], str]:
    """The job's id (from the run's output), its report and its log as kept on the controller."""
    found = re.search(rf"job ({name}-\d{{8}}t\d{{6}}z)", output)
    assert found, output[-3000:]
    folder = live.ephemeral_dir() / "artifacts" / "reports" / "jobs" / found.group(1)
    return found.group(1), json.loads((folder / "job.json").read_text()), (folder / "output.log").read_text()


def test_three_jobs_at_once_stream_their_output_keep_their_reports_and_fail_the_run_when_they_fail(
        tmp_path: Path) -> None:
    lock = (live.ephemeral_dir() / "artifacts" / "client" / "requirements.lock").read_text()
    dask_version = re.search(r"(?m)^dask==(\S+)$", lock).group(1)  # type: ignore[union-attr]
    folder = tmp_path / "etl"
    folder.mkdir()
    (folder / "main.py").write_text(SCRIPT)
    (folder / "requirements.txt").write_text(f"dask=={dask_version}\ndistributed>=2024.1\n")
    single = tmp_path / "fails.py"
    single.write_text(SCRIPT)
    runs = {"ok": start(tmp_path, "ok", dask_job_script=str(folder), dask_job_args=["pass", "two words"]),
            "fails": start(tmp_path, "fails", dask_job_script=str(single), dask_job_args=["fail"]),
            "slow": start(tmp_path, "slow", dask_job_script=str(single), dask_job_args=["sleep"],
                          dask_job_timeout=SLOW_TIMEOUT)}
    done = {name: finish(process) for name, process in runs.items()}

    status, output = done["ok"]
    assert status == 0, output[-4000:]
    job_id, report, log = kept(output, "ok")
    # Streamed: the script's lines appear in the run's output as they come, prefixed by the host.
    assert f"{JOB_HOST} | total 160000.0" in output and f"{JOB_HOST} | args " in output, output[-3000:]
    assert report["exit_status"] == 0 and report["args"] == ["pass", "two words"], report
    assert report["tasks"]["finished"] >= 16 and report["tasks"]["erred"] == 0, report
    assert report["clients"] == 1, report
    assert 'args ["pass", "two words"]' in log and "total 160000.0" in log, log
    print(f"[jobs] ok: {job_id} exit 0 in {report['seconds']} s, tasks {report['tasks']}")

    status, output = done["fails"]
    assert status != 0 and re.search(r"job fails-\S+ FAILED on \S+: exit 3", output), output[-3000:]
    _, report, _ = kept(output, "fails")
    assert report["exit_status"] == 3 and not report["timed_out"], report

    status, output = done["slow"]
    assert status != 0 and f"timed out after {SLOW_TIMEOUT} s" in output, output[-3000:]
    _, report, log = kept(output, "slow")
    assert report["timed_out"] and report["exit_status"] == 124, report
    # A line of progress at least every 30 s while the script prints nothing.
    assert re.search(r"\[dask-gpu-job\] slow: running, \d+ s", log), log
    assert re.search(rf"{JOB_HOST} \| \[dask-gpu-job\] slow: running", output), output[-3000:]

    reports = [kept(output, name)[1] for name, (_, output) in done.items()]
    latest_start, earliest_end = max(r["started"] for r in reports), min(r["ended"] for r in reports)
    assert latest_start <= earliest_end, f"the jobs did not overlap: {reports}"
    left = live.on_host(JOB_HOST, "docker", "ps", "-a", "--filter", "name=dask-job-", "--format", "{{.Names}}")
    assert left.stdout.strip() == "", f"job containers left on {JOB_HOST}: {left.stdout}"
    print(f"[jobs] fails: exit 3, run failed; slow: stopped at its {SLOW_TIMEOUT} s timeout (exit 124); the three "
          "overlapped")


def test_bad_input_is_refused_before_anything_on_a_host_changes(tmp_path: Path) -> None:
    before = live.on_host(JOB_HOST, "ls", JOBS_ON_HOST, check=False).stdout
    folder = tmp_path / "bad"
    folder.mkdir()
    (folder / "main.py").write_text(SCRIPT)
    (folder / "requirements.txt").write_text("dask==1.0\nnot-a-package-of-the-image\n")
    run = live.playbook("playbooks/job.yml", "-e",
                        job_vars(tmp_path, "bad", dask_job_script=str(folder), dask_job_entry="nope.py"))
    output = unfold(run.stdout + run.stderr)
    assert run.returncode != 0, output[-3000:]
    for expected in ("dask_job_entry=nope.py is not a file in the job folder",
                     "line 1: dask==1.0 is not met: the cluster's image has dask==",
                     "line 2: not-a-package-of-the-image is not in the cluster's image"):
        assert expected in output, output[-3000:]

    run = live.playbook("playbooks/job.yml", "-e", f"dask_job_script={tmp_path}/missing.py",
                        "-e", "dask_job_timeout=0")
    output = unfold(run.stdout + run.stderr)
    assert run.returncode != 0 and "dask_job_timeout" in output, output[-3000:]
    run = live.playbook("playbooks/job.yml", "-e", f"dask_job_script={tmp_path}/missing.py")
    output = unfold(run.stdout + run.stderr)
    assert run.returncode != 0 and f"dask_job_script={tmp_path}/missing.py does not exist" in output, output[-3000:]
    assert live.on_host(JOB_HOST, "ls", JOBS_ON_HOST, check=False).stdout == before
    print("[jobs] bad input refused on the controller: entry, requirements, timeout, missing script")
