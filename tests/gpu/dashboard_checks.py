#!/usr/bin/env python3
"""Judge what headless Chromium saw on the dashboard's GPU pages (tests/gpu/gpu-proof-dashboard.sh), against the GPU
as nvidia-smi reports it and the load that tests/gpu/dashboard_load.py put on it. Reads OUT/browser.json (drive.py
--bokeh-facts), OUT/gpu.csv (nvidia-smi: index, name, uuid, memory.total MiB, driver), OUT/load.json and
OUT/nvidia-smi-during.csv; prints PASS/FAIL lines (also to OUT/checks.txt) and writes OUT/result.json. PNGs over
300 KB are reduced to a 256-colour palette (Pillow), and scaled down if that is not enough.

    dashboard_checks.py OUT
"""
from __future__ import annotations

import csv
import json
import re
import sys
from pathlib import Path
from typing import Any

from dask.utils import parse_bytes

PNG_LIMIT = 300_000
TITLE = re.compile(r"GPU Memory: (?P<used>[0-9.]+ [KMGT]?i?B) / (?P<total>[0-9.]+ [KMGT]?i?B)")


def shrink(png: Path) -> str:
    if png.stat().st_size <= PNG_LIMIT:
        return f"{png.name}: {png.stat().st_size} bytes"
    from PIL import Image

    before = png.stat().st_size
    image = Image.open(png).convert("RGB")
    scale = 1.0
    while True:
        size = (round(image.width * scale), round(image.height * scale))
        image.resize(size, Image.Resampling.LANCZOS).quantize(256).save(png, optimize=True)
        if png.stat().st_size <= PNG_LIMIT or scale < 0.4:
            return f"{png.name}: {before} -> {png.stat().st_size} bytes ({size[0]}x{size[1]}, 256 colours)"
        scale *= 0.8


def main(out: Path) -> int:
    seen = json.loads((out / "browser.json").read_text())
    gpu = next(csv.reader((out / "gpu.csv").read_text().splitlines(), skipinitialspace=True))
    total_mib = float(gpu[3].split()[0])
    load = json.loads((out / "load.json").read_text())
    during = list(csv.DictReader((out / "nvidia-smi-during.csv").read_text().splitlines(), skipinitialspace=True))
    smi_used = max((float(row["memory.used [MiB]"].split()[0]) for row in during), default=0.0)
    smi_util = max((float(row["utilization.gpu [%]"].split()[0]) for row in during), default=0.0)
    checks: list[tuple[bool, str]] = []
    pages: dict[str, Any] = {}
    for page, state in seen["dashboard"].items():
        facts = state.get("bokeh_facts", {})
        checks.append((bool(state.get("bokeh")) and state.get("canvases", 0) > 0 and "error" not in state,
                       f"/{page}: title {state.get('title')!r}, {state.get('canvases')} canvases, Bokeh document "
                       f"{'loaded' if state.get('bokeh') else 'MISSING'} in {state.get('seconds')} s"))
        summary: dict[str, Any] = {k: state.get(k) for k in ("title", "canvases", "seconds")}
        summary |= {k: facts.get(k) for k in ("titles", "sources", "plots", "text_mentions_gpu", "gpu_page_link")}
        pages[page] = summary
        source = (facts.get("sources") or [{}])[0]
        if page == "status":
            link = facts.get("gpu_page_link") or {}
            checks.append((bool(link) and bool(facts.get("text_mentions_gpu")),
                           f"/status: the navigation links the GPU page ({link.get('text')!r} -> "
                           f"{link.get('href')!r}), the page's text names the GPU ({facts.get('text_mentions_gpu')})"))
        if page in ("individual-gpu-memory", "gpu"):
            title = next((m for t in facts.get("titles", []) if (m := TITLE.search(t))), None)
            plot: dict[str, Any] = next(
                (p for p in facts.get("plots", []) if p.get("name") == "gpu_memory_histogram"), {})
            used = source.get("memory", [0])[0] if source.get("memory") else 0
            x_end = float(plot.get("x_end") or 0)
            ok = (title is not None and abs(parse_bytes(title["total"]) / 2**20 - total_mib) / total_mib < 0.01
                  and abs(x_end / 2**20 - total_mib) <= 1 and used >= load["held_bytes"]
                  and source.get("worker") == [load["worker"]])
            shown = title.group(0) if title else "MISSING"
            checks.append((ok, f"/{page}: plot title {shown!r}; the bar's scale ends at "
                               f"{x_end / 2**20:.0f} MiB (nvidia-smi: {gpu[1]}, {total_mib:.0f} MiB); worker "
                               f"{source.get('worker')} at {used / 2**30:.2f} GiB used "
                               f"(held by the load: {load['held_bytes'] / 2**30:.2f} GiB; nvidia-smi's peak "
                               f"{smi_used / 1024:.2f} GiB) {source.get('memory_text')}"))
        if page in ("individual-gpu-utilization", "gpu"):
            util = source.get("utilization", [0])[0] if source.get("utilization") else 0
            checks.append((util > 0 and source.get("worker") == [load["worker"]],
                           f"/{page}: worker {source.get('worker')} at {util} % utilisation "
                           f"(nvidia-smi's peak while the browser looked: {smi_util:.0f} %)"))
    images = [shrink(png) for png in sorted(out.glob("*.png"))]
    lines = [("PASS " if ok else "FAIL ") + text for ok, text in checks] + [f"png {line}" for line in images]
    (out / "checks.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    result = {"browser": seen.get("browser"), "chromedriver": seen.get("chromedriver"),
              "gpu": {"name": gpu[1], "uuid": gpu[2], "memory_total_mib": total_mib, "driver": gpu[4]},
              "load": load, "nvidia_smi_peak": {"memory_used_mib": smi_used, "utilization_percent": smi_util},
              "pages": pages, "checks": [{"pass": ok, "check": text} for ok, text in checks], "png": images}
    (out / "result.json").write_text(json.dumps(result, indent=1) + "\n")
    return 0 if all(ok for ok, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
