#!/usr/bin/env python3
"""Print the shared libraries that ELF files need, found inside an unpacked root (dpkg -x), one `SONAME PATH` a line:
the transitive closure of their DT_NEEDED entries through the root's library folders, glibc's own libraries left out
(the machine that runs them brings its glibc). tests/gpu/carry-browser.sh uses it to carry only what Chromium and
chromedriver load. Exits 1, naming them, if some needed library is in none of the folders.

    elf_closure.py ROOT ELF... [--dir SUBDIR]...
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

GLIBC = frozenset({"libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1", "ld-linux-x86-64.so.2",
                   "libresolv.so.2", "libutil.so.1", "libanl.so.1"})
DIRS = ("usr/lib/chromium", "usr/lib/x86_64-linux-gnu", "lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu/pulseaudio")


def needed(path: Path) -> list[str]:
    out = subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True, check=True).stdout
    return [line.split("[", 1)[1].split("]", 1)[0] for line in out.splitlines() if "(NEEDED)" in line]


def closure(elves: list[Path], dirs: list[Path]) -> tuple[dict[str, Path], set[str]]:
    found: dict[str, Path] = {}
    missing: set[str] = set()
    todo = list(elves)
    while todo:
        for name in needed(todo.pop()):
            if name in GLIBC or name in found or name in missing:
                continue
            hit = next((d / name for d in dirs if (d / name).exists()), None)
            if hit is None:
                missing.add(name)
                continue
            found[name] = hit
            todo.append(hit)
    return found, missing


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("root", type=Path)
    parser.add_argument("elves", type=Path, nargs="+")
    parser.add_argument("--dir", action="append", default=[], help="library folder under ROOT (more than the default)")
    args = parser.parse_args()
    found, missing = closure(args.elves, [args.root / d for d in (*DIRS, *args.dir)])
    for name, path in sorted(found.items()):
        print(name, path)
    if missing:
        print("not found: " + " ".join(sorted(missing)), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
