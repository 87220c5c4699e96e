"""Container health check: GET a Dask /health endpoint and exit 0 only on `ok`.

    dask-gpu-healthcheck [URL]     (default: $DASK_HEALTH_URL or http://127.0.0.1:8787/health)

With DASK_HEALTH_FILE (a worker container of dask-gpu-worker-slots), every URL listed in that file must answer: the
slots that run now; none listed (every slot released, or none started yet) is healthy.
"""
from __future__ import annotations

import os
import sys
import urllib.request
from pathlib import Path

DEFAULT_URL = "http://127.0.0.1:8787/health"


def healthy(url: str, timeout: float = 5.0) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 (local URL)
            return bool(response.status == 200 and response.read().strip() == b"ok")
    except OSError:
        return False


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    listed = os.environ.get("DASK_HEALTH_FILE", "")
    if not args and listed:
        try:
            urls = Path(listed).read_text().split()
        except FileNotFoundError:
            urls = []
    else:
        urls = [args[0] if args else os.environ.get("DASK_HEALTH_URL", DEFAULT_URL)]
    failed = [url for url in urls if not healthy(url)]
    for url in failed:
        print(f"unhealthy: {url}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
