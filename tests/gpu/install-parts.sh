# shellcheck shell=bash
# Sourced by the GPU proofs that run RAPIDS from carried wheels (gpu-proof-scaling.sh, gpu-proof-polars.sh): RAPIDS
# 26.10 for CUDA 13 in parts (tests/gpu/carry-wheels.sh: .gpuparts/pN, one device call each, copied to
# /var/tmp/parts; the last part travels with the proof's own call), the UCX wheels in .gpuparts/ucx, ansible-core for
# the renders in .gpuparts/ans, and, where a part call copied them to /var/tmp/polars, the polars profile's wheels
# (.gpuparts/polars, checked against tests/gpu/results/polars-h200x4/polars-wheels.sha256). Installed once into
# /tmp/site; a later call on the same warm machine reuses it. Then the carried numpy comes first (the machine's
# numba-cuda calls np.row_stack, which its own numpy lacks) and this tree's verification client (python-env.sh).
# Multi-GPU machines: no NVLink multicast (../shared/reference/gpu-docker.md).
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
  extra=()
  if [ -d /var/tmp/polars ]; then
    (cd /var/tmp && sha256sum --quiet -c "$OLDPWD/tests/gpu/results/polars-h200x4/polars-wheels.sha256") || exit 3
    extra=(/var/tmp/polars/*.whl)
  fi
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    "$work"/wheels/*.whl .gpuparts/ucx/*.whl .gpuparts/ans/*.whl "${extra[@]}"
  rm -rf "$work"
  touch /tmp/site/.installed
fi
export PYTHONPATH="/tmp/site" PATH="/tmp/site/bin:$PATH"
# shellcheck source=tests/gpu/python-env.sh
. tests/gpu/python-env.sh
