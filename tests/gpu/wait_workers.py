#!/usr/bin/env python3
"""Wait until the scheduler's /json/counts.json shows N workers; print how long it took.

    tests/gpu/wait_workers.py N STARTED_EPOCH_SECONDS [URL]
"""
import json
import sys
import time
import urllib.request

want, started = int(sys.argv[1]), float(sys.argv[2])
url = sys.argv[3] if len(sys.argv) > 3 else "http://127.0.0.1:8787/json/counts.json"
while True:
    counts = json.load(urllib.request.urlopen(url, timeout=2))  # noqa: S310 (local URL)
    if counts.get("workers", 0) >= want:
        print(f"{counts['workers']} workers registered {time.time() - started:.1f} s after the worker command started")
        break
    if time.time() - started > 180:
        sys.exit(f"only {counts.get('workers')} of {want} workers after 180 s")
    time.sleep(0.2)
