#!/usr/bin/env bash
# The whole GPU proof on a GPU machine without Docker or systemd (issue 4): for each configuration, start the
# scheduler and the workers, run verification (bundle configurations) and dask-gpu-bench, stop them; then
# tests/gpu/compare_bench.py prints the comparison tables (bundle against bare, UCX against TCP, 1 GPU
# against all; EARLIER="DIR ..." adds the reports of earlier runs on the same machine).
#   bundle-tls        the units' command lines from playbooks/render-commands.yml (TLS, the inventory's defaults)
#   bundle-tls-1gpu   the same with dask_worker_gpus: ["0"]
#   bare-tcp[-1gpu]   `dask scheduler` + `dask cuda worker tcp://...` with dask-cuda's defaults
#   bundle-tls-rmm-1gpu  the units with an RMM pool and CuPy through RMM (RMM: both image profiles)
#   bundle-tls-2threads-1gpu  the units with 2 threads per worker instead of 1
#   bundle-tcp        the units with TLS off (what TLS costs)
#   bundle-ucx        dask_transport ucx (UCX, TLS off: the firewall's job on real hosts), RMM pool
#   bundle-tls-ucx    dask_transport tls-ucx (clients mutual TLS, scheduler and workers UCX), RMM pool
#   bundle-tls-ucx-1gpu  the same with dask_worker_gpus: ["0"] (one GPU of the same machine, same run)
# dask-gpu-bench runs dask-cuda's local_cudf_merge and local_cudf_shuffle too where cuDF is installed (carried:
# PYTHONPATH=/tmp/site after tests/gpu/gpu-proof-multi.sh installed RAPIDS there on the same warm machine).
#   OUT=/tmp/proof CERTS_DIR=.gpucerts CONFIGS="bundle-tls bare-tcp" tests/gpu/gpu-proof-bench.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
out="${OUT:-/tmp/gpu-proof-bench}"; mkdir -p "$out"
certs="${CERTS_DIR:-.gpucerts}"
configs="${CONFIGS:-bundle-tls bundle-tls-ucx bundle-ucx bare-tcp bundle-tls-1gpu bare-tcp-1gpu bundle-tls-rmm-1gpu}"
runs="${RUNS:-3}"
. tests/gpu/python-env.sh
export ANSIBLE_NOCOLOR=1
# Without an `ip` binary (some lent machines) Ansible's network facts are empty and the model's check refuses
# dask_cluster_address 127.0.0.1; without fact gathering that check is skipped and the rendered files are the same
# (tests/gpu/gpu-proof-containers.sh).
command -v ip >/dev/null || export ANSIBLE_GATHERING=explicit
nvidia-smi --query-gpu=index,uuid,name,memory.total,driver_version --format=csv,noheader | tee "$out/gpus.csv"
nvidia-smi topo -m > "$out/topo.txt" 2>&1 || true
install -d -m 0750 /etc/dask/tls /var/lib/dask /var/lib/dask-reports
install -m 0644 "$certs/ca.crt" /etc/dask/tls/ca.crt
install -m 0644 "$certs/gpu-box.crt" /etc/dask/tls/host.crt
install -m 0600 "$certs/gpu-box.key" /etc/dask/tls/host.key

pids=()
gpus=$(nvidia-smi -L | wc -l)
ports_free() {  # the scheduler, dashboard and scheduler UCX ports, and the GPU workers' fixed HTTP ports 8790+N, can be
  # bound again (UCX binds 0.0.0.0:8788: a container run just before left it bound for a few seconds on a lent
  # 4 x H200, and the tls-ucx scheduler failed; a worker on a taken port moves to a random one and the probes miss it)
  python3 -c 'import socket, sys
ports = [("127.0.0.1", 8786), ("127.0.0.1", 8787), ("0.0.0.0", 8788)] + [("127.0.0.1", 8790 + n) for n in range(int(sys.argv[1]))]
for host, port in ports:
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind((host, port)); s.close()' "$gpus" 2>/dev/null
}
wait_ports() { for _ in $(seq 60); do ports_free && return 0; sleep 0.5; done; echo "ports 8786-8788 or 8790+ still bound" >&2; return 1; }
# Each cluster process runs in a session of its own (setsid), so stopping it ends its nannies and their worker
# processes too (after the UCX configuration a surviving worker kept the scheduler port bound).
stop_cluster() {
  local pid alive
  for pid in "${pids[@]}"; do kill -TERM -- "-$pid" 2>/dev/null; done
  for _ in $(seq 60); do
    alive=0; for pid in "${pids[@]}"; do kill -0 -- "-$pid" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && break; sleep 0.5
  done
  for pid in "${pids[@]}"; do kill -KILL -- "-$pid" 2>/dev/null; done
  pids=()
  wait_ports
}
trap stop_cluster EXIT

wait_health() {
  for _ in $(seq 120); do python3 -c 'import urllib.request as u; u.urlopen("http://127.0.0.1:8787/health", timeout=1)' 2>/dev/null && return 0; sleep 0.5; done
  echo "scheduler never answered /health" >&2; return 1
}

extra_for() {  # the inventory variables of a bundle configuration
  case "$1" in
    bundle-tls) echo '{}' ;;
    bundle-tls-1gpu) echo '{"dask_worker_gpus": ["0"]}' ;;
    bundle-tls-2threads-1gpu) echo '{"dask_worker_gpus": ["0"], "dask_worker_nthreads": 2}' ;;
    bundle-tcp) echo '{"dask_transport": "tcp", "dask_tls_disabled_ack": true}' ;;
    bundle-tls-rmm-1gpu) echo '{"dask_worker_gpus": ["0"], "dask_worker_rmm_pool_size": "0.5", "dask_worker_rmm_for_cupy": true}' ;;
    bundle-ucx) echo '{"dask_transport": "ucx", "dask_tls_disabled_ack": true, "dask_firewall_enabled": true, "dask_worker_rmm_pool_size": "0.5"}' ;;
    bundle-tls-ucx) echo '{"dask_transport": "tls-ucx", "dask_firewall_enabled": true, "dask_worker_rmm_pool_size": "0.5"}' ;;
    bundle-tls-ucx-1gpu) echo '{"dask_worker_gpus": ["0"], "dask_transport": "tls-ucx", "dask_firewall_enabled": true, "dask_worker_rmm_pool_size": "0.5"}' ;;
  esac
}

status=0
for config in $configs; do
  dir="$out/$config"; mkdir -p "$dir"; echo "=== $config"
  case "$config" in
    bundle-*)
      ansible-playbook -i tests/gpu/inventory.yml playbooks/render-commands.yml -e "render_dir=$dir" \
        -e "$(extra_for "$config")" >"$dir/render.log" 2>&1 || { tail -30 "$dir/render.log"; status=1; continue; }
      for f in "$dir"/gpu-box-dask-{scheduler,worker}.sh; do grep -h '^exec ' "$f"; done | tee "$dir/commands.txt"
      wait_ports || { status=1; continue; }
      setsid sh "$dir/gpu-box-dask-scheduler.sh" >"$dir/scheduler.log" 2>&1 & pids+=($!)
      wait_health || { status=1; stop_cluster; continue; }
      started=$(date +%s.%N)
      setsid sh "$dir/gpu-box-dask-worker.sh" >"$dir/worker.log" 2>&1 & pids+=($!)
      want=$(python3 tests/gpu/spec_value.py "$dir/gpu-box-dask-verify.json" arg --expect-workers)
      ready=$(python3 tests/gpu/wait_workers.py "$want" "$started" | tee "$dir/registration.txt" | awk '{print $4}')
      sh "$dir/gpu-box-dask-verify.sh" > "$dir/verify.txt" 2>&1 || { echo "verification FAILED ($config)"; status=1; }
      tail -4 "$dir/verify.txt"
      eval "$(python3 tests/gpu/spec_value.py "$dir/gpu-box-dask-verify.json" exports)"
      address=$(python3 tests/gpu/spec_value.py "$dir/gpu-box-dask-verify.json" arg --scheduler)
      # Results of persisted CuPy arrays through the client address (the gather of issue 11); for tls-ucx also
      # what happens without the scheduler's host_frames preload.
      probe=(); [[ "$config" == bundle-tls-ucx* ]] && probe=(--without-preload)
      python3 tests/gpu/gather_probe.py "$address" "${probe[@]}" > "$dir/gather.txt" 2>&1 \
        || { echo "gather probe FAILED ($config)"; status=1; }
      grep -E '^(PASS|FAIL|pass|fail)' "$dir/gather.txt"
      # Each GPU worker's own GPU in its /metrics (dask_gpu_verify.gpu_metrics, issue 13).
      given=all; [[ "$config" == *-1gpu ]] && given=0
      python3 tests/gpu/gpu_metrics_probe.py "$address" --gpus "$given" > "$dir/gpu-metrics.txt" 2>&1 \
        || { echo "GPU metrics probe FAILED ($config)"; status=1; }
      grep -E '^(PASS|FAIL)' "$dir/gpu-metrics.txt" || tail -5 "$dir/gpu-metrics.txt"
      ;;
    bare-tcp*)
      unset DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION DASK_DISTRIBUTED__COMM__TLS__CA_FILE \
        DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY
      [ "$config" = bare-tcp-1gpu ] && export CUDA_VISIBLE_DEVICES=0 || unset CUDA_VISIBLE_DEVICES
      want=$([ "$config" = bare-tcp-1gpu ] && echo 1 || nvidia-smi -L | wc -l)
      echo "dask scheduler --host 127.0.0.1 --dashboard-address 127.0.0.1:8787; dask cuda worker tcp://127.0.0.1:8786" | tee "$dir/commands.txt"
      wait_ports || { status=1; continue; }
      setsid dask scheduler --host 127.0.0.1 --port 8786 --dashboard-address 127.0.0.1:8787 >"$dir/scheduler.log" 2>&1 & pids+=($!)
      wait_health || { status=1; stop_cluster; continue; }
      started=$(date +%s.%N)
      setsid dask cuda worker tcp://127.0.0.1:8786 >"$dir/worker.log" 2>&1 & pids+=($!)
      unset CUDA_VISIBLE_DEVICES
      ready=$(python3 tests/gpu/wait_workers.py "$want" "$started" | tee "$dir/registration.txt" | awk '{print $4}')
      address=tcp://127.0.0.1:8786
      ;;
  esac
  python3 -m dask_gpu_verify.bench --scheduler "$address" --expect-workers "$want" --runs "$runs" --label "$config" \
    --ready-seconds "${ready:-0}" --out "$dir/bench" > "$dir/bench.txt" 2>&1 || { echo "bench FAILED ($config)"; tail -20 "$dir/bench.txt"; status=1; }
  stop_cluster
done
python3 tests/gpu/compare_bench.py ${EARLIER:-} "$out" | tee "$out/summary.md"
exit "$status"
