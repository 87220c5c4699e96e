"""Every GPU profile (lean, full, polars), for both CUDA majors, resolves against the committed pins (no image is
built)."""
from __future__ import annotations

import subprocess
import sys

import pytest
from dockerutil import ROOT, settings


@pytest.mark.parametrize("cuda", ["12", "13"])
def test_pins_resolve_for_every_gpu_profile(cuda: str) -> None:
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "pin-versions.py"), "--check",
                             "--release", settings()["RAPIDS_RELEASE"], "--cuda", cuda],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    for profile in ("lean", "full", "polars"):
        assert f"{profile} profile resolves" in result.stdout, result.stdout
