#!/usr/bin/env python3
"""The workers' GPU series (dask_gpu_verify.gpu_metrics) on real GPUs, through a running cluster: every GPU
worker's /metrics carries its own GPU (UUID distinct per worker, all the machine's GPUs), utilisation rises above
50 % while a matmul loop runs on that worker, memory used grows by what CuPy allocated (within 5 %; where the worker
says CuPy allocates from an RMM pool, memory used stays put within 5 % of the array instead: the pool was counted
when it was made; 0.00 GiB on 4 x H200 with --rmm-pool-size 0.5), memory used in /metrics equals what NVML, read
by the probe itself, says of that GPU with the array held (within 5 % of the array, pool or not), and a scrape takes
under 50 ms.
Exit status 0 when every check passes.

    tests/gpu/gpu_metrics_probe.py SCHEDULER_ADDRESS [--first-port N]
    (TLS from the DASK_DISTRIBUTED__COMM__TLS__* environment; --first-port: the workers' HTTP ports must be
    N, N+1, ... one per GPU, the fixed ports of the bundle's GPU workers)
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
import urllib.request
from typing import Any

import pynvml
from distributed import Client, wait
from prometheus_client.parser import text_string_to_metric_families

ALLOCATE = 8 << 30  # bytes CuPy allocates on the worker for the memory check


def scrape(port: int) -> tuple[dict[str, float], dict[str, str], float]:
    started = time.perf_counter()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    seconds = time.perf_counter() - started
    values, labels = {}, {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.startswith("dask_worker_gpu_") and not sample.labels.get("type"):
                values[sample.name] = sample.value
                labels = dict(sample.labels)
    return values, labels, seconds


def busy(seconds: float) -> int:
    import cupy

    x = cupy.random.random((8192, 8192))
    end, loops = time.monotonic() + seconds, 0
    while time.monotonic() < end:
        x = x @ x
        x /= float(cupy.abs(x).max())
        loops += 1
    return loops


def hold(nbytes: int) -> Any:
    import cupy

    return cupy.ones(nbytes // 8, dtype="f8")


def allocator() -> str:
    """Where CuPy's allocations come from on this worker: "rmm-pool", "rmm" or "cupy"."""
    import cupy

    name = getattr(cupy.cuda.get_allocator(), "__module__", "") or ""
    if not name.startswith("rmm"):
        return "cupy"
    import rmm

    return "rmm-pool" if "Pool" in type(rmm.mr.get_current_device_resource()).__name__ else "rmm"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scheduler")
    parser.add_argument("--first-port", type=int, help="the workers' HTTP ports must be N, N+1, ... (one per GPU)")
    parser.add_argument("--gpus", default="all",
                        help="the GPUs the cluster's workers were given, by index (0,1) or all (default)")
    args = parser.parse_args()
    pynvml.nvmlInit()
    given = (range(pynvml.nvmlDeviceGetCount()) if args.gpus == "all"
             else [int(index) for index in args.gpus.split(",")])
    machine = sorted(pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(i)) for i in given)
    machine = [uuid.decode() if isinstance(uuid, bytes) else uuid for uuid in machine]
    status = 0

    def check(ok: bool, text: str) -> None:
        nonlocal status
        print(f"{'PASS' if ok else 'FAIL'} {text}", flush=True)
        status |= 0 if ok else 1

    with Client(args.scheduler, timeout=30) as client:
        ports = client.run(lambda dask_worker: dask_worker.http_server.port)
        if args.first_port is not None:
            want = list(range(args.first_port, args.first_port + len(machine)))
            check(sorted(ports.values()) == want, f"worker HTTP ports {sorted(ports.values())} (want {want})")
        seen: dict[str, str] = {}
        for address, port in sorted(ports.items()):
            values, labels, _ = scrape(port)
            seen[address] = labels.get("gpu_uuid", "")
            print(f"{address} /metrics :{port}: {labels} "
                  + ", ".join(f"{k.removeprefix('dask_worker_gpu_')}={v:g}" for k, v in sorted(values.items())))
        check(sorted(seen.values()) == machine, f"every GPU given once, on its own worker: {seen} (given: {machine})")
        for address, port in sorted(ports.items()):
            times = [scrape(port)[2] for _ in range(20)]
            check(statistics.median(times) < 0.05, f"{address}: scrape median {statistics.median(times) * 1e3:.1f} ms, "
                                                   f"max {max(times) * 1e3:.1f} ms (target < 50 ms)")
            before = scrape(port)[0]["dask_worker_gpu_memory_used_bytes"]
            held = client.submit(hold, ALLOCATE, workers=[address], pure=False)
            wait(held, timeout=60)  # the array stays on the worker
            values, labels, _ = scrape(port)
            after = values["dask_worker_gpu_memory_used_bytes"]
            device = pynvml.nvmlDeviceGetHandleByUUID(labels.get("gpu_uuid", "").encode())
            nvml_used = float(pynvml.nvmlDeviceGetMemoryInfo(device).used)
            check(abs(after - nvml_used) <= 0.05 * ALLOCATE,
                  f"{address}: memory used {after / 2**30:.2f} GiB in /metrics, {nvml_used / 2**30:.2f} GiB by NVML "
                  "read here, with the array held")
            delta = after - before
            source = client.submit(allocator, workers=[address], pure=False).result()
            grow = 0 if source == "rmm-pool" else ALLOCATE
            check(abs(delta - grow) <= 0.05 * ALLOCATE,
                  f"{address}: memory used grew by {delta / 2**30:.2f} GiB for a {ALLOCATE / 2**30:.0f} GiB CuPy array "
                  f"(CuPy allocates from {source}: expected {grow / 2**30:.0f} GiB)")
            del held
            peak = 0.0
            work = client.submit(busy, 4.0, workers=[address], pure=False)
            while not work.done():
                peak = max(peak, scrape(port)[0].get("dask_worker_gpu_utilization_ratio", 0.0))
                time.sleep(0.25)
            check(peak > 0.5, f"{address}: utilisation peaked at {peak:.0%} during {work.result()} matmul loops")
    return status


if __name__ == "__main__":
    sys.exit(main())
