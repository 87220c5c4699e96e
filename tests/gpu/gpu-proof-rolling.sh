#!/usr/bin/env bash
# Rolling restart on a real GPU machine (issue 12) with the bundle's dask-gpu-roll, as plain processes (the GPU
# machines have no systemd): tests/gpu/rolling_probe.py says what is checked. Needs 2 GPUs.
#   OUT=/tmp/rolling CERTS_DIR=.gpucerts bash tests/gpu/gpu-proof-rolling.sh
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
out="${OUT:-/tmp/gpu-proof-rolling}"; mkdir -p "$out"
# shellcheck source=tests/gpu/python-env.sh
. tests/gpu/python-env.sh
nvidia-smi --query-gpu=index,uuid,name,memory.total,driver_version --format=csv,noheader | tee "$out/gpus.csv"
python3 -c "import dask, distributed, dask_cuda, cupy; print('dask', dask.__version__, 'distributed', distributed.__version__, 'dask-cuda', dask_cuda.__version__, 'cupy', cupy.__version__)" | tee "$out/versions.txt"
python3 tests/gpu/rolling_probe.py --certs "${CERTS_DIR:-.gpucerts}" --out "$out" 2>&1 | tee "$out/probe.txt"
status=${PIPESTATUS[0]}
grep -E "^(PASS|FAIL) " "$out/probe.txt" > "$out/checks.txt"
exit "$status"
