#!/usr/bin/env bash
# Polars on 1 and every GPU of a lent machine (issue 42): tests/gpu/polars_scaling.py PHASE through the rendered
# cluster of the polars profile (tests/gpu/harness.py). The carried wheels: tests/gpu/install-parts.sh (the polars
# profile's wheels from a part call: `mkdir -p /var/tmp/polars && cp .gpuparts/polars/*.whl /var/tmp/polars/`); the
# TLS files in .gpucerts (tests/gpu/certs.yml).
#   PHASE=all|every|one|bare|large|clients OUT=/tmp/out BUDGET=540 SCALE=100 [CPU_SCALE=500] [CPU_QUERIES=q1,q6]
#   tests/gpu/gpu-proof-polars.sh          (CPU_QUERIES: the large phase runs them on CPU Polars too, at SCALE)
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${OUT:?OUT}" phase="${PHASE:-all}"
mkdir -p "$out"
# shellcheck source=tests/gpu/install-parts.sh
. tests/gpu/install-parts.sh
python3 -c 'import cudf, polars, cudf_polars, rapidsmpf, dask, dask_cuda, ucxx, ansible, yaml; print("cudf", cudf.__version__, "polars", polars.__version__, "cudf-polars", cudf_polars.__version__, "dask", dask.__version__, "dask-cuda", dask_cuda.__version__)' | tee "$out/versions-$phase.txt"
{ nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader; nproc; free -g | sed -n 2p; df -h /var/tmp | tail -1; } | tee "$out/device.txt"
status=0
python3 tests/gpu/polars_scaling.py --phase "$phase" --out "$out" --budget "${BUDGET:-540}" --scale "${SCALE:-100}" \
  --cpu-scale "${CPU_SCALE:-500}" ${CPU_QUERIES:+--cpu-queries "$CPU_QUERIES"} || status=$?
du -sh "$out" | tail -1
exit "$status"
