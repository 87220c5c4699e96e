#!/usr/bin/env bash
# Proof of the target "500 workers ready <= 60 s after the units start; verification of them <= 60 s", with the
# scheduler's CPU and memory and a /metrics scrape at that count (docs/fleets.md, "Hundreds of workers on one
# scheduler"), on a machine with enough cores for the TLS handshakes (a lent GPU machine: 16 cores), without Docker
# or systemd:
#  1. playbooks/render-commands.yml (tests/gpu/inventory.yml, the machine's real nvidia-smi) renders the scheduler's
#     and the GPU worker's command lines as the units run them (TLS on), as tests/gpu/gpu-proof-units.sh does;
#  2. the scheduler runs as a plain process with the TLS material of tests/gpu/certs.yml (CERTS_DIR), under the
#     units' open-files limit (dask_container_nofile, 1048576) or the machine's hard limit if lower;
#  3. tests/fleet/many_workers.py starts WORKERS load workers (distributed.Worker, one thread, no GPU) at once in
#     PROCESSES processes listening on 127.0.0.1, over mutual TLS with the client bundle's certificate; it records
#     seconds to 50/90/100 % registered from the moment the load processes start, the scheduler's CPU % and RSS
#     (/proc) idle, while registering (peak) and steady, /metrics before and at full count, a map of 4 tasks per
#     worker, and `dask-gpu-verify --expect-workers N --allow-cpu --bandwidth-mib 16` against all of them.
# Modes (MODES, in order, each with a fresh scheduler):
#   cpu  the load workers alone: the verification's NumPy bandwidth probe, workload and data frames on every one;
#   gpu  the real dask-cuda worker (the rendered unit command line, every GPU) registered first, then the load
#        workers: the verification's CuPy probes on the GPU worker(s), its version and GPU probes on all.
# Carried (made on the controller, both folders ignored through .git/info/exclude):
#   .whl/       tests/gpu/python-env.sh installs it: with tests/gpu/wheels-lib.sh sourced, `download_wheels .whl` of
#               `pinned_specs images/pins/rapids-26.10-cuda13.txt dask distributed dask-cuda rapids-dask-dependency
#               tornado zict tblib partd locket nvtx bokeh xyzservices pyyaml packaging prometheus-client`, plus
#               ansible-core==2.19.14 resolvelib==1.2.1 (for render-commands.yml); 17 wheels, 16 MB
#   CERTS_DIR   `ansible-playbook -i tests/gpu/inventory.yml tests/gpu/certs.yml -e dask_controller_dir=$PWD/.mwparts/a
#               -e gpu_facts_nvidia_smi=$PWD/tests/inventory/fixtures/nvidia-smi` (a controller without a GPU), then
#               a/tls/{ca.crt,gpu-box.crt,gpu-box.key} into CERTS_DIR (the scheduler's, as in gpu-proof-units.sh) and
#               a/client/{ca.crt,client.crt,client.key} into CERTS_DIR/client (the controller's bundle)
#   OUT=/tmp/mw CERTS_DIR=.gpucerts [WORKERS=500] [PROCESSES=12] [MODES="cpu gpu"] [STEP_TIMEOUT=420] \
#     tests/gpu/gpu-proof-many-workers.sh
# Writes OUT/system.txt (nproc, ulimit -n, nvidia-smi), OUT/rendered/, and per mode OUT/MODE/many-workers.json,
# .verify.json, .verify.txt, many-workers.log and the scheduler's (and GPU worker's) log.
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${OUT:-/tmp/gpu-proof-many-workers}"; mkdir -p "$out/rendered"
certs="${CERTS_DIR:-.gpucerts}"
workers="${WORKERS:-500}" processes="${PROCESSES:-12}" step_timeout="${STEP_TIMEOUT:-420}"
# shellcheck source=tests/gpu/python-env.sh
. tests/gpu/python-env.sh
export ANSIBLE_NOCOLOR=1

{
  echo "nproc: $(nproc)"
  echo "ulimit -n before: soft $(ulimit -Sn), hard $(ulimit -Hn)"
  ulimit -n 1048576 2>/dev/null || ulimit -n "$(ulimit -Hn)"
  echo "ulimit -n for the scheduler and workers: $(ulimit -n)"
  echo "memory: $(awk '/MemTotal/ {print $2 " kB"}' /proc/meminfo)"
  echo "python: $(python3 -c 'import sys, dask, distributed; print(sys.version.split()[0], "dask", dask.__version__, "distributed", distributed.__version__)')"
  nvidia-smi --query-gpu=index,uuid,name,memory.total,driver_version --format=csv,noheader || echo "nvidia-smi failed"
} 2>&1 | tee "$out/system.txt"
ulimit -n 1048576 2>/dev/null || ulimit -n "$(ulimit -Hn)"  # the block above ran in a subshell (the pipe)

ansible-playbook -i tests/gpu/inventory.yml playbooks/render-commands.yml -e "render_dir=$out/rendered" \
  >"$out/render.log" 2>&1 || { tail -40 "$out/render.log"; exit 1; }
for f in "$out"/rendered/gpu-box-dask-scheduler.sh "$out"/rendered/gpu-box-dask-worker.sh; do
  echo "== $f"; grep -h '^exec ' "$f"
done | tee "$out/commands.txt"

install -d -m 0750 /etc/dask/tls /var/lib/dask /var/lib/dask-reports
install -m 0644 "$certs/ca.crt" /etc/dask/tls/ca.crt
install -m 0644 "$certs/gpu-box.crt" /etc/dask/tls/host.crt
install -m 0600 "$certs/gpu-box.key" /etc/dask/tls/host.key
# The client bundle (env.sh) as the controller's would read: the rendered scheduler address, this copy's files.
address=$(python3 tests/gpu/spec_value.py "$out/rendered/gpu-box-dask-verify.json" arg --scheduler)
client="$(cd "$certs/client" && pwd)"
cat >"$out/env.sh" <<EOF
export DASK_SCHEDULER_ADDRESS=$address
export DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION=True
export DASK_DISTRIBUTED__COMM__TLS__CA_FILE=$client/ca.crt
export DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT=$client/client.crt
export DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY=$client/client.key
export DASK_DATAFRAME__SHUFFLE__METHOD=tasks
EOF

pids=()
stop_all() {
  [ "${#pids[@]}" -gt 0 ] && kill "${pids[@]}" 2>/dev/null
  wait "${pids[@]}" 2>/dev/null
  pids=()
  return 0
}
trap stop_all EXIT
status=0
for mode in ${MODES:-cpu gpu}; do
  dir="$out/$mode"; mkdir -p "$dir"
  echo "=== mode $mode: $workers load workers in $processes processes"
  rm -rf /var/lib/dask/* /var/lib/dask-reports/* /tmp/many-workers-*
  begun=$(date +%s.%N)
  sh "$out/rendered/gpu-box-dask-scheduler.sh" >"$dir/scheduler.log" 2>&1 & spid=$!; pids+=("$spid")
  for _ in $(seq 120); do
    python3 -c 'import urllib.request as u; u.urlopen("http://127.0.0.1:8787/health", timeout=1)' 2>/dev/null && break
    sleep 0.5
  done
  {
    echo "scheduler healthy $(python3 -c "import time; print(round(time.time() - $begun, 1))") s after its command started"
    echo "scheduler process $spid: $(tr '\0' ' ' </proc/"$spid"/cmdline | cut -c1-200)"
    grep 'Max open files' "/proc/$spid/limits" || echo "no /proc/$spid/limits"
  } | tee "$dir/scheduler-start.txt"
  if [ "$mode" = gpu ]; then
    started=$(date +%s.%N)
    sh "$out/rendered/gpu-box-dask-worker.sh" >"$dir/worker.log" 2>&1 & pids+=($!)
    gpus=$(python3 tests/gpu/spec_value.py "$out/rendered/gpu-box-dask-verify.json" arg --expect-workers)
    python3 tests/gpu/wait_workers.py "$gpus" "$started" | tee "$dir/gpu-worker-registration.txt"
  fi
  rc=0
  timeout "$step_timeout" python3 tests/fleet/many_workers.py --bundle "$out/env.sh" --workers "$workers" \
    --processes "$processes" --listen 127.0.0.1 --scheduler-pid "$spid" \
    --metrics-url http://127.0.0.1:8787/metrics --timeout 120 --verify --verify-timeout 180 \
    --out "$dir/many-workers.json" >"$dir/many-workers.log" 2>&1 || rc=$?
  echo "many_workers.py ($mode) exit status $rc" | tee -a "$dir/many-workers.log"
  tail -60 "$dir/many-workers.log"
  [ "$rc" = 0 ] || status=1
  stop_all
done
exit "$status"
