#!/usr/bin/env bash
# Spilling that works for data frames, on one real GPU: a dask-cudf merge whose live data (left + right + result) is
# larger than the GPU's memory, run through the bundle's own scheduler and `dask cuda worker` command lines
# (tests/gpu/spill_merge.py argv: spec.py's scheduler_argv / worker_argv with cudf_spill=True, the role defaults'
# --device-memory-limit 0.8, --memory-limit 100GiB, and spec.spill_env's CUDF_SPILL=on for the scheduler and the
# client, never for the worker: dask-cuda's CUDFSetup plugin turns spilling on there), as plain processes.
# RAPIDS 26.10 (CUDA 13, CPython 3.12) comes as wheels (tests/gpu/carry-wheels.sh), in parts in PARTS checked against
# SUMS, or whole in WHEELS.
#   PARTS=/var/tmp/parts OUT=/tmp/spill tests/gpu/gpu-proof-spill.sh
#   DRYRUN=1 OUT=/tmp/spill tests/gpu/gpu-proof-spill.sh   # no GPU: pandas and a CPU `dask worker`, tiny sizes
#
# Sizing (H100 80GB: 81,559 MiB = 85.5 GB; host 128 GiB, 125 GiB usable; disk 64 GiB). ROWS rows a side in PARTITIONS
# partitions, each key 4 times a side (tests/gpu/spill_merge.py): left 16 B/row, right 16 B/row, result 4 rows of
# 24 B per input row, 128 B per row of a side in all, all of it live at the end of the merge (inputs and result kept).
#   big:     ROWS 960 M in 32 partitions of 30 M: left 15.4 GB + right 15.4 GB + result 92.2 GB (3.84 G rows)
#            = 122.9 GB (114.4 GiB), 1.44 x the GPU. cuDF spills on demand (an RMM allocation that fails), so the
#            device fills up and at least ~37 GiB lives in host memory (measured on an H100: 64 GB spilled after the
#            merge, worker RSS 65 GB, the machine's used memory at most 69 GB; results/spill-h100). The worker's
#            host limit of 100 GiB pauses it at 80 GiB of process memory (distributed's default 0.8) and the nanny
#            ends it at 95 GiB: both well above this and below the 125 GiB the machine has. Nothing goes to disk
#            (cuDF spills to host memory only). The tasks shuffle's pieces (left + right again, 30.7 GB) are
#            freed as the result grows, so the peak is the final 122.9 GB plus one task's temporaries (~6 GB).
#   control: ROWS/4 = 240 M in 8 partitions of the same 30 M rows: 30.7 GB in all, under the GPU's memory, same
#            worker: no spilling expected (the spill statistics say); run twice, the first is the warm-up.
#   objspill: the big merge on a worker without --enable-cudf-spill (dask-cuda's object spilling at
#            --device-memory-limit 0.8 only; CUDF_SPILL unset everywhere).
#   objspill-preimport: objspill with `--pre-import dask_cudf` on the worker (not in the default STEPS).
#   nospill: the big merge with --device-memory-limit 0 and no cuDF spilling (expected to fail: GPU out of memory),
#            showing the work really needs spilling.
# STEPS picks the runs (default "control-warmup control big objspill nospill"); BUDGET (540) is the seconds the
# script may take: a run that would not fit is skipped and says so. OUT gets runs.jsonl (one JSON line a run),
# trace.csv (time,label,phase,GPU used bytes,host used bytes every 0.2 s), console.log, logs.txt (server log tails).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 3
out="${OUT:-/tmp/gpu-spill}"; mkdir -p "$out"
exec > >(tee -a "$out/console.log") 2>&1
budget="${BUDGET:-540}" rows="${ROWS:-960000000}" parts="${PARTITIONS:-32}"
work="$(mktemp -d)"
backend=cudf
if [ -n "${DRYRUN:-}" ]; then
  backend=pandas rows="${ROWS:-960000}"
elif [ -n "${PARTS:-}" ]; then
  sums="${SUMS:-$PWD/tests/gpu/results/spill-h100/wheels.sha256}"
  (cd "$PARTS" && sed -n 's# p[0-9]*/part-# part-#p' "$sums" | sha256sum --quiet -c -) || exit 3
  cat "$PARTS"/part-* >"$work/wheels.tar"
  [ "$(sha256sum <"$work/wheels.tar" | cut -d' ' -f1)" = "$(grep ' wheels.tar$' "$sums" | cut -d' ' -f1)" ] || exit 3
  tar -C "$work" -xf "$work/wheels.tar" && rm "$work/wheels.tar"
  WHEELS="$work/wheels"
fi
if [ -z "${DRYRUN:-}" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    "${WHEELS:-/tmp/wheels}"/*.whl || exit 3
  # The carried numpy (2.4.6) first: the machine's numba-cuda calls np.row_stack (tests/gpu/README.md, "The lent machines").
  export PYTHONPATH="/tmp/site:$PWD/images/verify/src" PATH=/tmp/site/bin:$PATH
  python3 -c 'import cudf, dask_cudf, dask, distributed, dask_cuda, numpy, pandas; print("cudf", cudf.__version__, "dask", dask.__version__, "distributed", distributed.__version__, "dask-cuda", dask_cuda.__version__, "numpy", numpy.__version__, "pandas", pandas.__version__)' || exit 3
  nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv,noheader
else
  export PYTHONPATH="$PWD/images/verify/src"
fi
export PYTHONUNBUFFERED=1 DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION=False DASK_DATAFRAME__SHUFFLE__METHOD=tasks
echo "cores $(nproc); $(free -g | sed -n 2p); $(python3 -V)"

pids=()
stop_cluster() {  # each process leads its own group (setsid): the group goes, the nanny's worker process too
  local pid
  for pid in "${pids[@]}"; do kill -TERM -- "-$pid" 2>/dev/null; done
  for _ in $(seq 75); do
    for pid in "${pids[@]}"; do kill -0 -- "-$pid" 2>/dev/null && { sleep 0.2; continue 2; }; done
    break
  done
  for pid in "${pids[@]}"; do kill -KILL -- "-$pid" 2>/dev/null; done
  pids=()
}
logs() { local f; for f in "$work"/*.log; do [ -f "$f" ] && { echo "== $(basename "$f")"; tail -n 40 "$f"; }; done >"$out/logs.txt"; }
cleanup() { stop_cluster; logs; rm -rf "$work"; }
trap cleanup EXIT
trap 'exit 143' TERM INT
spill_env=""
start_cluster() {  # NAME ARGV-OPTIONS... (spill_merge.py argv's), then EXTRA worker flags after --
  local name=$1; shift
  local opts=() extra=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do opts+=("$1"); shift; done
  [ $# -gt 0 ] && { shift; extra=("$@"); }
  mapfile -t lines < <(python3 tests/gpu/spill_merge.py argv "$work/$name" "${opts[@]}")
  read -r -a scheduler_cmd <<<"${lines[0]}"; read -r -a worker_cmd <<<"${lines[1]}"; spill_env="${lines[2]}"
  if [ -n "${DRYRUN:-}" ]; then  # no GPU here: a CPU worker of the same scheduler
    worker_cmd=(dask worker tcp://127.0.0.1:8786 --nthreads 1 --memory-limit 4GiB --local-directory "$work/$name")
    extra=()
  fi
  mkdir -p "$work/$name"
  echo "$name: scheduler env [$spill_env]: ${scheduler_cmd[*]}"
  echo "$name: worker: ${worker_cmd[*]} ${extra[*]}"
  # shellcheck disable=SC2086
  env $spill_env setsid python3 -m dask "${scheduler_cmd[@]:1}" >"$work/$name-scheduler.log" 2>&1 & pids+=($!)
  env -u CUDF_SPILL setsid python3 -m dask "${worker_cmd[@]:1}" "${extra[@]}" >"$work/$name-worker.log" 2>&1 & pids+=($!)
}
left() { echo $((budget - SECONDS)); }
merge_run() {  # LABEL ROWS PARTITIONS LIMIT
  local label=$1 n=$2 p=$3 limit=$4
  if [ "$(left)" -lt 40 ]; then echo "$label: skipped, $(left) s left of $budget"; return 0; fi
  [ "$(left)" -lt "$limit" ] && limit=$(left)
  echo "== $label: $n rows a side, $p partitions, limit ${limit}s, client env [$spill_env] ($(date -u +%T))"
  # shellcheck disable=SC2086
  env $spill_env timeout -k 10 "$limit" python3 tests/gpu/spill_merge.py run --scheduler tcp://127.0.0.1:8786 \
    --rows "$n" --partitions "$p" --label "$label" --jsonl "$out/runs.jsonl" --trace "$out/trace.csv" \
    --backend "$backend"
  local status=$?
  [ "$status" -eq 0 ] || echo "$label: exit $status"
  grep -hE 'MemoryError|out of memory|[Pp]aus|[Kk]illed|Restarting|WARNING' "$work"/*-worker.log 2>/dev/null \
    | sort | uniq -c | sort -rn | head -n 8
  return 0
}

steps=" ${STEPS:-control-warmup control big objspill nospill} "
if [[ $steps == *" control"* || $steps == *" big "* ]]; then
  start_cluster cudf-spill -- --cudf-spill-stats 1   # statistics (level 1: totals, very low overhead) to report
  for s in $steps; do
    case $s in
      control-warmup|control) merge_run "$s" $((rows / 4)) $((parts / 4)) 120 ;;
      big) merge_run big "$rows" "$parts" 300 ;;
    esac
  done
  stop_cluster
fi
if [[ $steps == *" objspill "* ]] && [ "$(left)" -ge 60 ]; then
  start_cluster objspill --no-cudf-spill
  merge_run objspill "$rows" "$parts" 240
  stop_cluster
fi
if [[ $steps == *" objspill-preimport "* ]] && [ "$(left)" -ge 60 ]; then
  # the same with dask_cudf imported in the worker before any task: dask's sizeof of a cuDF frame is registered by
  # dask_cudf.backends only; without it a frame made by a plain cuDF task weighs ~48 bytes to the device limit
  start_cluster objspill-preimport --no-cudf-spill -- --pre-import dask_cudf
  merge_run objspill-preimport "$rows" "$parts" 240
  stop_cluster
fi
if [[ $steps == *" nospill "* ]] && [ "$(left)" -ge 60 ]; then
  start_cluster nospill --no-cudf-spill --device-memory-limit 0
  merge_run nospill "$rows" "$parts" 90
  stop_cluster
fi
echo "done after ${SECONDS}s"
