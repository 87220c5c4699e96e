"""The closed form matches a direct computation, and the Dask graph gives it."""
from __future__ import annotations

import sys

import dask
import numpy as np
import pytest
from dask_gpu_verify import workload


@pytest.mark.parametrize(("n", "chunk"), [(8, 4), (10, 4), (12, 5), (64, 16), (7, 7)])
def test_closed_form_matches_direct_numpy(n: int, chunk: int) -> None:
    i = np.arange(n, dtype=np.float64)[:, None]
    j = np.arange(n, dtype=np.float64)[None, :]
    z = (i + 2 * j) + (i + 2 * j).T
    direct = 0.0
    for r0 in range(0, n, chunk):
        for c0 in range(0, n, chunk):
            block = z[r0:r0 + chunk, c0:c0 + chunk]
            direct += float((block @ block.T).sum())
    assert workload.expected_total(n, chunk) == direct


def test_dask_graph_gives_the_closed_form() -> None:
    graph = workload.build(96, 32, "numpy")
    assert dask.compute(graph, scheduler="sync")[0] == float(workload.expected_total(96, 32))


def test_task_count() -> None:
    assert workload.task_count(10, 4) == 9


def test_client_without_a_usable_gpu_gets_numpy_meta(monkeypatch: pytest.MonkeyPatch) -> None:
    """A client container given no GPU imports CuPy but cannot allocate: the graph still builds (issue 11)."""
    import types

    class CUDARuntimeError(RuntimeError):
        pass

    def empty(*_args: object, **_kwargs: object) -> None:
        raise CUDARuntimeError("cudaErrorInsufficientDriver: CUDA driver version is insufficient")

    fake = types.ModuleType("fakecupy")
    fake.empty = empty  # type: ignore[attr-defined]
    fake.float64 = "float64"  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fakecupy", fake)
    assert type(workload.client_meta("fakecupy")).__module__ == "numpy"
    assert type(workload.client_meta("no_such_backend")).__module__ == "numpy"
    assert workload.build(96, 32, "numpy").compute() == workload.expected_total(96, 32)
