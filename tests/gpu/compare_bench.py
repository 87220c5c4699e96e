#!/usr/bin/env python3
"""Compare the dask-gpu-bench reports of tests/gpu/gpu-proof-bench.sh: one Markdown summary.

    tests/gpu/compare_bench.py OUT_DIR [OUT_DIR ...]   (reads OUT_DIR/<configuration>/bench.json; later wins)

Every ratio divides figures of the same machine and the same proof run. Time ratios read "how many times
faster the first is" (> 1: faster).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def load(outs: list[Path]) -> dict[str, dict[str, Any]]:
    return {p.parent.name: json.loads(p.read_text()) for out in outs for p in sorted(out.glob("*/bench.json"))}


def workloads(report: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Seconds and transfer MiB/s per workload, all workers: our scaling workloads and dask-cuda's benchmarks
    (reports before the data frames name them local_cupy)."""
    found = {f"{row['workload']} (all workers)": {"s": row["all"]["seconds"], "mib": row["all"]["transfer_mib_per_s"]}
             for row in report["scaling"]}
    for row in report.get("dask_cuda", report.get("local_cupy", [])):
        if "seconds" in row:
            found[f"{row.get('benchmark', 'local_cupy')} {row['operation']}"] = {"s": row["seconds"],
                                                                                 "mib": row["transfer_mib_per_s"]}
    return found


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    return lines + ["| " + " | ".join(r) + " |" for r in rows]


def versus(reports: dict[str, dict[str, Any]], first: str, second: str, title: str) -> list[str]:
    if first not in reports or second not in reports:
        return []
    a, b = workloads(reports[first]), workloads(reports[second])
    rows = [[name, f"{a[name]['s']:.3f}", f"{b[name]['s']:.3f}", f"{b[name]['s'] / a[name]['s']:.2f}",
             f"{a[name]['mib']:,.0f} / {b[name]['mib']:,.0f}"] for name in a if name in b]
    return [f"### {title}", "", *table(["workload", f"{first} s", f"{second} s", f"{first} faster by",
                                        "transfers MiB/s"], rows), ""]


def main(outs: list[Path]) -> None:
    reports = load(outs)
    lines = ["# GPU proof: benchmark summary", ""]
    base = reports.get("bundle-tls") or next(iter(reports.values()), None)
    if base is None:
        print("no bench.json found")
        return
    lines += ["## Per GPU (bundle-tls run, inside each worker)", "",
              *table(["worker", "GPU", "copy GB/s", "fp64 sum GB/s", "fp64 matmul TFLOP/s", "fp32 matmul TFLOP/s"],
                     [[base["workers"][a]["name"], base["workers"][a]["gpu"].get("name", "?"),
                       f"{b['copy_gbps']:,.0f}", f"{b['sum_gbps']:,.0f}", f"{b['fp64_tflops']:.1f}",
                       f"{b['fp32_tflops']:.1f}"] for a, b in base["baselines"].items()]), ""]
    lines += ["## Every configuration", "",
              *table(["configuration", "workers", "ready s", "no-op tasks/s", "round trip ms",
                      *[name for name in workloads(base)]],
                     [[name, str(len(r["workers"])), f"{r.get('ready_seconds') or 0:.1f}",
                       f"{r['overhead']['tasks_per_s']:,.0f}", f"{r['overhead']['round_trip_ms']:.2f}",
                       *[f"{workloads(r).get(w, {}).get('s', float('nan')):.3f} s" for w in workloads(base)]]
                      for name, r in reports.items()]), ""]
    lines += ["## One worker against all, in the same run (dask-gpu-bench's restricted runs)", ""]
    rows = []
    for name, r in reports.items():
        for row in r["scaling"]:
            rows.append([name, row["workload"], "yes" if row["transfers_between_workers"] else "no",
                         f"{row['one']['seconds']:.3f}", f"{row['all']['seconds']:.3f} ({row['all']['workers']})",
                         f"{row['ratio']:.2f}", f"{100 * row['efficiency']:.0f} %",
                         f"{row['all']['transfer_mib_per_s']:,.0f}"])
    lines += table(["configuration", "workload", "moves blocks", "1 worker s", "all s (workers)", "throughput all / 1",
                    "efficiency", "transfers MiB/s"], rows) + [""]
    lines += ["## Comparisons", ""]
    lines += versus(reports, "bundle-tls", "bare-tcp", "Bundle (TLS) against bare dask-cuda defaults (TCP), all GPUs")
    lines += versus(reports, "bundle-tls-1gpu", "bare-tcp-1gpu", "Bundle against bare defaults, one GPU")
    lines += versus(reports, "bundle-tcp", "bare-tcp", "Bundle with TLS off against bare defaults (both TCP), all GPUs")
    lines += versus(reports, "bundle-tcp", "bundle-tls", "What TLS costs: bundle over TCP against TLS, all GPUs")
    lines += versus(reports, "bundle-ucx", "bundle-tls", "UCX against TCP/TLS, all GPUs")
    lines += versus(reports, "bundle-ucx", "bare-tcp", "Bundle UCX mode against bare defaults (TCP), all GPUs")
    lines += versus(reports, "bundle-tls-ucx", "bare-tcp", "Bundle tls-ucx against bare defaults (TCP), all GPUs")
    lines += versus(reports, "bundle-tls-ucx", "bundle-ucx", "tls-ucx against ucx, all GPUs")
    lines += versus(reports, "bundle-tls-ucx-1gpu", "bundle-tls-ucx",
                    "One GPU against all GPUs over tls-ucx (time ratio)")
    lines += versus(reports, "bundle-tls-1gpu", "bundle-tls", "One GPU against all GPUs over TCP/TLS (time ratio)")
    lines += versus(reports, "bundle-tls-1gpu", "bundle-ucx", "One GPU against all GPUs over UCX (time ratio)")
    lines += versus(reports, "bundle-tls-2threads-1gpu", "bundle-tls-1gpu", "2 threads per worker against 1, one GPU")
    lines += versus(reports, "bundle-tls-rmm-1gpu", "bundle-tls-1gpu",
                    "RMM pool + CuPy through RMM against none, one GPU")
    print("\n".join(lines))


if __name__ == "__main__":
    main([Path(arg) for arg in sys.argv[1:]])
