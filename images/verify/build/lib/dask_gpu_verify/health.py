"""Container health check: GET a Dask /health endpoint and exit 0 only on `ok`.

    dask-gpu-healthcheck [URL]     (default: $DASK_HEALTH_URL or http://127.0.0.1:8787/health)
"""
from __future__ import annotations

import os
import sys
import urllib.request

DEFAULT_URL = "http://127.0.0.1:8787/health"


def healthy(url: str, timeout: float = 5.0) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 (local URL)
            return bool(response.status == 200 and response.read().strip() == b"ok")
    except OSError:
        return False


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    url = args[0] if args else os.environ.get("DASK_HEALTH_URL", DEFAULT_URL)
    if healthy(url):
        return 0
    print(f"unhealthy: {url}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
