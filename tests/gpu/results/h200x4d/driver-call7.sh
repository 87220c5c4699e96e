#!/usr/bin/env bash
# Call 7 of the h200x4d lease (issue 23): the last RAPIDS part, install (gpu-proof-multi.sh STEPS=" ", with its
# readings: topo, NVLink state, gpu_health -> multi/health.json), then gpu-proof-bench.sh with
# CONFIGS="bundle-tls-ucx bundle-ucx" RUNS=2, then "bundle-tls-ucx-1gpu" in the same OUT if enough of the call is
# left (else call 8 runs it). Run from the repository root on the GPU machine; the measured tree is the HEAD
# snapshot in .gpuparts/snap. Made from ../h200x4c/driver-call7.sh.
set -uo pipefail
R=$PWD S=$PWD/.gpuparts/snap B=/var/tmp/h200x4d
mkdir -p "$B" /var/tmp/parts /var/tmp/ucx
cp .gpuparts/p7/part-* /var/tmp/parts/
cp .gpuparts/ucx/*.whl /var/tmp/ucx/  # call 8 reinstalls from here (the ETL) without carrying UCX again
ls -l /var/tmp/parts /var/tmp/ucx >"$B/parts.txt"
cd "$S"
echo "snapshot of $(cat SNAPSHOT_COMMIT)" | tee -a "$B/calls.txt"
nvidia-smi -L | tee "$B/nvidia-smi-L.txt"
t=$SECONDS
PARTS=/var/tmp/parts WHEELS_UCX=/var/tmp/ucx OUT=$B/multi STEPS=" " tests/gpu/gpu-proof-multi.sh >"$B/multi.log" 2>&1
echo "call7 install+readings: gpu-proof-multi.sh rc=$? in $((SECONDS - t)) s" | tee -a "$B/calls.txt"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$R"/.whl/*.whl
echo "ansible wheel rc=$?" | tee -a "$B/calls.txt"
export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH
cat "$B/multi/versions.txt" "$B/multi/device.txt"; ls "$B/multi"
nvidia-smi --query-gpu=uuid --format=csv >"$B/nvidia-smi-uuid.csv"; cat "$B/nvidia-smi-uuid.csv"
t=$SECONDS
timeout -k 20 $((560 - SECONDS)) env CERTS_DIR=$R/.gpucerts CONFIGS="bundle-tls-ucx bundle-ucx" RUNS=2 OUT=$B/bench \
  tests/gpu/gpu-proof-bench.sh >"$B/bench-call7a.log" 2>&1
echo "call7 bench (bundle-tls-ucx bundle-ucx): rc=$? in $((SECONDS - t)) s, at $SECONDS s" | tee -a "$B/calls.txt"
grep -E '^(===|verification|gather|GPU metrics|bench FAILED|PASS|FAIL|fail)' "$B/bench-call7a.log"
if [ "$SECONDS" -le 380 ]; then
  t=$SECONDS
  timeout -k 15 $((570 - SECONDS)) env CERTS_DIR=$R/.gpucerts CONFIGS="bundle-tls-ucx-1gpu" RUNS=2 OUT=$B/bench \
    tests/gpu/gpu-proof-bench.sh >"$B/bench-call7b.log" 2>&1
  rc=$?
  echo "call7 bench (bundle-tls-ucx-1gpu): rc=$rc in $((SECONDS - t)) s, at $SECONDS s" | tee -a "$B/calls.txt"
  grep -E '^(===|verification|gather|GPU metrics|bench FAILED|PASS|FAIL|fail)' "$B/bench-call7b.log"
  [ "$rc" != 124 ] && [ "$rc" != 137 ] && [ -f "$B/bench/bundle-tls-ucx-1gpu/bench.json" ] && touch "$B/done-1gpu"
else
  echo "call7: bundle-tls-ucx-1gpu left for call 8 (at $SECONDS s)" | tee -a "$B/calls.txt"
fi
[ -f "$B/bench/summary.md" ] && cat "$B/bench/summary.md"
ls "$B"
tar -czf "$OUT/h200x4d-call7.tgz" -C /var/tmp h200x4d
ls -l "$OUT"
