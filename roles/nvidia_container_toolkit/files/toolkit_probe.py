#!/usr/bin/env python3
"""Print, as JSON, what the checks of playbooks/check.yml need to know about the NVIDIA container toolkit already on
this host and the CDI spec given for it (role nvidia_container_toolkit, tasks/probe.yml). Reads only.

{"nvidia_ctk": str|null (its path), "version_output": str (`nvidia-ctk --version`), "version_error": str|null,
 "spec": null, or {"path": str, "exists": bool, "text": str, "error": str|null} with --spec PATH}
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess

# A CDI spec for a few GPUs is tens of KiB; a file beyond this is not one.
SPEC_LIMIT = 4 * 2 ** 20


def toolkit() -> dict[str, object]:
    found: dict[str, object] = {"nvidia_ctk": None, "version_output": "", "version_error": None}
    ctk = shutil.which("nvidia-ctk")
    if ctk is None:
        found["version_error"] = "nvidia-ctk is not on PATH"
        return found
    found["nvidia_ctk"] = ctk
    try:
        run = subprocess.run([ctk, "--version"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError) as error:
        found["version_error"] = f"{ctk} --version: {error}"
        return found
    found["version_output"] = (run.stdout or run.stderr).strip()
    if run.returncode != 0:
        found["version_error"] = f"{ctk} --version exited {run.returncode}"
    return found


def spec(path: str) -> dict[str, object]:
    found: dict[str, object] = {"path": path, "exists": os.path.lexists(path), "text": "", "error": None}
    if not found["exists"]:
        return found
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read(SPEC_LIMIT + 1)
    except (OSError, UnicodeDecodeError) as error:
        found["error"] = str(error)
        return found
    if len(text) > SPEC_LIMIT:
        found["error"] = f"larger than {SPEC_LIMIT // 2 ** 20} MiB, not a CDI spec"
    else:
        found["text"] = text
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--spec", default="", help="a CDI spec on this host to read (none: not read)")
    args = parser.parse_args()
    print(json.dumps({**toolkit(), "spec": spec(args.spec) if args.spec else None}))


if __name__ == "__main__":
    main()
