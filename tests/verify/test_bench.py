"""dask-gpu-bench against real scheduler and worker processes (CPU, NumPy): every section is measured and the
three report files are written; a cluster without GPUs is refused unless --allow-cpu."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import LocalDask


def run_bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dask_gpu_verify.bench", *args], capture_output=True, text=True,
                          timeout=300)


def test_cpu_cluster_benchmark_reports_every_section(cluster: LocalDask, tmp_path: Path) -> None:
    address = cluster.start_scheduler()
    cluster.start_worker("w0")
    cluster.start_worker("w1")
    out = tmp_path / "bench"
    result = run_bench("--scheduler", address, "--expect-workers", "2", "--allow-cpu", "--runs", "1",
                       "--label", "cpu test", "--ready-seconds", "7.5", "--out", str(out))
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(out.with_suffix(".json").read_text())
    assert report["backend"] == "numpy" and len(report["baselines"]) == 2
    for base in report["baselines"].values():
        assert base["copy_gbps"] > 0 and base["sum_gbps"] > 0 and base["fp64_tflops"] > 0 and base["fp32_tflops"] > 0
    rows = {row["workload"]: row for row in report["scaling"]}
    assert set(rows) == {"transpose_sum", "gram"}
    assert rows["transpose_sum"]["all"]["workers"] == 2 and rows["transpose_sum"]["one"]["workers"] == 1
    # Blocks move between the two workers for transpose_sum, and the transfer log saw them.
    assert rows["transpose_sum"]["all"]["transferred_gib"] > 0
    assert rows["transpose_sum"]["one"]["transferred_gib"] == 0
    assert all(row["ratio"] > 0 for row in rows.values())
    assert report["overhead"]["tasks_per_s"] > 0 and report["overhead"]["round_trip_ms"] > 0
    assert report["local_cupy"] == []  # a GPU-only benchmark
    markdown = (tmp_path / "bench.md").read_text()
    assert "Time to ready after the last deploy: 7.5 s" in markdown and "| transpose_sum | yes |" in markdown
    page = (tmp_path / "bench.html").read_text()
    assert page.count("<svg") == 2 and "gram per worker" in page


def test_cpu_cluster_without_allow_cpu_is_refused(cluster: LocalDask, tmp_path: Path) -> None:
    address = cluster.start_scheduler()
    cluster.start_worker("w0")
    result = run_bench("--scheduler", address, "--out", str(tmp_path / "bench"), "--timeout", "30")
    assert result.returncode != 0 and "no GPU worker" in result.stderr
    assert not (tmp_path / "bench.json").exists()
