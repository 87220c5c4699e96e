"""images/split_layers.py (the Dockerfile's `layers` stage): every file stays, at its path, in one of the layers, and
the layers come out of similar size, with the NVIDIA wheels' libraries split per library."""
from __future__ import annotations

import importlib.util
from pathlib import Path

from dockerutil import ROOT

spec = importlib.util.spec_from_file_location("split_layers", ROOT / "images" / "split_layers.py")
assert spec and spec.loader
split_layers = importlib.util.module_from_spec(spec)
spec.loader.exec_module(split_layers)

SIZES = {"cupy/core.so": 240, "llvmlite/lib.so": 160, "libucx/lib.so": 140, "pandas/a.py": 40, "numpy/b.py": 30,
         "nvidia/cublas/lib/libcublas.so": 800, "nvidia/cuda_nvrtc/lib/nvrtc.so": 220, "nvidia/curand/lib/r.so": 160,
         "nvidia/__init__.py": 1, "dask-2026.7.1.dist-info/RECORD": 2, "six.py": 1}


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): str(p.readlink()).encode() if p.is_symlink() else p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file() or p.is_symlink()}


def test_every_file_keeps_its_path_and_the_layers_are_balanced(tmp_path: Path) -> None:
    root = tmp_path / "opt" / "dask"
    site = root / "lib" / "python3.11" / "site-packages"
    for name, kib in SIZES.items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_bytes(name.encode().ljust(kib * 1024, b"."))
    (root / "bin").mkdir()
    (root / "bin" / "python").symlink_to("/usr/bin/python3")
    before = tree(root)

    filled = split_layers.split(root, tmp_path / "layers", 3)

    merged = tree(root)
    for k in (1, 2, 3):
        layer = tmp_path / "layers" / str(k) / root.relative_to("/")
        merged.update(tree(layer) if layer.exists() else {})
    assert merged == before
    assert (root / "bin" / "python").is_symlink()
    total = sum(SIZES.values()) * 1024
    share = total / 4 * 1.1
    rest = sum(len(data) for data in tree(root).values())
    # cuBLAS alone is 45 % of this environment (35 % of the lean image's): an empty layer takes it whole
    assert filled[0] == SIZES["nvidia/cublas/lib/libcublas.so"] * 1024, filled
    assert all(size <= share for size in filled[1:]) and rest <= share, (filled, rest)
    assert not (site / "nvidia" / "cublas").exists() and (site / "nvidia" / "__init__.py").exists()
