#!/usr/bin/env python3
"""Write the command lines and GPU requests of compose.yaml and compose.cpu.yaml from the spec builder
(plugin_utils/spec.py of the collection in collections/), the one place where the scheduler, worker and client
command lines and the containers' GPU requests are made; and compose.cdi.yaml, which is compose.yaml with the GPUs
requested as CDI devices (a whole file, which also works after compose.yaml: its device lists carry !override, so
compose replaces compose.yaml's GPU requests instead of adding to them).

    scripts/compose-gen.py           rewrite each block between "# BEGIN generated: NAME" and "# END generated",
                                     and compose.cdi.yaml
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
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FILES = [ROOT / "compose.yaml", ROOT / "compose.cpu.yaml"]
CDI_FILE = ROOT / "compose.cdi.yaml"
CDI_HEADER = """\
# GENERATED from compose.yaml by scripts/compose-gen.py (edit compose.yaml): the same single-host stack with the
# GPUs as CDI devices (docs/gpu-request.md) instead of NVIDIA's container runtime. Needs Docker >= 25 with CDI on
# ("features": {"cdi": true} in daemon.json; the default from Docker 28.2) and a CDI spec naming the GPUs:
# `nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml` (toolkit 1.18 also keeps /var/run/cdi/nvidia.yaml).
#   docker compose -f compose.cdi.yaml up -d --wait               every GPU (nvidia.com/gpu=all)
#   DASK_GPUS=1 docker compose -f compose.cdi.yaml up -d --wait   one GPU, by index or UUID (a CDI name has no commas)
#   docker compose -f compose.cdi.yaml run --rm verify
# Also right after compose.yaml (-f compose.yaml -f compose.cdi.yaml): its GPU requests replace compose.yaml's.
"""
# A block's first line, as written or as rendered (with "(scripts/compose-gen.py, ...)" after the name).
BLOCK = re.compile(r"^(?P<indent>[ ]*)# BEGIN generated: (?P<name>[a-z-]+)(?: [(][^\n]*)?\n.*?^[ ]*# END generated\n",
                   re.M | re.S)
SCHEDULER = "tcp://scheduler:8786"
# How many workers verification expects comes from the environment (scripts/compose-up.sh counts the GPUs).
EXPECT = "${DASK_EXPECT_WORKERS:-1}"
# Which GPUs the containers get: all, or DASK_GPUS (with CDI, one GPU: an index or a UUID).
GPUS = "${DASK_GPUS:-all}"
# A generated block: (key, value).
Block = tuple[str, Any]


def builder() -> ModuleType:
    """The spec builder of the collection dask_gpu.bundle (collections/ in this repository)."""
    sys.path.insert(0, str(ROOT / "collections"))
    return importlib.import_module("ansible_collections.dask_gpu.bundle.plugins.plugin_utils.spec")


def container_paths() -> dict[str, str]:
    """The images' own paths (the model's CONTAINER_PATHS): the workers' local directory, the reports folder."""
    model = importlib.import_module("ansible_collections.dask_gpu.bundle.plugins.plugin_utils.model")
    return dict(model.CONTAINER_PATHS)


def gpu_deploy(spec: ModuleType, request: str) -> dict[str, Any]:
    """deploy: the builder's Docker API device requests for GPUS, in compose's form (capabilities is required)."""
    devices = [{**device, "capabilities": ["gpu"]} for device in spec.gpu_device_requests(GPUS, request)]
    return {"resources": {"reservations": {"devices": devices}}}


def commands() -> dict[str, Block]:
    spec = builder()
    paths = container_paths()
    local_dir, reports = paths["local"], paths["reports"]
    worker = {"host": None, "memory_limit": None, "local_dir": local_dir, "death_timeout": 60, "http_port": 8790}
    return {
        "scheduler": ("command", spec.scheduler_argv("0.0.0.0", 8786, ":8787", "tcp", None, [])),
        "gpu-worker": ("command", spec.worker_argv(True, SCHEDULER, name=None, nthreads=None, **worker)),
        # The units' nanny preloads: worker N's HTTP port, each worker pinned to its own GPU's cores.
        "gpu-worker-env": ("environment", {"DASK_DISTRIBUTED__NANNY__PRELOAD": spec.NANNY_PRELOAD_ENV}),
        "cpu-worker": ("command", spec.worker_argv(False, SCHEDULER, name="cpu-worker", nthreads=2, **worker)),
        "gpu-verify": ("command", spec.verify_argv(SCHEDULER, EXPECT, f"{reports}/verify.json", allow_cpu=False)),
        "cpu-verify": ("command", spec.verify_argv(SCHEDULER, EXPECT, f"{reports}/verify.json", allow_cpu=True)),
        "gpus": ("deploy", gpu_deploy(spec, "gpus")),
        "cdi-gpus": ("deploy", gpu_deploy(spec, "cdi")),
    }


def cdi_variant(compose: str, made: dict[str, Block]) -> str:
    """compose.cdi.yaml: compose.yaml (as rendered) under its own header, its GPU requests as CDI devices."""
    body = compose[compose.index("---\n"):].replace("# BEGIN generated: gpus ", "# BEGIN generated: cdi-gpus ")
    # !override: given after compose.yaml (-f compose.yaml -f compose.cdi.yaml), its CDI requests replace compose.yaml's
    # instead of being added to them (both drivers asked: `up` fails without NVIDIA's runtime; found on an H100).
    return render(CDI_HEADER + body, made).replace("          devices:\n", "          devices: !override\n")


def yaml_lines(key: str, value: Any, indent: str) -> list[str]:
    """Block YAML for mappings and lists of mappings; scalars and lists of scalars as JSON (valid YAML)."""
    if isinstance(value, dict):
        return [f"{indent}{key}:"] + [line for name, item in value.items()
                                           for line in yaml_lines(name, item, indent + "  ")]
    if isinstance(value, list) and any(isinstance(item, dict) for item in value):
        lines = [f"{indent}{key}:"]
        for item in value:
            entry = [line for name, field in item.items() for line in yaml_lines(name, field, indent + "    ")]
            lines += [f"{indent}  - {entry[0].lstrip()}"] + entry[1:]
        return lines
    if isinstance(value, list) and key == "command":
        return [f"{indent}{key}:"] + [f"{indent}  - {json.dumps(item)}" for item in value]
    return [f"{indent}{key}: {json.dumps(value)}"]


def render(text: str, made: dict[str, Block]) -> str:
    def block(match: re.Match[str]) -> str:
        indent, name = match["indent"], match["name"]
        if name not in made:
            raise SystemExit(f"unknown generated block {name!r}; known: {', '.join(made)}")
        key, value = made[name]
        lines = [f"{indent}# BEGIN generated: {name} (scripts/compose-gen.py, from the spec builder)"]
        return "\n".join(lines + yaml_lines(key, value, indent) + [f"{indent}# END generated", ""])
    return BLOCK.sub(block, text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="fail if a compose file is out of date")
    args = parser.parse_args()
    made, stale = commands(), []
    rendered = {path: render(path.read_text(), made) for path in FILES}
    rendered[CDI_FILE] = cdi_variant(rendered[FILES[0]], made)
    for path, updated in rendered.items():
        if not path.exists() or updated != path.read_text():
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
