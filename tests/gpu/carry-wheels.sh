#!/usr/bin/env bash
# Build the parts that carry RAPIDS 26.10's cuDF and dask-cudf (CUDA 13, CPython 3.12, manylinux x86_64, the versions
# of images/pins/rapids-26.10-cuda13.txt) to a lent GPU machine, one device call per part (docs/performance.md;
# the technique: ../shared/reference/gpu-carry.md). The machine has CuPy 14.2, numba-cuda, cuda-bindings, pandas,
# pyarrow and fsspec; everything else the ETL proof needs is here, numpy 2.4.6 included (its numba-cuda calls
# np.row_stack, which its own numpy lacks).
#   tests/gpu/carry-wheels.sh [DEST]     # DEST defaults to .gpuparts (ignored through .git/info/exclude)
# Writes DEST/wheels/*.whl, one uncompressed tar of them split in 59 MiB parts DEST/p1/part-00, DEST/p2/part-01, ...,
# and the sha256 of every part and of the tar to tests/gpu/results/etl-h100/wheels.sha256 (the last call checks them).
set -euo pipefail
cd "$(dirname "$0")/../.."
dest="${1:-.gpuparts}"
pins=images/pins/rapids-26.10-cuda13.txt
sums=tests/gpu/results/etl-h100/wheels.sha256
names=(cudf-cu13 dask-cudf-cu13 libcudf-cu13 pylibcudf-cu13 rmm-cu13 librmm-cu13 libkvikio-cu13 nvidia-libnvcomp-cu13
       rapids-logger nvtx numpy dask distributed dask-cuda rapids-dask-dependency tornado zict tblib partd locket
       cachetools typing-extensions cuda-core cuda-pathfinder prometheus-client)
mkdir -p .git/info
grep -qx "/${dest}/" .git/info/exclude 2>/dev/null || echo "/${dest}/" >>.git/info/exclude
rm -rf "$dest/wheels"; mkdir -p "$dest/wheels"
platforms=()
for n in 17 24 27 28 31 34 35; do platforms+=(--platform "manylinux_2_${n}_x86_64"); done
specs=()
for name in "${names[@]}"; do
  version=$(grep -i "^${name}==" "$pins" | cut -d= -f3)
  [ -n "$version" ] || { echo "no pin for $name in $pins" >&2; exit 1; }
  specs+=("${name}==${version}")
done
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp --abi cp312 \
  --abi abi3 --abi none --platform manylinux2014_x86_64 "${platforms[@]}" --platform any -d "$dest/wheels" "${specs[@]}" \
  2> >(grep -v 'is ignored: it is neither a file nor a directory' >&2)
count=$(find "$dest/wheels" -name '*.whl' | wc -l)
[ "$count" -eq "${#names[@]}" ] || { echo "expected ${#names[@]} wheels, found $count" >&2; exit 1; }
rm -rf "$dest"/p[0-9]* "$dest/wheels.tar"
tar -C "$dest" -cf "$dest/wheels.tar" wheels
split -b 59M -d "$dest/wheels.tar" "$dest/part-"
i=0
for part in "$dest"/part-*; do i=$((i + 1)); mkdir -p "$dest/p$i"; mv "$part" "$dest/p$i/"; done
mkdir -p "$(dirname "$sums")"
(cd "$dest" && sha256sum p*/part-* wheels.tar) >"$sums"
rm -f "$dest/wheels.tar"
echo "$count wheels, $(du -sh "$dest/wheels" | cut -f1), $i parts; checksums in $sums"
