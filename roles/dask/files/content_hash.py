#!/usr/bin/env python3
"""Print a short content hash of the image sources and build settings (the image tag's suffix).

    content_hash.py IMAGES_DIR RELEASE CUDA_MAJOR PROFILE BASE_IMAGE [--package REQ]... [--requirements-file F]
                    [--wheels-dir D]
A changed Dockerfile, requirement, pin or verification-client file, build setting, or extra package (a requirement,
the requirements file's text, a wheel's name and bytes: dask_images_extra_*) gives a new hash. Of the pins files only
the build's own counts (the image installs from it alone), so adding pins for another release or CUDA major changes
no image. A requirements file or wheels folder that cannot be read adds nothing (the checks name it).
"""
import argparse
import hashlib
from pathlib import Path

SKIP = {"__pycache__", ".pytest_cache", "build"}


def content_hash(images: Path, settings: list[str], packages: list[str] | None = None,
                 requirements_file: str = "", wheels_dir: str = "") -> str:
    digest = hashlib.sha256("\0".join(settings).encode())
    release, cuda = (settings + ["", ""])[:2]
    own_pins = Path("pins") / f"rapids-{release}-cuda{cuda}.txt"
    for path in sorted(p for p in images.rglob("*") if p.is_file()):
        relative = path.relative_to(images)
        if SKIP.intersection(relative.parts) or any(part.endswith(".egg-info") for part in relative.parts):
            continue
        if relative.parts[0] == "pins" and relative != own_pins:
            continue
        digest.update(str(relative).encode() + b"\0" + path.read_bytes() + b"\0")
    extras = [f"package {package}".encode() for package in packages or []]
    if requirements_file and Path(requirements_file).is_file():
        extras.append(b"requirements " + Path(requirements_file).read_bytes())
    if wheels_dir and Path(wheels_dir).is_dir():
        extras += [f"wheel {wheel.name}".encode() + b"\0" + wheel.read_bytes()
                   for wheel in sorted(Path(wheels_dir).glob("*.whl"))]
    for extra in extras:  # nothing added without extras: the tag of a build without them stays as it was
        digest.update(b"extra\0" + extra + b"\0")
    return digest.hexdigest()[:12]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("images", type=Path)
    parser.add_argument("settings", nargs="*")
    parser.add_argument("--package", action="append", default=[])
    parser.add_argument("--requirements-file", default="")
    parser.add_argument("--wheels-dir", default="")
    args = parser.parse_args()
    print(content_hash(args.images, args.settings, args.package, args.requirements_file, args.wheels_dir))


if __name__ == "__main__":
    main()
