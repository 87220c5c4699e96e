#!/usr/bin/env bash
# GPU proof on a machine with NVIDIA GPUs and no Docker: run the compose stack's scheduler and
# dask-cuda worker command lines as plain processes, then the verification client, with CuPy on
# every GPU. Wheels missing on the machine may be carried in .whl/ (see docs/testing.md, "GPU proof").
#   OUT=/tmp/proof tests/gpu/gpu-proof.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${OUT:-/tmp/gpu-proof}"; mkdir -p "$out"
work="$(mktemp -d)"
. tests/gpu/python-env.sh
nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.total --format=csv,noheader | tee "$out/gpus.csv"
gpus=$(grep -c . "$out/gpus.csv")
python3 -c 'import cupy, dask, distributed, dask_cuda, numpy, platform; print("python", platform.python_version(), "cupy", cupy.__version__, "dask", dask.__version__, "distributed", distributed.__version__, "dask-cuda", dask_cuda.__version__, "numpy", numpy.__version__)'

read -r -a scheduler_cmd <<<"$(python3 tests/gpu/compose_commands.py scheduler "$work")"
read -r -a worker_cmd <<<"$(python3 tests/gpu/compose_commands.py worker "$work")"
scheduler_cmd[0]="python3 -m dask"; worker_cmd[0]="python3 -m dask"
echo "scheduler: ${scheduler_cmd[*]}" | tee "$out/commands.txt"
echo "worker:    ${worker_cmd[*]}" | tee -a "$out/commands.txt"

cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"; }
pids=(); trap cleanup EXIT
# shellcheck disable=SC2086  # "python3 -m dask" is meant to split
${scheduler_cmd[0]} "${scheduler_cmd[@]:1}" >"$out/scheduler.log" 2>&1 & pids+=($!)
for _ in $(seq 60); do python3 -c 'import urllib.request as u; u.urlopen("http://127.0.0.1:8787/health", timeout=1)' 2>/dev/null && break; sleep 0.5; done
started=$(date +%s.%N)
# shellcheck disable=SC2086
${worker_cmd[0]} "${worker_cmd[@]:1}" >"$out/worker.log" 2>&1 & pids+=($!)
python3 tests/gpu/wait_workers.py "$gpus" "$started" | tee "$out/registration.txt"
status=0
python3 -m dask_gpu_verify --scheduler tcp://127.0.0.1:8786 --expect-workers "$gpus" --json "$out/verify.json" \
  "$@" | tee "$out/verify.txt" || status=$?
exit "$status"
