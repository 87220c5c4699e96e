#!/usr/bin/env python3
"""Print a short content hash of the image sources and build settings (the image tag's suffix).

    content_hash.py IMAGES_DIR RELEASE CUDA_MAJOR PROFILE BASE_IMAGE
A changed Dockerfile, requirement, pin or verification-client file, or build setting gives a new hash. Of the
pins files only the build's own counts (the image installs from it alone), so adding pins for another release or
CUDA major changes no image.
"""
import hashlib
import sys
from pathlib import Path

SKIP = {"__pycache__", ".pytest_cache", "build"}


def content_hash(images: Path, settings: list[str]) -> str:
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
    return digest.hexdigest()[:12]


if __name__ == "__main__":
    print(content_hash(Path(sys.argv[1]), sys.argv[2:]))
