"""Files written whole or not at all: the one atomic write of the collection's modules, and the one comparison that
decides whether a file needs writing."""
from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable


def write_atomic(path: str, data: bytes, mode: int, move: Callable[[str, str], object] = os.replace,
                 make_folder: bool = False) -> None:
    """Write data to path through a temporary file beside it (.dask-bundle-*, given its mode first), then move it
    over path: a reader sees the old file or the new one, never a part. `move` is os.replace, or a module's
    atomic_move (which also keeps the file's SELinux context); make_folder creates a missing folder (0755)."""
    folder = os.path.dirname(path)
    if make_folder:
        os.makedirs(folder, mode=0o755, exist_ok=True)
    handle, temp = tempfile.mkstemp(dir=folder, prefix=".dask-bundle-")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.chmod(temp, mode)
        move(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def differs(path: str, content: bytes) -> bool:
    """Whether the file at path is missing or holds other bytes than content."""
    if not os.path.exists(path):
        return True
    with open(path, "rb") as handle:
        return handle.read() != content
