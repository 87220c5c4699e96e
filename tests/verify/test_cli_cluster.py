"""The verification client against real scheduler and worker processes (CPU, NumPy)."""
from __future__ import annotations

import json
import os
from pathlib import Path

from conftest import LocalDask, run_verify


def test_healthy_cpu_cluster_passes_and_says_no_gpu(cluster: LocalDask, tmp_path: Path) -> None:
    address = cluster.start_scheduler()
    cluster.start_worker("w0")
    cluster.start_worker("w1")
    report_path = tmp_path / "report.json"
    result = run_verify("--scheduler", address, "--expect-workers", "2", "--allow-cpu", "--timeout", "60",
                        "--json", str(report_path))
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(report_path.read_text())
    assert report["ok"] is True
    assert report["backend"] == "numpy"
    assert report["workers_registered"] == 2
    assert "NO GPU WAS USED" in result.stdout
    assert report["workload"]["result"] == report["workload"]["expected"]
    assert all(w["bandwidth"]["sum_gbps"] > 0 for w in report["workers"].values())


def test_gpu_required_without_gpus_fails_naming_each_worker(cluster: LocalDask) -> None:
    address = cluster.start_scheduler()
    cluster.start_worker("w0")
    result = run_verify("--scheduler", address, "--expect-workers", "1", "--timeout", "60")
    assert result.returncode == 1
    assert "FAIL [gpu]" in result.stdout
    assert "no usable GPU" in result.stdout


def test_missing_worker_fails_and_names_the_host(cluster: LocalDask) -> None:
    address = cluster.start_scheduler()
    cluster.start_worker("w0")
    result = run_verify("--scheduler", address, "--expect-workers", "2", "--expect-host", "gpu-node-7=1",
                        "--allow-cpu", "--timeout", "8")
    assert result.returncode == 1
    assert "1 of 2 expected workers registered" in result.stdout
    assert "host=gpu-node-7: expected 1 workers on this host, found 0" in result.stdout


def test_version_mismatch_on_one_worker_fails(cluster: LocalDask, tmp_path: Path) -> None:
    # A worker whose environment carries another numpy distribution's metadata first on its path,
    # as a worker built from a different image would.
    shadow = tmp_path / "shadow"
    (shadow / "numpy-1.26.4.dist-info").mkdir(parents=True)
    (shadow / "numpy-1.26.4.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: numpy\nVersion: 1.26.4\n")
    address = cluster.start_scheduler()
    cluster.start_worker("w0")
    cluster.start_worker("odd", {"PYTHONPATH": os.pathsep.join([str(shadow), os.environ.get("PYTHONPATH", "")])})
    result = run_verify("--scheduler", address, "--expect-workers", "2", "--allow-cpu", "--timeout", "60")
    assert result.returncode == 1
    assert "FAIL [versions]" in result.stdout
    assert "numpy is 1.26.4 here" in result.stdout


def test_unreachable_scheduler_exits_2(tmp_path: Path) -> None:
    result = run_verify("--scheduler", "tcp://127.0.0.1:9", "--timeout", "3", "--json", str(tmp_path / "r.json"))
    assert result.returncode == 2
    assert json.loads((tmp_path / "r.json").read_text())["ok"] is False
