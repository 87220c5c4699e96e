"""The fleet benchmark's report: a straight-line fit of each step's wall and controller CPU time against the host
count, projections to 100 and 1,000 hosts, a Markdown table and an SVG chart.

    tests/fleet/report.py reports/fleet/fleet.jsonl [--out reports/fleet]

The fit assumes what the runs show on one machine: a fixed part (the controller's own tasks, the image build, run-once
steps) plus a part per host, growing linearly. It does not know where the machine itself becomes the limit: all
hosts run on the controller's own cores here, so wall times at large N are the machine's, not a fleet's (a real fleet
runs each host's work on its own CPU; the controller's CPU time per host is the figure that carries over).

Rows that carry the machine's CPU time (fleet.py since it reads /proc/stat) also get an estimate of the wall time with
each host on a machine of its own, `own`: the wall time less the time the shared cores spent on the hosts' work
(hosts' CPU seconds / cores), scaled by how busy the cores were (`busy`, the machine's CPU seconds over wall x cores:
with idle cores, part of the hosts' work ran while the controller waited anyway), but never under the controller's
CPU seconds / cores nor one host's share of the hosts' CPU seconds; its projection is the line through those, but
never under the projected controller CPU seconds / cores. It assumes that a host does on its own machine
what it did here and that the network between hosts is not the limit; it is an estimate, not a measurement.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

PROJECT = (100, 1000)


def fit(points: list[tuple[float, float]]) -> tuple[float, float]:
    """(fixed, per host) of the least-squares line through the points; one point gives (0, y/x)."""
    if len(points) == 1:
        x, y = points[0]
        return 0.0, y / x
    n = len(points)
    mean_x, mean_y = sum(x for x, _ in points) / n, sum(y for _, y in points) / n
    spread = sum((x - mean_x) ** 2 for x, _ in points)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / spread
    return mean_y - slope * mean_x, slope


def own_wall(row: dict[str, Any]) -> float | None:
    """The estimated wall seconds of the step with each host on a machine of its own (see above); None without the
    machine's CPU time."""
    if "hosts_cpu_s" not in row or "cores" not in row:
        return None
    cores, hosts_cpu, busy = float(row["cores"]), float(row["hosts_cpu_s"]), min(float(row.get("busy", 1.0)), 1.0)
    return round(max(float(row["wall_s"]) - busy * hosts_cpu / cores, float(row["controller_cpu_s"]) / cores,
                     hosts_cpu / float(row["hosts"])), 3)


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """{step: {measured: {N: row}, wall: (a, b), cpu: (a, b), projected: {N: {wall_s, controller_cpu_s}}}}."""
    by_step: dict[str, dict[int, dict[str, Any]]] = defaultdict(dict)
    for row in rows:
        if row.get("rc") == 0:
            by_step[row["step"]][int(row["hosts"])] = row  # the last run of a step and N wins
    out: dict[str, Any] = {}
    for step, measured in by_step.items():
        wall = fit([(n, row["wall_s"]) for n, row in sorted(measured.items())])
        cpu = fit([(n, row["controller_cpu_s"]) for n, row in sorted(measured.items())])
        out[step] = {"measured": {n: measured[n] for n in sorted(measured)},
                     "wall_fit": [round(value, 3) for value in wall], "cpu_fit": [round(value, 3) for value in cpu],
                     "projected": {n: {"wall_s": round(wall[0] + wall[1] * n, 1),
                                       "controller_cpu_s": round(cpu[0] + cpu[1] * n, 1)} for n in PROJECT}}
        owns = [(n, own_wall(row)) for n, row in sorted(measured.items())]
        if owns and all(value is not None for _, value in owns):
            own = fit([(n, float(value)) for n, value in owns if value is not None])
            out[step]["own_wall"] = {n: round(float(value), 1) for n, value in owns if value is not None}
            out[step]["own_fit"] = [round(value, 3) for value in own]
            cores = max(float(row["cores"]) for row in measured.values())
            for n in PROJECT:  # the line, but never under the controller's projected CPU over its cores
                out[step]["projected"][n]["own_wall_s"] = round(max(own[0] + own[1] * n,
                                                                    (cpu[0] + cpu[1] * n) / cores), 1)
    return out


def markdown(result: dict[str, Any]) -> str:
    counts = sorted({n for step in result.values() for n in step["measured"]})
    head = ["step"] + [f"N={n} wall / CPU s" for n in counts] + ["fit: wall s", "fit: CPU s"] + \
        [f"{n} hosts (projected) wall / CPU" for n in PROJECT]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    owned = [step for step, data in result.items() if "own_fit" in data]
    for step, data in result.items():
        cells = [step]
        for n in counts:
            row = data["measured"].get(n)
            cells.append(f"{row['wall_s']} / {row['controller_cpu_s']}" if row else "-")
        cells += [f"{data['wall_fit'][0]:.1f} + {data['wall_fit'][1]:.2f} N",
                  f"{data['cpu_fit'][0]:.1f} + {data['cpu_fit'][1]:.2f} N"]
        cells += [f"{data['projected'][n]['wall_s']:.0f} / {data['projected'][n]['controller_cpu_s']:.0f}"
                  for n in PROJECT]
        lines.append("| " + " | ".join(cells) + " |")
    if owned:
        head = ["step"] + [f"N={n} busy / hosts' CPU s / own wall s" for n in counts] + ["fit: own wall s"] + \
            [f"{n} hosts (projected) own wall s" for n in PROJECT]
        lines += ["", "Each host on a machine of its own (estimated; tests/fleet/report.py says how):", "",
                  "| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
        for step in owned:
            data = result[step]
            cells = [step]
            for n in counts:
                row = data["measured"].get(n)
                cells.append(f"{row['busy']} / {row['hosts_cpu_s']} / {data['own_wall'][n]}" if row else "-")
            cells.append(f"{data['own_fit'][0]:.1f} + {data['own_fit'][1]:.2f} N")
            cells += [f"{data['projected'][n]['own_wall_s']:.0f}" for n in PROJECT]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def svg(result: dict[str, Any], width: int = 720, height: int = 420) -> str:
    """Wall seconds against hosts, one line per step (measured points joined, the fit dashed to the largest N)."""
    colours = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"]
    counts: list[int] = sorted({int(n) for step in result.values() for n in step["measured"]}) or [1]
    top_n = float(max(counts))
    top_s = max([float(row["wall_s"]) for step in result.values() for row in step["measured"].values()] + [1.0]) * 1.1
    left, bottom, right, upper = 60, height - 40, width - 160, 20

    def x(n: float) -> float:
        return left + (right - left) * n / top_n

    def y(s: float) -> float:
        return bottom - (bottom - upper) * s / top_s

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
             'font-size="12">', '<rect width="100%" height="100%" fill="white"/>',
             f'<line x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="black"/>',
             f'<line x1="{left}" y1="{bottom}" x2="{left}" y2="{upper}" stroke="black"/>',
             f'<text x="{(left + right) / 2}" y="{height - 8}" text-anchor="middle">hosts (N)</text>',
             f'<text x="14" y="{(upper + bottom) / 2}" transform="rotate(-90 14 {(upper + bottom) / 2})" '
             'text-anchor="middle">wall seconds</text>']
    for n in counts:
        parts.append(f'<text x="{x(n):.0f}" y="{bottom + 16}" text-anchor="middle">{n}</text>')
    for tick in range(5):
        value = top_s * tick / 4
        parts.append(f'<text x="{left - 6}" y="{y(value) + 4:.0f}" text-anchor="end">{value:.0f}</text>')
    for index, (step, data) in enumerate(result.items()):
        colour = colours[index % len(colours)]
        points = " ".join(f"{x(n):.1f},{y(row['wall_s']):.1f}" for n, row in data["measured"].items())
        parts.append(f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="2"/>')
        fixed, per = data["wall_fit"]
        parts.append(f'<line x1="{x(0):.1f}" y1="{y(fixed):.1f}" x2="{x(top_n):.1f}" y2="{y(fixed + per * top_n):.1f}" '
                     f'stroke="{colour}" stroke-dasharray="4 3"/>')
        parts.append(f'<text x="{right + 10}" y="{upper + 16 * index + 10}" fill="{colour}">{step} '
                     f'({fixed:.0f} + {per:.1f} s/host)</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("rows", type=Path, help="fleet.jsonl written by tests/fleet/fleet.py")
    parser.add_argument("--out", type=Path,
                        help="folder for fleet.json, fleet.md and fleet.svg (default: the rows' folder)")
    args = parser.parse_args(argv)
    rows = [json.loads(line) for line in args.rows.read_text().splitlines() if line.strip()]
    result = summary(rows)
    out = args.out or args.rows.parent
    out.mkdir(parents=True, exist_ok=True)
    (out / "fleet.json").write_text(json.dumps(result, indent=1) + "\n")
    (out / "fleet.md").write_text(markdown(result))
    (out / "fleet.svg").write_text(svg(result))
    sys.stdout.write(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
