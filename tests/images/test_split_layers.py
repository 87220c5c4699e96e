"""images/split_layers.py (the Dockerfile's `layers` stage): every file stays, at its path, in exactly one of the
layers; the layers come out of similar size, the NVIDIA wheels' libraries split per library; the folders a layer makes
carry the modes and times of those they are copied onto; the Dockerfile copies every layer the stage makes."""
from __future__ import annotations

import importlib.util
import os
import re
import stat
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


def environment(tmp_path: Path, sizes: dict[str, int]) -> tuple[Path, Path]:
    root = tmp_path / "opt" / "dask"
    site = root / "lib" / "python3.11" / "site-packages"
    for name, kib in sizes.items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_bytes(name.encode().ljust(kib * 1024, b"."))
    (root / "bin").mkdir()
    (root / "bin" / "python").symlink_to("/usr/bin/python3")
    return root, site


def layers(tmp_path: Path, root: Path) -> list[dict[str, bytes]]:
    return [tree(layer) if (layer := tmp_path / "layers" / str(k) / root.relative_to("/")).exists() else {}
            for k in (1, 2, 3)]


def test_every_file_keeps_its_path_in_one_layer_and_the_layers_are_balanced(tmp_path: Path) -> None:
    root, site = environment(tmp_path, SIZES)
    before = tree(root)

    filled = split_layers.split(root, tmp_path / "layers", 3)

    parts = [tree(root)] + layers(tmp_path, root)
    merged = {path: data for part in parts for path, data in part.items()}
    assert merged == before
    assert sum(len(part) for part in parts) == len(before), "a file is in two layers"
    assert (root / "bin" / "python").is_symlink()
    share = sum(SIZES.values()) * 1024 / 4 * 1.1
    rest = sum(len(data) for data in parts[0].values())
    # cuBLAS alone is 45 % of this environment (34 % of the lean image's): an empty layer takes it whole
    assert filled[0] == SIZES["nvidia/cublas/lib/libcublas.so"] * 1024, filled
    assert all(size <= share for size in filled[1:]) and rest <= share, (filled, rest)
    assert not (site / "nvidia" / "cublas").exists() and (site / "nvidia" / "__init__.py").exists()


def test_an_environment_without_nvidia_libraries_is_split_too(tmp_path: Path) -> None:
    sizes = {name: kib for name, kib in SIZES.items() if not name.startswith("nvidia/")}
    root, _ = environment(tmp_path, sizes)
    before = tree(root)
    filled = split_layers.split(root, tmp_path / "layers", 3)
    parts = [tree(root)] + layers(tmp_path, root)
    assert {path: data for part in parts for path, data in part.items()} == before
    assert all(filled) and sum(len(part) for part in parts) == len(before)


def test_the_folders_a_layer_makes_carry_the_originals_modes_and_times(tmp_path: Path) -> None:
    root, site = environment(tmp_path, SIZES)
    os.chmod(site / "nvidia", 0o700)
    os.chmod(root / "lib", 0o700)
    os.utime(root / "lib", (1_000_000_000, 1_000_000_000))
    split_layers.split(root, tmp_path / "layers", 3)
    layer = tmp_path / "layers" / "1"
    made_site = layer / site.relative_to("/")
    assert stat.S_IMODE((made_site / "nvidia").stat().st_mode) == 0o700
    assert stat.S_IMODE((layer / (root / "lib").relative_to("/")).stat().st_mode) == 0o700
    assert (layer / (root / "lib").relative_to("/")).stat().st_mtime == 1_000_000_000
    # site-packages changed as entries left it: the layer's folder has its times after the split
    assert made_site.stat().st_mtime == site.stat().st_mtime
    assert stat.S_IMODE(layer.stat().st_mode) == stat.S_IMODE(Path("/").stat().st_mode)


def test_the_dockerfile_copies_every_layer_the_stage_makes() -> None:
    dockerfile = (ROOT / "images" / "Dockerfile").read_text()
    bins = int(re.search(r"split_layers\.py /opt/dask /layers (\d+)", dockerfile).group(1))  # type: ignore[union-attr]
    copies = re.findall(r"^COPY --from=layers /layers/(\d+)/ /$", dockerfile, re.MULTILINE)
    assert copies == [str(k) for k in range(1, bins + 1)]
    assert "COPY --from=layers /opt/dask /opt/dask" in dockerfile
