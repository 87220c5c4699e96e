#!/usr/bin/env bash
# Data frames on 1 and every GPU of a lent machine (issue 42): tests/gpu/frames_scaling.py PHASE through the rendered
# cluster (tests/gpu/harness.py). RAPIDS 26.10 for CUDA 13 comes in parts (tests/gpu/carry-wheels.sh: .gpuparts/pN,
# one device call each, copied to /var/tmp/parts; the last part travels with this call), the UCX wheels in
# .gpuparts/ucx, ansible-core for the renders in .gpuparts/ans, the TLS files in .gpucerts (tests/gpu/certs.yml).
# Installed once into /tmp/site; a later call on the same warm machine reuses it.
#   PHASE=sweep|transports|change OUT=/tmp/out BUDGET=520 tests/gpu/gpu-proof-scaling.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${OUT:?OUT}" phase="${PHASE:?PHASE}"
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if [ ! -f /tmp/site/.installed ]; then
  sums="$PWD/tests/gpu/results/etl-h100/wheels.sha256"
  mkdir -p /var/tmp/parts
  cp .gpuparts/p*/part-* /var/tmp/parts/ 2>/dev/null || true
  (cd /var/tmp/parts && sed -n 's# p[0-9]*/part-# part-#p' "$sums" | sha256sum --quiet -c -) || { echo "parts missing or damaged" >&2; ls -la /var/tmp/parts >&2; exit 3; }
  work=$(mktemp -d)
  cat /var/tmp/parts/part-* >"$work/wheels.tar"
  [ "$(sha256sum <"$work/wheels.tar" | cut -d' ' -f1)" = "$(grep ' wheels.tar$' "$sums" | cut -d' ' -f1)" ] || { echo "wheels.tar checksum" >&2; exit 3; }
  tar -C "$work" -xf "$work/wheels.tar"
  (cd .gpuparts && sha256sum --quiet -c "$OLDPWD/tests/gpu/results/h200x2-frames/ucx-wheels.sha256") || exit 3
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    "$work"/wheels/*.whl .gpuparts/ucx/*.whl .gpuparts/ans/*.whl
  rm -rf "$work"
  touch /tmp/site/.installed
fi
# The carried numpy first (the machine's numba-cuda calls np.row_stack, which its own numpy lacks): PYTHONPATH.
export PYTHONPATH="/tmp/site" PATH="/tmp/site/bin:$PATH"
. tests/gpu/python-env.sh
python3 -c 'import cudf, dask_cudf, dask, distributed, dask_cuda, numpy, ucxx, ansible, yaml, jinja2; print("cudf", cudf.__version__, "dask", dask.__version__, "dask-cuda", dask_cuda.__version__, "numpy", numpy.__version__, "ucxx", ucxx.__version__, "ansible-core", ansible.__version__ if hasattr(ansible, "__version__") else "?")' | tee "$out/versions-$phase.txt"
{ nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader; nproc; free -g | sed -n 2p; } | tee "$out/device.txt"
[ "$phase" != sweep ] || nvidia-smi topo -m >"$out/topo.txt" 2>&1 || true
status=0
python3 tests/gpu/frames_scaling.py --phase "$phase" --out "$out" --budget "${BUDGET:-520}" ${SCALING_ARGS:-} || status=$?
# Scheduler and worker logs of failed starts stay; the ETL data does not travel back.
du -sh "$out" | tail -1
exit "$status"
