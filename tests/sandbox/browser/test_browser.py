"""The web pages in a real browser (headless Chromium, Debian's package, driven by Selenium): the Dask dashboard's
status, workers and system pages render their plots, and JupyterLab (dask_notebook_enabled in the sandbox) asks for
its token, opens the example notebook, runs it on the cluster and shows the answer. The browser runs in the scheduler
host's network namespace (nsenter), where the pages listen on loopback, as a user reaches them through an SSH
tunnel. Screenshots and browser.json are kept in artifacts/reports/browser/."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import live

HERE = Path(__file__).resolve().parent


def test_the_dashboard_and_a_notebook_work_in_a_real_browser() -> None:
    setup = subprocess.run(["bash", str(live.ROOT / "scripts" / "setup-browser.sh")], capture_output=True, text=True,
                           timeout=900)
    assert setup.returncode == 0, setup.stdout[-2000:] + setup.stderr[-2000:]
    pid = subprocess.run(["docker", "inspect", "-f", "{{.State.Pid}}", live.SCHEDULER], capture_output=True,
                         text=True, check=True).stdout.strip()
    artifacts = live.ephemeral_dir() / "artifacts"
    out = artifacts / "reports" / "browser"
    run = subprocess.run(["nsenter", f"--net=/proc/{pid}/ns/net", sys.executable, str(HERE / "drive.py"),
                          "--out", str(out), "--dashboard", "http://127.0.0.1:8787", "--lab", "http://127.0.0.1:8888",
                          "--token-file", str(artifacts / "notebook" / "token")],
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    seen = json.loads((out / "browser.json").read_text())
    for page, state in seen["dashboard"].items():
        assert state["bokeh"] and state["canvases"] > 0 and "error" not in state, (page, state)
        assert (out / f"dashboard-{page}.png").stat().st_size > 10_000, page
    lab = seen["lab"]
    assert "error" not in lab, lab
    mean = re.search(r"mean of x \+ x\.T: ([0-9.]+)", lab["output"])
    assert mean and abs(float(mean.group(1)) - 1.0) < 0.01 and not lab["errors"], lab
    assert "CPU" in lab["output"], lab["output"]  # the sandbox's workers have no GPU
    print(f"[browser] Chromium {seen['browser']}: dashboard " + ", ".join(
        f"/{page} {state['canvases']} canvases in {state['seconds']} s" for page, state in seen["dashboard"].items())
        + f"; JupyterLab login, {lab['notebook']} run on the cluster in {lab['run_seconds']} s: "
        + f"{mean.group(0)}; screenshots in {out}")
