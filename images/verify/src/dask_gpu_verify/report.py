"""The verification report: a table for people and JSON for machines."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from .findings import Finding
from .gpu_affinity import ranges


@dataclass
class Report:
    scheduler: str
    backend: str = "unknown"
    gpu_required: bool = True
    workers: dict[str, dict[str, Any]] = field(default_factory=dict)
    versions: dict[str, Any] = field(default_factory=dict)
    workload: dict[str, Any] = field(default_factory=dict)
    frames: dict[str, Any] = field(default_factory=dict)
    polars: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.findings

    def cluster_bandwidth(self) -> dict[str, float]:
        totals = {"sum_gbps": 0.0, "copy_gbps": 0.0}
        for info in self.workers.values():
            for key in totals:
                totals[key] += info.get("bandwidth", {}).get(key, 0.0)
        return totals

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "scheduler": self.scheduler,
            "backend": self.backend,
            "gpu_required": self.gpu_required,
            "note": self.note(),
            "workers_registered": len(self.workers),
            "gpus": sorted(info["gpu"]["uuid"] for info in self.workers.values() if "uuid" in info.get("gpu", {})),
            "workers": self.workers,
            "versions": self.versions,
            "workload": self.workload,
            "frames": self.frames,
            "polars": self.polars,
            "bandwidth_cluster": self.cluster_bandwidth(),
            "timings": self.timings,
            "failures": [finding.to_dict() for finding in self.findings],
        }

    def note(self) -> str:
        if self.backend == "numpy":
            return "NO GPU WAS USED: the workload ran with NumPy on the CPU because GPUs were not required."
        if self.backend == "cupy":
            return "The workload ran with CuPy on the workers' GPUs."
        return "The workload did not run."

    def write_json(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n")

    def print_table(self, out: TextIO) -> None:
        unit = "GPU" if self.backend == "cupy" else "memory"
        print(f"Scheduler {self.scheduler}: {len(self.workers)} workers, backend {self.backend}", file=out)
        print(self.note(), file=out)
        rows = self.per_host_rows(unit) if len(self.workers) > PER_WORKER_ROWS else self.per_worker_rows(unit)
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        for row in rows:
            print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip(), file=out)
        totals = self.cluster_bandwidth()
        print(f"cluster {unit} bandwidth: sum {totals['sum_gbps']:.1f} GB/s, copy {totals['copy_gbps']:.1f} GB/s "
              "(all workers at once)", file=out)
        if self.versions.get("scheduler"):
            shown = ", ".join(f"{k} {v}" for k, v in sorted(self.versions["scheduler"].items()) if v)
            print(f"versions (scheduler): {shown}", file=out)
        if self.workload:
            load = self.workload
            print(f"workload n={load['n']} chunk={load['chunk']}: result {load.get('result')!r}, expected "
                  f"{load['expected']!r}, {load.get('seconds', float('nan')):.3f} s", file=out)
        if self.frames.get("backend") == "skipped":
            print(f"data frames: skipped, {self.frames['reason']}", file=out)
        elif self.frames and not self.frames.get("error"):
            frames = self.frames
            print(f"data frames ({frames['backend']}): {frames['rows']} rows in {frames['partitions']} partitions, "
                  f"{frames.get('groups')} groups, {'exact' if frames.get('exact') else 'WRONG'}, "
                  f"{frames.get('seconds', float('nan')):.3f} s", file=out)
        if self.polars.get("status") == "skipped":
            print(f"polars: skipped, {self.polars['reason']}", file=out)
        elif self.polars.get("ranks"):
            found = self.polars
            print(f"polars (DaskEngine): {found['rows']} rows on {found['ranks']} GPUs, {found['groups']} groups, "
                  f"{'exact' if found.get('equal') else 'WRONG'} against CPU Polars, engine start "
                  f"{found['engine_start_seconds']:.2f} s, query {found['query_seconds']:.3f} s", file=out)
        for finding in self.findings:
            print(finding.line(), file=out)
        print("PASS" if self.ok else f"FAILED: {len(self.findings)} check(s)", file=out)


    def per_worker_rows(self, unit: str) -> list[tuple[str, ...]]:
        rows: list[tuple[str, ...]] = [("host", "worker", "GPU", "UUID", f"{unit} sum GB/s", f"{unit} copy GB/s",
                                        "CPU cores (its GPU's)")]
        for address, info in sorted(self.workers.items(), key=lambda item: (item[1].get("hostname", ""), item[0])):
            gpu = info.get("gpu", {})
            bandwidth = info.get("bandwidth", {})
            rows.append((info.get("hostname", "?"), str(info.get("name", address)), gpu.get("name", "-"),
                         gpu.get("uuid", "-"), _gbps(bandwidth.get("sum_gbps")), _gbps(bandwidth.get("copy_gbps")),
                         _cores(info.get("gpu_health") or {})))
        return rows

    def per_host_rows(self, unit: str) -> list[tuple[str, ...]]:
        """A line per host (the JSON keeps every worker): its workers, GPUs, and the sum and slowest worker."""
        hosts: dict[str, list[dict[str, Any]]] = {}
        for info in self.workers.values():
            hosts.setdefault(str(info.get("hostname", "?")), []).append(info)
        rows: list[tuple[str, ...]] = [
            ("host", "workers", "GPUs", f"{unit} sum GB/s", f"slowest worker {unit} sum GB/s")]
        for host, infos in sorted(hosts.items()):
            sums = [info.get("bandwidth", {}).get("sum_gbps") for info in infos]
            measured = [value for value in sums if value is not None]
            gpus = sum(1 for info in infos if info.get("gpu", {}).get("uuid"))
            rows.append((host, str(len(infos)), str(gpus), _gbps(sum(measured) if measured else None),
                         _gbps(min(measured) if measured else None)))
        return rows


# More workers than this: the table has a line per host (the JSON report keeps every worker).
PER_WORKER_ROWS = 32


def _cores(health: dict[str, Any]) -> str:
    """The cores a GPU worker runs on, and in brackets those NVML names for its GPU: `0-15 (0-15)`."""
    own, gpu = health.get("worker_cores"), health.get("cpu_cores")
    if not own:
        return "-"
    return f"{ranges(own)} ({ranges(gpu) if gpu else '?'})"


def _gbps(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"
