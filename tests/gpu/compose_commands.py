#!/usr/bin/env python3
"""Print the scheduler and worker command lines of compose.yaml, adapted to plain processes on one
host: the scheduler's service name becomes 127.0.0.1 and the worker's local directory a given path.

    tests/gpu/compose_commands.py scheduler|worker LOCAL_DIR
"""
from __future__ import annotations

import shlex
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def command(service: str, local_dir: str) -> list[str]:
    spec = yaml.safe_load((ROOT / "compose.yaml").read_text())["services"][service]["command"]
    args = [str(arg).replace("tcp://scheduler:", "tcp://127.0.0.1:").replace("/var/lib/dask", local_dir)
            for arg in spec]
    if service == "scheduler":  # the container binds all of its own interfaces; a bare host must not
        args = [("127.0.0.1" if arg == "0.0.0.0" else "127.0.0.1:8787" if arg == ":8787" else arg) for arg in args]
    return args


if __name__ == "__main__":
    print(shlex.join(command(sys.argv[1], sys.argv[2])))
