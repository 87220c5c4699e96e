"""docker compose with the CPU override: up, verify passes, down leaves nothing behind; the CDI variant asks for
the GPUs as CDI devices (read through `docker compose config`, no GPU needed)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

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
        dashboard_in_a_browser("http://127.0.0.1:18787")
    finally:
        docker("rm", "-f", verify_name, check=False)
        compose("--profile", "verify", "down", "-v", "--remove-orphans", check=False)
    assert leftovers() == ""


def dashboard_in_a_browser(url: str) -> None:
    """The stack's dashboard (published on loopback) in headless Chromium: its status, workers and system pages
    render their plots (tests/sandbox/browser/drive.py; screenshots in reports/browser-compose/)."""
    setup = subprocess.run(["bash", str(ROOT / "scripts" / "setup-browser.sh")], capture_output=True, text=True,
                           timeout=900)
    assert setup.returncode == 0, setup.stdout[-2000:] + setup.stderr[-2000:]
    out = ROOT / "reports" / "browser-compose"
    run = subprocess.run([sys.executable, str(ROOT / "tests" / "sandbox" / "browser" / "drive.py"), "--out", str(out),
                          "--dashboard", url], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    seen = json.loads((out / "browser.json").read_text())["dashboard"]
    assert all(page["bokeh"] and page["canvases"] > 0 for page in seen.values()), seen
    print("compose dashboard in Chromium: " + ", ".join(f"/{name} {page['canvases']} canvases"
                                                        for name, page in seen.items()))


def gpu_requests(*files: str, gpus: str | None = None) -> dict[str, list[dict[str, object]]]:
    """Each GPU service's device requests as compose resolves them."""
    env = {key: value for key, value in os.environ.items() if key != "DASK_GPUS"}
    env.update({"DASK_GPUS": gpus} if gpus else {})
    args = [arg for name in files for arg in ("-f", str(ROOT / name))]
    result = subprocess.run(["docker", "compose", "--project-directory", str(ROOT), *args, "--profile", "verify",
                             "config", "--format", "json"], capture_output=True, text=True, check=True, env=env)
    services = json.loads(result.stdout)["services"]
    return {name: services[name]["deploy"]["resources"]["reservations"]["devices"]
            for name in ("scheduler", "worker", "verify")}


def test_the_cdi_variant_asks_for_cdi_devices_and_nothing_of_the_nvidia_runtime() -> None:
    for devices in gpu_requests("compose.cdi.yaml").values():
        assert devices == [{"capabilities": ["gpu"], "driver": "cdi", "device_ids": ["nvidia.com/gpu=all"]}]
    for devices in gpu_requests("compose.cdi.yaml", gpus="1").values():
        assert devices == [{"capabilities": ["gpu"], "driver": "cdi", "device_ids": ["nvidia.com/gpu=1"]}]
    # Given after compose.yaml, its CDI requests replace compose.yaml's (an H100 run failed when both were asked).
    for devices in gpu_requests("compose.yaml", "compose.cdi.yaml").values():
        assert devices == [{"capabilities": ["gpu"], "driver": "cdi", "device_ids": ["nvidia.com/gpu=all"]}]
    for devices in gpu_requests("compose.yaml", gpus="0,2").values():
        assert devices == [{"capabilities": ["gpu"], "driver": "nvidia", "device_ids": ["0,2"]}]


def _read_report(container: str) -> dict[str, object]:
    out = docker("run", "--rm", "--volumes-from", container, "--entrypoint", "cat",
                 "dask-gpu-worker:" + container_tag(container), "/var/lib/dask-reports/verify.json").stdout
    return dict(json.loads(out))


def container_tag(container: str) -> str:
    return str(json.loads(docker("inspect", container).stdout)[0]["Config"]["Image"]).split(":", 1)[1]
