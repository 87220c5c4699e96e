"""playbooks/benchmark.yml against the sandbox (CPU workers, through the firewall): the report is on the controller
as JSON, Markdown and HTML, and the JSON holds the baselines, the scaling of both workloads, the overhead and the
time to ready."""
from __future__ import annotations

import json
import time

import live

# The cluster's settings at this point of the side effect (cluster-registry images, firewall, monitoring).
VARS = f"@{live.ROOT / 'molecule' / 'default' / 'vars' / 'side-effect.yml'}"


def test_the_benchmark_playbook_reports_every_section() -> None:
    started = time.time()
    run = live.playbook("playbooks/benchmark.yml", "-e", VARS, timeout=1800)
    assert run.returncode == 0, run.stdout[-4000:]
    reports = live.ephemeral_dir() / "artifacts" / "reports"
    made = {path.suffix: path for path in reports.glob("*-bench-*.*") if path.stat().st_mtime >= started - 1}
    assert sorted(made) == [".html", ".json", ".md"], sorted(reports.iterdir())
    bench = json.loads(made[".json"].read_text())
    assert len(bench["baselines"]) == 2
    assert sorted(row["workload"] for row in bench["scaling"]) == ["gram", "transpose_sum"]
    assert bench["overhead"]["tasks_per_s"] > 0
    assert isinstance(bench["ready_seconds"], (int, float))
    print(f"[benchmark] report {made['.json'].name}: overhead {bench['overhead']['tasks_per_s']:.0f} tasks/s, "
          f"ready in {bench['ready_seconds']} s")
