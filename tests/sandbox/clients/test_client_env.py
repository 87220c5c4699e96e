"""A client made from the cluster's lock (scripts/client-env.sh over the client bundle site.yml wrote): it connects
over TLS with `Client()` and no argument (env.sh), `get_versions(check=True)` passes, and no version-mismatch
warning is raised (warnings are errors in the client process)."""
from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import live

CLIENT = """
import warnings
warnings.simplefilter("error")
from distributed import Client
with Client(timeout=60) as client:
    versions = client.get_versions(check=True)
    print("client", versions["client"]["packages"]["dask"], versions["client"]["packages"]["python"])
    print("scheduler", versions["scheduler"]["packages"]["dask"], versions["scheduler"]["packages"]["python"])
    print("sum", client.submit(sum, [1, 2, 3]).result())
"""


def test_a_client_made_from_the_lock_matches_the_cluster(tmp_path: Path) -> None:
    bundle = live.ephemeral_dir() / "artifacts" / "client"
    lock = (bundle / "requirements.lock").read_text()
    assert "\ndistributed==" in lock and "\ndask-cuda==" in lock, lock[:500]
    started = time.monotonic()
    made = subprocess.run(["bash", str(live.ROOT / "scripts" / "client-env.sh"), str(bundle), str(tmp_path / "venv")],
                          capture_output=True, text=True, timeout=900)
    assert made.returncode == 0, made.stdout[-2000:] + made.stderr[-2000:]
    seconds = time.monotonic() - started
    env = {key: value for key, value in os.environ.items() if not key.startswith("DASK_")}
    env.update(live.bundle())
    run = subprocess.run([str(tmp_path / "venv" / "bin" / "python"), "-c", CLIENT], capture_output=True, text=True,
                         env=env, timeout=180)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    assert "sum 6" in run.stdout and "Mismatch" not in run.stderr, run.stderr[-2000:]
    lines = dict(line.split(" ", 1) for line in run.stdout.splitlines())
    assert lines["client"] == lines["scheduler"], run.stdout
    print(f"[clients] lock-made client in {seconds:.0f} s ({made.stdout.splitlines()[0]}); {run.stdout.strip()}")
