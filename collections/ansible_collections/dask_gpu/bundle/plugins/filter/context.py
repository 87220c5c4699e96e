"""The image build context as files for one write (roles/dask_images/tasks/build.yml): every file under images/ that
Docker would send (images/.dockerignore's patterns left out), with its content and mode, placed under the build
host's context folder, so the `files` module writes them all in one task instead of a module run per file."""
from __future__ import annotations

import fnmatch
import os
from pathlib import Path
from typing import Any


def _ignored(relative: Path, patterns: list[str]) -> bool:
    """A path Docker leaves out: `**/NAME` patterns match any component of it, others the whole relative path."""
    for pattern in patterns:
        if pattern.startswith("**/"):
            if any(fnmatch.fnmatch(part, pattern[3:]) for part in relative.parts):
                return True
        elif fnmatch.fnmatch(str(relative), pattern):
            return True
    return False


def context_files(source: str, dest: str) -> list[dict[str, str]]:
    """[{path, content, mode}] for each file under `source` (sorted), its path under `dest`. Text files only (the
    context is a Dockerfile, requirement lists, pins and Python sources); a binary file fails with its name."""
    root = Path(source)
    ignore = root / ".dockerignore"
    patterns = [line.strip() for line in ignore.read_text().splitlines()
                if line.strip() and not line.startswith("#")] if ignore.is_file() else []
    files: list[dict[str, str]] = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        relative = path.relative_to(root)
        if _ignored(relative, patterns):
            continue
        try:
            content = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as error:
            raise ValueError(f"{path}: the build context takes text files only ({error})") from error
        files.append({"path": os.path.join(dest, str(relative)), "content": content,
                      "mode": f"{path.stat().st_mode & 0o7777:04o}"})
    return files


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"context_files": context_files}
