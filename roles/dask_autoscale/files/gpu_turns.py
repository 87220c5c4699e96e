#!/usr/bin/env python3
"""Clusters taking turns on a host's GPUs (role dask_autoscale, dask_autoscale_share_gpus, docs/autoscale.md).

    gpu_turns.py take --unit UNIT --cluster NAME KEY...   the worker unit's ExecCondition: exit 0 and hold the keys,
                                                          or exit 1 (the start is skipped) while another unit holds one
                 [--if-running]                           (site.yml) only for a unit that runs now: workers running
                                                          when their cluster starts sharing take their turn then
    gpu_turns.py held --unit UNIT KEY...                  exit 0 when the keys are free for UNIT, 1 when another
                                                          unit holds one (one JSON line says which, either way)
    gpu_turns.py release --unit UNIT                      forget what UNIT held, once it no longer runs

A key is a GPU's UUID (a MIG instance's own UUID), or `cpu` for a host without GPUs. /run/dask-gpu-turns/KEY names
the last unit that took the key; the key is held while that unit is active, activating or deactivating (systemd's
own state, so a unit that stopped, failed or was removed holds nothing and a crash never leaves a key taken). Every
read and write is under one lock, so two clusters' starts cannot both take a key. Python's standard library only:
it runs on the host, as root, beside systemd. /run is emptied at boot, and the first unit to start takes the keys.
"""
from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

TURNS = Path("/run/dask-gpu-turns")
HOLDING = ("active", "activating", "deactivating", "reloading")
KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]*")


@contextlib.contextmanager
def locked(folder: Path) -> Iterator[None]:
    folder.mkdir(mode=0o755, parents=True, exist_ok=True)
    with open(folder / ".lock", "w", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def state(unit: str) -> str:
    """systemd's ActiveState of a unit (`inactive` for a unit that does not exist)."""
    out = subprocess.run(["systemctl", "show", "--property=ActiveState", "--value", f"{unit}.service"],
                         capture_output=True, text=True, check=False)
    return out.stdout.strip() or "inactive"


def holder(folder: Path, key: str) -> dict[str, str]:
    try:
        held = json.loads((folder / key).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(held, dict):
        return {}
    return {"unit": str(held.get("unit", "")), "cluster": str(held.get("cluster", ""))}


def others(folder: Path, unit: str, keys: list[str]) -> list[dict[str, str]]:
    """The keys another unit holds now: key, unit, cluster and its state."""
    found = []
    for key in keys:
        held = holder(folder, key)
        if held and held["unit"] != unit:
            now = state(held["unit"])
            if now in HOLDING:
                found.append({"key": key, **held, "state": now})
    return found


def describe(taken: list[dict[str, str]]) -> str:
    return "; ".join(f"{item['key']} is in use by cluster {item['cluster']} (unit {item['unit']}, {item['state']})"
                     for item in taken)


def main(argv: list[str] | None = None, folder: Path = TURNS) -> int:  # noqa: C901 (three small actions)
    parse = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parse.add_argument("action", choices=("take", "held", "release"))
    parse.add_argument("--unit", required=True)
    parse.add_argument("--cluster", default="")
    parse.add_argument("--if-running", action="store_true", help="take: only when the unit runs now")
    parse.add_argument("keys", nargs="*")
    args = parse.parse_intermixed_args(argv)  # the keys after the options
    bad = [key for key in args.keys if not KEY.fullmatch(key)]
    if bad or (args.action != "release" and not args.keys):
        parse.error(f"keys must be GPU UUIDs or cpu, got {bad or 'none'}")
    if args.action == "take" and not args.cluster:
        parse.error("take needs --cluster")
    if args.action != "take" and not folder.is_dir():
        if args.action == "held":
            print(json.dumps({"held": False, "by": ""}))
        return 0  # no cluster has taken a turn on this host since it booted
    with locked(folder):
        if args.action == "release":
            # A unit that still runs keeps its turn (it stops later, or runs on without the check): its GPUs stay
            # taken until it stops, when its file holds nothing anyway.
            if state(args.unit) in HOLDING:
                return 0
            for path in folder.iterdir():
                if path.name != ".lock" and holder(folder, path.name).get("unit") == args.unit:
                    path.unlink()
                    print(f"released {path.name}")
            return 0
        if args.action == "take" and args.if_running and state(args.unit) not in HOLDING:
            return 0  # it takes its turn when it starts
        taken = others(folder, args.unit, args.keys)
        if args.action == "held":
            print(json.dumps({"held": bool(taken), "by": describe(taken)}))
            return 1 if taken else 0
        if taken and args.if_running:
            # Workers of two clusters on the same GPUs now (site.yml fails the run, naming both).
            print(f"{args.unit} runs while {describe(taken)}: two clusters' workers share these GPUs at once; stop "
                  f"one of them ({args.unit} or that unit), then run site.yml again")
            return 1
        if taken:
            # ExecCondition: 1 skips the start (the unit stays inactive, not failed, and does not restart).
            print(f"{args.unit} does not start: {describe(taken)}; it starts when that cluster releases them")
            return 1
        for key in args.keys:
            if holder(folder, key) == {"unit": args.unit, "cluster": args.cluster}:
                continue  # already this unit's
            temporary = folder / f".{key}.{os.getpid()}"
            temporary.write_text(json.dumps({"unit": args.unit, "cluster": args.cluster}), encoding="utf-8")
            temporary.replace(folder / key)
            print(f"took {key}")
        return 0


if __name__ == "__main__":
    sys.exit(main())
