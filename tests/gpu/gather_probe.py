#!/usr/bin/env python3
"""The persist-then-compute client of issue 11 against a running cluster, through the client address (TLS from
the DASK_DISTRIBUTED__COMM__TLS__* environment): CuPy arrays persisted on the GPU workers, then results
gathered through the scheduler, as a CuPy array and as a NumPy array. Exit status 0 when every case returns the
exact answer.

    tests/gpu/gather_probe.py SCHEDULER_ADDRESS [--without-preload]

--without-preload first undoes the scheduler's dask_gpu_verify.host_frames preload (its connections ask workers
for device buffers again, distributed's default) and reports what happens then; the preload's settings are put
back before the script ends.
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from typing import Any

import cupy
import dask.array as da
import numpy as np
from distributed import Client


def set_scheduler_serializers(dask_scheduler: Any, serializers: list[str] | None) -> list[str] | None:
    before = dask_scheduler.rpc.serializers
    dask_scheduler.rpc.serializers = serializers
    dask_scheduler.rpc.deserializers = serializers
    return list(before) if before else None


def cases(client: Client) -> list[tuple[str, bool, str]]:
    """Each case's (name, exact answer, detail); a failure is a row, never an exception."""
    results = []
    try:
        rng = da.random.RandomState(0, RandomState=cupy.random.RandomState)
        x = rng.random_sample((8000, 8000), chunks=(2000, 2000)).persist()
        started = time.perf_counter()
        scalar = client.compute((x + x.T).sum()).result(timeout=60)  # a 0-d CuPy array
        expected = float(cupy.asnumpy(scalar))
        results.append(("scalar", expected > 0, f"{type(scalar).__module__}.{type(scalar).__name__} sum "
                                                f"{expected:.3f} in {time.perf_counter() - started:.2f} s"))
    except Exception as error:  # noqa: BLE001 - the failure is the finding
        return [("scalar", False, f"{type(error).__name__}: {error}"[:300])]
    for name, graph, host in (("cupy block", (x + x.T)[:2000, :2000], False),
                              ("numpy block", (x + x.T)[:2000, :2000].map_blocks(cupy.asnumpy), True)):
        started = time.perf_counter()
        try:
            block = client.compute(graph).result(timeout=60)
            total = float(np.asarray(block if host else cupy.asnumpy(block)).sum())
            direct = float(cupy.asnumpy((x[:2000, :2000] + x.T[:2000, :2000]).sum().compute()))
            # host and device sums add in different orders: equal to the last few bits
            ok = isinstance(block, np.ndarray if host else cupy.ndarray) and math.isclose(total, direct, rel_tol=1e-9)
            results.append((name, ok, f"{type(block).__module__}.{type(block).__name__} sum {total:.6f} "
                                      f"(expected {direct:.6f}) in {time.perf_counter() - started:.2f} s"))
        except Exception as error:  # noqa: BLE001 - the failure is the finding
            results.append((name, False, f"{type(error).__name__}: {error}"[:300]))
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scheduler")
    parser.add_argument("--without-preload", action="store_true")
    args = parser.parse_args()
    status = 0
    with Client(args.scheduler, timeout=30) as client:
        before = client.run_on_scheduler(lambda dask_scheduler: dask_scheduler.rpc.serializers)
        print(f"scheduler connections' serializers (as deployed): {before}")
        for name, ok, detail in cases(client):
            print(f"{'PASS' if ok else 'FAIL'} as deployed: {name}: {detail}")
            status |= 0 if ok else 1
        if args.without_preload:  # what the preload prevents: reported, not counted
            client.run_on_scheduler(set_scheduler_serializers, serializers=None)
            try:
                for name, ok, detail in cases(client):
                    print(f"{'pass' if ok else 'fail'} without the preload: {name}: {detail}")
            finally:
                client.run_on_scheduler(set_scheduler_serializers, serializers=before)
    return status


if __name__ == "__main__":
    sys.exit(main())
