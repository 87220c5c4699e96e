"""The fleet benchmark's fit and projection (tests/fleet/report.py) on rows whose answer is known."""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def report() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fleet_report", HERE / "report.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["fleet_report"] = module
    spec.loader.exec_module(module)
    return module


def rows(step: str, fixed: float, per_host: float, counts: tuple[int, ...]) -> list[dict[str, object]]:
    return [{"hosts": n, "step": step, "rc": 0, "wall_s": fixed + per_host * n,
             "controller_cpu_s": 2 * (fixed + per_host * n)} for n in counts]


def test_a_line_is_fitted_and_projected(report: ModuleType) -> None:
    result = report.summary(rows("rerun", 10.0, 1.5, (3, 10, 20)) + [{"hosts": 40, "step": "rerun", "rc": 2}])
    assert result["rerun"]["wall_fit"] == [10.0, 1.5]
    assert sorted(result["rerun"]["measured"]) == [3, 10, 20]  # the failed run is left out
    assert result["rerun"]["projected"][100] == {"wall_s": 160.0, "controller_cpu_s": 320.0}
    assert result["rerun"]["projected"][1000]["wall_s"] == 1510.0


def test_the_files_are_written(report: ModuleType, tmp_path: Path) -> None:
    source = tmp_path / "fleet.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in rows("check", 1.0, 0.5, (3, 10))))
    assert report.main([str(source)]) == 0
    table = (tmp_path / "fleet.md").read_text()
    assert "| check | 2.5 / 5.0 | 6.0 / 12.0 | 1.0 + 0.50 N | 2.0 + 1.00 N | 51 / 102 | 501 / 1002 |" in table
    assert (tmp_path / "fleet.svg").read_text().startswith("<svg")
    assert json.loads((tmp_path / "fleet.json").read_text())["check"]["wall_fit"] == [1.0, 0.5]


def test_the_wall_time_on_machines_of_their_own_is_estimated_and_bounded(report: ModuleType) -> None:
    """Wall less the hosts' CPU seconds over the shared cores (scaled by how busy they were), never under the
    controller's CPU over the cores nor one host's share of the hosts' CPU."""
    measured = [{"hosts": 10, "step": "converge", "rc": 0, "wall_s": 100.0, "controller_cpu_s": 40.0,
                 "hosts_cpu_s": 120.0, "cores": 2, "busy": 1.0},
                {"hosts": 20, "step": "converge", "rc": 0, "wall_s": 190.0, "controller_cpu_s": 70.0,
                 "hosts_cpu_s": 260.0, "cores": 2, "busy": 1.0}]
    result = report.summary(measured)["converge"]
    assert result["own_wall"] == {10: 40.0, 20: 60.0}
    assert result["own_fit"] == [20.0, 2.0] and result["projected"][100]["own_wall_s"] == 220.0
    # 1,000 hosts: the line says 2,020 s, the controller's CPU (10 + 3 N) over 2 cores 1,505 s: the line stands.
    assert result["projected"][1000]["own_wall_s"] == 2020.0
    steeper = [measured[0], {**measured[1], "controller_cpu_s": 100.0}]  # controller CPU -20 + 6 N
    bound = report.summary(steeper)["converge"]
    assert bound["own_fit"] == [20.0, 2.0]  # the measured points are wall-bound: the same line
    assert bound["projected"][100]["own_wall_s"] == 290.0  # (-20 + 600) / 2 cores, over the line's 220
    assert report.own_wall({"hosts": 10, "wall_s": 100.0, "controller_cpu_s": 40.0, "hosts_cpu_s": 120.0,
                            "cores": 2, "busy": 0.5}) == 70.0  # half busy: half the hosts' time taken off
    assert report.own_wall({"hosts": 3, "wall_s": 10.0, "controller_cpu_s": 8.0, "hosts_cpu_s": 30.0,
                            "cores": 2}) == 10.0  # one host's share of the hosts' work
    assert report.own_wall({"hosts": 3, "wall_s": 10.0, "controller_cpu_s": 30.0, "hosts_cpu_s": 6.0,
                            "cores": 2}) == 15.0  # the controller's CPU over its cores
    assert "Each host on a machine of its own" in report.markdown(report.summary(measured))
    assert "own_fit" not in report.summary(rows("check", 1.0, 0.5, (3, 10)))["check"]  # rows without the machine's CPU
