"""Run every panel query of the bundle's Grafana dashboard against a Prometheus and count the series it returns,
so a dashboard never ships with a dead panel. Standard library only: it runs on a sandbox host or a GPU machine
(where Prometheus listens on loopback) as well as on the controller.

    python3 dashboard_queries.py --prometheus http://127.0.0.1:9090 [--dashboard FILE] [--no-gpu] [--json OUT]

Grafana's variables are given the values that select everything ($host: .*, $__rate_interval: 1m). A panel
whose query reads dask_worker_gpu_* series is a GPU panel: with --no-gpu (a cluster without GPU workers, like the
CI sandbox) those must return nothing and the others must return series; without it, every panel must. Exit 0
when that holds, 1 otherwise; one line per query either way.
"""
from __future__ import annotations

import argparse
import json
import sys
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DASHBOARD = Path(__file__).resolve().parents[2] / "roles" / "dask_monitoring" / "files" / "grafana-dashboard.json"
VARIABLES = {"$__rate_interval": "1m", "$host": ".*"}
GPU_SERIES = "dask_worker_gpu_"


@dataclass(frozen=True)
class Query:
    panel: str
    expr: str

    @property
    def gpu(self) -> bool:
        return GPU_SERIES in self.expr

    @property
    def expanded(self) -> str:
        expr = self.expr
        for name, value in VARIABLES.items():
            expr = expr.replace(name, value)
        return expr


def queries(dashboard: dict[str, Any]) -> list[Query]:
    """Every target expression of every panel, rows' nested panels included."""
    found: list[Query] = []
    for panel in dashboard.get("panels", []):
        for inner in [panel, *panel.get("panels", [])]:
            found += [Query(str(inner.get("title")), str(target["expr"])) for target in inner.get("targets", [])
                      if target.get("expr")]
    return found


def series_count(prometheus: str, expr: str, timeout: float = 10) -> int:
    """How many series an instant query returns (Prometheus's HTTP API)."""
    url = f"{prometheus.rstrip('/')}/api/v1/query?{urllib.parse.urlencode({'query': expr})}"
    with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - a URL the caller gives
        body = json.load(response)
    if body.get("status") != "success":
        raise RuntimeError(f"query failed: {expr}: {body}")
    return len(body["data"]["result"])


def check(prometheus: str, found: list[Query], no_gpu: bool) -> tuple[bool, list[dict[str, Any]]]:
    """(every panel as expected, one result per query)."""
    results = []
    for query in found:
        count = series_count(prometheus, query.expanded)
        expected = "none" if no_gpu and query.gpu else "series"
        results.append({"panel": query.panel, "expr": query.expanded, "series": count, "gpu": query.gpu,
                        "ok": (count == 0) if expected == "none" else (count > 0), "expected": expected})
    return all(result["ok"] for result in results), results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prometheus", default="http://127.0.0.1:9090")
    parser.add_argument("--dashboard", type=Path, default=DASHBOARD)
    parser.add_argument("--no-gpu", action="store_true", help="GPU panels must be empty (no GPU workers)")
    parser.add_argument("--json", type=Path, help="write the results here too")
    args = parser.parse_args(argv)
    found = queries(json.loads(args.dashboard.read_text()))
    ok, results = check(args.prometheus, found, args.no_gpu)
    for result in results:
        mark = "ok " if result["ok"] else "BAD"
        print(f"{mark} {result['series']:3d} series (expected {result['expected']}) {result['panel']}: "
              f"{result['expr']}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0 if ok and results else 1


if __name__ == "__main__":
    sys.exit(main())
