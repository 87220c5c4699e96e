#!/usr/bin/env bash
# GPU proof of the units' command lines, on a GPU machine without Docker or systemd:
#  1. playbooks/render-commands.yml (with tests/gpu/inventory.yml, real GPU facts from nvidia-smi) writes the
#     scheduler, worker and verification command lines and environments exactly as the units and
#     playbooks/verify.yml run them inside their containers;
#  2. this script runs them as plain processes, with the container paths (/etc/dask/tls, /var/lib/dask)
#     made on the machine, and the TLS material from tests/gpu/certs.yml (carried in CERTS_DIR);
#  3. the verification client must pass: one worker per GPU, distinct UUIDs, correct CuPy result.
#   OUT=/tmp/proof CERTS_DIR=.gpucerts [RENDER_EXTRA='{"dask_worker_gpus": ["0"]}'] [BENCH=1] tests/gpu/gpu-proof-units.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${OUT:-/tmp/gpu-proof}"; mkdir -p "$out/rendered"
certs="${CERTS_DIR:-.gpucerts}"
. tests/gpu/python-env.sh
export ANSIBLE_NOCOLOR=1
nvidia-smi --query-gpu=index,uuid,name,memory.total,driver_version,compute_cap --format=csv,noheader,nounits \
  | tee "$out/nvidia-smi-query.csv"
nvidia-smi -L | tee "$out/nvidia-smi-L.txt"
nvidia-smi topo -m > "$out/topo.txt" 2>&1 || true

ansible-playbook -i tests/gpu/inventory.yml playbooks/render-commands.yml -e "render_dir=$out/rendered" \
  -e "${RENDER_EXTRA:-{\}}" \
  >"$out/render.log" 2>&1 || { tail -40 "$out/render.log"; exit 1; }
for f in "$out"/rendered/*-dask-*.sh; do echo "== $f"; grep -h '^exec ' "$f"; done | tee "$out/commands.txt"

install -d -m 0750 /etc/dask/tls /var/lib/dask /var/lib/dask-reports
install -m 0644 "$certs/ca.crt" /etc/dask/tls/ca.crt
install -m 0644 "$certs/gpu-box.crt" /etc/dask/tls/host.crt
install -m 0600 "$certs/gpu-box.key" /etc/dask/tls/host.key

pids=()
# shellcheck disable=SC2329  # called by the EXIT trap
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; }; trap cleanup EXIT
sh "$out/rendered/gpu-box-dask-scheduler.sh" >"$out/scheduler.log" 2>&1 & pids+=($!)
for _ in $(seq 60); do python3 -c 'import urllib.request as u; u.urlopen("http://127.0.0.1:8787/health", timeout=1)' 2>/dev/null && break; sleep 0.5; done
started=$(date +%s.%N)
sh "$out/rendered/gpu-box-dask-worker.sh" >"$out/worker.log" 2>&1 & pids+=($!)
gpus=$(python3 tests/gpu/spec_value.py "$out/rendered/gpu-box-dask-verify.json" arg --expect-workers)
python3 tests/gpu/wait_workers.py "$gpus" "$started" | tee "$out/registration.txt"
status=0
sh "$out/rendered/gpu-box-dask-verify.sh" "$@" | tee "$out/verify.txt" || status=$?
if [ -f /var/lib/dask-reports/verify-latest.json ]; then cp /var/lib/dask-reports/verify-latest.json "$out/verify.json"
elif [ "$status" = 0 ]; then echo "verification passed but wrote no report" >&2; status=1; fi
if [ "${BENCH:-0}" = 1 ] && [ "$status" = 0 ]; then
  # dask-cuda's own benchmark through the same TLS cluster (never with EXPECTED_NUM_WORKERS).
  eval "$(python3 tests/gpu/spec_value.py "$out/rendered/gpu-box-dask-verify.json" exports)"
  for op in "transpose_sum -s 40000 -c 10000" "dot -s 20000 -c 5000"; do
    # shellcheck disable=SC2086
    python3 -m dask_cuda.benchmarks.local_cupy --scheduler-address tls://127.0.0.1:8786 -o $op --runs 3 \
      >>"$out/bench.txt" 2>&1 || { echo "benchmark $op failed: see bench.txt" >&2; status=1; }
  done
fi
exit "$status"
