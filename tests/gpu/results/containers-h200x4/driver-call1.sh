#!/usr/bin/env bash
# containers-h200x4: the bundle's containers (gpu-proof-containers.sh) and the same configuration as plain processes
# (gpu-proof-bench.sh) on one warm 4-GPU machine, in one call. Run from the repository root on the GPU machine;
# the measured tree is the HEAD snapshot in .gpuparts/snap (its commit in SNAPSHOT_COMMIT).
set -uo pipefail
R=$PWD S=$PWD/.gpuparts/snap B=/var/tmp/c4
rm -rf "$B"; mkdir -p "$B"
log() { echo "[$SECONDS s] $*" | tee -a "$B/calls.txt"; }
cd "$S"
log "snapshot of $(cat SNAPSHOT_COMMIT)"
rm -rf .whl .ucx .dockerbin; mkdir -p .whl .ucx .dockerbin
cp "$R"/.gpuparts/c4/whl/*.whl .whl/ && cp "$R"/.gpuparts/c4/ucx/ucx-site.tar.xz .ucx/ \
  && cp "$R"/.dockerbin/docker-trixie.tar.xz .dockerbin/ || { log "copy failed"; exit 3; }
ls -l .whl .ucx .dockerbin >> "$B/calls.txt"
nvidia-smi -L | tee -a "$B/calls.txt"
nvidia-smi topo -m > "$B/topo.txt" 2>&1
nvidia-smi --query-gpu=index,uuid,name,memory.total,driver_version --format=csv,noheader > "$B/gpus.csv"
python3 -c 'import sys, cupy, numba, numpy, jinja2; print(sys.executable, sys.version.split()[0], "cupy", cupy.__version__, "numba", numba.__version__, "numpy", numpy.__version__)' 2>&1 | tee -a "$B/calls.txt"
RE='{"dask_transport": "tls-ucx", "dask_firewall_enabled": true, "dask_worker_rmm_pool_size": "0.5"}'
log "containers: gpu-proof-containers.sh RENDER_EXTRA=$RE"
t=$SECONDS
timeout -k 20 330 env OUT="$B/containers" CERTS_DIR="$R/.gpucerts" MACHINE=h200x4-tls-ucx RENDER_EXTRA="$RE" \
  tests/gpu/gpu-proof-containers.sh > "$B/containers.log" 2>&1
log "containers: rc=$? in $((SECONDS - t)) s"
# nothing of the container run may stay (GPUs, ports): remove containers, stop dockerd if the script could not
if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
  docker ps -a --format '{{.Names}} {{.Status}}' >> "$B/calls.txt"; docker rm -f $(docker ps -aq) >/dev/null 2>&1
  [ -f /var/run/docker.pid ] && kill -TERM "$(cat /var/run/docker.pid)"; sleep 3; log "dockerd was still up: stopped"
fi
nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory --format=csv,noheader >> "$B/calls.txt" 2>&1
grep -E '^(PASS|FAIL|verification|[0-9]+ workers registered|  transpose_sum|  gram|  local_cupy|  scheduler:|  bench container)' \
  "$B/containers/summary.txt" 2>/dev/null | head -30
log "processes: gpu-proof-bench.sh CONFIGS=bundle-tls-ucx RUNS=3"
t=$SECONDS
timeout -k 20 $((560 - SECONDS)) env CERTS_DIR="$R/.gpucerts" CONFIGS="bundle-tls-ucx" RUNS=3 OUT="$B/bench" \
  tests/gpu/gpu-proof-bench.sh > "$B/bench.log" 2>&1
log "processes: rc=$? in $((SECONDS - t)) s"
grep -E '^(===|verification|gather|GPU metrics|bench FAILED|PASS|FAIL)' "$B/bench.log"
cp "$B/containers/summary.txt" "$OUT/containers-summary.txt" 2>/dev/null
cp "$B/containers/bench.json" "$OUT/containers-bench.json" 2>/dev/null
cp "$B/containers/verify.json" "$OUT/containers-verify.json" 2>/dev/null
cp "$B/bench/bundle-tls-ucx/bench.json" "$OUT/processes-bench.json" 2>/dev/null
cp "$B/bench/summary.md" "$OUT/processes-summary.md" 2>/dev/null
cp "$B/calls.txt" "$OUT/calls.txt"
tar -czf "$OUT/c4-all.tgz" -C /var/tmp c4
log "done"
