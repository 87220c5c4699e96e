"""A small data-frame check with a known answer: made on the workers, filtered, grouped, joined, compared with
pandas on the client exactly. With cuDF on every worker it runs on the GPUs (dask-cudf); on CPU workers with
pandas; GPU workers without cuDF (the lean profile) skip it, and the report says so.

The frame: row i (0 <= i < rows) has key i % KEYS, value i, flag i % 3. Rows with flag 0 go; the rest are grouped by
key (sum of value, count of rows) and joined with a table of the keys' weights (key * 7); score = sum * weight.
Shuffles run as tasks (distributed's p2p shuffle made cuDF slower than the CPUs: docs/performance.md).
"""
from __future__ import annotations

import importlib
import importlib.metadata
import time
from typing import Any

from dask_gpu_verify import partitions

KEYS = 1000
DEFAULT_ROWS = 1_000_000
COLUMNS = ["key", "total", "rows", "weight", "score"]


def available() -> dict[str, str | None]:
    """What this process can build frames with (run on each worker): the versions of cudf, dask-cudf and pandas, and
    whether dask.dataframe imports (it needs pyarrow; the error when it does not)."""
    found: dict[str, str | None] = {}
    try:
        importlib.import_module("dask.dataframe")
        found["dask_dataframe_error"] = None
    except ImportError as error:
        found["dask_dataframe_error"] = str(error)
    for name, dist in (("cudf", ("cudf-cu12", "cudf-cu13", "cudf")), ("dask_cudf", ("dask-cudf-cu12", "dask-cudf-cu13",
                                                                                     "dask-cudf")),
                       ("pandas", ("pandas",))):
        found[name] = None
        for candidate in dist:
            try:
                found[name] = importlib.metadata.version(candidate)
                break
            except importlib.metadata.PackageNotFoundError:
                continue
    return found


def _library(backend: str) -> Any:
    return importlib.import_module("cudf" if backend == "cudf" else "pandas")


def part(bounds: tuple[int, int], backend: str) -> Any:
    """Rows start..stop-1 of the frame, as a cuDF or pandas frame (made where the task runs)."""
    import numpy

    start, stop = bounds
    index = numpy.arange(start, stop, dtype="int64")
    return _library(backend).DataFrame({"key": index % KEYS, "value": index, "flag": index % 3})


def weights(backend: str) -> Any:
    import numpy

    keys = numpy.arange(KEYS, dtype="int64")
    return _library(backend).DataFrame({"key": keys, "weight": keys * 7})


def partitions_for(rows: int, workers: int | None = None) -> int:
    """The cluster's published partitioning (dask_gpu_verify.partitions) for this frame (4 int64 columns), never
    more partitions than rows: at least one per worker, so every GPU computes a part."""
    return max(1, min(rows, partitions.count(rows * 4 * 8, workers)))


def build(rows: int, backend: str, parts: int) -> Any:
    """The check's graph: a dask data frame (cuDF or pandas partitions) of the result, one row per key."""
    import dask.dataframe as dd

    step = -(-rows // parts)
    bounds = [(start, min(start + step, rows)) for start in range(0, rows, step)]
    frame = dd.from_map(part, bounds, backend=backend, meta=part((0, 0), backend))
    kept = frame[frame["flag"] != 0]
    grouped = kept.groupby("key").agg({"value": "sum", "flag": "count"}).reset_index()
    grouped.columns = ["key", "total", "rows"]
    joined = grouped.merge(dd.from_pandas(weights(backend), npartitions=1), on="key", shuffle_method="tasks")
    joined["score"] = joined["total"] * joined["weight"]
    return joined[COLUMNS]


def expected(rows: int) -> Any:
    """The answer, with pandas on the client."""
    import pandas

    frame = part((0, rows), "pandas")
    kept = frame[frame["flag"] != 0]
    grouped = kept.groupby("key").agg(total=("value", "sum"), rows=("flag", "count")).reset_index()
    joined = grouped.merge(weights("pandas"), on="key")
    joined["score"] = joined["total"] * joined["weight"]
    if not len(joined):
        return pandas.DataFrame(columns=COLUMNS)
    return joined[COLUMNS].sort_values("key").reset_index(drop=True).astype("int64")


def run(client: Any, backend: str, rows: int = DEFAULT_ROWS) -> dict[str, Any]:
    """Build, compute and compare; {"backend", "rows", "groups", "seconds", "exact", "error"}."""
    import dask

    parts = partitions_for(rows, len(client.scheduler_info(n_workers=-1)["workers"]))
    result: dict[str, Any] = {"backend": backend, "rows": rows, "partitions": parts, "error": None}
    try:
        with dask.config.set({"dataframe.shuffle.method": "tasks"}):
            graph = build(rows, backend, parts)
            started = time.monotonic()
            got = client.compute(graph).result()
            result["seconds"] = round(time.monotonic() - started, 3)
    except Exception as error:  # reported as a finding by the caller
        result["error"] = f"{type(error).__name__}: {error}"
        return result
    if backend == "cudf":
        got = got.to_pandas()
    got = got.sort_values("key").reset_index(drop=True).astype("int64")
    want = expected(rows)
    result["groups"] = len(got)
    result["exact"] = bool(len(got) == len(want) and (got.to_numpy() == want.to_numpy()).all())
    return result
