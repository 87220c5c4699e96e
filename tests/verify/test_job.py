"""dask-gpu-job against real `dask scheduler` and `dask worker` processes: a script that computes, one that fails,
one stopped at its timeout, two concurrent jobs counted apart; the output kept and the report written."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import LocalDask

SCRIPT = """
import sys
import time
import dask.array as da
from distributed import Client

client = Client()
print("total", float(da.ones((200, 200), chunks=100).sum().compute()))
if "two" in sys.argv:
    with Client() as second:
        print("second", second.submit(sum, [1, 2]).result())
if "fail" in sys.argv:
    sys.exit(3)
if "sleep" in sys.argv:
    time.sleep(60)
"""


def job(tmp: Path, name: str, address: str, *args: str, timeout: int = 60,
        env: dict[str, str] | None = None, connect: float = 30) -> subprocess.Popen[str]:
    script = tmp / "script.py"
    script.write_text(SCRIPT)
    return subprocess.Popen([sys.executable, "-m", "dask_gpu_verify.job", "--scheduler", address, "--job-dir",
                             str(tmp / name), "--name", name, "--timeout", str(timeout),
                             "--connect-timeout", str(connect), str(script), "--", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, **(env or {})})


def report(tmp: Path, name: str) -> dict[str, object]:
    return dict(json.loads((tmp / name / "job.json").read_text()))


def test_jobs_report_their_status_output_and_own_task_counts(cluster: LocalDask, tmp_path: Path) -> None:
    address = cluster.start_scheduler()
    cluster.start_worker("w-a")
    runs = {"ok": job(tmp_path, "ok", address, "two", "a b"), "fails": job(tmp_path, "fails", address, "fail"),
            "slow": job(tmp_path, "slow", address, "sleep", timeout=5)}
    outputs = {name: process.communicate(timeout=120)[0] for name, process in runs.items()}

    ok = report(tmp_path, "ok")
    assert runs["ok"].returncode == 0 and ok["exit_status"] == 0, outputs["ok"]
    assert ok["args"] == ["two", "a b"] and ok["clients"] == 2, ok
    tasks = ok["tasks"]
    assert isinstance(tasks, dict) and tasks["finished"] >= 2 and tasks["erred"] == 0, ok
    assert "total 40000.0" in outputs["ok"] and "second 3" in outputs["ok"]
    log = (tmp_path / "ok" / "output.log").read_text()
    assert "total 40000.0" in log and "exit 0" in log, log
    # Only what the script printed: not the INFO lines of the runner's own client preload (distributed.preloading).
    assert "distributed.preloading" not in log and ok["output_lines"] == 2, (ok["output_lines"], log)
    assert (tmp_path / "ok" / "work").is_dir()

    fails = report(tmp_path, "fails")
    assert runs["fails"].returncode == 3 and fails["exit_status"] == 3 and not fails["timed_out"], fails
    # Counted apart: the failing job's one client and its own tasks only.
    assert fails["clients"] == 1 and fails["tasks"]["submitted"] < tasks["submitted"], fails  # type: ignore[index]

    slow = report(tmp_path, "slow")
    assert runs["slow"].returncode == 124 and slow["timed_out"] and slow["exit_status"] == 124, slow
    assert "timeout after 5 s" in outputs["slow"]


def test_a_scheduler_that_cannot_be_reached_still_runs_the_script_and_says_why_there_are_no_counts(
        tmp_path: Path) -> None:
    process = job(tmp_path, "alone", "tcp://127.0.0.1:1", timeout=30,
                  env={"DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": "2s"}, connect=2)
    output = process.communicate(timeout=120)[0]
    alone = report(tmp_path, "alone")
    assert alone["tasks"] is None and "task counts unavailable" in str(alone["note"]), alone
    assert process.returncode == alone["exit_status"] != 0, output  # the script's own Client() fails too
