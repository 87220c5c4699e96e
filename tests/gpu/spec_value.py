#!/usr/bin/env python3
"""Read a value from a spec that playbooks/render-commands.yml wrote as JSON (no parsing of command lines).

    spec_value.py SPEC.json arg FLAG     the argument after FLAG in the command line (--expect-workers, --scheduler)
    spec_value.py SPEC.json exports      the spec's environment as `export K=V` lines for eval
"""
from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    spec = json.loads(Path(argv[1]).read_text())
    if argv[2] == "arg":
        print(spec["argv"][spec["argv"].index(argv[3]) + 1])
    elif argv[2] == "exports":
        print("\n".join(f"export {key}={shlex.quote(str(value))}" for key, value in sorted(spec["env"].items())))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
