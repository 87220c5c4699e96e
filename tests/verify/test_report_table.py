"""The verification table: a line per worker for small clusters, a line per host beyond 32 workers (the JSON keeps
every worker)."""
from __future__ import annotations

import io

from dask_gpu_verify.report import PER_WORKER_ROWS, Report


def report(hosts: int, per_host: int) -> Report:
    workers = {f"tls://10.0.{h}.{w}:4000": {"hostname": f"host-{h:03d}", "name": f"host-{h:03d}-{w}",
                                             "gpu": {"name": "H100", "uuid": f"GPU-{h}-{w}"},
                                             "bandwidth": {"sum_gbps": 100.0 + w, "copy_gbps": 50.0}}
               for h in range(hosts) for w in range(per_host)}
    return Report(scheduler="tls://10.0.0.1:8786", backend="cupy", workers=workers)


def table(found: Report) -> list[str]:
    out = io.StringIO()
    found.print_table(out)
    return out.getvalue().splitlines()


def test_a_small_cluster_has_a_line_per_worker() -> None:
    lines = table(report(2, 4))
    assert lines[2].split() == ["host", "worker", "GPU", "UUID", "GPU", "sum", "GB/s", "GPU", "copy", "GB/s", "CPU",
                                "cores", "(its", "GPU's)"]
    assert sum(1 for line in lines if line.startswith("host-")) == 8
    assert all(line.split()[-1] == "-" for line in lines if line.startswith("host-"))  # no health reading: no cores


def test_each_worker_line_names_its_cores_and_its_gpus() -> None:
    found = report(1, 2)
    first, second = sorted(found.workers)
    found.workers[first]["gpu_health"] = {"worker_cores": list(range(16)), "cpu_cores": list(range(16))}
    found.workers[second]["gpu_health"] = {"worker_cores": [16, 17, 18, 19], "cpu_cores": None}
    rows = [line.split() for line in table(found) if line.startswith("host-")]
    assert [row[-2:] for row in rows] == [["0-15", "(0-15)"], ["16-19", "(?)"]]


def test_hundreds_of_workers_have_a_line_per_host_and_the_json_keeps_them_all() -> None:
    found = report(100, 8)
    assert len(found.workers) > PER_WORKER_ROWS
    lines = table(found)
    rows = [line.split() for line in lines if line.startswith("host-")]
    assert len(rows) == 100
    assert rows[0] == ["host-000", "8", "8", f"{sum(100.0 + w for w in range(8)):.1f}", "100.0"]
    assert lines[-1] == "PASS"
    assert len(found.to_dict()["workers"]) == 800
