"""How a rolling restart cuts the worker hosts waiting for it into batches, and how long it is expected to take.

dask_worker_rolling_batch is a number of hosts ("2") or a share of the cluster's worker hosts ("25%", at least one
host); dask_worker_rolling_max_gpus caps the GPUs out at once (0: no cap; a host with more GPUs than the cap goes
alone). The expected time is the number of batches times the median time of the batches the controller's
reports/rolling.jsonl holds (every batch retires, restarts and registers one after another)."""
from __future__ import annotations

import json
import math
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

# Seconds a batch is taken to need when no earlier roll was measured (the sandbox's batches took 5-10 s; GPU hosts
# retiring GB of device data took 25-50 s on 2 x H200).
DEFAULT_BATCH_SECONDS = 60.0


def batch_size(setting: Any, worker_hosts: int) -> int:
    """Hosts per batch: never every worker host of a cluster that has more than one, so that the batch's workers
    always have others to hand their data to (a batch of 100 % or of more hosts than the cluster has would retire
    them all at once, their data nowhere to go)."""
    text = str(setting).strip()
    size = math.ceil(worker_hosts * int(text[:-1]) / 100) if text.endswith("%") else int(text)
    return max(1, min(size, worker_hosts - 1))


def holding(cluster: Mapping[str, Any], released: Sequence[str] = ()) -> list[str]:
    """The worker hosts that run workers now: all of them but those the autoscaler released (their units stopped)."""
    return [host for host in cluster.get("worker_hosts") or [] if host not in released]


def batches(pending: Sequence[str], cluster: Mapping[str, Any], settings: Mapping[str, Any],
            released: Sequence[str] = ()) -> list[list[str]]:
    """The pending hosts (in the order given) cut into batches of at most the batch size and the GPU cap; the size
    counts the hosts that run workers now, so a batch always leaves one of them to take its data."""
    size = batch_size(settings.get("dask_worker_rolling_batch") or 1, len(holding(cluster, released)) or 1)
    cap = int(settings.get("dask_worker_rolling_max_gpus") or 0)
    gpus = {host: int(count) for host, count in (cluster.get("workers_per_host") or {}).items()
            if host in (cluster.get("gpu_hosts") or [])}
    cut: list[list[str]] = []
    for host in pending:
        last = cut[-1] if cut else None
        fits = last is not None and len(last) < size and (
            not cap or sum(gpus.get(other, 0) for other in last) + gpus.get(host, 0) <= cap)
        if fits and last is not None:
            last.append(host)
        else:
            cut.append([host])
    return cut


def counts(batch: Sequence[str], cluster: Mapping[str, Any], released: Mapping[str, Any] | None = None) -> list[int]:
    """The workers each host of a batch registers after its restart: all of its workers but those the autoscaler
    released by GPU (dask_autoscale_by gpu: they stay stopped in the restarted container)."""
    per_host = cluster.get("workers_per_host") or {}
    return [max(int(per_host.get(host, 0)) - int((released or {}).get(host, 0)), 0) for host in batch]


def batch_seconds(report: str) -> float:
    """The median seconds of the batches in a rolling.jsonl report (DEFAULT_BATCH_SECONDS when it has none)."""
    try:
        rows = [json.loads(line) for line in Path(report).read_text().splitlines() if line.strip()]
    except (OSError, ValueError):
        rows = []
    spans = [float(row.get("retire_seconds", 0)) + float(row.get("restart_seconds", 0))
             + float(row.get("register_seconds", 0)) for row in rows if isinstance(row, dict)]
    return round(statistics.median(spans), 1) if spans else DEFAULT_BATCH_SECONDS


def plan(pending: Sequence[str], cluster: Mapping[str, Any], settings: Mapping[str, Any],
         released: Sequence[str] = ()) -> dict[str, Any]:
    """{batches, per_batch_s, expected_s, measured, retire}: what the run says before the first host restarts. retire
    is false when no other host runs workers (one worker host, or the others released by the autoscaler): a batch's
    data then has nowhere to go, so the batch restarts without waiting out a retirement that cannot move it."""
    cut = batches(pending, cluster, settings, released)
    report = f"{(cluster.get('paths') or {}).get('controller', '')}/reports/rolling.jsonl"
    per_batch = batch_seconds(report)
    return {"batches": cut, "per_batch_s": per_batch, "expected_s": round(per_batch * len(cut)),
            "measured": Path(report).is_file(), "retire": len(holding(cluster, released)) > 1}
