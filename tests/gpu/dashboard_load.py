#!/usr/bin/env python3
"""Give the dashboard's GPU pages something to show (tests/gpu/gpu-proof-dashboard.sh): on the one dask-cuda worker,
hold a CuPy array of HOLD_GIB GiB (a task's result, kept while this client lives) and keep the GPU busy with float32
matrix products for BUSY_SECONDS. Once both are under way, write READY (JSON: the worker, the bytes held, the time);
then wait for the busy task, or to be stopped.

    dashboard_load.py --scheduler tcp://127.0.0.1:8786 --hold-gib 8 --busy-seconds 120 --ready FILE
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from distributed import Client


def hold(nbytes: int) -> Any:
    import cupy

    return cupy.ones(nbytes // 4, dtype=cupy.float32)


def held_bytes(array: Any) -> int:
    return int(array.nbytes)


def busy(seconds: float, n: int = 8192) -> dict[str, float]:
    import cupy

    a = cupy.random.random((n, n), dtype=cupy.float32)
    end = time.monotonic() + seconds
    products = 0
    while time.monotonic() < end:
        for _ in range(20):
            a @ a  # noqa: B018 - the work is the point
        cupy.cuda.Device().synchronize()
        products += 20
    return {"products": products, "tflops": 2 * n**3 * products / seconds / 1e12}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scheduler", default="tcp://127.0.0.1:8786")
    parser.add_argument("--hold-gib", type=float, default=8)
    parser.add_argument("--busy-seconds", type=float, default=120)
    parser.add_argument("--ready", type=Path, required=True)
    args = parser.parse_args()
    with Client(args.scheduler, timeout=60) as client:  # type: ignore[no-untyped-call]
        client.wait_for_workers(1, timeout=120)
        worker = next(iter(client.scheduler_info()["workers"]))
        array = client.submit(hold, int(args.hold_gib * 2**30), workers=[worker], pure=False)
        nbytes = client.submit(held_bytes, array, workers=[worker]).result(timeout=120)
        load = client.submit(busy, args.busy_seconds, workers=[worker], pure=False)
        time.sleep(3)  # the products under way, a heartbeat or two with their utilisation
        args.ready.write_text(json.dumps({"worker": worker, "held_bytes": nbytes, "busy_seconds": args.busy_seconds,
                                          "ready_at": time.time()}) + "\n")
        print(f"holding {nbytes} bytes on {worker}, busy for {args.busy_seconds:.0f} s", flush=True)
        print(json.dumps(load.result(timeout=args.busy_seconds + 60)), flush=True)
        del array
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
