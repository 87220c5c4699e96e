#!/usr/bin/env bash
# Build the parts that carry RAPIDS 26.10's cuDF and dask-cudf (CUDA 13, CPython 3.12, manylinux x86_64, the versions
# of images/pins/rapids-26.10-cuda13.txt) to a lent GPU machine, one device call per part (docs/performance.md;
# the technique: tests/gpu/README.md, "The lent machines"). The machine has CuPy 14.2, numba-cuda, cuda-bindings, pandas,
# pyarrow and fsspec; everything else the ETL proof needs is here, numpy 2.4.6 included (its numba-cuda calls
# np.row_stack, which its own numpy lacks).
#   tests/gpu/carry-wheels.sh [DEST]     # DEST defaults to .gpuparts (ignored through .git/info/exclude)
# Writes DEST/wheels/*.whl, one uncompressed tar of them split in 59 MiB parts DEST/p1/part-00, DEST/p2/part-01, ...,
# and the sha256 of every part and of the tar to tests/gpu/results/etl-h100/wheels.sha256 (the last call checks them).
# Reproducible (issues 63, 65): the same wheels make the same tar and parts byte for byte (wheels-lib.sh's
# reproducible_tar: no download times, owners or umask in it), and the tracked checksum file is rewritten only when its
# content changes, so a rerun leaves `git status` clean and a `git archive HEAD` snapshot matches the parts.
set -euo pipefail
cd "$(dirname "$0")/../.."
export LC_ALL=C   # the globs below (part-*, p*/part-*) in byte order
dest="${1:-.gpuparts}"
dest=${dest%/}
pins=images/pins/rapids-26.10-cuda13.txt
sums=tests/gpu/results/etl-h100/wheels.sha256
names=(cudf-cu13 dask-cudf-cu13 libcudf-cu13 pylibcudf-cu13 rmm-cu13 librmm-cu13 libkvikio-cu13 nvidia-libnvcomp-cu13
       rapids-logger nvtx numpy dask distributed dask-cuda rapids-dask-dependency tornado zict tblib partd locket
       cachetools typing-extensions cuda-core cuda-pathfinder prometheus-client)
# shellcheck source=tests/gpu/wheels-lib.sh
. tests/gpu/wheels-lib.sh
# the carry folders, and DEST when it is another folder inside the checkout
exclude_carry_folders
case $dest in /* | ..*) ;; *) exclude_folders "$dest" ;; esac
rm -rf "$dest/wheels"; mkdir -p "$dest/wheels"
mapfile -t specs < <(pinned_specs "$pins" "${names[@]}")
[ "${#specs[@]}" -eq "${#names[@]}" ] || exit 1
download_wheels "$dest/wheels" "${specs[@]}"
count=${#specs[@]}
rm -rf "$dest"/p[0-9]* "$dest/wheels.tar"
reproducible_tar "$dest" wheels >"$dest/wheels.tar"
split -b 59M -d "$dest/wheels.tar" "$dest/part-"
i=0
for part in "$dest"/part-*; do i=$((i + 1)); mkdir -p "$dest/p$i"; mv "$part" "$dest/p$i/"; done
mkdir -p "$(dirname "$sums")"
(cd "$dest" && sha256sum p*/part-* wheels.tar) | write_if_changed "$sums"
rm -f "$dest/wheels.tar"
echo "$count wheels, $(du -sh "$dest/wheels" | cut -f1), $i parts; checksums in $sums"
