"""Split the image's environment into layers of similar size (run in the Dockerfile's `layers` stage).

    python3 split_layers.py ROOT OUT N
Moves the largest top-level entries of ROOT's site-packages (and of its `nvidia/` folder, where the CUDA libraries
of the NVIDIA wheels sit) into OUT/1 .. OUT/N under their full paths, so that each of those folders and what stays in
ROOT are about the same size. The runtime stage copies ROOT, then each OUT/k onto `/`: the same files as one `COPY`
of ROOT, as N + 1 layers. Every folder on the way to a moved entry (OUT/k itself standing for `/`) gets the mode,
owner and times of the folder it lands on, since `COPY` gives an existing folder those of its source. `docker push`
compresses the layers of an image in parallel (one 2.39 GB layer compresses on one core); `docker pull` downloads
them in parallel and unpacks them in order.
"""
import os
import stat
import subprocess
import sys
from pathlib import Path


def size(path: Path) -> int:
    if path.is_symlink() or not path.is_dir():
        return path.lstat().st_size
    return sum(size(child) for child in path.iterdir())


def candidates(root: Path) -> list[tuple[int, Path]]:
    """Top-level entries of every site-packages, with nvidia/'s children instead of nvidia/ itself."""
    found = []
    for site in sorted(root.glob("lib/python3*/site-packages")):
        for entry in site.iterdir():
            if entry.name == "nvidia" and entry.is_dir() and not entry.is_symlink():
                found += [(size(child), child) for child in entry.iterdir() if child.is_dir()]
            else:
                found.append((size(entry), entry))
    return sorted(found, key=lambda item: (-item[0], str(item[1])))


def mirror(layer: Path, folders: set[Path]) -> None:
    """The folders a layer made on the way to its entries (and the layer's own folder, copied onto `/`) take the
    mode, owner and times of the folders they will be copied onto."""
    for folder in sorted(folders | {layer}, key=lambda path: -len(path.parts)):  # deepest first: parents' times last
        original = os.stat(Path("/") / folder.relative_to(layer))
        os.chmod(folder, stat.S_IMODE(original.st_mode))
        if (folder.stat().st_uid, folder.stat().st_gid) != (original.st_uid, original.st_gid):
            os.chown(folder, original.st_uid, original.st_gid)
        os.utime(folder, ns=(original.st_atime_ns, original.st_mtime_ns))


def split(root: Path, out: Path, bins: int) -> list[int]:
    """Greedy: the largest entries first, each into the least-filled bin while that bin stays under a share of the
    whole; an empty bin takes an entry whatever its size (cuBLAS is 817 of the lean environment's 2,392 MB)."""
    root = root.resolve()
    share = size(root) // (bins + 1)
    filled = [0] * bins
    moved: list[tuple[Path, Path]] = []
    for entry_size, entry in candidates(root):
        k = min(range(bins), key=filled.__getitem__)
        if filled[k] and filled[k] + entry_size > share * 1.1:
            continue
        moved.append((entry, out / str(k + 1) / entry.relative_to("/")))
        filled[k] += entry_size
    for entry, target in moved:
        target.parent.mkdir(parents=True, exist_ok=True)
        # GNU mv: a rename, or where overlayfs refuses one (a folder of a lower layer), a copy that keeps owners,
        # modes, times and links, then the removal
        subprocess.run(["mv", "-T", str(entry), str(target)], check=True)
    for k in range(bins):
        layer = out / str(k + 1)
        layer.mkdir(parents=True, exist_ok=True)
        made = {parent for _, target in moved if target.is_relative_to(layer)
                for parent in target.parents if parent.is_relative_to(layer) and parent != layer}
        mirror(layer, made)
    return filled


def main() -> None:
    root, out, bins = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
    filled = split(root, out, bins)
    print("layers (MB):", size(root) // 10**6, *(f // 10**6 for f in filled))


if __name__ == "__main__":
    main()
