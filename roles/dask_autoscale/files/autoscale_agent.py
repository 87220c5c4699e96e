#!/usr/bin/env python3
"""dask-gpu-autoscale's agent on a worker host (role dask_autoscale, docs/autoscale.md): asks the autoscaler on
the scheduler host, over mutual TLS with this host's certificate, whether this host's workers are wanted, and starts
or stops the host's worker unit. Python's standard library only (it runs on the host, as root, beside systemd).

    autoscale_agent.py --url https://IP:PORT/v1/hosts/NAME --unit dask-worker --ca CA --cert CRT --key KEY

It acts once per generation the autoscaler gives the host (the autoscaler retired the host's workers, their data
moved, before it says down), so a unit stopped or started by hand or by site.yml is left as it is until the next
decision. While the autoscaler cannot be reached, or is paused, nothing changes. Each action is one journal line.
"""
from __future__ import annotations

import argparse
import json
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request


def ask(url: str, context: ssl.SSLContext) -> dict[str, object]:
    with urllib.request.urlopen(url, timeout=10, context=context) as answer:  # noqa: S310 (https only)
        return dict(json.loads(answer.read()))


def systemctl(action: str, unit: str) -> int:
    return subprocess.run(["systemctl", action, f"{unit}.service"], check=False).returncode


def main(argv: list[str] | None = None) -> int:
    parse = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parse.add_argument("--url", required=True)
    parse.add_argument("--unit", required=True)
    parse.add_argument("--ca", required=True)
    parse.add_argument("--cert", required=True)
    parse.add_argument("--key", required=True)
    parse.add_argument("--interval", type=float, default=2.0)
    args = parse.parse_args(argv)
    if not args.url.startswith("https://"):
        parse.error("--url must be https://")
    context = ssl.create_default_context(cafile=args.ca)
    context.load_cert_chain(args.cert, args.key)
    applied: object = None
    reachable = True
    while True:
        try:
            answer = ask(args.url, context)
        except (OSError, ValueError, urllib.error.URLError) as error:
            if reachable:
                print(f"autoscaler unreachable ({error}); {args.unit} stays as it is", flush=True)
            reachable = False
            time.sleep(args.interval)
            continue
        if not reachable:
            print("autoscaler reachable again", flush=True)
        reachable = True
        generation = answer.get("generation")
        if generation != applied and not answer.get("paused"):
            desired = answer.get("desired")
            action = "start" if desired == "up" else "stop"
            code = systemctl(action, args.unit)
            print(f"{action} {args.unit}: desired {desired} (generation {generation}), systemctl exit {code}",
                  flush=True)
            if code == 0:
                applied = generation
        time.sleep(args.interval)


if __name__ == "__main__":
    sys.exit(main())
