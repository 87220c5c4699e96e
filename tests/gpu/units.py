"""The `docker` command lines of the rendered units and client specs, as argv. Nothing is rebuilt by hand: unit lines
are read back from the .service files that playbooks/render-commands.yml wrote (systemd's quoting and $$/%% escapes
undone); client lines come from the spec builder's own docker_run_args (plugin_utils/spec.py of the collection).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def values(unit: Path, key: str) -> list[str]:
    """Every KEY= value of the unit, continuation lines (ending in a backslash) joined."""
    lines, found = unit.read_text().splitlines(), []
    for index, line in enumerate(lines):
        if line.startswith(key + "="):
            value = line[len(key) + 1:]
            while value.endswith("\\"):
                index += 1
                value = value[:-1] + " " + lines[index]
            found.append(value)
    return found


def systemd_split(value: str) -> list[str]:
    """systemd's command-line splitting for what unit.service.j2 writes: bare words and JSON-quoted words, then its
    escapes for specifiers (%%) and variables ($$)."""
    words, i = [], 0
    while i < len(value):
        if value[i].isspace():
            i += 1
            continue
        if value[i] == '"':
            j = i + 1
            while value[j] != '"':
                j += 2 if value[j] == "\\" else 1
            word = str(json.loads(value[i:j + 1]))
            i = j + 1
        else:
            j = i
            while j < len(value) and not value[j].isspace():
                j += 1
            word, i = value[i:j], j
        words.append(word.replace("%%", "%").replace("$$", "$"))
    return words


def commands(unit: Path, key: str) -> list[tuple[list[str], bool]]:
    """The unit's KEY= commands in order, each with whether its failure is ignored (systemd's "-" prefix)."""
    found = []
    for value in values(unit, key):
        argv = systemd_split(value)
        ignore = bool(argv) and argv[0].startswith("-")
        found.append(([argv[0][1:], *argv[1:]] if ignore else argv, ignore))
    return found


def detached(unit: Path) -> list[str]:
    """ExecStart with `docker run --rm --name X` made `docker run --detach --name X` (no systemd holds it here)."""
    (argv, _), = commands(unit, "ExecStart")
    if argv[1:3] != ["run", "--rm"] or argv[3] != "--name":
        raise ValueError(f"{unit}: ExecStart is not `docker run --rm --name ...`: {argv[:5]}")
    return argv[:2] + ["--detach"] + argv[3:]


def option(argv: list[str], flag: str) -> str:
    """The value after FLAG in a rendered command line (the env file of a unit, say)."""
    return argv[argv.index(flag) + 1]


def client(spec: dict[str, Any]) -> list[str]:
    """docker run --rm --name NAME FLAGS --env K=V ... IMAGE ARGV, as playbooks/verify.yml and benchmark.yml run a
    client spec (the spec builder's own flags)."""
    sys.path.insert(0, str(ROOT / "collections"))
    from ansible_collections.dask_gpu.bundle.plugins.plugin_utils import spec as builder  # type: ignore[import-not-found,unused-ignore]

    env = [item for key, value in sorted(spec["env"].items()) for item in ("--env", f"{key}={value}")]
    return (["docker", "run", "--rm", "--name", spec["name"], *builder.docker_run_args(spec), *env, spec["image"],
             *spec["argv"]])
