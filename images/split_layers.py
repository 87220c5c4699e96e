"""Split the image's environment into layers of similar size (run in the Dockerfile's `layers` stage).

    python3 split_layers.py ROOT OUT N
Moves the largest top-level entries of ROOT's site-packages (and of its `nvidia/` folder, where the CUDA libraries
of the NVIDIA wheels sit) into OUT/1 .. OUT/N under their full paths, so that each of those folders and what stays in
ROOT are about the same size. The runtime stage copies ROOT, then each OUT/k onto `/`: the same files as one
`COPY` of ROOT, as N + 1 layers. `docker push` compresses and `docker pull` unpacks a layer on one core: one 2.4 GB
layer took 152 s to push and 85 s to pull on a 2-core machine; layers of similar size use every core.
"""
import shutil
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
            if entry.name == "nvidia" and entry.is_dir():
                found += [(size(child), child) for child in entry.iterdir() if child.is_dir()]
            else:
                found.append((size(entry), entry))
    return sorted(found, key=lambda item: (-item[0], str(item[1])))


def split(root: Path, out: Path, bins: int) -> list[int]:
    """Greedy: the largest entries first, each into the least-filled bin while that bin stays under a share of the
    whole (an entry larger than a share gets an empty bin to itself: cuBLAS, 817 of the lean image's 2,327 MB)."""
    share = size(root) // (bins + 1)
    filled = [0] * bins
    for entry_size, entry in candidates(root):
        k = min(range(bins), key=filled.__getitem__)
        if filled[k] and filled[k] + entry_size > share * 1.1:
            continue
        target = out / str(k + 1) / entry.relative_to("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(entry, target)
        filled[k] += entry_size
    for k in range(bins):
        (out / str(k + 1)).mkdir(parents=True, exist_ok=True)
    return filled


def main() -> None:
    root, out, bins = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
    filled = split(root, out, bins)
    print("layers (MB):", size(root) // 10**6, *(f // 10**6 for f in filled))


if __name__ == "__main__":
    main()
