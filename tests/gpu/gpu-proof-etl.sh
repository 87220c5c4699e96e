#!/usr/bin/env bash
# The seeds-like ETL on one real GPU (issue 24, "Performance"): dask_gpu_verify.etl through the compose stack's
# scheduler and dask-cuda worker command lines as plain processes, one setting changed at a time as extra worker
# flags (RMM pool, cuDF spilling) or client settings (shuffle method, partitions); then the same work on 8 CPU worker
# processes (dask.dataframe on pandas), on a bare dask_cuda.LocalCUDACluster with the tuned settings, and dask-cuda's
# local_cudf_merge through the bundle's worker against bare dask-cuda. RAPIDS 26.10 (CUDA 13, CPython 3.12) comes as
# wheels (tests/gpu/carry-wheels.sh), whole in WHEELS or in parts in PARTS (checked against
# tests/gpu/results/etl-h100/wheels.sha256).
#   PARTS=/var/tmp/parts OUT=/tmp/etl tests/gpu/gpu-proof-etl.sh      # or WHEELS=/tmp/wheels
# ROWS (96000000) and FILES (8) size the data, PASSES (2) the passes of each run; STEPS picks and orders the runs (default: all, in the order below);
# BUDGET (540) is the seconds the whole script may take: a run that would not fit in what is left is skipped and
# says so. Everything lands in OUT: etl-NAME.{json,txt,err}, merge-{bundle,bare}.*, summary.{json,md},
# versions.txt, device.txt, commands.txt (each run's exact command), skipped.txt, failed.txt.
set -uo pipefail  # no -e: one failed variant is recorded and the others still run
cd "$(dirname "$0")/../.." || exit
out="${OUT:-/tmp/gpu-etl}"; mkdir -p "$out"
rows="${ROWS:-96000000}" files="${FILES:-8}" passes="${PASSES:-2}" budget="${BUDGET:-540}" data="${DATA:-/var/tmp/dask-gpu-etl}"
work="$(mktemp -d)"
if [ -n "${PARTS:-}" ]; then
  sums="$PWD/tests/gpu/results/etl-h100/wheels.sha256"
  (cd "$PARTS" && sed -n 's# p[0-9]*/part-# part-#p' "$sums" | sha256sum --quiet -c -) || exit 3
  cat "$PARTS"/part-* >"$work/wheels.tar"
  [ "$(sha256sum <"$work/wheels.tar" | cut -d' ' -f1)" = "$(grep ' wheels.tar$' "$sums" | cut -d' ' -f1)" ] || exit 3
  tar -C "$work" -xf "$work/wheels.tar" && rm "$work/wheels.tar"
  WHEELS="$work/wheels"
fi
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  "${WHEELS:-/tmp/wheels}"/*.whl || exit 3
# The carried numpy (the pins' 2.4.6) goes first: the machine's numba-cuda calls np.row_stack, which its newer numpy
# lacks, and `import cudf` reaches that code (tests/gpu/README.md, "The lent machines").
export PYTHONPATH="/tmp/site:$PWD/images/verify/src" PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1
python3 -c 'import cudf, dask_cudf, cupy, dask, distributed, dask_cuda, numpy, pandas, pyarrow; print("cudf", cudf.__version__, "dask-cudf", dask_cudf.__version__, "cupy", cupy.__version__, "dask", dask.__version__, "distributed", distributed.__version__, "dask-cuda", dask_cuda.__version__, "numpy", numpy.__version__, "pandas", pandas.__version__, "pyarrow", pyarrow.__version__)' \
  | tee "$out/versions.txt" || exit 3
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nproc; free -g | sed -n 2p;
  python3 -V; } | tee "$out/device.txt"
total_mib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits -i 0)
pool_mib=$((total_mib * 8 / 10))  # 0.8 of the GPU: local_cudf_merge's --rmm-pool-size takes a size, not a fraction

read -r -a scheduler_cmd <<<"$(python3 tests/gpu/compose_commands.py scheduler "$work")"
read -r -a worker_cmd <<<"$(python3 tests/gpu/compose_commands.py worker "$work")"
printf 'scheduler: %s\nworker:    %s\n' "${scheduler_cmd[*]}" "${worker_cmd[*]}" | tee "$out/commands.txt"
pids=()
stop_cluster() {  # each process leads its own group (setsid): the group goes, the nanny's worker process too
  local pid
  for pid in "${pids[@]}"; do kill -TERM -- "-$pid" 2>/dev/null; done
  for _ in $(seq 50); do
    for pid in "${pids[@]}"; do kill -0 -- "-$pid" 2>/dev/null && { sleep 0.2; continue 2; }; done
    break
  done
  for pid in "${pids[@]}"; do kill -KILL -- "-$pid" 2>/dev/null; done
  pids=()
}
cleanup() { stop_cluster; rm -rf "$work"; }
trap cleanup EXIT
trap 'exit 143' TERM INT
start_bundle() {  # NAME EXTRA_WORKER_FLAGS...: the compose command lines, the flags after the worker's own
  local name=$1; shift
  setsid python3 -m dask "${scheduler_cmd[@]:1}" >"$work/$name-scheduler.log" 2>&1 & pids+=($!)
  setsid python3 -m dask "${worker_cmd[@]:1}" "$@" >"$work/$name-worker.log" 2>&1 & pids+=($!)
  echo "$name: worker +$*" >>"$out/commands.txt"
}
wait_worker() {  # the worker registered (a client that comes too early sees no worker)
  python3 -c 'from distributed import Client
with Client("tcp://127.0.0.1:8786", timeout=60) as c: c.wait_for_workers(1, timeout=120)'
}
left() { echo $((budget - SECONDS)); }
fits() {  # NAME SECONDS: enough left for a run expected to take SECONDS?
  if [ "$(left)" -ge "$2" ]; then return 0; fi
  echo "$1: skipped, $(left) s left of $budget, it needs about $2" | tee -a "$out/skipped.txt"; return 1
}
etl() {  # NAME TIMEOUT ETL_ARGS...
  local name=$1 limit=$2; shift 2
  echo "== $name: etl $*" | tee -a "$out/commands.txt"
  timeout -k 10 "$limit" python3 -m dask_gpu_verify.etl --rows "$rows" --files "$files" --data "$data" --passes "$passes" \
    --label "$name" --json "$out/etl-$name.json" "$@" 2>"$work/etl-$name.err" | tee "$out/etl-$name.txt"
  local status=${PIPESTATUS[0]}
  [ "$status" -eq 0 ] && return 0
  echo "$name: exit $status" | tee -a "$out/failed.txt"
  tail -n 20 "$work/etl-$name.err" >"$out/etl-$name.err"
  [ -f "$work/$name-worker.log" ] && tail -n 30 "$work/$name-worker.log" >"$out/$name-worker.log"
  return 0
}
bundle() {  # NAME TIMEOUT PARTITIONS SHUFFLE [WORKER FLAGS...]
  local name=$1 limit=$2 partitions=$3 shuffle=$4; shift 4
  fits "$name" $((limit / 2)) || return 0
  # cuDF spilling on the workers needs it in the scheduler and the client too (dask-cuda's warning says so; without
  # it the client cannot deserialize results: "cannot create SpillableBufferOwner without a global spill manager")
  local spill=off
  [[ " $* " == *" --enable-cudf-spill "* ]] && spill=on
  CUDF_SPILL=$spill start_bundle "$name" "$@"
  CUDF_SPILL=$spill etl "$name" "$(( limit < $(left) ? limit : $(left) ))" --scheduler tcp://127.0.0.1:8786 \
    --partitions "$partitions" --shuffle "$shuffle"
  stop_cluster
}
merge_args=(-c 50_000_000 --base-chunks 8 --other-chunks 8 --runs 5)
merge() {  # NAME BENCHMARK_ARGS...: the client's shuffle method as the ETL's (tasks) for both
  local name=$1; shift
  echo "== $name: local_cudf_merge $* ${merge_args[*]}" | tee -a "$out/commands.txt"
  DASK_DATAFRAME__SHUFFLE__METHOD=tasks timeout -k 10 150 python3 -m dask_cuda.benchmarks.local_cudf_merge "$@" \
    "${merge_args[@]}" --output-basename "$out/$name" >"$out/$name.txt" 2>"$work/$name.err" \
    || { echo "$name: failed" | tee -a "$out/failed.txt"; tail -20 "$work/$name.err" >"$out/$name.err"; }
  grep -E '^(Throughput|Wall clock|Data processed|RMM Pool)' "$out/$name.txt"
}

steps=" ${STEPS:-tuned cpu-8x1 bare-tuned merge no-pool cudf-spill partitions-x8 p2p cpu-8x2 threads-2 scale} "
# The tuned bundle first, then what it is held against, then each setting changed on its own.
for name in $steps; do
  case $name in
    tuned|tuned-[a-z]) bundle "$name" 150 "$files" tasks --rmm-pool-size 0.8 ;;
    cpu-8x1) fits cpu-8x1 150 && etl cpu-8x1 200 --local-cpu 8 --threads 1 --partitions $((files * 4)) ;;
    cpu-8x2) fits cpu-8x2 150 && etl cpu-8x2 200 --local-cpu 8 --threads 2 --partitions $((files * 4)) ;;
    bare-tuned|bare-tuned-[a-z])
      fits "$name" 60 && etl "$name" 150 --local-cuda --rmm-pool-size 0.8 --partitions "$files" ;;
    merge)
      if fits merge 120; then
        start_bundle merge-bundle --rmm-pool-size "${pool_mib}MiB"
        wait_worker && merge merge-bundle --scheduler-address tcp://127.0.0.1:8786
        stop_cluster
        merge merge-bare --devs 0 --protocol tcp --rmm-pool-size "${pool_mib}MiB"
      fi ;;
    no-pool) bundle no-pool 150 "$files" tasks ;;
    cudf-spill) bundle cudf-spill 150 "$files" tasks --rmm-pool-size 0.8 --enable-cudf-spill ;;
    partitions-x8) bundle partitions-x8 150 $((files * 8)) tasks --rmm-pool-size 0.8 ;;
    p2p) bundle p2p 300 "$files" p2p --rmm-pool-size 0.8 ;;
    threads-2|threads-2-[a-z]) bundle "$name" 150 "$files" tasks --rmm-pool-size 0.8 --nthreads 2 ;;
    scale)  # twice the rows in twice the files (12 M rows each): the tuned bundle against both CPU settings
      rows=$((rows * 2)) files=$((files * 2)) data="$data-x2"
      bundle tuned-x2 180 "$files" tasks --rmm-pool-size 0.8
      fits cpu-8x2-x2 120 && etl cpu-8x2-x2 200 --local-cpu 8 --threads 2 --partitions $((files * 4))
      fits cpu-8x1-x2 120 && etl cpu-8x1-x2 200 --local-cpu 8 --threads 1 --partitions $((files * 4))
      rows=$((rows / 2)) files=$((files / 2)) data="${data%-x2}" ;;
    *) echo "unknown step $name" | tee -a "$out/failed.txt" ;;
  esac
done

python3 - "$out" <<'PY' | tee "$out/summary.md"
import json, re, sys
from pathlib import Path
out = Path(sys.argv[1])
runs = {p.stem[4:]: json.loads(p.read_text()) for p in sorted(out.glob("etl-*.json"))}
print("| variant | backend | partitions | shuffle | pass 1 s | pass 2 s | median 2.. s | 8 CPU / variant | variant / tuned "
      "| checks |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for name, r in runs.items():
    size = "-x2" if name.endswith("-x2") else ""  # held against the runs of the same data
    cpu, tuned = runs.get("cpu-8x1" + size), runs.get("tuned" + size)
    vs_cpu = f"{cpu['seconds'] / r['seconds']:.2f}" if cpu else "-"
    vs_tuned = f"{r['seconds'] / tuned['seconds']:.2f}" if tuned else "-"
    same = "same as CPU" if cpu and r["check_digest"] == cpu["check_digest"] else r["check_digest"][:12]
    print(f"| {name} | {r['backend']} | {r['partitions']} | {r['shuffle']} | {r['passes'][0]['seconds']:.2f} | "
          f"{r['seconds']:.2f} | {r.get('steady_median_s', r['seconds']):.2f} | {vs_cpu} | {vs_tuned} | {same} |")
cpu, tuned = runs.get("cpu-8x1"), runs.get("tuned")
if tuned and "bare-tuned" in runs:
    print(f"\nbundle / bare LocalCUDACluster throughput (bare s / bundle s): {runs['bare-tuned']['seconds'] / tuned['seconds']:.3f}")
merges = {}
for name in ("merge-bundle", "merge-bare"):
    text = (out / f"{name}.txt").read_text() if (out / f"{name}.txt").exists() else ""
    found = re.search(r"^Throughput\s*\|\s*([\d.]+) GiB/s", text, re.M)
    merges[name] = float(found.group(1)) if found else None
    print(f"{name}: {merges[name]} GiB/s")
if all(merges.values()):
    print(f"merge bundle / bare: {merges['merge-bundle'] / merges['merge-bare']:.3f}")
digests = {r["check_digest"] for r in runs.values()}
print(f"check digests: {len(digests)} distinct over {len(runs)} runs (one per data size when all agree)")
(out / "summary.json").write_text(json.dumps({"etl": {n: {k: r[k] for k in ("backend", "partitions", "shuffle",
    "seconds", "steps", "check_digest", "cluster")} | {"pass1": r["passes"][0]["seconds"]} for n, r in runs.items()},
    "merge_gib_s": merges, "distinct_check_digests": len(digests)}, indent=1) + "\n")
PY
[ ! -s "$out/failed.txt" ]
