"""The data-frame check (dask_gpu_verify.frames) on real Dask workers with pandas: its answer equals pandas' on the
client exactly; an answer that differs is caught; the report says when it was skipped."""
from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest
from dask_gpu_verify import frames
from dask_gpu_verify.report import Report
from distributed import Client, LocalCluster


@pytest.fixture(scope="module")
def client() -> Iterator[Client]:
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            Client(cluster) as connected:
        yield connected


def test_the_check_matches_pandas_exactly(client: Client) -> None:
    result = frames.run(client, "pandas", 200_000)
    assert result["error"] is None and result["exact"] is True and result["groups"] == frames.KEYS
    total = frames.expected(200_000)["rows"].sum()
    assert total == 200_000 - len(range(0, 200_000, 3))  # the rows with flag 0 are gone


def test_a_wrong_answer_is_caught(client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    right = frames.expected
    monkeypatch.setattr(frames, "expected", lambda rows: right(rows).assign(score=lambda f: f["score"] + 1))
    assert frames.run(client, "pandas", 50_000)["exact"] is False


def test_the_report_says_when_it_was_skipped(capsys: pytest.CaptureFixture[str]) -> None:
    report = Report(scheduler="tcp://x")
    report.frames = {"backend": "skipped", "reason": "no cuDF and dask-cudf on every worker"}
    report.print_table(sys.stdout)
    assert "data frames: skipped, no cuDF and dask-cudf on every worker" in capsys.readouterr().out
