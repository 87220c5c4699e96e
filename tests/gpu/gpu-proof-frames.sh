#!/usr/bin/env bash
# Data frames on a real GPU (issue 24): the compose stack's scheduler and dask-cuda worker command lines as plain
# processes, with RAPIDS 26.10's cuDF and dask-cudf (CUDA 13, CPython 3.12) carried to the machine in parts
# (docs/performance.md, "Carrying cuDF"); then dask-gpu-verify (the data-frame check on cuDF, each GPU's health
# through NVML) and dask-cuda's local_cudf_merge through the cluster.
#   WHEELS=/tmp/wheels OUT=/tmp/frames tests/gpu/gpu-proof-frames.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${OUT:-/tmp/gpu-frames}"; mkdir -p "$out"
work="$(mktemp -d)"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "${WHEELS:-/tmp/wheels}"/*.whl
# The carried numpy (the pins' 2.4.6) goes first: the machine's numba-cuda calls np.row_stack, which its newer numpy
# lacks, and `import cudf` reaches that code (docs/performance.md).
export PYTHONPATH="/tmp/site:$PWD/images/verify/src" PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1
python3 -c 'import cudf, dask_cudf, cupy, dask, distributed, dask_cuda, numpy, pandas; print("cudf", cudf.__version__, "dask-cudf", dask_cudf.__version__, "cupy", cupy.__version__, "dask", dask.__version__, "dask-cuda", dask_cuda.__version__, "numpy", numpy.__version__, "pandas", pandas.__version__)' | tee "$out/versions.txt"
python3 -m dask_gpu_verify.gpu_health | tee "$out/health.json"

read -r -a scheduler_cmd <<<"$(python3 tests/gpu/compose_commands.py scheduler "$work")"
read -r -a worker_cmd <<<"$(python3 tests/gpu/compose_commands.py worker "$work")"
echo "scheduler: ${scheduler_cmd[*]}" | tee "$out/commands.txt"
echo "worker:    ${worker_cmd[*]}" | tee -a "$out/commands.txt"
# shellcheck disable=SC2329  # called by the EXIT trap
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"; }
pids=(); trap cleanup EXIT
python3 -m dask "${scheduler_cmd[@]:1}" >"$out/scheduler.log" 2>&1 & pids+=($!)
python3 -m dask "${worker_cmd[@]:1}" >"$out/worker.log" 2>&1 & pids+=($!)
gpus=$(nvidia-smi -L | grep -c '^GPU')
python3 - "$gpus" <<'PY' | tee "$out/registration.txt"
import sys, time
from distributed import Client
started = time.monotonic()
with Client("tcp://127.0.0.1:8786", timeout=60) as client:
    client.wait_for_workers(int(sys.argv[1]), timeout=120)
    print(f"{sys.argv[1]} workers registered in {time.monotonic() - started:.1f} s")
PY
status=0
for rows in 10000000 100000000; do
  python3 -m dask_gpu_verify --scheduler tcp://127.0.0.1:8786 --expect-workers "$gpus" --frame-rows "$rows" \
    --json "$out/verify-$rows.json" | tee "$out/verify-$rows.txt" || status=$?
done
python3 -m dask_cuda.benchmarks.local_cudf_merge --scheduler-address tcp://127.0.0.1:8786 -c 50_000_000 --runs 3 \
  2>&1 | tee "$out/local_cudf_merge.txt" | tail -25 || status=$?
exit "$status"
