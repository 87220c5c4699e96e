"""playbooks/benchmark.yml against the sandbox (CPU workers, through the firewall): the report is on the controller
as JSON, Markdown and HTML, and the JSON holds the baselines, the scaling of both workloads, the overhead, the time to
ready, and the seeds-like ETL (pandas on the CPU workers, the files written in each worker container and the
benchmark's) against pandas processes of the benchmark host, with equal check values; with the lean images (no
pyarrow) the ETL is skipped and the report says why."""
from __future__ import annotations

import json
import time

import live

# The images' package profile (.env's PROFILE: the sandbox's images are built with it).
PROFILE = next(line.split("=", 1)[1].strip() for line in (live.ROOT / ".env").read_text().splitlines()
               if line.startswith("PROFILE="))


def test_the_benchmark_playbook_reports_every_section() -> None:
    started = time.time()
    # The ETL small enough for the sandbox's 2 GiB worker (the default is 12 M rows).
    run = live.playbook("playbooks/benchmark.yml", "-e", "dask_bench_etl_rows=200000", timeout=1800)
    assert run.returncode == 0, run.stdout[-4000:]
    reports = live.ephemeral_dir() / "artifacts" / "reports"
    made = {path.suffix: path for path in reports.glob("*-bench-*.*") if path.stat().st_mtime >= started - 1}
    assert sorted(made) == [".html", ".json", ".md"], sorted(reports.iterdir())
    bench = json.loads(made[".json"].read_text())
    assert len(bench["baselines"]) == 2
    assert sorted(row["workload"] for row in bench["scaling"]) == ["gram", "transpose_sum"]
    assert bench["overhead"]["tasks_per_s"] > 0
    assert isinstance(bench["ready_seconds"], (int, float))
    etl = bench["etl"]
    ready = f"overhead {bench['overhead']['tasks_per_s']:.0f} tasks/s, ready in {bench['ready_seconds']} s"
    if PROFILE != "full":
        # The lean images have no pyarrow, which dask.dataframe and the ETL's CSV writer need: said, not run.
        assert "pyarrow" in etl["skipped"] and "cluster" not in etl, etl
        assert f"Skipped: {etl['skipped']}." in made[".md"].read_text()
        print(f"[benchmark] report {made['.json'].name}: {ready}; ETL skipped ({PROFILE} images): {etl['skipped']}")
        return
    assert etl["backend"] == "pandas" and etl["checks_equal"] and etl["cluster"]["rows"] == 200000, etl
    assert sorted(etl["generated_on"]) == ["dask-w1", "dask-w2"], etl["generated_on"]
    assert etl["cluster"]["workers"] == 2 and etl["cpu"]["seconds"] > 0
    assert "check values equal" in made[".md"].read_text()
    print(f"[benchmark] report {made['.json'].name}: {ready}; ETL 200,000 rows: "
          f"cluster {etl['cluster']['seconds']:.2f} s, pandas on {etl['cpu_workers']} processes "
          f"{etl['cpu']['seconds']:.2f} s, checks equal")
