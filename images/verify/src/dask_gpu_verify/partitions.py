"""How to cut a data frame for the cluster this client talks to: the advice the cluster publishes as Dask
configuration (`dask-gpu.dataframe.*`: the client bundle's dask.yaml and env.sh, the environment of the clients
the bundle runs for one task - verification, benchmark, jobs - and JupyterLab's configuration file).

    import dask.dataframe as dd
    from dask_gpu_verify import partitions
    frame = dd.read_parquet(path).repartition(npartitions=partitions.count(nbytes))

partition-bytes is the GPU memory a partition should hold (1 GiB by default on GPUs of 64 GiB or more: on 4 x H100
the ETL ran fastest with about that, 3.5 x slower with 8 times as many smaller partitions; tests/gpu/results/
scaling-h100x4/), partitions-per-worker the fewest per worker, workers the workers the cluster expects. Without the
configuration (a client of some other cluster) the defaults below apply.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

DEFAULT_BYTES = 256 * 2 ** 20


@dataclass(frozen=True)
class Advice:
    partition_bytes: int
    per_worker: int
    workers: int

    def count(self, nbytes: int, workers: int | None = None) -> int:
        """Partitions for a frame of nbytes (in GPU memory): at least per_worker for every worker, and enough that
        none holds more than partition_bytes."""
        floor = self.per_worker * max(1, workers if workers is not None else self.workers)
        return max(floor, math.ceil(max(0, nbytes) / self.partition_bytes))


def advice() -> Advice:
    """The cluster's advice from Dask's configuration (environment or dask.yaml)."""
    import dask

    def setting(key: str, default: int) -> int:
        value = dask.config.get(f"dask-gpu.dataframe.{key}", default=default)
        try:
            return max(1, int(value))
        except (TypeError, ValueError):
            return default

    return Advice(setting("partition-bytes", DEFAULT_BYTES), setting("partitions-per-worker", 1),
                  setting("workers", 1))


def count(nbytes: int, workers: int | None = None) -> int:
    """advice().count(nbytes, workers): the partitions for a frame of nbytes on this cluster."""
    return advice().count(nbytes, workers)
