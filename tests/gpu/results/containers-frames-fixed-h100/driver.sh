#!/usr/bin/env bash
# containers-frames-fixed (issue 24, item 7, after 1afed83): the container proof (tests/gpu/gpu-proof-containers.sh)
# with a stand-in image that has cuDF and dask-cudf, run EXACTLY AS RENDERED (no VERIFY_GPU_VARIANT, no SCHEDULER_GPU):
# commit 1afed83 gives the scheduler and verify specs one GPU (gpus "0", CDI) with dask_image_profile full.
# Copied from .gpuparts/cf/driver.sh; differences: the snapshot (.gpuparts/snapg), no diagnostic switches, the pack.
# Last call of the lease: parts p1..p6 of the RAPIDS wheels were copied to /var/tmp/parts by calls 1-6; this call
# carries p7, checks all 7 against tests/gpu/results/etl-h100/wheels.sha256, unpacks them, makes the snapshot's .whl/
# (the c4 wheels + the cuDF wheels) and runs gpu-proof-containers.sh (tls, the machine's GPU(s), BENCH=0, the render
# with dask_image_profile full, STANDIN_EXTRA_ROOTS naming the cuDF distributions and nvidia-cufile).
# Run from the repository root on the GPU machine; the measured tree is .gpuparts/snapg (git archive 1afed83,
# unmodified).   bash .gpuparts/cfg/driver.sh LIMIT_SECONDS
set -uo pipefail
LIMIT=${1:-560}
R=$PWD S=$PWD/.gpuparts/snapg B=/var/tmp/cfg W=/var/tmp/gpu-proof-containers
rm -rf "$B"; mkdir -p "$B" /var/tmp/parts /var/tmp/cfw
log() { echo "[$SECONDS s] $*" | tee -a "$B/calls.txt"; }
pack() {
  cp "$B/calls.txt" "$OUT/calls.txt"
  cp "$B/containers/summary.txt" "$OUT/summary.txt" 2>/dev/null
  cp "$W/verify.json" "$OUT/verify.json" 2>/dev/null
  cp "$W/verify.txt" "$OUT/verify-out.txt" 2>/dev/null
  cp "$W/commands.txt" "$OUT/commands.txt" 2>/dev/null
  cp "$W/standin/standin-versions.txt" "$OUT/standin-versions.txt" 2>/dev/null
  { for f in "$W"/rendered/gpu-box-dask-scheduler.service "$W"/rendered/gpu-box-dask-scheduler.json \
             "$W"/rendered/gpu-box-dask-verify.json "$W"/rendered/gpu-box-dask-worker.json; do
      echo "== $f"; cat "$f"; done; echo "== /etc/cdi/nvidia.yaml device names"; grep -E '^  - name:' /etc/cdi/nvidia.yaml
    echo "== ls /dev/nvidia*"; ls -l /dev/nvidia*; } > "$OUT/rendered.txt" 2>&1
  mkdir -p "$B/w"; cp -r "$W/rendered" "$B/w/" 2>/dev/null
  find "$W" -maxdepth 2 -type f -size -5M \( -name '*.txt' -o -name '*.log' -o -name '*.json' -o -name '*.csv' \) \
    -exec cp --parents {} "$B/w/" \; 2>/dev/null
  tar -cJf "$OUT/cfg-all.tar.xz" -C /var/tmp cfg 2>/dev/null
  ls -l "$OUT"
}
[ -d .gpuparts/p7 ] && cp .gpuparts/p7/part-* /var/tmp/parts/
ls -l /var/tmp/parts >> "$B/calls.txt"
cd "$S"
log "snapshot of $(cat SNAPSHOT_COMMIT) (unmodified, as rendered: no VERIFY_GPU_VARIANT, no SCHEDULER_GPU); limit ${LIMIT} s"
sums=$S/tests/gpu/results/etl-h100/wheels.sha256
if [ "$(ls /var/tmp/cfw/wheels/*.whl 2>/dev/null | wc -l)" = 25 ] && [ ! -e /var/tmp/parts/part-00 ]; then
  log "reusing /var/tmp/cfw/wheels (unpacked and checked by the previous call on this warm machine)"
else
if (cd /var/tmp/parts && sed -n 's# p[0-9]*/part-# part-#p' "$sums" | sha256sum -c -) >> "$B/calls.txt" 2>&1; then
  log "7 parts: sha256 ok"
else
  log "parts: sha256 FAILED"; pack; exit 3
fi
cat /var/tmp/parts/part-* > /var/tmp/cfw/wheels.tar
got=$(sha256sum < /var/tmp/cfw/wheels.tar | cut -d' ' -f1)
[ "$got" = "$(grep ' wheels.tar$' "$sums" | cut -d' ' -f1)" ] || { log "wheels.tar sha256 FAILED ($got)"; pack; exit 3; }
tar -C /var/tmp/cfw -xf /var/tmp/cfw/wheels.tar && rm -f /var/tmp/cfw/wheels.tar /var/tmp/parts/part-*
log "wheels.tar ok ($got), unpacked: $(ls /var/tmp/cfw/wheels | wc -l) wheels"
fi
rm -rf .whl .ucx .dockerbin; mkdir -p .whl .dockerbin
cp "$R"/.gpuparts/c4/whl/*.whl .whl/
for f in /var/tmp/cfw/wheels/*.whl; do [ -e ".whl/${f##*/}" ] || cp "$f" .whl/; done
cp "$R"/.dockerbin/docker-trixie.tar.xz .dockerbin/
ls -l .whl > "$B/wheels.txt"
dups=$(ls .whl | sed 's/-.*//' | tr 'A-Z' 'a-z' | sort | uniq -d | tr '\n' ' ')
log ".whl: $(ls .whl | wc -l) wheels (c4's + the cuDF set); distributions with two versions: ${dups:-none}"
nvidia-smi -L | tee -a "$B/calls.txt"
nvidia-smi --query-gpu=index,uuid,name,memory.total,driver_version --format=csv,noheader > "$B/gpus.csv"
python3 -c 'import sys, cupy, numba, numpy, pandas, pyarrow; print(sys.executable, sys.version.split()[0], "cupy", cupy.__version__, "numba", numba.__version__, "numpy", numpy.__version__, "pandas", pandas.__version__, "pyarrow", pyarrow.__version__)' 2>&1 | tee -a "$B/calls.txt"
log "open files: fs.nr_open=$(cat /proc/sys/fs/nr_open) ulimit -Hn=$(ulimit -Hn)"
ulimit -Hn 1048576 2>>"$B/calls.txt"
nr=$(cat /proc/sys/fs/nr_open) h=$(ulimit -Hn); [ "$h" = unlimited ] && h=$nr
allowed=$(( nr < h ? nr : h ))
RE='{"dask_image_profile": "full"}'
[ "$allowed" -lt 1048576 ] && RE='{"dask_image_profile": "full", "dask_container_nofile": '"$allowed"'}'
machine=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr -d ' ')x$(nvidia-smi -L | wc -l)-tls-frames
ROOTS="cudf-cu13 dask-cudf-cu13 pylibcudf-cu13 libcudf-cu13 rmm-cu13 librmm-cu13 libkvikio-cu13 nvidia-libnvcomp-cu13 rapids-logger cuda-core cuda-pathfinder cachetools ?nvidia-cufile ?nvidia-nvvm ?nvidia-cuda-crt ?nvidia-nvfatbin"
# libkvikio loads libcufile.so.0 (its Requires-Dist cuda-toolkit[cufile], an extra the closure does not follow)
cuf=$(python3 -c 'import importlib.metadata as md
for d in md.distributions():
    if any(f.name.startswith("libcufile.so") for f in (d.files or [])):
        print(d.metadata["Name"], d.version, d.locate_file("")); break' 2>&1)
log "GPU nodes: $(ls /dev/nvidia[0-9]* 2>/dev/null | tr '\n' ' ')"
log "libcufile.so on the machine: ${cuf:-no distribution}; ldconfig: $(ldconfig -p | grep -c cufile)"
[ -n "$cuf" ] && ROOTS="$ROOTS ${cuf%% *}"
left=$((LIMIT - SECONDS - 30))
log "containers: gpu-proof-containers.sh BENCH=0 (no diagnostic switches) MACHINE=$machine RENDER_EXTRA=$RE STANDIN_EXTRA_ROOTS='$ROOTS' (timeout $left s)"
t=$SECONDS
timeout -k 10 "$left" env -u VERIFY_GPU_VARIANT -u SCHEDULER_GPU -u STANDIN_REUSE OUT="$B/containers" CERTS_DIR="$R/.gpucerts" MACHINE="$machine" BENCH=0 \
  STANDIN_EXTRA_ROOTS="$ROOTS" RENDER_EXTRA="$RE" tests/gpu/gpu-proof-containers.sh > "$B/containers.log" 2>&1
log "containers: rc=$? in $((SECONDS - t)) s"
if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
  docker ps -a --format '{{.Names}} {{.Status}}' >> "$B/calls.txt"; docker rm -f $(docker ps -aq) >/dev/null 2>&1
  [ -f /var/run/docker.pid ] && kill -TERM "$(cat /var/run/docker.pid)"; sleep 2; log "dockerd was still up: stopped"
fi
nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory --format=csv,noheader >> "$B/calls.txt" 2>&1
grep -E '^\[ *[0-9.]+ s\]' "$W/steps.txt" 2>/dev/null | tee -a "$B/calls.txt"
grep -E 'dask-(scheduler|verify) ' "$W/commands.txt" 2>/dev/null | grep 'docker run' | tee -a "$B/calls.txt"
grep -E 'data frames|^PASS|^FAIL|verify container' "$W/verify.txt" 2>/dev/null | tee -a "$B/calls.txt"
grep -E '^(PASS|FAIL|verification|[0-9]+ workers registered)' "$B/containers/summary.txt" 2>/dev/null | head -20
for f in verify.json; do
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(sys.argv[1], "ok:", d.get("ok"), "frames:", json.dumps(d.get("frames")), "findings:", json.dumps(d.get("findings", d.get("failures")))[:600])' "$W/$f" 2>&1 | tee -a "$B/calls.txt"
done
pack
log "done"
