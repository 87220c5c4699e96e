#!/usr/bin/env bash
# monitoring-h200x4 (issue 23 item 3): tests/gpu/gpu-proof-monitoring.sh on every GPU of one 4-GPU machine, one
# dask-cuda worker per GPU, in one call. Run from the repository root on the GPU machine; the measured tree is the
# snapshot of 81fa89b in .gpuparts/snapm (SNAPSHOT_COMMIT), with the Dask/dask-cuda/Ansible wheels of the
# containers-h200x4 run in .gpuparts/snapm/.whl and its ucx-site (RMM, nvtx) in .gpuparts/snapm/.ucx.
# Carried: .gpuparts/snapm, .promdebs (Debian bookworm prometheus + prometheus-node-exporter), .gpucerts.
set -uo pipefail
R=$PWD S=$PWD/.gpuparts/snapm B=/var/tmp/mon
rm -rf "$B" "$B.log"; mkdir -p "$B"
cd "$S" || exit 3
{
  echo "snapshot of $(cat SNAPSHOT_COMMIT)"
  nvidia-smi -L
  python3 -c 'import sys, cupy; print(sys.executable, sys.version.split()[0], "cupy", cupy.__version__)' 2>&1
  ls .whl .ucx "$R/.promdebs"
  command -v dpkg-deb || echo "no dpkg-deb (the probe extracts the debs)"
} > "$OUT/calls.txt" 2>&1
cat "$OUT/calls.txt"
t=$SECONDS
timeout -k 20 "${LIMIT:-480}" env OUT="$B" CERTS_DIR="$R/.gpucerts" PROM_DEBS="$R/.promdebs" \
  bash tests/gpu/gpu-proof-monitoring.sh > "$B.log" 2>&1
rc=$?
echo "gpu-proof-monitoring.sh: rc=$rc in $((SECONDS - t)) s" | tee -a "$OUT/calls.txt"
# anything left on the GPUs or ports (a run cut off by the timeout) is reported
nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory --format=csv,noheader >> "$OUT/calls.txt" 2>&1
grep -E '^(PASS|FAIL|INFO|===)' "$B.log"
cp "$B.log" "$OUT/run.log"
cp "$B/summary.md" "$OUT/summary.md" 2>/dev/null
cp "$B/checks.txt" "$OUT/checks.txt" 2>/dev/null
tar -czf "$OUT/mon.tgz" -C /var/tmp mon mon.log
ls -l "$OUT"
