#!/usr/bin/env bash
# Data frames on every GPU of one host against one GPU of the same machine, in the same run (issue 23, "Several GPUs
# per host, measured"). RAPIDS 26.10 (CUDA 13, CPython 3.12) comes as wheels in parts, exactly as for
# tests/gpu/gpu-proof-etl.sh (PARTS, checked against tests/gpu/results/etl-h100/wheels.sha256, or WHEELS); UCX
# (distributed-ucxx, ucxx, libucxx, libucx for CUDA 13) from WHEELS_UCX (default .gpuparts/ucx, checked against
# tests/gpu/results/h200x2-frames/ucx-wheels.sha256) when carried; without them the UCX steps are skipped.
#   PARTS=/var/tmp/parts WHEELS_UCX=.gpuparts/ucx OUT=/tmp/multi tests/gpu/gpu-proof-multi.sh
# First the readings: nvidia-smi, `nvidia-smi topo -m`, NVLink state, `python -m dask_gpu_verify.gpu_health` (NVML, every
# GPU). Then STEPS, each a pair run back to back, one GPU first, then all N GPUs:
#   merge-tcp    dask-cuda's local_cudf_merge --devs 0 / --devs 0,..,N-1, --protocol tcp, 8 x 8 chunks of 50 M rows
#   etl          dask_gpu_verify.etl through the compose scheduler and worker command lines (one worker per GPU;
#                CUDA_VISIBLE_DEVICES=0 for one), --rmm-pool-size 0.8, shuffle tasks, FILES partitions per GPU;
#                on the N-GPU cluster then `python -m dask_gpu_verify --expect-workers N --frame-rows 10000000`
#   merge-ucx    local_cudf_merge as merge-tcp with --protocol ucx
#   shuffle-tcp  local_cudf_shuffle, 64 partitions of 64 MiB, --protocol tcp (shuffle-ucx: ucx)
#   etl-ucx      etl over UCX: the same command lines with the scheduler's --protocol ucx, the worker's address
#                ucx://127.0.0.1:8786 and --enable-nvlink (dask-cuda's switch: UCX_TLS tcp,cuda_copy,cuda_ipc); the
#                scheduler and the clients get DASK_DISTRIBUTED_UCXX__NVLINK=True and __CREATE_CUDA_CONTEXT=True
#                (dask-cuda's docs); no verify run. Writes etl-ucx-1gpu.json, etl-ucx-NgpU.json
#   shuffle-ucx-all, etl-ucx-all  only the N-GPU half of shuffle-ucx, etl-ucx
# STEPS picks and orders them (default: merge-tcp etl merge-ucx shuffle-tcp shuffle-ucx), e.g. STEPS="etl-ucx
# shuffle-ucx-all". READINGS=0 skips topo, NVLink state and gpu_health (device.txt and versions.txt stay).
# Every benchmark gets an RMM pool of 0.8 of a GPU given as a size (their --rmm-pool-size takes no fraction).
# BUDGET (380) is the seconds the whole script may take: a run that would not fit in what is left is skipped and says
# so. Everything lands in OUT: device.txt, topo.txt, nvlink.txt, health.json, versions.txt, commands.txt (each run's
# exact command), NAME.{json,txt} per run, verify.{json,txt}, summary.{json,md}, skipped.txt, failed.txt.
set -uo pipefail  # no -e: one failed run is recorded and the others still run
cd "$(dirname "$0")/../.." || exit
out="${OUT:-/tmp/gpu-multi}"; mkdir -p "$out"
rows="${ROWS:-96000000}" files="${FILES:-8}" passes="${PASSES:-3}" budget="${BUDGET:-380}" runs="${RUNS:-3}"
data="${DATA:-/var/tmp/dask-gpu-etl}"
work="$(mktemp -d)"
# --- install: gpu-proof-etl.sh's, plus the UCX wheels ---
if [ -n "${PARTS:-}" ]; then
  sums="$PWD/tests/gpu/results/etl-h100/wheels.sha256"
  (cd "$PARTS" && sed -n 's# p[0-9]*/part-# part-#p' "$sums" | sha256sum --quiet -c -) || exit 3
  cat "$PARTS"/part-* >"$work/wheels.tar"
  [ "$(sha256sum <"$work/wheels.tar" | cut -d' ' -f1)" = "$(grep ' wheels.tar$' "$sums" | cut -d' ' -f1)" ] || exit 3
  tar -C "$work" -xf "$work/wheels.tar" && rm "$work/wheels.tar"
  WHEELS="$work/wheels"
fi
ucx_dir="${WHEELS_UCX:-.gpuparts/ucx}" ucx_wheels=()
if compgen -G "$ucx_dir/*.whl" >/dev/null; then
  (cd "$ucx_dir/.." && sha256sum --quiet -c "$OLDPWD/tests/gpu/results/h200x2-frames/ucx-wheels.sha256") || exit 3
  ucx_wheels=("$ucx_dir"/*.whl)
fi
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  "${WHEELS:-/tmp/wheels}"/*.whl "${ucx_wheels[@]}" || exit 3
# The carried numpy (the pins' 2.4.6) goes first: the machine's numba-cuda calls np.row_stack, which its newer numpy
# lacks, and `import cudf` reaches that code (tests/gpu/README.md, "The lent machines").
export PYTHONPATH="/tmp/site:$PWD/images/verify/src" PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1
python3 -c 'import cudf, dask_cudf, cupy, dask, distributed, dask_cuda, numpy, pandas, pyarrow; print("cudf", cudf.__version__, "dask-cudf", dask_cudf.__version__, "cupy", cupy.__version__, "dask", dask.__version__, "distributed", distributed.__version__, "dask-cuda", dask_cuda.__version__, "numpy", numpy.__version__, "pandas", pandas.__version__, "pyarrow", pyarrow.__version__)' \
  | tee "$out/versions.txt" || exit 3
ucx=0
if [ ${#ucx_wheels[@]} -gt 0 ] && python3 -c 'import ucxx, distributed_ucxx, importlib.metadata as m; print("ucxx", ucxx.__version__, "distributed-ucxx", m.version("distributed-ucxx-cu13"), "libucx", m.version("libucx-cu13"))' \
    >>"$out/versions.txt" 2>"$work/ucx-import.err"; then ucx=1
elif [ ${#ucx_wheels[@]} -gt 0 ]; then echo "ucx: import failed: $(tail -1 "$work/ucx-import.err")" | tee -a "$out/failed.txt"
fi
{ nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,memory.total --format=csv,noheader; nproc
  free -g | sed -n 2p; uname -r; python3 -V; } | tee "$out/device.txt"
if [ "${READINGS:-1}" != 0 ]; then
  nvidia-smi topo -m >"$out/topo.txt" 2>&1
  nvidia-smi nvlink -s >"$out/nvlink.txt" 2>&1
  python3 -m dask_gpu_verify.gpu_health >"$out/health.json" 2>"$work/health.err" \
    || { echo "gpu_health: failed" | tee -a "$out/failed.txt"; tail -20 "$work/health.err" >"$out/health.err"; }
fi
gpus=$(nvidia-smi -L | grep -c '^GPU')
all_devs=$(seq -s, 0 $((gpus - 1)))
total_mib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits -i 0)
pool_mib=$((total_mib * 8 / 10))

read -r -a scheduler_cmd <<<"$(python3 tests/gpu/compose_commands.py scheduler "$work")"
read -r -a worker_cmd <<<"$(python3 tests/gpu/compose_commands.py worker "$work")"
printf 'scheduler: %s\nworker:    %s\n' "${scheduler_cmd[*]}" "${worker_cmd[*]}" | tee -a "$out/commands.txt"
# The same lines over UCX: the scheduler's protocol, the worker's scheduler address, NVLink on (CUDA IPC)
ucx_scheduler_cmd=() ucx_worker_cmd=()
for a in "${scheduler_cmd[@]}"; do [ "$a" = tcp ] && a=ucx; ucx_scheduler_cmd+=("$a"); done
for a in "${worker_cmd[@]}"; do ucx_worker_cmd+=("${a/#tcp:\/\/127.0.0.1:8786/ucx://127.0.0.1:8786}"); done
ucx_worker_cmd+=(--enable-nvlink)
ucx_env=(DASK_DISTRIBUTED_UCXX__NVLINK=True DASK_DISTRIBUTED_UCXX__CREATE_CUDA_CONTEXT=True)
pids=()
stop_cluster() {  # each process leads its own group (setsid): the group goes, the nanny's worker processes too
  local pid
  for pid in "${pids[@]}"; do kill -TERM -- "-$pid" 2>/dev/null; done
  for _ in $(seq 50); do
    for pid in "${pids[@]}"; do kill -0 -- "-$pid" 2>/dev/null && { sleep 0.2; continue 2; }; done
    break
  done
  for pid in "${pids[@]}"; do kill -KILL -- "-$pid" 2>/dev/null; done
  for _ in $(seq 25); do  # gone, and nothing left listening on 8786 before the next cluster binds it
    for pid in "${pids[@]}"; do kill -0 -- "-$pid" 2>/dev/null && { sleep 0.2; continue 2; }; done
    (exec 3<>/dev/tcp/127.0.0.1/8786) 2>/dev/null && { sleep 0.2; continue; }
    break
  done
  pids=()
}
cleanup() { stop_cluster; rm -rf "$work"; }
trap cleanup EXIT
trap 'exit 143' TERM INT
left() { echo $((budget - SECONDS)); }
fits() {  # NAME SECONDS: enough left for a run expected to take SECONDS?
  if [ "$(left)" -ge "$2" ]; then return 0; fi
  echo "$1: skipped, $(left) s left of $budget, it needs about $2" | tee -a "$out/skipped.txt"; return 1
}
start_bundle() {  # NAME DEVICES [PROTOCOL]: the compose command lines; the worker on DEVICES ("0" or "0,1,..")
  local name=$1 devices=$2 protocol=${3:-tcp}  # + --rmm-pool-size 0.8; PROTOCOL ucx: the UCX lines above
  local s=("${scheduler_cmd[@]}") w=("${worker_cmd[@]}") e=()
  [ "$protocol" = ucx ] && s=("${ucx_scheduler_cmd[@]}") w=("${ucx_worker_cmd[@]}") e=("${ucx_env[@]}")
  env "${e[@]}" setsid python3 -m dask "${s[@]:1}" >"$work/$name-scheduler.log" 2>&1 & pids+=($!)
  env "${e[@]}" CUDA_VISIBLE_DEVICES="$devices" setsid python3 -m dask "${w[@]:1}" --rmm-pool-size 0.8 \
    >"$work/$name-worker.log" 2>&1 & pids+=($!)
  if [ "$protocol" = ucx ]; then
    printf '%s: %s %s\n%s: %s CUDA_VISIBLE_DEVICES=%s %s --rmm-pool-size 0.8\n' "$name" "${e[*]}" "${s[*]}" \
      "$name" "${e[*]}" "$devices" "${w[*]}" >>"$out/commands.txt"
  else echo "$name: CUDA_VISIBLE_DEVICES=$devices worker +--rmm-pool-size 0.8" >>"$out/commands.txt"; fi
}
wait_workers() {  # N [ADDRESS]: the workers registered (a client that comes too early sees none)
  python3 -c 'import sys, time
from distributed import Client
started = time.monotonic()
with Client(sys.argv[2], timeout=60) as c:
    c.wait_for_workers(int(sys.argv[1]), timeout=120)
    print(f"{sys.argv[1]} workers registered in {time.monotonic() - started:.1f} s")' "$1" "${2:-tcp://127.0.0.1:8786}"
}
failed() {  # NAME: record it, keep the ends of its logs
  echo "$1: failed" | tee -a "$out/failed.txt"
  [ -f "$work/$1.err" ] && tail -n 20 "$work/$1.err" >"$out/$1.err"
  [ -f "$work/$1-worker.log" ] && tail -n 30 "$work/$1-worker.log" >"$out/$1-worker.log"
  [ -f "$work/$1-scheduler.log" ] && grep -v 'Endpoint is not connected' "$work/$1-scheduler.log" | tail -n 30 \
    >"$out/$1-scheduler.log"
  [ -f "$work/$1-worker.log" ] && grep -v 'Endpoint is not connected' "$work/$1-worker.log" | head -n 40 \
    >"$out/$1-worker-head.log"
  return 0
}
etl() {  # NAME DEVICES PARTITIONS [PROTOCOL]
  local name=$1 devices=$2 partitions=$3 protocol=${4:-tcp} n e=() limit=150
  n=$(tr ',' '\n' <<<"$devices" | wc -l)
  fits "$name" 50 || return 0
  [ "$protocol" = ucx ] && e=("${ucx_env[@]}") limit=100  # a UCX run that hangs must not eat the budget
  start_bundle "$name" "$devices" "$protocol"
  if ! env "${e[@]}" timeout -k 5 90 bash -c "$(declare -f wait_workers); wait_workers $n $protocol://127.0.0.1:8786" \
      2>"$work/$name.err" | tee -a "$out/registration.txt"; then failed "$name"; stop_cluster; return 0; fi
  local args=(--scheduler "$protocol://127.0.0.1:8786" --rows "$rows" --files "$files" --data "$data"
              --passes "$passes" --partitions "$partitions" --shuffle tasks --label "$name" --json "$out/$name.json")
  echo "== $name: ${e[*]}${e:+ }python -m dask_gpu_verify.etl ${args[*]}" | tee -a "$out/commands.txt"
  env "${e[@]}" timeout -k 10 "$(( limit < $(left) ? limit : $(left) ))" python3 -m dask_gpu_verify.etl "${args[@]}" \
    2>"$work/$name.err" | tee "$out/$name.txt"
  [ "${PIPESTATUS[0]}" -eq 0 ] || failed "$name"
  if [ "$protocol" = tcp ] && [ "$n" -eq "$gpus" ] && [ "$n" -gt 1 ] && fits verify 25; then  # priority 2: every worker's GPU health
    args=(--scheduler tcp://127.0.0.1:8786 --expect-workers "$n" --frame-rows 10000000 --json "$out/verify.json")
    echo "== verify: python -m dask_gpu_verify ${args[*]}" | tee -a "$out/commands.txt"
    timeout -k 10 60 python3 -m dask_gpu_verify "${args[@]}" 2>"$work/verify.err" | tee "$out/verify.txt"
    [ "${PIPESTATUS[0]}" -eq 0 ] || failed verify
  fi
  stop_cluster
}
bench() {  # NAME TIMEOUT BENCHMARK DEVICES PROTOCOL ARGS...: the client's shuffle method as the ETL's (tasks)
  local name=$1 limit=$2 benchmark=$3 devices=$4 protocol=$5; shift 5
  fits "$name" $((limit / 3)) || return 0
  local args=(--devs "$devices" --protocol "$protocol" --rmm-pool-size "${pool_mib}MiB" --runs "$runs" "$@"
              --output-basename "$out/$name")
  echo "== $name: DASK_DATAFRAME__SHUFFLE__METHOD=tasks python -m dask_cuda.benchmarks.$benchmark ${args[*]}" \
    | tee -a "$out/commands.txt"
  DASK_DATAFRAME__SHUFFLE__METHOD=tasks timeout -k 10 "$(( limit < $(left) ? limit : $(left) ))" \
    python3 -m "dask_cuda.benchmarks.$benchmark" "${args[@]}" >"$out/$name.txt" 2>"$work/$name.err" || failed "$name"
  grep -E '^(Throughput|Wall clock|Data processed|Number of workers)' "$out/$name.txt"
  rm -f "$out/$name.address_map.json"
}
merge_args=(-c 50_000_000 --base-chunks 8 --other-chunks 8)
shuffle_args=(--partition-size 64MiB --in-parts 64)
for step in ${STEPS:-merge-tcp etl merge-ucx shuffle-tcp shuffle-ucx}; do
  case $step in
    merge-tcp|shuffle-tcp|merge-ucx|shuffle-ucx)
      protocol=${step#*-} kind=${step%-*}
      if [ "$protocol" = ucx ] && [ "$ucx" = 0 ]; then echo "$step: skipped, no UCX wheels" | tee -a "$out/skipped.txt"; continue; fi
      limit=150; [ "$protocol" = ucx ] && limit=90  # a UCX run that hangs must not eat the budget
      if [ "$kind" = merge ]; then bench_name=local_cudf_merge extra=("${merge_args[@]}")
      else bench_name=local_cudf_shuffle extra=("${shuffle_args[@]}"); fi
      bench "$step-1gpu" "$limit" "$bench_name" 0 "$protocol" "${extra[@]}"
      bench "$step-${gpus}gpu" "$limit" "$bench_name" "$all_devs" "$protocol" "${extra[@]}" ;;
    etl)
      etl etl-1gpu 0 "$files"
      etl "etl-${gpus}gpu" "$all_devs" $((files * gpus)) ;;
    etl-ucx)
      if [ "$ucx" = 0 ]; then echo "$step: skipped, no UCX wheels" | tee -a "$out/skipped.txt"; continue; fi
      etl etl-ucx-1gpu 0 "$files" ucx
      etl "etl-ucx-${gpus}gpu" "$all_devs" $((files * gpus)) ucx ;;
    etl-ucx-all)  # only the N-GPU half of etl-ucx
      if [ "$ucx" = 0 ]; then echo "$step: skipped, no UCX wheels" | tee -a "$out/skipped.txt"; continue; fi
      etl "etl-ucx-${gpus}gpu" "$all_devs" $((files * gpus)) ucx ;;
    shuffle-ucx-all)
      if [ "$ucx" = 0 ]; then echo "$step: skipped, no UCX wheels" | tee -a "$out/skipped.txt"; continue; fi
      bench "shuffle-ucx-${gpus}gpu" 90 local_cudf_shuffle "$all_devs" ucx "${shuffle_args[@]}" ;;
    *) echo "unknown step $step" | tee -a "$out/failed.txt" ;;
  esac
done

python3 - "$out" "$gpus" <<'PY' | tee "$out/summary.md"
import json, sys
from pathlib import Path
out, n = Path(sys.argv[1]), int(sys.argv[2])
rows = {}
for kind in ("merge-tcp", "merge-ucx", "shuffle-tcp", "shuffle-ucx"):  # throughput: bytes over seconds of all runs
    pair = {}
    for g in (1, n):
        p = out / f"{kind}-{g}gpu.json"
        if p.exists():
            r = json.loads(p.read_text())
            pair[g] = sum(r["data_processed"].values()) / sum(r["wallclock"].values()) / 2**30
    if pair:
        rows[f"{kind} GiB/s"] = pair
etls = {}
for kind in ("etl", "etl-ucx"):
    etl = {g: json.loads((out / f"{kind}-{g}gpu.json").read_text()) for g in (1, n)
           if (out / f"{kind}-{g}gpu.json").exists()}
    if etl:
        etls[kind] = etl
        rows[f"{kind} pass 2 s"] = {g: r["seconds"] for g, r in etl.items()}
        rows[f"{kind} median passes 2.. s"] = {g: r.get("steady_median_s", r["seconds"]) for g, r in etl.items()}
print(f"| workload | 1 GPU | {n} GPUs | {n} GPUs faster by |")
print("| --- | --- | --- | --- |")
summary = {}
for name, pair in rows.items():
    one, many = pair.get(1), pair.get(n)
    ratio = None
    if one and many:
        ratio = one / many if name.endswith(" s") else many / one
    summary[name] = {"1": one, str(n): many, "ratio": ratio}
    cell = [f"{v:.2f}" if v is not None else "-" for v in (one, many, ratio)]
    print(f"| {name} | {cell[0]} | {cell[1]} | {cell[2]} |")
for kind, etl in etls.items():
    if len(etl) == 2:
        same = etl[1]["check_digest"] == etl[n]["check_digest"]
        print(f"\n{kind} check digests: {etl[1]['check_digest']} / {etl[n]['check_digest']} "
              f"({'same' if same else 'DIFFER'})")
    for g, r in etl.items():
        print(f"{kind} {g} GPU(s): workers {r.get('workers')}, partitions {r['partitions']}, passes "
              f"{[p['seconds'] for p in r['passes']]}, steps {r['steps']}")
    summary[kind] = {str(g): {k: r.get(k) for k in ("workers", "partitions", "seconds", "steady_median_s", "steps",
                                                    "check_digest")} | {"passes": [p["seconds"] for p in r["passes"]]}
                     for g, r in etl.items()}
(out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
PY
[ ! -s "$out/failed.txt" ]
