#!/usr/bin/env python3
"""The one place that installs the wheels carried to a lent GPU machine (it cannot reach a package index) and sets
the environment the proofs run in. Sources, each used when it is there (tests/gpu/README.md, "Carries"):

    .whl/*.whl                 the Dask set, bokeh, yaml, ansible-core and resolvelib (tests/gpu/carry-compose.sh)
    .gpuparts/pN/part-*        RAPIDS 26.10 for CUDA 13 (cuDF, dask-cudf, numpy 2.4.6...), one device call a part
                               (tests/gpu/carry-wheels.sh): copied to /var/tmp/parts, used when every part is there
    .gpuparts/ucx, .gpuparts/ans   the UCX wheels, ansible-core for the renders
    /var/tmp/polars/*.whl      the polars profile's wheels, copied there by an earlier part call
    .ucx/ucx-site.tar.xz       a pruned UCX site, unpacked to /tmp/ucx-site

Every part and wheel set with a checksum file in tests/gpu/results/ is checked. One `pip install --target` into
/tmp/site (one wheel per distribution, the first source above it in this order wins: rapids, ucx, ans, polars, whl);
a later call on the same warm machine with the same wheels reuses it. The environment puts this tree's verification
client first, then /tmp/ucx-site, then /tmp/site (its numpy before the machine's: the machine's numba-cuda calls
np.row_stack, which its own numpy lacks), and console scripts for dask-gpu-verify, -bench, -healthcheck and `dask`.

    eval "$(python3 tests/gpu/carried.py [--require rapids,ucx,polars])"     # prints `export K=V` lines
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "tests" / "gpu" / "results"
PART_SUMS = RESULTS / "etl-h100" / "wheels.sha256"
UCX_SUMS = RESULTS / "h200x2-frames" / "ucx-wheels.sha256"
POLARS_SUMS = RESULTS / "polars-h200x4" / "polars-wheels.sha256"
PARTS = Path("/var/tmp/parts")
POLARS = Path("/var/tmp/polars")
SITE = Path("/tmp/site")
UCX_SITE = Path("/tmp/ucx-site")
BIN = Path("/tmp/verify-bin")
# Lent multi-GPU machines: no NVLink multicast in any program started here (tests/gpu/README.md, "The lent machines").
NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
# images/verify's console scripts (its pyproject's [project.scripts]) run from this tree's source; `dask` as
# `python3 -m dask` (on a lent 4 x H200 the carried Dask's console script was missing).
SCRIPTS = {"dask-gpu-verify": "cli", "dask-gpu-healthcheck": "health", "dask-gpu-bench": "bench"}


class CarryError(RuntimeError):
    """A carried part or wheel is missing or damaged."""


@dataclass
class Found:
    """Wheels by source, what was left out and why."""

    wheels: dict[str, list[Path]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as source:
        for block in iter(lambda: source.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def sums(path: Path) -> dict[str, str]:
    """A sha256sum file: name -> digest."""
    return {name: digest for digest, name in (line.split(maxsplit=1) for line in path.read_text().splitlines()
                                              if line.strip())}


def check(folder: Path, wanted: dict[str, str]) -> None:
    for name, digest in wanted.items():
        path = folder / name
        if not path.is_file() or sha256(path) != digest:
            raise CarryError(f"{path}: missing or not the checksum of {PART_SUMS.name if 'part' in name else name}")


def rapids(work: Path) -> list[Path]:
    """The RAPIDS wheels from the parts (this call's carried ones copied to /var/tmp/parts first); [] without all."""
    wanted = sums(PART_SUMS)
    parts = {Path(name).name: digest for name, digest in wanted.items() if "/part-" in name}
    PARTS.mkdir(parents=True, exist_ok=True)
    for carried in sorted((ROOT / ".gpuparts").glob("p*/part-*")):
        # this call's part replaces an earlier one of the same name: split parts of a rebuild have the same sizes, so
        # a size check would keep a stale part on a warm machine and fail the checksums
        target = PARTS / carried.name
        if not (target.exists() and target.samefile(carried)):
            shutil.copyfile(carried, target)
    if not all((PARTS / name).exists() for name in parts):
        return []
    check(PARTS, parts)
    tar = work / "wheels.tar"
    with tar.open("wb") as sink:
        for name in sorted(parts):
            with (PARTS / name).open("rb") as source:
                shutil.copyfileobj(source, sink)
    if sha256(tar) != wanted["wheels.tar"]:
        raise CarryError("the parts' wheels.tar has another checksum")
    with tarfile.open(tar) as archive:
        archive.extractall(work, filter="data")
    tar.unlink()
    return sorted((work / "wheels").glob("*.whl"))


def checked(folder: Path, sums_file: Path, base: Path) -> list[Path]:
    """Wheels of FOLDER checked against SUMS_FILE (names relative to BASE); [] when the folder is not there."""
    if not folder.is_dir():
        return []
    check(base, sums(sums_file))
    return sorted(folder.glob("*.whl"))


def find(work: Path) -> Found:
    found = Found()
    found.wheels["rapids"] = rapids(work)
    if not found.wheels["rapids"]:
        found.notes.append(f"rapids: not every part in {PARTS} (cuDF not installed)")
    found.wheels["ucx"] = checked(ROOT / ".gpuparts" / "ucx", UCX_SUMS, ROOT / ".gpuparts")
    found.wheels["ans"] = sorted((ROOT / ".gpuparts" / "ans").glob("*.whl"))
    found.wheels["polars"] = checked(POLARS, POLARS_SUMS, POLARS.parent)
    found.wheels["whl"] = sorted((ROOT / ".whl").glob("*.whl"))
    return found


def distribution(wheel: Path) -> str:
    return re.sub(r"[-_.]+", "-", wheel.name.split("-")[0]).lower()


def one_each(found: Found) -> list[Path]:
    """One wheel per distribution, the first source wins (two versions of one stop the whole install)."""
    chosen: dict[str, Path] = {}
    for wheels in found.wheels.values():
        for wheel in wheels:
            chosen.setdefault(distribution(wheel), wheel)
    return sorted(chosen.values())


def install(wheels: list[Path], site: Path = SITE) -> bool:
    """pip install --target SITE, unless SITE already holds exactly these wheels; True when it installed."""
    key = json.dumps(sorted(wheel.name for wheel in wheels))
    marker = site / ".installed"
    if marker.exists() and marker.read_text() == key:
        return False
    shutil.rmtree(site, ignore_errors=True)
    if wheels:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                        "--no-cache-dir", "--disable-pip-version-check", "--upgrade", "--target", str(site),
                        *map(str, wheels)], check=True)
    site.mkdir(parents=True, exist_ok=True)
    marker.write_text(key)
    return True


def ucx_site() -> bool:
    archive = ROOT / ".ucx" / "ucx-site.tar.xz"
    if not archive.exists():
        return False
    UCX_SITE.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive) as source:
        source.extractall(UCX_SITE, filter="data")
    return True


def console_scripts() -> None:
    BIN.mkdir(parents=True, exist_ok=True)
    for name, module in SCRIPTS.items():
        (BIN / name).write_text(f'#!/bin/sh\nexec python3 -c "import sys; from dask_gpu_verify.{module} import main; '
                                f'sys.exit(main())" "$@"\n')
    (BIN / "dask").write_text('#!/bin/sh\nexec python3 -m dask "$@"\n')
    for path in BIN.iterdir():
        path.chmod(0o755)


def environment(base: dict[str, str], with_ucx_site: bool) -> dict[str, str]:
    """What changes in the environment: PYTHONPATH, PATH, unbuffered Python, no NVLink multicast."""
    paths = [str(ROOT / "images" / "verify" / "src"), *([str(UCX_SITE)] if with_ucx_site else []), str(SITE)]
    old = [p for p in base.get("PYTHONPATH", "").split(":") if p and p not in paths]
    return {"PYTHONPATH": ":".join(paths + old), "PATH": f"{BIN}:{SITE / 'bin'}:{base.get('PATH', '/usr/bin:/bin')}",
            "PYTHONUNBUFFERED": "1", **NO_MULTICAST}


def prepare(require: set[str], work: Path = Path("/var/tmp/carried")) -> tuple[dict[str, str], str]:
    """Install what is carried; the environment changes and a one-line account. Raises CarryError when a REQUIRE'd
    source (rapids, ucx, polars, whl) is not there."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    found = find(work)
    missing = sorted(name for name in require if not found.wheels.get(name))
    if missing:
        raise CarryError(f"required but not carried: {', '.join(missing)}; " + "; ".join(found.notes))
    wheels = one_each(found)
    installed = install(wheels)
    shutil.rmtree(work, ignore_errors=True)
    with_ucx = ucx_site()
    console_scripts()
    counts = ", ".join(f"{name} {len(items)}" for name, items in found.wheels.items() if items)
    account = (f"carried wheels: {counts or 'none'}; {len(wheels)} distributions "
               f"{'installed' if installed else 'already installed'} in {SITE}"
               + ("; ucx-site unpacked" if with_ucx else "") + "".join(f"; {note}" for note in found.notes))
    return environment(dict(os.environ), with_ucx), account


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--require", default="", help="comma-separated sources that must be there: rapids, ucx, "
                        "polars, whl (default none)")
    args = parser.parse_args()
    try:
        changes, account = prepare({name for name in args.require.split(",") if name})
    except CarryError as error:
        print(f"carried.py: {error}", file=sys.stderr)
        return 3
    print(account, file=sys.stderr)
    print("\n".join(f"export {key}={shlex.quote(value)}" for key, value in changes.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
