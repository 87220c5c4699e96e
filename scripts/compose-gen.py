#!/usr/bin/env python3
"""Write compose.yaml's and compose.cpu.yaml's command lines from the spec builder (roles/dask/filter_plugins/
dask_spec.py), the one place where the scheduler, worker and client command lines are made.

    scripts/compose-gen.py           rewrite each block between "# BEGIN generated: NAME" and "# END generated"
    scripts/compose-gen.py --check   exit 1 if a compose file differs from what the builder makes (CI runs this)

The compose stack is one host's private network: plain TCP between containers (no TLS), the scheduler binding
every address of its own network namespace, ports published on 127.0.0.1 only (see compose.yaml).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
FILES = [ROOT / "compose.yaml", ROOT / "compose.cpu.yaml"]
BLOCK = re.compile(r"^(?P<indent>[ ]*)# BEGIN generated: (?P<name>[a-z-]+)\n.*?^[ ]*# END generated\n", re.M | re.S)
SCHEDULER = "tcp://scheduler:8786"
LOCAL_DIR = "/var/lib/dask"
REPORTS = "/var/lib/dask-reports"
# How many workers verification expects comes from the environment (scripts/compose-up.sh counts the GPUs).
EXPECT = "${DASK_EXPECT_WORKERS:-1}"


def builder() -> ModuleType:
    path = ROOT / "roles" / "dask" / "filter_plugins" / "dask_spec.py"
    spec = importlib.util.spec_from_file_location("dask_spec", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def commands() -> dict[str, list[str]]:
    spec = builder()
    worker = {"host": None, "memory_limit": None, "local_dir": LOCAL_DIR, "death_timeout": 60, "http_port": 8790}
    return {
        "scheduler": spec.scheduler_argv("0.0.0.0", 8786, ":8787", "tcp", None, []),
        "gpu-worker": spec.worker_argv(True, SCHEDULER, name=None, nthreads=None, **worker),
        "cpu-worker": spec.worker_argv(False, SCHEDULER, name="cpu-worker", nthreads=2, **worker),
        "gpu-verify": spec.verify_argv(SCHEDULER, EXPECT, f"{REPORTS}/verify.json", allow_cpu=False),
        "cpu-verify": spec.verify_argv(SCHEDULER, EXPECT, f"{REPORTS}/verify.json", allow_cpu=True),
    }


def render(text: str, made: dict[str, list[str]]) -> str:
    def block(match: re.Match[str]) -> str:
        indent, name = match["indent"], match["name"]
        if name not in made:
            raise SystemExit(f"unknown generated block {name!r}; known: {', '.join(made)}")
        lines = [f"{indent}# BEGIN generated: {name} (scripts/compose-gen.py, from the spec builder)",
                 f"{indent}command:"] + [f"{indent}  - {json.dumps(arg)}" for arg in made[name]]
        return "\n".join(lines + [f"{indent}# END generated", ""])
    return BLOCK.sub(block, text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="fail if a compose file is out of date")
    args = parser.parse_args()
    made, stale = commands(), []
    for path in FILES:
        text = path.read_text()
        updated = render(text, made)
        if updated != text:
            stale.append(path.name)
            if not args.check:
                path.write_text(updated)
    if args.check and stale:
        print(f"{', '.join(stale)}: command lines differ from the spec builder: run scripts/compose-gen.py",
              file=sys.stderr)
        return 1
    print("compose command lines " + ("match the spec builder" if args.check else "written"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
