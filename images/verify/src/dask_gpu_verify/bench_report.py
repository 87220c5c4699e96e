"""The benchmark report as Markdown and as a self-contained HTML page with an SVG bar chart."""
from __future__ import annotations

import html as html_lib
import statistics
from typing import Any

# Data-sheet figures (SXM parts): HBM GB/s, fp64 and fp32 TFLOP/s (fp64 with tensor cores).
SPECS = {"H200": (4800.0, 67.0, 67.0), "H100": (3350.0, 67.0, 67.0), "A100": (2039.0, 19.5, 19.5)}


def spec_for(gpu_name: str) -> tuple[float, float, float] | None:
    return next((spec for key, spec in SPECS.items() if key in gpu_name), None)


def fmt(value: Any, digits: int | None = None) -> str:
    """A number with `digits` decimals, or by default three significant figures (0.0123, 4.56, 4,343)."""
    if not isinstance(value, (int, float)):
        return "-"
    if digits is None:
        digits = 0 if abs(value) >= 100 else 1 if abs(value) >= 10 else 2 if abs(value) >= 1 else 3
    return f"{value:,.{digits}f}"


def pct(value: float, limit: float | None) -> str:
    return f" ({100 * value / limit:.0f} %)" if limit else ""


def baseline_means(report: dict[str, Any]) -> dict[str, float]:
    rows = list(report["baselines"].values())
    return {key: statistics.mean(row[key] for row in rows) for key in rows[0]} if rows else {}


def markdown(report: dict[str, Any]) -> str:
    v = report["versions"]
    lines = [f"# Dask GPU benchmark{': ' + report['label'] if report.get('label') else ''}", "",
             f"Scheduler `{report['scheduler']}`, {len(report['workers'])} workers, backend {report['backend']}, "
             f"{report['when']}. dask {v.get('dask')}, distributed {v.get('distributed')}, "
             f"dask-cuda {v.get('dask-cuda')}, {v.get('cupy') or 'no CuPy'}.", ""]
    expected = report.get("expected")
    if expected:
        hosts = ", ".join(f"{host} {count}" for host, count in sorted(expected["per_host"].items()))
        lines += [f"Workers: {expected['registered']} registered, {expected['workers']} expected"
                  f"{' (per host: ' + hosts + ')' if hosts else ''}; {len(report['workers'])} benchmarked.", ""]
    for address, info in sorted(report.get("left_out", {}).items()):
        lines += [f"**Not benchmarked**: worker {info.get('name') or address} on {info.get('host')}: {info['reason']}.",
                  ""]
    if report.get("ready_seconds") is not None:
        lines += [f"Time to ready after the last deploy: {report['ready_seconds']:.1f} s.", ""]
    lines += ["## Per device: raw baselines inside each worker process, against the data sheet", "",
              "| worker | device | copy GB/s | fp64 sum GB/s | fp64 matmul TFLOP/s | fp32 matmul TFLOP/s |",
              "| --- | --- | --- | --- | --- | --- |"]
    for address, base in report["baselines"].items():
        gpu = report["workers"][address]["gpu"]
        name = gpu.get("name", "CPU")
        spec = spec_for(name)
        lines.append(f"| {report['workers'][address]['name']} | {name} {gpu.get('uuid', '')} | "
                     f"{fmt(base['copy_gbps'])}{pct(base['copy_gbps'], spec and spec[0])} | "
                     f"{fmt(base['sum_gbps'])}{pct(base['sum_gbps'], spec and spec[0])} | "
                     f"{fmt(base['fp64_tflops'])}{pct(base['fp64_tflops'], spec and spec[1])} | "
                     f"{fmt(base['fp32_tflops'])}{pct(base['fp32_tflops'], spec and spec[2])} |")
    means = baseline_means(report)
    lines += ["", "(%: of the data-sheet HBM bandwidth or peak TFLOP/s.)", "",
              "## Workloads through the scheduler: one worker, then all", "",
              "| workload | moves blocks | n / chunk | 1 worker s | all s | 1 worker | all | all / 1 | efficiency "
              "| per worker vs baseline | transfers MiB/s (GiB) |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for row in report["scaling"]:
        one, every = row["one"], row["all"]
        baseline = means.get("copy_gbps" if row["workload"] == "transpose_sum" else "fp64_tflops")
        versus = f"{100 * every['per_worker'] / baseline:.0f} % of {fmt(baseline)}" if baseline else "-"
        lines.append(f"| {row['workload']} | {'yes' if row['transfers_between_workers'] else 'no'} | "
                     f"{row['n']} / {row['chunk']} | {fmt(one['seconds'], 3)} | {fmt(every['seconds'], 3)} | "
                     f"{fmt(one['throughput'])} {row['unit']} | {fmt(every['throughput'])} {row['unit']} | "
                     f"{row['ratio']:.2f} | {100 * row['efficiency']:.0f} % | {versus} | "
                     f"{fmt(every['transfer_mib_per_s'], 0)} ({fmt(every['transferred_gib'], 2)}) |")
    if report["dask_cuda"]:
        lines += ["", "## dask-cuda's own benchmarks through this cluster", "",
                  "| benchmark | size | median s | throughput GB/s | transfers MiB/s (GiB) | command |",
                  "| --- | --- | --- | --- | --- | --- |"]
        for row in report["dask_cuda"]:
            name = f"{row['benchmark']} {row['operation']}"
            if "skipped" in row or "error" in row:
                why = f"skipped: {row['skipped']}" if "skipped" in row else f"failed: {' '.join(row['error'])[:120]}"
                lines.append(f"| {name} | {row['size']} | {why} | | | `{row['command']}` |")
                continue
            lines.append(f"| {name} | {row['size']} | {fmt(row['seconds'], 3)} | {fmt(row['throughput_gbps'], 1)} | "
                         f"{fmt(row['transfer_mib_per_s'], 0)} ({fmt(row['transferred_gib'], 2)}) | "
                         f"`{row['command']}` |")
    lines += etl_lines(report.get("etl"))
    lines += polars_lines(report.get("polars"))
    o = report["overhead"]
    lines += ["", "## Scheduler", "", "| no-op tasks per second | round trip (submit to result) |", "| --- | --- |",
              f"| {fmt(o['tasks_per_s'], 0)} ({o['tasks']} tasks) | {fmt(o['round_trip_ms'], 2)} ms |", ""]
    return "\n".join(lines)


def etl_lines(etl: dict[str, Any] | None) -> list[str]:
    """The seeds-like ETL: the cluster against pandas on the benchmark host's CPUs, pass 2, step by step."""
    if not etl:
        return []
    lines = ["", f"## Data-frame ETL (seeds-like): {etl['rows']:,} rows in {etl['files']} CSV files, "
                 f"the cluster ({etl['backend']}) against pandas on this host's CPUs", ""]
    if "skipped" in etl:
        return lines + [f"Skipped: {etl['skipped']}."]
    steps = ("read", "filter", "groupby", "merge", "broadcast_merge", "aggregate")
    lines += [f"| where | workers | pass 2 s | rows/s | {' | '.join(steps)} | checks |",
              "| --- | --- | --- | --- | " + "--- | " * len(steps) + "--- |"]
    for where, run in (("cluster", etl["cluster"]), (f"pandas, {etl['cpu_workers']} processes", etl["cpu"])):
        lines.append(f"| {where} | {run['workers']} | {fmt(run['seconds'], 3)} | {fmt(run['rows_per_s'], 0)} | "
                     + " | ".join(fmt(run["steps"][step], 3) for step in steps)
                     + f" | `{run['check_digest'][:16]}` |")
    verdict = "equal" if etl["checks_equal"] else "DIFFERENT: FAILED"
    return lines + ["", f"The cluster is {etl['cpu_over_cluster']:.2f} x as fast as pandas on this host; check values "
                        f"{verdict}."]


def polars_lines(polars: dict[str, Any] | None) -> list[str]:
    """The PDS-H-like queries through DaskEngine against CPU Polars (gpu_polars.benchmark's report)."""
    if not polars:
        return []
    lines = ["", "## Polars on the GPUs (cudf-polars DaskEngine), PDS-H-like queries", ""]
    if polars.get("status") == "skipped":
        return lines + [f"Skipped: {polars['reason']}."]
    data = polars["data"]
    threads = (polars.get("cpu") or {}).get("threads", "?")
    lines += [f"Scale {data['scale']:g} ({data['rows']['lineitem']:,} line items, {data['bytes'] / 1e9:.1f} GB of "
              f"Parquet), {polars['workers']} GPU workers, engine start {polars['engine_start_seconds']:.2f} s; CPU "
              f"Polars on {threads} threads of a worker host. GPU times: the median of {polars['passes']} passes "
              "after a first; CPU Polars: one pass after a first.", "",
              "| query | GPUs s | CPU Polars s | CPU / GPUs | result |", "| --- | --- | --- | --- | --- |"]
    cpu = polars.get("cpu") or {}
    for name, entry in polars["gpu"].items():
        if "error" in entry:
            lines.append(f"| {name} | failed: {entry['error']} | | | |")
            continue
        other = cpu.get(name) or {}
        same = "equal" if other.get("digest") == entry["digest"] else ("-" if not other else "DIFFERENT")
        lines.append(f"| {name} | {fmt(entry['median'], 3)} | {fmt(other.get('median'), 3)} | "
                     f"{fmt((polars.get('ratios') or {}).get(name), 2)} | {same} |")
    if polars.get("status") == "failed":
        lines += ["", f"FAILED: {polars.get('reason')}"]
    return lines


def bars(title: str, items: list[tuple[str, float, str]], unit: str) -> str:
    """A horizontal SVG bar chart: (label, value, colour) per bar."""
    top = max((value for _, value, _ in items), default=1.0) or 1.0
    height = 26 * len(items) + 40
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="760" height="{height}" role="img">',
             f'<text x="0" y="16" font-weight="bold">{html_lib.escape(title)}</text>']
    for i, (label, value, colour) in enumerate(items):
        y = 30 + 26 * i
        width = 420 * value / top
        parts += [f'<text x="0" y="{y + 14}" font-size="12">{html_lib.escape(label)}</text>',
                  f'<rect x="250" y="{y}" width="{width:.1f}" height="18" fill="{colour}"/>',
                  f'<text x="{255 + width:.1f}" y="{y + 14}" font-size="12">{value:,.1f} {unit}</text>']
    parts.append("</svg>")
    return "\n".join(parts)


def html(report: dict[str, Any], markdown_text: str) -> str:
    """Achieved against baseline per GPU, measured in the same run, plus the Markdown report as text."""
    charts = []
    for workload, key, unit in (("transpose_sum", "copy_gbps", "GB/s"), ("gram", "fp64_tflops", "TFLOP/s")):
        row = next((r for r in report["scaling"] if r["workload"] == workload), None)
        if row is None:
            continue
        items = [(f"baseline {report['workers'][a]['name']}", base[key], "#8da0cb")
                 for a, base in report["baselines"].items()]
        items += [(f"{workload}, 1 worker", row["one"]["per_worker"], "#66c2a5"),
                  (f"{workload}, all ({row['all']['workers']}), per worker", row["all"]["per_worker"], "#fc8d62")]
        charts.append(bars(f"{workload} per worker against the {key.replace('_', ' ')} baseline", items, unit))
    return ("<!doctype html><html><head><meta charset='utf-8'><title>Dask GPU benchmark</title></head><body>"
            + "".join(f"<div>{chart}</div>" for chart in charts)
            + f"<pre>{html_lib.escape(markdown_text)}</pre></body></html>\n")
