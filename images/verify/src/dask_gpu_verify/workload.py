"""A workload whose answer is known in closed form.

x[i, j] = i + 2j (n x n, fp64, square chunks of c), z = x + x.T (so z[i, j] = 3(i + j); this
moves blocks between workers), then for every block B of z the sum of B @ B.T (2 c^3 flops per
task, tens of milliseconds of GPU time at c = 8192). The total is computed exactly with Python
integers from the formula below and compared with what the cluster returns.
"""
from __future__ import annotations

import importlib
from typing import Any

DEFAULTS = {"cupy": (32768, 8192), "numpy": (2048, 512)}  # (n, chunk) per backend


def expected_total(n: int, chunk: int) -> int:
    """Sum over row blocks R of sum_j (3 S_R + 3 m j)^2, where S_R is the sum of R's row indices
    and m its row count: the sum of every entry of B @ B.T over the blocks B in row block R."""
    s1 = n * (n - 1) // 2                    # sum of j
    s2 = (n - 1) * n * (2 * n - 1) // 6      # sum of j^2
    total = 0
    for r0 in range(0, n, chunk):
        m = min(chunk, n - r0)
        s_rows = m * r0 + m * (m - 1) // 2
        total += 9 * (n * s_rows * s_rows + 2 * s_rows * m * s1 + m * m * s2)
    return total


def make_block(backend: str, block_info: dict[Any, Any] | None = None) -> Any:
    xp = importlib.import_module(backend)
    assert block_info is not None
    (r0, r1), (c0, c1) = block_info[None]["array-location"]
    rows = xp.arange(r0, r1, dtype=xp.float64)[:, None]
    cols = xp.arange(c0, c1, dtype=xp.float64)[None, :]
    return rows + 2 * cols


def gram_sum(block: Any) -> Any:
    """Sum of every entry of block @ block.T, kept as a 1x1 array so Dask can reduce it."""
    return (block @ block.T).sum().reshape(1, 1)


def to_float(value: Any) -> float:
    """Bring a 0-d NumPy or CuPy value back to the host as a Python float, on the worker."""
    return float(value.get() if hasattr(value, "get") else value)


def client_meta(backend: str) -> Any:
    """An empty array of the chunk type when the client can make one, else NumPy's.

    A client needs no GPU: a controller without CuPy, or a client container given no GPU (CuPy imports there,
    but allocating fails with cudaErrorInsufficientDriver or cudaErrorNoDevice), gets NumPy's meta; the blocks
    are still made and reduced on the workers with the backend.
    """
    import numpy

    try:
        xp = importlib.import_module(backend)
        return xp.empty((0, 0), dtype=xp.float64)
    except Exception:  # ImportError, or CuPy's CUDARuntimeError without a usable GPU
        return numpy.empty((0, 0), dtype=numpy.float64)


def build(n: int, chunk: int, backend: str) -> Any:
    """The lazy Dask graph for the workload; compute it to get a float."""
    import dask.array as da
    from dask.delayed import delayed

    meta = client_meta(backend)
    chunks = ((chunk,) * (n // chunk) + ((n % chunk,) if n % chunk else ()),) * 2
    x = da.map_blocks(make_block, backend, chunks=chunks, dtype="f8", meta=meta, name=f"verify-x-{n}-{chunk}")
    z = x + x.T
    partial = z.map_blocks(gram_sum, chunks=(1, 1), dtype="f8")
    return delayed(to_float)(partial.sum())


def task_count(n: int, chunk: int) -> int:
    blocks = -(-n // chunk)
    return blocks * blocks
