#!/usr/bin/env python3
"""The `docker` command lines of the rendered units and client specs, as argv (printed shell-quoted, for eval),
for tests/gpu/gpu-proof-containers.sh. Nothing is rebuilt by hand: unit lines are read back from the .service
files that playbooks/render-commands.yml wrote (systemd's quoting and $$/%% escapes undone), client lines come
from the spec builder's own docker_run_args (plugin_utils/spec.py of the collection in collections/).

    unit_command.py line UNIT.service ExecStart|ExecStartPre|ExecStop   the unit's command, unchanged
    unit_command.py detached UNIT.service    ExecStart, `docker run --rm --name X` made `docker run --detach --name X`
    unit_command.py client SPEC.json         docker run --rm --name NAME FLAGS -e K=V ... IMAGE ARGV (a client spec)
"""
from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def unit_value(unit: Path, key: str) -> str:
    """The value of KEY= in the [Service] section, continuation lines (ending in a backslash) joined."""
    lines = unit.read_text().splitlines()
    for index, line in enumerate(lines):
        if line.startswith(key + "="):
            value = line[len(key) + 1:]
            while value.endswith("\\"):
                index += 1
                value = value[:-1] + " " + lines[index]
            return value
    raise SystemExit(f"{unit}: no {key}= line")


def systemd_split(value: str) -> list[str]:
    """systemd's command-line splitting for what unit.service.j2 writes: bare words and JSON-quoted words,
    then its escapes for specifiers (%%) and variables ($$)."""
    words, i = [], 0
    while i < len(value):
        if value[i].isspace():
            i += 1
            continue
        if value[i] == '"':
            j = i + 1
            while value[j] != '"':
                j += 2 if value[j] == "\\" else 1
            word = json.loads(value[i:j + 1])
            i = j + 1
        else:
            j = i
            while j < len(value) and not value[j].isspace():
                j += 1
            word, i = value[i:j], j
        words.append(word.replace("%%", "%").replace("$$", "$"))
    return words


def unit_argv(unit: Path, key: str) -> list[str]:
    argv = systemd_split(unit_value(unit, key))
    if argv and argv[0].startswith("-"):  # systemd's "ignore failure" prefix
        argv[0] = argv[0][1:]
    return argv


def detached(unit: Path) -> list[str]:
    argv = unit_argv(unit, "ExecStart")
    if argv[1:3] != ["run", "--rm"] or argv[3] != "--name":
        raise SystemExit(f"{unit}: ExecStart is not `docker run --rm --name ...`: {argv[:5]}")
    return argv[:2] + ["--detach"] + argv[3:]


def client(spec_path: Path) -> list[str]:
    sys.path.insert(0, str(ROOT / "collections"))
    from ansible_collections.dask_gpu.bundle.plugins.plugin_utils import spec as dask_spec  # the spec builder itself

    spec = json.loads(spec_path.read_text())
    env = [item for key, value in sorted(spec["env"].items()) for item in ("--env", f"{key}={value}")]
    return (["docker", "run", "--rm", "--name", spec["name"]] + dask_spec.docker_run_args(spec) + env
            + [spec["image"]] + list(spec["argv"]))


def main(argv: list[str]) -> int:
    if len(argv) == 4 and argv[1] == "line":
        words = unit_argv(Path(argv[2]), argv[3])
    elif len(argv) == 3 and argv[1] == "detached":
        words = detached(Path(argv[2]))
    elif len(argv) == 3 and argv[1] == "client":
        words = client(Path(argv[2]))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    print(shlex.join(words))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
