#!/usr/bin/env python3
"""An out-of-core dask-cudf merge with an exact, closed-form answer (tests/gpu/gpu-proof-spill.sh drives it).

    spill_merge.py argv LOCAL_DIR [--no-cudf-spill] [--memory-limit 100GiB] [--device-memory-limit 0.8]
        prints three lines: the scheduler's command line, the worker's (both from the bundle's spec builder,
        plugins/plugin_utils/spec.py) and the scheduler's/clients' extra environment (spec.spill_env)
    spill_merge.py run --scheduler ADDR --rows N --partitions P [--fanout M] --label NAME --jsonl FILE

The data: two frames of N rows each (P partitions of N/P rows), K = N/M keys.
    left  row i (0 <= i < N): key = ((i mod K) * A) mod K,  la = i
    right row j (0 <= j < N): key = ((j mod K) * B) mod K,  ra = j
A and B are primes larger than K, so each side holds every key exactly M times, in a different order. The inner merge
on `key` therefore has exactly M*M rows per key: M*N rows of (key, la, ra), 24 bytes each, against 16 bytes per input
row: left 16 N bytes, right 16 N, result 24 M N (M = 4: 128 N bytes in all, left, right and result live together).
The check (one task per result partition, no further shuffle: a hash-partitioned result holds every row of a key in
one partition) proves the result is the merge, not merely a frame of the right length:
  - every row is consistent: key = f_A(la) and key = f_B(ra);
  - every key in a partition has exactly M*M rows, and no (la, ra) pair occurs twice in a partition; since a key has
    only M left and M right rows, M*M distinct consistent pairs are exactly all of them;
  - the keys seen over all partitions number exactly K (every key present; a key split over two partitions would
    show fewer than M*M rows in each);
  - rows = M N, sum(la) = sum(ra) = M N (N - 1) / 2 (Python integers; per-partition sums fit in int64).
Reports timings, spill statistics of the worker (cuDF's spill manager; dask-cuda's DeviceHostFile), peak GPU memory
(NVML, as nvidia-smi) and peak host memory, sampled every 0.2 s, per phase, as one JSON line.
"""
from __future__ import annotations

import argparse
import json
import shlex
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
A = 2654435761  # primes above any K used here (K < 2**31): (x mod K) * A < 2**63
B = 2246822519


def bundle_argv(local_dir: str, cudf_spill: bool, memory_limit: str, device_memory_limit: str) -> list[str]:
    sys.path.insert(0, str(ROOT / "collections"))
    from ansible_collections.dask_gpu.bundle.plugins.plugin_utils import spec  # type: ignore

    scheduler = spec.scheduler_argv("127.0.0.1", 8786, "127.0.0.1:8787", "tcp", None, [])
    # As worker_spec builds it for one GPU host (dask_worker_nthreads 0 -> 1 thread per GPU worker), on loopback.
    worker = spec.worker_argv(True, "tcp://127.0.0.1:8786", host="127.0.0.1", name="spill-h100", nthreads=1,
                              memory_limit=memory_limit, local_dir=local_dir, death_timeout=60, http_port=8790,
                              device_memory_limit=device_memory_limit, cudf_spill=cudf_spill)
    env = spec.spill_env({"cudf_spill": cudf_spill})
    return [shlex.join(scheduler), shlex.join(worker), " ".join(f"{k}={v}" for k, v in env.items())]


def make_side(args: tuple) -> Any:
    """One partition of one side (runs on the worker)."""
    side, part, rows, nkeys, mult, backend = args
    start = part * rows
    if backend == "cudf":
        import cudf as xd
        ids = xd.Series(range(start, start + rows), dtype="int64")  # libcudf sequence: device memory through RMM
    else:
        import numpy as np
        import pandas as xd
        ids = xd.Series(np.arange(start, start + rows, dtype="int64"))
    keys = ((ids % nkeys) * mult) % nkeys
    return xd.DataFrame({"key": keys, "la" if side == "left" else "ra": ids})


CHECK_COLUMNS = ("rows", "keys", "bad_keys", "bad_left", "bad_right", "dup_pairs", "sum_la", "sum_ra")


def check_part(df: Any, nkeys: int, rows_total: int, fanout: int) -> Any:
    """One result partition's exact check figures (runs on the worker)."""
    xd = sys.modules[type(df).__module__.split(".")[0]]
    counts = df.groupby("key").size()
    figures = {
        "rows": len(df),
        "keys": len(counts),
        "bad_keys": int((counts != fanout * fanout).sum()),
        "bad_left": int(((((df["la"] % nkeys) * A) % nkeys) != df["key"]).sum()),
        "bad_right": int(((((df["ra"] % nkeys) * B) % nkeys) != df["key"]).sum()),
        "dup_pairs": len(df) - int((df["la"] * rows_total + df["ra"]).nunique()),
        "sum_la": int(df["la"].sum()),
        "sum_ra": int(df["ra"].sum()),
    }
    return xd.DataFrame({k: [v] for k, v in figures.items()}, dtype="int64")


def spill_info(dask_worker: Any = None) -> dict[str, Any]:
    """The worker's spilling state: cuDF's spill manager (totals need --cudf-spill-stats 1) and dask-cuda's
    DeviceHostFile (object spilling by --device-memory-limit)."""
    import gc
    gc.collect()
    info: dict[str, Any] = {}
    try:
        from cudf.core.buffer.spill_manager import get_global_manager
        manager = get_global_manager()
    except ImportError:
        manager = None
    if manager is not None:
        buffers = manager.buffers()
        info["cudf"] = {
            "level": manager.statistics.level,
            "device_limit": manager._device_memory_limit,
            "totals": {f"{s}->{d}": [int(n), float(t)] for (s, d), (n, t) in manager.statistics.spill_totals.items()},
            "spilled_now": sum(b.size for b in buffers if b.is_spilled),
            "unspilled_now": sum(b.size for b in buffers if not b.is_spilled),
            "unspillable_now": sum(b.size for b in buffers if not (b.is_spilled or b.spillable)),
        }
    data = getattr(dask_worker, "data", None)
    if data is not None:
        dhf: dict[str, Any] = {"type": type(data).__name__}
        for name in ("device", "host", "disk", "others"):
            part = getattr(data, name, None)
            if part is not None:
                dhf[f"{name}_keys"] = len(part)
        buffers = (("device", getattr(data, "device_buffer", None)), ("host", getattr(data, "host_buffer", None)))
        for name, buf in buffers:
            fast = getattr(buf, "fast", None)
            if fast is not None and hasattr(fast, "total_weight"):
                dhf[f"{name}_bytes"] = int(fast.total_weight)
        info["data"] = dhf
    try:
        import psutil
        info["worker_rss"] = psutil.Process().memory_info().rss
    except ImportError:
        info["worker_rss"] = None
    return info


class Sampler(threading.Thread):
    """GPU 0's used memory (NVML, what nvidia-smi shows) and the host's used memory, every 0.2 s; peaks per phase."""

    def __init__(self, trace: Path | None, label: str) -> None:
        super().__init__(daemon=True)
        self.label = label
        self.phase = "start"
        self.peaks: dict[str, dict[str, int]] = {}
        self.stop = threading.Event()
        self.trace = trace.open("a") if trace else None
        try:
            import pynvml
            pynvml.nvmlInit()
            self.handle = pynvml.nvmlDeviceGetHandleByIndex(0)
            self.nvml = pynvml
        except Exception:  # noqa: BLE001  (no GPU: the CPU rehearsal)
            self.nvml = None

    def sample(self) -> None:
        import psutil
        gpu = self.nvml.nvmlDeviceGetMemoryInfo(self.handle).used if self.nvml else 0
        host = psutil.virtual_memory().used
        peak = self.peaks.setdefault(self.phase, {"gpu_used": 0, "host_used": 0})
        peak["gpu_used"], peak["host_used"] = max(peak["gpu_used"], gpu), max(peak["host_used"], host)
        if self.trace:
            self.trace.write(f"{time.time():.1f},{self.label},{self.phase},{gpu},{host}\n")

    def run(self) -> None:
        while not self.stop.wait(0.2):
            self.sample()


def run(args: argparse.Namespace) -> int:
    import dask
    import dask.dataframe as dd
    from distributed import Client, futures_of, wait

    backend = args.backend
    if backend == "cudf":
        import cudf as xd
        import dask_cudf  # noqa: F401  (registers the cuDF collections)
    else:
        import pandas as xd
    n, parts, fanout = args.rows, args.partitions, args.fanout
    if n % parts or n % fanout:
        raise SystemExit("rows must be a multiple of partitions and of fanout")
    nkeys, per_part = n // fanout, n // parts
    if not nkeys < A or nkeys >= 2**31:
        raise SystemExit("too many keys for the closed form")
    record: dict[str, Any] = {"label": args.label, "backend": backend, "rows_per_side": n, "partitions": parts,
                              "fanout": fanout, "keys": nkeys, "result_rows": fanout * n,
                              "bytes": {"left": 16 * n, "right": 16 * n, "result": 24 * fanout * n}}
    record["bytes"]["total"] = sum(record["bytes"].values())
    sampler = Sampler(Path(args.trace) if args.trace else None, args.label)
    sampler.start()
    times: dict[str, float] = {}
    status = "ok"
    try:
        with dask.config.set({"dataframe.shuffle.method": "tasks"}), \
                Client(args.scheduler, timeout=60) as client:
            client.wait_for_workers(1, timeout=120)
            record["spill_before"] = client.run(spill_info)
            meta = {side: make_side((side, 0, 0, 1, 1, backend)) for side in ("left", "right")}
            frames = {side: dd.from_map(make_side, [(side, p, per_part, nkeys, A if side == "left" else B, backend)
                                                    for p in range(parts)],
                                        meta=meta[side], divisions=[None] * (parts + 1), enforce_metadata=False)
                      for side in ("left", "right")}

            def phase(name: str, fn: Any) -> Any:
                sampler.phase = name
                t0 = time.perf_counter()
                out = fn()
                times[name] = round(time.perf_counter() - t0, 3)
                print(f"{args.label}: {name} {times[name]:.2f} s", flush=True)
                return out

            left, right = phase("generate", lambda: wait_all(wait, futures_of, frames["left"].persist(),
                                                             frames["right"].persist()))
            record["spill_after_generate"] = client.run(spill_info)
            merged = phase("merge", lambda: wait_all(wait, futures_of, left.merge(
                right, on="key", how="inner", shuffle_method="tasks", broadcast=False).persist())[0])
            record["result_partitions"] = merged.npartitions
            record["spill_after_merge"] = client.run(spill_info)
            check_meta = xd.DataFrame({c: [0] for c in CHECK_COLUMNS}, dtype="int64").iloc[:0]
            figures = phase("check", lambda: merged.map_partitions(check_part, nkeys, n, fanout,
                                                                   meta=check_meta).compute())
            figures = figures.to_pandas() if hasattr(figures, "to_pandas") else figures
            got = {c: sum(int(v) for v in figures[c]) for c in CHECK_COLUMNS}
            expected = {"rows": fanout * n, "keys": nkeys, "bad_keys": 0, "bad_left": 0, "bad_right": 0,
                        "dup_pairs": 0, "sum_la": fanout * n * (n - 1) // 2, "sum_ra": fanout * n * (n - 1) // 2}
            record["check"] = {"got": got, "expected": expected, "exact": got == expected}
            record["spill_after_check"] = client.run(spill_info)
            sampler.phase = "release"
            merged = left = right = None  # the client lets go of every key
            time.sleep(1)
            record["spill_after_release"] = client.run(spill_info)
            if not record["check"]["exact"]:
                status = "wrong answer"
    except Exception as error:  # noqa: BLE001  (recorded: a failed run is a result too)
        status = f"failed: {type(error).__name__}: {str(error)[:600]}"
    finally:
        sampler.stop.set()
        sampler.join()
    record["status"] = status
    record["seconds"] = times
    record["peaks"] = sampler.peaks
    if "merge" in times:
        record["merge_input_rows_per_s"] = round(2 * n / times["merge"])
        record["merge_output_rows_per_s"] = round(fanout * n / times["merge"])
        record["merge_bytes_per_s"] = round(record["bytes"]["total"] / times["merge"])
    with open(args.jsonl, "a") as out:
        out.write(json.dumps(record) + "\n")
    print(json.dumps({k: record.get(k) for k in ("label", "status", "seconds", "check", "peaks",
                                                 "merge_input_rows_per_s")}), flush=True)
    return 0 if status == "ok" else 1


def wait_all(wait: Any, futures_of: Any, *collections: Any) -> tuple:
    wait(list(collections))
    for c in collections:  # a failed task surfaces here, not as a hang
        for future in futures_of(c):
            if future.status == "error":
                raise future.exception()
    return collections


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    argv = sub.add_parser("argv")
    argv.add_argument("local_dir")
    argv.add_argument("--no-cudf-spill", action="store_true")
    argv.add_argument("--memory-limit", default="100GiB")
    argv.add_argument("--device-memory-limit", default="0.8")
    r = sub.add_parser("run")
    r.add_argument("--scheduler", required=True)
    r.add_argument("--rows", type=int, required=True)
    r.add_argument("--partitions", type=int, required=True)
    r.add_argument("--fanout", type=int, default=4)
    r.add_argument("--label", required=True)
    r.add_argument("--jsonl", required=True)
    r.add_argument("--trace", default="")
    r.add_argument("--backend", choices=("cudf", "pandas"), default="cudf")
    args = parser.parse_args()
    if args.command == "argv":
        print("\n".join(bundle_argv(args.local_dir, not args.no_cudf_spill, args.memory_limit,
                                    args.device_memory_limit)))
        return 0
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
