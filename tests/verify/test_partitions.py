"""dask_gpu_verify.partitions: the published partitioning read from Dask's configuration, as the client bundle's
dask.yaml and the bundle's clients' environment give it."""
from __future__ import annotations

import dask
import pytest
from dask_gpu_verify import partitions

GIB = 2 ** 30


def test_count_takes_the_larger_of_the_floor_and_the_size() -> None:
    advice = partitions.Advice(partition_bytes=GIB, per_worker=1, workers=4)
    assert advice.count(0) == 4  # every worker gets a part
    assert advice.count(3 * GIB) == 4
    assert advice.count(10 * GIB) == 10  # none over a GiB
    assert advice.count(10 * GIB, workers=16) == 16
    assert partitions.Advice(GIB, 2, 4).count(GIB) == 8


def test_advice_comes_from_the_configuration_in_either_spelling(monkeypatch: pytest.MonkeyPatch) -> None:
    with dask.config.set({"dask-gpu": {"dataframe": {"partition-bytes": 512 * 2 ** 20, "partitions-per-worker": 2,
                                                     "workers": 3}}}):
        assert partitions.advice() == partitions.Advice(512 * 2 ** 20, 2, 3)
        assert partitions.count(4 * GIB) == 8
    monkeypatch.setenv("DASK_DASK_GPU__DATAFRAME__PARTITION_BYTES", str(GIB))
    monkeypatch.setenv("DASK_DASK_GPU__DATAFRAME__WORKERS", "5")
    dask.config.refresh()
    try:
        assert partitions.advice() == partitions.Advice(GIB, 1, 5)
    finally:
        monkeypatch.undo()
        dask.config.refresh()


def test_without_configuration_or_with_nonsense_the_defaults_hold() -> None:
    assert partitions.advice() == partitions.Advice(partitions.DEFAULT_BYTES, 1, 1)
    with dask.config.set({"dask-gpu": {"dataframe": {"partition-bytes": "lots", "workers": 0}}}):
        assert partitions.advice() == partitions.Advice(partitions.DEFAULT_BYTES, 1, 1)
