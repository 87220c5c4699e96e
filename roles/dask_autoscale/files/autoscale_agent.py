#!/usr/bin/env python3
"""dask-gpu-autoscale's agent on a worker host (role dask_autoscale, docs/autoscale.md): asks the autoscaler on
the scheduler host, over mutual TLS with this host's certificate, whether this host's workers are wanted, and starts
or stops the host's worker unit. Python's standard library only (it runs on the host, as root, beside systemd).

    autoscale_agent.py --url https://IP:PORT/v1/hosts/NAME --unit dask-worker --ca CA --cert CRT --key KEY

It acts once per generation the autoscaler gives the host (the autoscaler retired the host's workers, their data
moved, before it says down), so a unit stopped or started by hand or by site.yml is left as it is until the next
decision. Where the cluster shares the host's GPUs with other clusters (--turns, --turn; dask_autoscale_share_gpus),
a start waits while another cluster's workers run on them (the agent says so to the autoscaler, which may give the
host up) and comes once that cluster has released them. While the autoscaler cannot be reached, or is paused,
nothing changes. Each action is one journal line.
With --slots (dask_autoscale_by: gpu) the unit keeps running and each of its workers is released or wanted on its own:
the agent writes the host's released workers to that file (`{"released": [...]}`, read by dask-gpu-worker-slots in
the worker container, which stops and starts them), and starts the unit at a new decision if it is not running.
Certificates renewed in place (site.yml -e dask_tls_renew=true) are taken at the next question, without a restart.
"""
from __future__ import annotations

import argparse
import json
import os
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request


class Tls:
    """The agent's TLS context, made again when its CA, certificate or key file changes. Files caught half renewed
    (a certificate without its new key) keep the context before them until they match."""

    def __init__(self, ca: str, cert: str, key: str) -> None:
        self.files = (ca, cert, key)
        self.stamp: tuple[int, ...] = ()
        self.refused: tuple[int, ...] = ()
        self.made: ssl.SSLContext | None = None

    def context(self) -> ssl.SSLContext:
        try:
            stamp = tuple(os.stat(path).st_mtime_ns for path in self.files)
        except OSError:
            stamp = self.stamp
        if stamp != self.stamp or self.made is None:
            ca, cert, key = self.files
            try:
                context = ssl.create_default_context(cafile=ca)
                context.load_cert_chain(cert, key)
            except (OSError, ssl.SSLError) as error:
                if self.made is None:
                    raise
                if stamp != self.refused:
                    print(f"TLS files changed but do not load yet ({error}); the earlier ones stay", flush=True)
                self.refused = stamp
            else:
                if self.made is not None:
                    print("TLS files changed: this host's certificate reloaded", flush=True)
                self.made, self.stamp = context, stamp
        return self.made


def ask(url: str, context: ssl.SSLContext) -> dict[str, object]:
    with urllib.request.urlopen(url, timeout=10, context=context) as answer:  # noqa: S310 (https only)
        return dict(json.loads(answer.read()))


def systemctl(action: str, unit: str) -> int:
    return subprocess.run(["systemctl", action, f"{unit}.service"], check=False).returncode


def running(unit: str) -> bool:
    """Whether the unit runs (a start skipped by its turn check leaves it inactive, and systemctl says 0)."""
    out = subprocess.run(["systemctl", "show", "--property=ActiveState", "--value", f"{unit}.service"],
                         capture_output=True, text=True, check=False)
    return out.stdout.strip() in ("active", "activating")


def write_released(path: str, names: list[str]) -> bool:
    """The file of released workers, replaced whole (0644: worker names only) when it says otherwise; True if it
    changed."""
    content = json.dumps({"released": sorted(names)}) + "\n"
    try:
        with open(path, encoding="utf-8") as current:
            if current.read() == content:
                return False
    except OSError:
        pass
    temporary = f"{path}.tmp"
    with open(temporary, "w", encoding="utf-8") as out:
        out.write(content)
    os.chmod(temporary, 0o644)
    os.replace(temporary, path)
    return True


def slots_step(path: str, unit: str, answer: dict[str, object], applied: object) -> object:
    """One answer acted on with --slots: the released workers written; the unit started at a new decision that wants
    a worker up if it does not run (stopped by hand, or left stopped when the unit of scale was a host)."""
    names = answer.get("released")
    if not isinstance(names, list):
        print(f"the autoscaler's answer names no released workers ({answer}); {path} stays as it is", flush=True)
        return applied
    generation = answer.get("generation")
    before = set()
    try:
        with open(path, encoding="utf-8") as current:
            before = set(json.loads(current.read()).get("released") or [])
    except (OSError, ValueError, AttributeError):
        pass
    if write_released(path, [str(name) for name in names]):
        now = {str(name) for name in names}
        if now == before:  # the file was not there (a first start) or was not one the agent writes
            print(f"{path} written: released now {', '.join(sorted(now)) or 'none'} (generation {generation})",
                  flush=True)
        else:
            print(f"workers released {', '.join(sorted(now - before)) or 'none'}, wanted again "
                  f"{', '.join(sorted(before - now)) or 'none'} (generation {generation}); released now: "
                  f"{', '.join(sorted(now)) or 'none'}", flush=True)
    if generation != applied and answer.get("desired") == "up" and not running(unit):
        code = systemctl("start", unit)
        print(f"start {unit}: a worker is wanted up (generation {generation}), systemctl exit {code}", flush=True)
        if code != 0:
            return applied
    return generation


def held_by(script: str, unit: str, keys: list[str]) -> str:
    """What holds the host's GPUs that the cluster shares with others ("" when they are free for this unit)."""
    if not keys:
        return ""
    out = subprocess.run([sys.executable, script, "held", "--unit", unit, *keys], capture_output=True, text=True,
                         check=False)
    try:
        return str(json.loads(out.stdout)["by"]) if out.returncode in (0, 1) else f"turn check failed: {out.stderr}"
    except (ValueError, KeyError):
        return f"turn check failed: {out.stdout} {out.stderr}"


def main(argv: list[str] | None = None) -> int:
    parse = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parse.add_argument("--url", required=True)
    parse.add_argument("--unit", required=True)
    parse.add_argument("--ca", required=True)
    parse.add_argument("--cert", required=True)
    parse.add_argument("--key", required=True)
    parse.add_argument("--interval", type=float, default=2.0)
    parse.add_argument("--turns", default="", help="gpu_turns.py, where the cluster shares its GPUs with others")
    parse.add_argument("--turn", action="append", default=[], help="a key the worker unit takes its turn on")
    parse.add_argument("--slots", default="", help="the file of released workers (dask_autoscale_by: gpu)")
    args = parse.parse_args(argv)
    if not args.url.startswith("https://"):
        parse.error("--url must be https://")
    tls = Tls(args.ca, args.cert, args.key)
    tls.context()  # files that cannot be read stop the agent at its start, as systemd then shows
    applied: object = None
    reachable = True
    waiting = ""
    while True:
        if waiting:  # as the GPUs are now, not as they were at the last question
            waiting = held_by(args.turns, args.unit, args.turn)
        try:
            # ?waiting=1: this host's GPUs are another cluster's now; its autoscaler may give the host up.
            answer = ask(args.url + ("?waiting=1" if waiting else ""), tls.context())
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
        if args.slots:
            if not answer.get("paused"):
                applied = slots_step(args.slots, args.unit, answer, applied)
            time.sleep(args.interval)
            continue
        if generation != applied and not answer.get("paused"):
            desired = answer.get("desired")
            action = "start" if desired == "up" else "stop"
            # GPUs shared with other clusters: this host's workers start once no other cluster's run on them.
            holder = held_by(args.turns, args.unit, args.turn) if action == "start" else ""
            if holder:
                if holder != waiting:
                    print(f"start {args.unit}: desired up (generation {generation}), waiting: {holder}", flush=True)
                waiting = holder
                time.sleep(args.interval)
                continue
            waiting = ""
            code = systemctl(action, args.unit)
            started = action == "stop" or not args.turn or running(args.unit)
            print(f"{action} {args.unit}: desired {desired} (generation {generation}), systemctl exit {code}"
                  + ("" if started else ", skipped: another cluster took its GPUs first"), flush=True)
            if code == 0 and started:
                applied = generation
        time.sleep(args.interval)


if __name__ == "__main__":
    sys.exit(main())
