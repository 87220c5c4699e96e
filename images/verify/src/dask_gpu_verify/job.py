"""dask-gpu-job: run a user's script as a job on the cluster (playbooks/job.yml, docs/jobs.md).

    dask-gpu-job --scheduler ADDR --job-dir DIR --name NAME --timeout S SCRIPT [ARG ...]

The script runs with the cluster's Python in DIR/work (its own files go there), with DASK_SCHEDULER_ADDRESS set
so `Client()` connects with no argument (TLS from the Dask configuration, DASK_DISTRIBUTED__COMM__TLS__*).
Its output (stdout and stderr) goes to DIR/output.log and to this command's stdout, a line of progress after
every HEARTBEAT seconds without output. After --timeout seconds the script is stopped (SIGTERM, then SIGKILL).
At the end DIR/job.json holds the name, script, arguments, start and end times, exit status, whether it timed
out, and the Dask tasks the script's clients submitted, finished and saw fail. The exit status is the script's
(124 after the timeout, 128+N after signal N).
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from . import job_tasks

HEARTBEAT = 30.0
STOP_GRACE = 10.0
EXIT_TIMEOUT = 124


def stamp(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Output:
    """The job's output: every line to the log and to stdout; `quiet_for` tells how long nothing came."""

    def __init__(self, log: IO[str]) -> None:
        self.log = log
        self.lock = threading.Lock()
        self.last = time.monotonic()
        self.lines = 0

    def write(self, line: str, *, own: bool = False) -> None:
        with self.lock:
            for out in (self.log, sys.stdout):
                out.write(line if line.endswith("\n") else line + "\n")
                out.flush()
            self.last = time.monotonic()
            self.lines += 0 if own else 1

    def quiet_for(self) -> float:
        return time.monotonic() - self.last


class Counter:
    """The scheduler's task counts for the job's clients (None when the scheduler cannot be asked)."""

    def __init__(self, scheduler: str, folder: Path, timeout: float = 30.0) -> None:
        self.folder = folder
        self.client: Any = None
        self.problem = ""
        try:
            from distributed import Client

            self.client = Client(scheduler, timeout=timeout)
            self.client.register_plugin(job_tasks.JobTaskCounts(), name=job_tasks.PLUGIN_NAME)
        except Exception as error:  # noqa: BLE001 - counting is a report's detail; the script still runs
            self.problem = f"task counts unavailable: {type(error).__name__}: {error}"
            if self.client is not None:
                self.client.close()
            self.client = None

    def clients(self) -> list[str]:
        path = self.folder / "clients"
        return path.read_text().split() if path.exists() else []

    def take(self) -> dict[str, int] | None:
        if self.client is None:
            return None
        try:
            counts = self.client.run_on_scheduler(job_tasks.take_counts, self.clients())
            return {str(name): int(value) for name, value in counts.items()} if counts is not None else None
        except Exception as error:  # noqa: BLE001
            self.problem = f"task counts unavailable: {type(error).__name__}: {error}"
            return None

    def close(self) -> None:
        if self.client is not None:
            self.client.close()


def copy_lines(process: subprocess.Popen[str], out: Output) -> None:
    for line in process.stdout or ():
        out.write(line)


def stop(process: subprocess.Popen[str]) -> None:
    """SIGTERM to the script's process group, SIGKILL after STOP_GRACE seconds."""
    for sig, grace in ((signal.SIGTERM, STOP_GRACE), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(grace)
            return
        except subprocess.TimeoutExpired:
            continue


def run(args: argparse.Namespace) -> int:
    folder = Path(args.job_dir)
    work = folder / "work"
    work.mkdir(parents=True, exist_ok=True)
    (folder / "clients").unlink(missing_ok=True)
    started = time.time()
    with (folder / "output.log").open("w") as log:
        out = Output(log)
        out.write(f"[dask-gpu-job] {args.name}: {' '.join([args.script, *args.args])} started {stamp(started)} "
                  f"(timeout {args.timeout} s)", own=True)
        counter = Counter(args.scheduler, folder, timeout=args.connect_timeout)
        if counter.problem:
            out.write(f"[dask-gpu-job] {counter.problem}", own=True)
        env = {**os.environ, "DASK_SCHEDULER_ADDRESS": args.scheduler, "DASK_JOB_DIR": str(folder),
               "DASK_JOB_NAME": args.name,
               "DASK_DISTRIBUTED__CLIENT__PRELOAD": json.dumps([job_tasks.__name__])}
        # The preload's own INFO lines (distributed.preloading) are not the job's output; merged with distributed's
        # logging defaults and with a configuration file's `logging`, and left alone where the job sets DASK_LOGGING.
        env.setdefault("DASK_LOGGING", json.dumps({"distributed.preloading": "warning"}))
        process = subprocess.Popen([sys.executable, "-u", args.script, *args.args], cwd=work, env=env, text=True,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop(process))
        reader = threading.Thread(target=copy_lines, args=(process, out), daemon=True)
        reader.start()
        deadline = time.monotonic() + args.timeout
        timed_out = False
        while process.poll() is None:
            if time.monotonic() >= deadline:
                timed_out = True
                out.write(f"[dask-gpu-job] {args.name}: timeout after {args.timeout} s, stopping the script",
                          own=True)
                stop(process)
                break
            if out.quiet_for() >= HEARTBEAT:
                out.write(f"[dask-gpu-job] {args.name}: running, {round(time.time() - started)} s, "
                          f"{out.lines} lines of output", own=True)
            time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))
        process.wait()
        reader.join(timeout=10)
        ended = time.time()
        status = EXIT_TIMEOUT if timed_out else (process.returncode if process.returncode >= 0
                                                 else 128 - process.returncode)
        tasks = counter.take()
        counter.close()
        report: dict[str, Any] = {
            "name": args.name, "script": args.script, "args": args.args, "scheduler": args.scheduler,
            "started": stamp(started), "ended": stamp(ended), "seconds": round(ended - started, 2),
            "exit_status": status, "timed_out": timed_out, "output_lines": out.lines,
            "tasks": tasks, "clients": len(counter.clients())}
        if counter.problem:
            report["note"] = counter.problem
        tasks_text = (f"{tasks['submitted']} tasks submitted, {tasks['finished']} finished, {tasks['erred']} erred"
                      if tasks is not None else counter.problem)
        out.write(f"[dask-gpu-job] {args.name}: exit {status}{' (timed out)' if timed_out else ''} after "
                  f"{report['seconds']} s; {tasks_text}", own=True)
    (folder / "job.json.tmp").write_text(json.dumps(report, indent=2) + "\n")
    (folder / "job.json.tmp").replace(folder / "job.json")
    return status


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="dask-gpu-job", description=__doc__.split("\n\n")[0])
    parser.add_argument("--scheduler", default=os.environ.get("DASK_SCHEDULER_ADDRESS"), required=False)
    parser.add_argument("--job-dir", required=True, help="the job's folder: output.log, job.json, work/")
    parser.add_argument("--name", required=True)
    parser.add_argument("--timeout", type=int, default=3600, help="seconds before the script is stopped")
    parser.add_argument("--connect-timeout", type=float, default=30.0,
                        help="seconds to reach the scheduler for the task counts")
    parser.add_argument("script")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.args[:1] == ["--"]:
        args.args = args.args[1:]
    if not args.scheduler:
        parser.error("no scheduler: give --scheduler or DASK_SCHEDULER_ADDRESS")
    if args.timeout < 1:
        parser.error("--timeout must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    return run(parse(argv))


if __name__ == "__main__":
    sys.exit(main())
