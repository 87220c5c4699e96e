"""The Polars parts of dask_gpu_verify that run without a GPU, on real Polars and real Dask workers: the PDS-H-like
generator and queries (pdsh.py), the seeds-like ETL in Polars giving etl.py's check values, the generator's
disk refusal, and the verification and benchmark saying why they skip a cluster without GPU workers. DaskEngine
itself needs GPUs: its runs are tests/gpu/gpu-proof-polars.sh's (docs/polars.md)."""
from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest
from dask_gpu_verify import etl, gpu_polars, pdsh
from distributed import Client, LocalCluster


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("pdsh")
    made = pdsh.generate_local(folder, 0.05)
    assert not made["reused"] and made["bytes"] > 0
    return folder


def test_the_generator_is_deterministic_and_reused(tables: Path, tmp_path: Path) -> None:
    assert pdsh.generate_local(tables, 0.05)["reused"]
    again = pdsh.generate_local(tmp_path, 0.05)
    for part in pdsh.plan(0.05):
        assert part.path(tmp_path).read_bytes() == part.path(tables).read_bytes(), part
    assert again["bytes"] == pdsh.generate_local(tables, 0.05)["bytes"]
    assert pdsh.rows("lineitem", 0.05) == 300_000 and pdsh.rows("nation", 0.05) == 25


def test_every_query_answers_from_whole_numbers(tables: Path) -> None:
    """Each query has rows, and none of its columns is a float (equal means exactly equal on every engine)."""
    for name, build in pdsh.selected("all"):
        result = build(tables).collect()
        assert result.height > 0, name
        assert not [column for column, kind in result.schema.items() if kind.is_float()], (name, result.schema)
    with pytest.raises(ValueError, match="unknown queries q2: choose from q1, q3, q6, q10, q18 or all"):
        list(pdsh.selected("q1,q2"))


def test_a_scale_the_disk_cannot_hold_is_refused_naming_the_setting(tmp_path: Path) -> None:
    problem = pdsh.space_problem(tmp_path / "new", 1e6, "dask_bench_polars_scale")
    assert problem and problem.startswith("dask_bench_polars_scale=1e+06: the PDS-H-like tables take up to"), problem
    assert pdsh.space_problem(tmp_path, 0.01, "x") is None
    with pytest.raises(SystemExit, match="--scale=1e"):
        pdsh.generate_local(tmp_path / "big", 1e6)
    assert not (tmp_path / "big" / "lineitem").exists()


def test_the_polars_etl_gives_the_check_values_of_the_dask_etl(tmp_path: Path) -> None:
    data = etl.Data(tmp_path, 200_000, 2)
    etl.generate(data)
    polars_pass = gpu_polars.etl_pass(data, None)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        dask_pass = etl.one_pass(client, etl.Plan(data, "pandas", 4, "tasks"))
    assert polars_pass["digest"] == etl.digest(dask_pass["checks"])


def test_the_cpu_baseline_runs_in_a_process_of_its_own(tables: Path) -> None:
    report = gpu_polars.cpu_queries(str(tables), "q1,q6", 1)
    assert set(report) == {"q1", "q6", "threads"} and report["threads"] >= 1
    direct = gpu_polars.run_queries(tables, "q1,q6", 1)
    assert report["q1"]["digest"] == direct["q1"]["digest"] and report["q6"]["rows"] == 1


@pytest.fixture(scope="module")
def cpu_client() -> Iterator[Client]:
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            Client(cluster) as connected:
        yield connected


def test_a_cluster_without_gpu_workers_is_skipped_with_the_reason(cpu_client: Client) -> None:
    assert gpu_polars.verify(cpu_client, 1000) == {"status": "skipped", "reason": "no GPU workers"}
    assert gpu_polars.benchmark(cpu_client, 0.01, "q1", 1)["reason"] == "no GPU workers"


def test_the_tables_are_written_on_every_worker_host_by_its_workers(cpu_client: Client, tmp_path: Path) -> None:
    made = gpu_polars.generate(cpu_client, 0.02, str(tmp_path), "--scale")
    hosts = {info["host"] for info in cpu_client.scheduler_info()["workers"].values()}
    assert made["folders"] == dict.fromkeys(hosts, str(tmp_path)) and not made["reused"]
    assert pdsh.ready(tmp_path, 0.02)
    assert gpu_polars.generate(cpu_client, 0.02, str(tmp_path), "--scale")["reused"]
    with pytest.raises(SystemExit, match=f"host {next(iter(hosts))}: --scale=1e"):
        gpu_polars.generate(cpu_client, 1e6, str(tmp_path / "big"), "--scale")


def test_the_cli_refuses_bad_values_and_runs_cpu_polars(tables: Path) -> None:
    run = [sys.executable, "-m", "dask_gpu_verify.gpu_polars"]
    bad = subprocess.run([*run, "cpu", "--folder", str(tables), "--queries", "q99"], capture_output=True, text=True,
                         check=False)
    assert bad.returncode == 2 and "--queries: unknown queries q99" in bad.stderr
    bad = subprocess.run([*run, "generate", "--folder", str(tables), "--scale", "0"], capture_output=True, text=True,
                         check=False)
    assert bad.returncode == 2 and "--scale must be above 0, not 0" in bad.stderr
    good = subprocess.run([*run, "cpu", "--folder", str(tables), "--queries", "q6", "--passes", "1"],
                          capture_output=True, text=True, check=True)
    assert json.loads(good.stdout)["q6"]["rows"] == 1


def test_the_verify_query_is_exact_on_cpu_polars() -> None:
    facts, dim = gpu_polars._verify_frames(50_000)
    result = gpu_polars.verify_query(facts, dim).collect()
    assert result.height == 97 and result.schema["total"] == pl.Int64
    assert result["rows"].sum() == facts.join(dim, on="key").height


def test_the_job_example_runs_its_queries_on_cpu_polars(tmp_path: Path) -> None:
    """examples/jobs/polars_queries.py's dry run (--engine cpu): the same queries and generator as on the cluster."""
    root = Path(__file__).resolve().parents[2]
    env = {"PYTHONPATH": str(root / "images" / "verify" / "src"), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, str(root / "examples" / "jobs" / "polars_queries.py"), "0.01", "q1", "q18",
                           "--engine", "cpu", "--folder", str(tmp_path)], capture_output=True, text=True, env=env,
                          check=False, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "q1: " in done.stdout and "q18: " in done.stdout and pdsh.ready(tmp_path, 0.01)
