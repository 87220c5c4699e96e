"""dask-gpu-bench against real scheduler and worker processes (CPU, NumPy): every section is measured and the
three report files are written; a cluster without GPUs is refused unless --allow-cpu; missing workers (in all
or on a host) fail the benchmark instead of benchmarking fewer."""
from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FakeClient, LocalDask
from dask_gpu_verify import bench, bench_report


def run_bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dask_gpu_verify.bench", *args], capture_output=True, text=True,
                          timeout=300)


def test_cpu_cluster_benchmark_reports_every_section(cluster: LocalDask, tmp_path: Path) -> None:
    address = cluster.start_scheduler()
    cluster.start_worker("w0")
    cluster.start_worker("w1")
    out = tmp_path / "bench"
    result = run_bench("--scheduler", address, "--expect-workers", "2", "--allow-cpu", "--runs", "1",
                       f"--expect-host={socket.gethostname()}=2", "--label", "cpu test", "--ready-seconds", "7.5",
                       "--etl-rows", "40000", "--etl-files", "2", "--etl-cpu-workers", "2",
                       "--etl-data", str(tmp_path / "etl"), "--out", str(out))
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(out.with_suffix(".json").read_text())
    assert report["backend"] == "numpy" and len(report["baselines"]) == 2
    assert report["expected"]["registered"] == 2 and report["expected"]["per_host"] == {socket.gethostname(): 2}
    assert report["left_out"] == {}
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
    assert report["dask_cuda"] == []  # GPU-only benchmarks
    markdown = (tmp_path / "bench.md").read_text()
    assert "Time to ready after the last deploy: 7.5 s" in markdown and "| transpose_sum | yes |" in markdown
    assert f"Workers: 2 registered, 2 expected (per host: {socket.gethostname()} 2); 2 benchmarked." in markdown
    page = (tmp_path / "bench.html").read_text()
    assert page.count("<svg") == 2 and "gram per worker" in page
    # The seeds-like ETL on the two workers (pandas: they have no GPU) against 2 local pandas processes: the same
    # CSV files (written once per worker host, here one host, and by the client), equal check values.
    etl = report["etl"]
    assert etl["backend"] == "pandas" and etl["checks_equal"], etl
    assert list(etl["generated_on"]) == [socket.gethostname()]
    assert etl["cluster"]["workers"] == 2 and etl["cpu"]["workers"] == 2 and etl["cluster"]["rows"] == 40000
    assert etl["cluster"]["seconds"] > 0 and etl["cpu_over_cluster"] > 0
    assert "## Data-frame ETL (seeds-like): 40,000 rows in 2 CSV files" in markdown and "check values equal" in markdown


def test_cpu_cluster_without_allow_cpu_is_refused(cluster: LocalDask, tmp_path: Path) -> None:
    address = cluster.start_scheduler()
    cluster.start_worker("w0")
    result = run_bench("--scheduler", address, "--out", str(tmp_path / "bench"), "--timeout", "30")
    assert result.returncode != 0 and "no GPU worker" in result.stderr
    assert not (tmp_path / "bench.json").exists()


def test_missing_worker_fails_the_benchmark_naming_the_host(cluster: LocalDask, tmp_path: Path) -> None:
    address = cluster.start_scheduler()
    cluster.start_worker("w0")
    result = run_bench("--scheduler", address, "--expect-workers", "2", "--expect-host=gpu-node-7=1",
                       "--allow-cpu", "--timeout", "5", "--out", str(tmp_path / "bench"))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "expected 2 workers (gpu-node-7=1); after 5 s 1 registered, so nothing was benchmarked" in result.stderr
    assert "FAIL [workers] 1 of 2 expected workers registered" in result.stderr
    assert "FAIL [workers] host=gpu-node-7: expected 1 workers on this host, found 0" in result.stderr
    assert not list(tmp_path.glob("bench.*"))


def _args(*argv: str) -> argparse.Namespace:
    return bench.parser().parse_args(["--out", "unused", "--timeout", "2", *argv])


def test_worker_without_gpu_is_refused_unless_cpu_is_allowed() -> None:
    client = FakeClient({"tcp://10.0.0.2:1": {"host": "10.0.0.2", "name": "gpu-a-0"},
                         "tcp://10.0.0.3:1": {"host": "10.0.0.3", "name": "gpu-b-0"}},
                        {"tcp://10.0.0.2:1": "gpu-a", "tcp://10.0.0.3:1": "gpu-b"},
                        {"tcp://10.0.0.2:1": {"uuid": "GPU-a", "hostname": "gpu-a"},
                         "tcp://10.0.0.3:1": {"error": "no CUDA device visible", "hostname": "gpu-b"}})
    with pytest.raises(bench.NotBenchmarked) as refused:
        bench.prepare(client, _args("--expect-workers", "2"))
    assert "1 of 2 workers have no usable GPU" in str(refused.value)
    assert "FAIL [gpu] host=gpu-b worker=tcp://10.0.0.3:1: no usable GPU: no CUDA device visible" in str(refused.value)
    _, _, backend = bench.prepare(client, _args("--expect-workers", "2", "--allow-cpu"))
    assert backend.targets == ["tcp://10.0.0.2:1"] and list(backend.left_out) == ["tcp://10.0.0.3:1"]


def test_report_names_workers_left_out() -> None:
    report = {"label": "", "scheduler": "tls://x:8786", "backend": "cupy", "when": "now", "versions": {},
              "workers": {"w0": {"name": "gpu-a-0", "host": "10.0.0.2", "gpu": {"name": "NVIDIA H200"}}},
              "expected": {"workers": 2, "per_host": {"gpu-a": 1, "gpu-b": 1}, "registered": 2, "wait_seconds": 1.0},
              "left_out": {"w1": {"name": "gpu-b-0", "host": "10.0.0.3", "reason": "no usable GPU: no CUDA device"}},
              "baselines": {}, "scaling": [], "dask_cuda": [],
              "overhead": {"tasks": 1, "tasks_per_s": 1.0, "round_trip_ms": 1.0}}
    markdown = bench_report.markdown(report)
    assert "Workers: 2 registered, 2 expected (per host: gpu-a 1, gpu-b 1); 1 benchmarked." in markdown
    assert "**Not benchmarked**: worker gpu-b-0 on 10.0.0.3: no usable GPU: no CUDA device." in markdown


def test_report_shows_dask_cuda_rows_measured_skipped_and_failed() -> None:
    measured = {"benchmark": "local_cupy", "operation": "dot", "size": "40000 / 10000", "command": "-m x",
                "seconds": 0.25, "throughput_gbps": 51.2, "transfer_mib_per_s": 80000.0, "transferred_gib": 12.5}
    skipped = {"benchmark": "local_cudf_merge", "operation": "merge", "size": "8 x 8 chunks of 50 M rows",
               "command": "-m y", "skipped": "cuDF is not installed in this client"}
    failed = {"benchmark": "local_cudf_shuffle", "operation": "shuffle", "size": "64 x 64 MiB", "command": "-m z",
              "error": ["MemoryError: out of device memory"]}
    report = {"label": "", "scheduler": "tls://x:8786", "backend": "cupy", "when": "now", "versions": {},
              "workers": {}, "expected": {"workers": 1, "per_host": {}, "registered": 1, "wait_seconds": 1.0},
              "left_out": {}, "baselines": {}, "scaling": [], "dask_cuda": [measured, skipped, failed],
              "overhead": {"tasks": 1, "tasks_per_s": 1.0, "round_trip_ms": 1.0}}
    markdown = bench_report.markdown(report)
    assert "| local_cupy dot | 40000 / 10000 | 0.250 | 51.2 | 80,000 (12.50) | `-m x` |" in markdown
    assert ("| local_cudf_merge merge | 8 x 8 chunks of 50 M rows | skipped: cuDF is not installed in this client "
            "| | | `-m y` |") in markdown
    assert "| local_cudf_shuffle shuffle | 64 x 64 MiB | failed: MemoryError: out of device memory |" in markdown


class _Workers:
    """client.run's answer per worker to 'is cuDF importable here?'."""

    def __init__(self, found: dict[str, bool]) -> None:
        self.found = found

    def run(self, function: object) -> dict[str, bool]:
        return dict(self.found)


def test_data_frame_benchmarks_name_where_cudf_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == "cudf" else real(name))
    assert bench.cudf_missing(_Workers({"tcp://a:1": True})) == "cuDF is not installed in this client"
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: object() if name == "cudf" else real(name))
    assert bench.cudf_missing(_Workers({"tcp://a:1": True, "tcp://b:1": True})) is None
    assert bench.cudf_missing(_Workers({"tcp://a:1": True, "tcp://b:1": False})) == (
        "cuDF is not installed on 1 worker(s): tcp://b:1")
