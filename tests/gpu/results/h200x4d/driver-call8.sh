#!/usr/bin/env bash
# Call 8 of the h200x4d lease, on the same warm machine: bundle-tls-ucx-1gpu (same bench OUT) if call 7 left it,
# then the seeds-like ETL on 1 GPU and on all GPUs, TCP then UCX (gpu-proof-multi.sh STEPS="etl etl-ucx"
# READINGS=0: the readings were taken in call 7; it reinstalls RAPIDS and UCX from /var/tmp, 13-15 s).
set -uo pipefail
R=$PWD S=$PWD/.gpuparts/snap B=/var/tmp/h200x4d
cd "$S"
ls /var/tmp/parts /var/tmp/ucx >/dev/null || { echo "parts gone: not the warm machine of call 7"; exit 2; }
# Anything left on the GPUs by call 7 (a cluster cut off by its timeout) goes, by process group
left=$(nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>/dev/null | tr -d ' ')
if [ -n "$left" ]; then
  echo "call8: GPU processes left from call 7: $left" | tee -a "$B/calls.txt"
  for p in $left; do g=$(ps -o pgid= -p "$p" | tr -d ' '); [ -n "$g" ] && kill -TERM -- "-$g" 2>/dev/null; done
  sleep 5; for p in $left; do kill -KILL "$p" 2>/dev/null; done
fi
export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH
if [ ! -f "$B/done-1gpu" ]; then
  t=$SECONDS
  timeout -k 15 $((300 - SECONDS)) env CERTS_DIR=$R/.gpucerts CONFIGS="bundle-tls-ucx-1gpu" RUNS=2 OUT=$B/bench \
    tests/gpu/gpu-proof-bench.sh >"$B/bench-call8.log" 2>&1
  echo "call8 bench (bundle-tls-ucx-1gpu): rc=$? in $((SECONDS - t)) s, at $SECONDS s" | tee -a "$B/calls.txt"
  grep -E '^(===|verification|gather|GPU metrics|bench FAILED|PASS|FAIL|fail)' "$B/bench-call8.log"
  [ -f "$B/bench/summary.md" ] && cat "$B/bench/summary.md"
fi
t=$SECONDS
budget=$((555 - SECONDS)); [ "$budget" -gt 420 ] && budget=420
timeout -k 10 $((575 - SECONDS)) env PARTS=/var/tmp/parts WHEELS_UCX=/var/tmp/ucx OUT=$B/etl STEPS="etl etl-ucx" \
  READINGS=0 BUDGET=$budget tests/gpu/gpu-proof-multi.sh >"$B/etl.log" 2>&1
echo "call8 ETL (STEPS=\"etl etl-ucx\" READINGS=0 BUDGET=$budget): rc=$? in $((SECONDS - t)) s, at $SECONDS s" \
  | tee -a "$B/calls.txt"
tail -30 "$B/etl.log"
ls "$B" "$B/etl"
tar -czf "$OUT/h200x4d-call8.tgz" -C /var/tmp h200x4d
ls -l "$OUT"
