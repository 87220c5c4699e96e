#!/usr/bin/env bash
# Call 7 of the h200x4c lease: the last RAPIDS part, install, then bundle-tls-ucx and bare-tcp (issue 23 ratios,
# one run on one machine). Run from the repository root on the GPU machine; the measured tree is the HEAD
# snapshot in .gpuparts/snap. Made from ../h200x4b/driver-call7.sh.
set -uo pipefail
R=$PWD S=$PWD/.gpuparts/snap B=/var/tmp/h200x4c
mkdir -p "$B" /var/tmp/parts
cp .gpuparts/p7/part-* /var/tmp/parts/
ls -l /var/tmp/parts >"$B/parts.txt"
cd "$S"
echo "snapshot of $(cat SNAPSHOT_COMMIT)" | tee -a "$B/calls.txt"
t=$SECONDS
PARTS=/var/tmp/parts WHEELS_UCX=$R/.gpuparts/ucx OUT=$B/multi STEPS=" " tests/gpu/gpu-proof-multi.sh >"$B/multi.log" 2>&1
echo "call7 install: gpu-proof-multi.sh rc=$? in $((SECONDS - t)) s" | tee -a "$B/calls.txt"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$R"/.whl/*.whl
echo "ansible wheel rc=$?" | tee -a "$B/calls.txt"
export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH
cat "$B/multi/versions.txt" "$B/multi/device.txt"
nvidia-smi --query-gpu=uuid --format=csv >"$B/nvidia-smi-uuid.csv"; cat "$B/nvidia-smi-uuid.csv"
nvidia-smi topo -m >"$B/topo.txt" 2>&1
t=$SECONDS
timeout -k 20 $((545 - SECONDS)) env CERTS_DIR=$R/.gpucerts CONFIGS="bundle-tls-ucx bare-tcp" RUNS=2 OUT=$B/bench \
  tests/gpu/gpu-proof-bench.sh >"$B/bench-call7.log" 2>&1
echo "call7 bench (bundle-tls-ucx bare-tcp): rc=$? in $((SECONDS - t)) s" | tee -a "$B/calls.txt"
grep -E '^(===|verification|gather|GPU metrics|bench FAILED|PASS|FAIL)' "$B/bench-call7.log"
[ -f "$B/bench/summary.md" ] && cat "$B/bench/summary.md"
tar -czf "$OUT/h200x4c-call7.tgz" -C /var/tmp h200x4c
