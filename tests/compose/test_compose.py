"""docker compose with the CPU override: up, verify passes, down leaves nothing behind."""
from __future__ import annotations

import json
import os
import subprocess

from dockerutil import ROOT, docker

PROJECT = "dask-gpu-test"
FILES = ["-f", str(ROOT / "compose.yaml"), "-f", str(ROOT / "compose.cpu.yaml")]


def compose(*args: str, check: bool = True, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, DASK_SCHEDULER_PORT="18786", DASK_DASHBOARD_PORT="18787")
    return subprocess.run(["docker", "compose", "-p", PROJECT, "--project-directory", str(ROOT), *FILES, *args],
                          capture_output=True, text=True, check=check, timeout=timeout, env=env)


def leftovers() -> str:
    label = f"label=com.docker.compose.project={PROJECT}"
    return (docker("ps", "-aq", "--filter", label).stdout + docker("network", "ls", "-q", "--filter", label).stdout
            + docker("volume", "ls", "-q", "--filter", label).stdout).strip()


def test_cpu_stack_verifies_and_tears_down() -> None:
    verify_name = f"{PROJECT}-verify-run"
    try:
        compose("up", "-d", "--wait")
        ports = docker("port", f"{PROJECT}-scheduler-1").stdout
        assert "127.0.0.1:18786" in ports and "0.0.0.0" not in ports
        run = compose("run", "--name", verify_name, "verify", check=False)
        assert run.returncode == 0, run.stdout + run.stderr
        report = _read_report(verify_name)
        assert report["ok"] is True
        assert report["workers_registered"] == 1
        assert report["backend"] == "numpy" and report["gpu_required"] is False
        assert report["workload"]["result"] == report["workload"]["expected"]
    finally:
        docker("rm", "-f", verify_name, check=False)
        compose("--profile", "verify", "down", "-v", "--remove-orphans", check=False)
    assert leftovers() == ""


def _read_report(container: str) -> dict[str, object]:
    out = docker("run", "--rm", "--volumes-from", container, "--entrypoint", "cat",
                 "dask-gpu-worker:" + container_tag(container), "/var/lib/dask-reports/verify.json").stdout
    return dict(json.loads(out))


def container_tag(container: str) -> str:
    return str(json.loads(docker("inspect", container).stdout)[0]["Config"]["Image"]).split(":", 1)[1]
