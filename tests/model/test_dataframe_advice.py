"""The cluster's published partitioning (model.dataframe_advice): measured default, GPU-size cap, the user's size."""
from __future__ import annotations

from typing import Any

from ansible_collections.dask_gpu.bundle.plugins.plugin_utils import model

GIB, MIB = 2 ** 30, 2 ** 20


def hosts(*memory_mib: int) -> dict[str, Any]:
    return {f"g{i}": {"worker_gpus": [{"index": 0, "memory_mib": mib}]} for i, mib in enumerate(memory_mib)}


def advice(size: str, *memory_mib: int, per_worker: int = 1) -> dict[str, int]:
    found = hosts(*memory_mib)
    return model.dataframe_advice({"dask_dataframe_partition_size": size,
                                   "dask_dataframe_partitions_per_worker": per_worker}, found, list(found), 4)


def test_auto_is_the_measured_size_capped_by_the_smallest_gpu() -> None:
    assert advice("auto", 81559, 143771)["partition_bytes"] == GIB  # H100 and H200: the measured 1 GiB
    assert advice("auto", 81559, 16384)["partition_bytes"] == 16384 * MIB // 64  # a 16 GB GPU: 256 MiB
    assert advice("auto")["partition_bytes"] == model.PARTITION_CPU  # no GPU worker


def test_a_size_or_a_fraction_of_the_smallest_gpu_is_taken_as_given() -> None:
    assert advice("2GiB", 81559)["partition_bytes"] == 2 * GIB
    assert advice("0.01", 81559, 40960)["partition_bytes"] == int(0.01 * 40960 * MIB)
    assert advice("500MB", per_worker=3) == {"partition_bytes": 500_000_000, "partitions_per_worker": 3, "workers": 4}
