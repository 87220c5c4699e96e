"""Your own packages built into the images (images/extra/, what dask_images_extra_* stage there): a package from
the index and a local wheel land in the one environment, in the image's lock, with the profile's layer reused; a
wheel whose dependency would change Dask fails the build, and pip's message names the package and the pin."""
from __future__ import annotations

import base64
import hashlib
import shutil
import subprocess
import uuid
import zipfile
from pathlib import Path

from dockerutil import ROOT, docker, settings


def make_wheel(folder: Path, name: str, requires: tuple[str, ...] = ()) -> Path:
    """A pure-Python wheel of one module `name` holding VALUE = 42 (no build backend needed)."""
    dist = f"{name}-1.0"
    files = {f"{name}/__init__.py": b"VALUE = 42\n",
             f"{dist}.dist-info/METADATA": ("Metadata-Version: 2.1\nName: " + name.replace("_", "-")
                                            + "\nVersion: 1.0\n"
                                            + "".join(f"Requires-Dist: {r}\n" for r in requires)).encode(),
             f"{dist}.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\n"
                                         b"Tag: py3-none-any\n"}
    record = "".join(f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},"
                     f"{len(data)}\n" for path, data in files.items()) + f"{dist}.dist-info/RECORD,,\n"
    wheel = folder / f"{dist}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, data in files.items():
            archive.writestr(path, data)
        archive.writestr(f"{dist}.dist-info/RECORD", record)
    return wheel


def build(context: Path, tag: str) -> subprocess.CompletedProcess[str]:
    s = settings()
    args = ["buildx", "build", "--load", "--target", "scheduler", "-t", tag]
    for key in ("BASE_IMAGE", "RAPIDS_RELEASE", "CUDA_MAJOR", "PROFILE"):
        args += ["--build-arg", f"{key}={s[key]}"]
    args += ["--build-arg", "PIP_INDEX_URL=", "--build-arg", "BAKE_EXTRA_CA=false"]
    ca = Path("/etc/ssl/certs/ca-certificates.crt")
    if ca.is_file():
        args += ["--secret", f"id=extra_ca,src={ca}"]
    return docker(*args, str(context), check=False, timeout=1500)


def staged(tmp_path: Path) -> Path:
    context = tmp_path / "context"
    shutil.copytree(ROOT / "images", context, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build"))
    shutil.rmtree(context / "extra")
    (context / "extra" / "wheels").mkdir(parents=True)
    return context


def test_own_packages_are_in_the_image_and_its_lock(tmp_path: Path) -> None:
    context = staged(tmp_path)
    (context / "extra" / "requirements.txt").write_text("six\n")
    make_wheel(context / "extra" / "wheels", "dask_gpu_private_demo")
    tag = f"dask-gpu-extra-test:{uuid.uuid4().hex[:8]}"
    result = build(context, tag)
    try:
        assert result.returncode == 0, result.stderr[-3000:]
        out = docker("run", "--rm", "--entrypoint", "python", tag, "-c",
                     "import six, dask, dask_gpu_private_demo as p; print(p.VALUE, dask.__version__)").stdout.split()
        pins = (ROOT / "images" / "pins" / f"rapids-{settings()['RAPIDS_RELEASE']}-cuda{settings()['CUDA_MAJOR']}.txt")
        assert out[0] == "42" and f"dask=={out[1]}" in pins.read_text().splitlines()
        lock = docker("run", "--rm", "--entrypoint", "cat", tag, "/opt/dask/requirements.lock").stdout
        names = {line.split("==")[0].split(" @ ")[0].lower() for line in lock.splitlines()}
        assert {"six", "dask-gpu-private-demo", "dask", "distributed", "dask-cuda"} <= names, sorted(names)
        print(f"[extras] {tag}: six and a local wheel installed; lock of {len(names)} packages")
    finally:
        docker("rmi", "-f", tag, check=False)


def test_a_wheel_that_would_change_dask_fails_the_build_naming_it(tmp_path: Path) -> None:
    context = staged(tmp_path)
    make_wheel(context / "extra" / "wheels", "needs_future_dask", requires=("dask>=2099.1",))
    result = build(context, f"dask-gpu-extra-test:{uuid.uuid4().hex[:8]}")
    assert result.returncode != 0
    log = result.stderr
    assert "needs-future-dask" in log and "dask>=2099.1" in log and "constraint" in log, log[-3000:]
