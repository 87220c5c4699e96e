"""Small helpers over the real docker CLI, shared by the image and compose tests."""
from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def settings() -> dict[str, str]:
    """The image settings in .env (the one place for them)."""
    pairs = (line.split("=", 1) for line in (ROOT / ".env").read_text().splitlines()
             if line and not line.startswith("#"))
    return {key: value for key, value in pairs}


def image(target: str) -> str:
    s = settings()
    return f"dask-gpu-{target}:{s['RAPIDS_RELEASE']}-cuda{s['CUDA_MAJOR']}-{s['PROFILE']}"


def docker(*args: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=check, timeout=timeout)


def inspect(ref: str) -> dict[str, Any]:
    return dict(json.loads(docker("inspect", ref).stdout)[0])


def wait_health(container: str, timeout: float = 120) -> str:
    deadline = time.monotonic() + timeout
    status = "unknown"
    while time.monotonic() < deadline:
        status = inspect(container)["State"].get("Health", {}).get("Status", "none")
        if status in ("healthy", "unhealthy"):
            return status
        time.sleep(1)
    return status
