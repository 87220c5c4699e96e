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
