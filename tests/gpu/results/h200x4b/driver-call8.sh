#!/usr/bin/env bash
# Call 8 of the h200x4b lease: bare-tcp on the same warm machine (same bench OUT: the summary covers all three).
set -uo pipefail
R=$PWD S=$PWD/.gpuparts/snap B=/var/tmp/h200x4b
cd "$S"
export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH
t=$SECONDS
timeout -k 60 $((500 - SECONDS)) env CERTS_DIR=$R/.gpucerts CONFIGS="bare-tcp" RUNS=2 OUT=$B/bench \
  tests/gpu/gpu-proof-bench.sh >"$B/bench-call8.log" 2>&1
echo "call8 bench (bare-tcp): rc=$? in $((SECONDS - t)) s" | tee -a "$B/calls.txt"
cat "$B/bench/summary.md"
tar -czf "$OUT/h200x4b.tgz" -C /var/tmp h200x4b
