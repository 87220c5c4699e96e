#!/usr/bin/env bash
# The bundle's monitoring on a real GPU machine without Docker or systemd (issue 13): the bundle-tls cluster from
# playbooks/render-commands.yml (dask_monitoring_enabled, 5 s scrapes) as plain processes, as in
# tests/gpu/proofs.py's processes; node exporter and Prometheus from Debian's packages (carried in .promdebs/) with the rendered
# prometheus.yml and alert rules. Then (tests/gpu/monitoring_probe.py prints PASS/FAIL lines with the figures):
#   targets    every target of the rendered configuration up (targets.json: job, scrapeUrl, health, scrape time)
#   mapping    GPU worker N answers on 8790+N, each serves its own GPU (the GPU of its CUDA device 0, by PCI
#              address), and Prometheus stores each GPU UUID once, on the target of the worker that owns it
#   workload   every GPU busy (fp64 matmuls) for WORKLOAD_SECONDS while holding an 8 GiB CuPy array each:
#              utilisation max_over_time > 50 %, memory used - baseline = 8 GiB within 5 %, from Prometheus;
#              tests/monitoring/dashboard_queries.py meanwhile (every panel, GPU panels included, has series)
#   rules      the 9 alert rules loaded and healthy, none pending or firing
#   scrape     a worker's /metrics fetched directly 20 times, Prometheus's scrape_duration_seconds (< 50 ms)
#   overhead   Prometheus scraping every 1 s (and node exporter) against both stopped, off/on x 3 alternating:
#              no-op task rate (target on/off >= 0.98), gram on every GPU, a fixed matmul loop (times, off/on)
# Everything is stopped at the end; OUT/summary.md holds the figures, OUT/checks.txt the PASS/FAIL lines.
#   OUT=/tmp/monitoring CERTS_DIR=.gpucerts [PROM_DEBS=.promdebs] bash tests/gpu/gpu-proof-monitoring.sh
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
out="${OUT:-/tmp/gpu-proof-monitoring}"; mkdir -p "$out"
certs="${CERTS_DIR:-.gpucerts}"
debs="${PROM_DEBS:-.promdebs}"
seconds="${WORKLOAD_SECONDS:-30}"
# shellcheck source=tests/gpu/python-env.sh
. tests/gpu/python-env.sh
export ANSIBLE_NOCOLOR=1
probe() { python3 tests/gpu/monitoring_probe.py "$@"; }
status=0
fail() { echo "FAIL $*" | tee -a "$out/steps.txt"; status=1; }

nvidia-smi --query-gpu=index,uuid,pci.bus_id,name,memory.total,driver_version --format=csv,noheader \
  | tee "$out/gpus-full.csv"
nvidia-smi --query-gpu=index,uuid,pci.bus_id --format=csv,noheader > "$out/gpus.csv"
ngpus=$(wc -l < "$out/gpus.csv")
install -d -m 0750 /etc/dask/tls /var/lib/dask /var/lib/dask-reports
install -m 0644 "$certs/ca.crt" /etc/dask/tls/ca.crt
install -m 0644 "$certs/gpu-box.crt" /etc/dask/tls/host.crt
install -m 0600 "$certs/gpu-box.key" /etc/dask/tls/host.key

# --- processes ----------------------------------------------------------------------------------------------------
# Each runs in a session of its own (setsid): stopping the session ends its children (nannies, workers) too.
cluster=() prom_pid="" node_pid=""
stop_session() {  # PID: TERM to its session, KILL after 15 s
  local pid=$1
  [ -n "$pid" ] || return 0
  kill -TERM -- "-$pid" 2>/dev/null
  for _ in $(seq 60); do kill -0 -- "-$pid" 2>/dev/null || return 0; sleep 0.25; done
  echo "session $pid ignored TERM for 15 s: killed" >&2; kill -KILL -- "-$pid" 2>/dev/null; return 1
}
stop_monitoring() {
  stop_session "$prom_pid"; stop_session "$node_pid"; prom_pid="" node_pid=""
}
stop_all() {  # monitoring, then the workers, then the scheduler
  local i
  stop_monitoring
  for (( i = ${#cluster[@]} - 1; i >= 0; i-- )); do stop_session "${cluster[i]}"; done
  cluster=()
}
trap stop_all EXIT

wait_health() {
  for _ in $(seq 120); do python3 -c 'import urllib.request as u; u.urlopen("http://127.0.0.1:8787/health", timeout=1)' 2>/dev/null && return 0; sleep 0.5; done
  echo "scheduler never answered /health" >&2; return 1
}

# --- the cluster (bundle-tls with monitoring) ---------------------------------------------------------------------
dir="$out/rendered"; mkdir -p "$dir"
echo "=== render (dask_monitoring_enabled, 5 s scrapes)"
ansible-playbook -i tests/gpu/inventory.yml playbooks/render-commands.yml -e "render_dir=$dir" \
  -e '{"dask_monitoring_enabled": true, "dask_monitoring_scrape_interval": "5s"}' >"$out/render.log" 2>&1 \
  || { tail -30 "$out/render.log"; fail "render"; exit 1; }
grep -h '^exec ' "$dir"/gpu-box-dask-{scheduler,worker}.sh | tee "$out/commands.txt"
if [ ! -f "$dir/gpu-box-prometheus.yml" ] || [ ! -f "$dir/gpu-box-dask-alerts.yml" ]; then
  fail "render wrote no gpu-box-prometheus.yml / gpu-box-dask-alerts.yml"; exit 1
fi
setsid sh "$dir/gpu-box-dask-scheduler.sh" >"$out/scheduler.log" 2>&1 & cluster+=($!)
wait_health || { fail "scheduler health"; exit 1; }
started=$(date +%s.%N)
setsid sh "$dir/gpu-box-dask-worker.sh" >"$out/worker.log" 2>&1 & cluster+=($!)
want=$(python3 tests/gpu/spec_value.py "$dir/gpu-box-dask-verify.json" arg --expect-workers)
python3 tests/gpu/wait_workers.py "$want" "$started" | tee "$out/registration.txt" || { fail "workers"; exit 1; }
eval "$(python3 tests/gpu/spec_value.py "$dir/gpu-box-dask-verify.json" exports)"
address=$(python3 tests/gpu/spec_value.py "$dir/gpu-box-dask-verify.json" arg --scheduler)

# --- node exporter and Prometheus ---------------------------------------------------------------------------------
root=/tmp/prometheus-root; rm -rf "$root"; mkdir -p "$root"
for deb in "$debs"/prometheus_*.deb "$debs"/prometheus-node-exporter_*.deb; do
  if command -v dpkg-deb >/dev/null; then dpkg-deb -x "$deb" "$root"; else probe extract-deb "$deb" "$root"; fi \
    || { fail "extract $deb"; exit 1; }
done
bin="$root/usr/bin"
{ "$bin/prometheus" --version 2>&1 | head -1; "$bin/prometheus-node-exporter" --version 2>&1 | head -1; } \
  | tee "$out/versions.txt"
install -D -m 0644 "$dir/gpu-box-dask-alerts.yml" /etc/prometheus/dask-alerts.yml  # the path prometheus.yml names
if "$bin/promtool" check config "$dir/gpu-box-prometheus.yml" >"$out/promtool.txt" 2>&1; then
  echo "PASS promtool check config of the rendered prometheus.yml and rules: $(grep -c SUCCESS "$out/promtool.txt") SUCCESS lines" \
    | tee -a "$out/steps.txt"
else
  cat "$out/promtool.txt"; fail "promtool check config"
fi
tsdb=$(mktemp -d /tmp/prometheus-tsdb.XXXXXX)
start_monitoring() {  # CONFIG
  setsid "$bin/prometheus-node-exporter" --web.listen-address=127.0.0.1:9100 >>"$out/node-exporter.log" 2>&1 &
  node_pid=$!
  setsid "$bin/prometheus" --config.file="$1" --web.listen-address=127.0.0.1:9090 \
    --storage.tsdb.path="$tsdb" >>"$out/prometheus.log" 2>&1 &
  prom_pid=$!
}
targets=$(( 3 + ngpus ))  # prometheus, dask-scheduler, node, one per GPU worker
echo "=== Prometheus (5 s scrapes), $targets targets"
start_monitoring "$dir/gpu-box-prometheus.yml"
probe targets --want "$targets" --timeout 90 --out "$out/targets.json" | tee "$out/targets.txt" || status=1

echo "=== worker ports and GPU mapping"
sleep 6  # a scrape of every target after all were up
probe mapping "$address" --gpus "$out/gpus.csv" --out "$out/mapping.json" | tee "$out/mapping.txt" || status=1

echo "=== GPU workload (${seconds} s, 8 GiB held per GPU), dashboard queries during it"
rm -f "$out/workload.started"
probe workload "$address" --seconds "$seconds" --hold-gib 8 --interval 5 --marker "$out/workload.started" \
  --out "$out/workload.json" > "$out/workload.txt" 2>&1 &
workload_pid=$!
for _ in $(seq 360); do [ -f "$out/workload.started" ] || ! kill -0 "$workload_pid" 2>/dev/null && break; sleep 0.5; done
sleep $(( seconds / 2 ))
nvidia-smi --query-gpu=index,uuid,utilization.gpu,memory.used --format=csv > "$out/nvidia-smi-during.csv" 2>&1
python3 tests/monitoring/dashboard_queries.py --prometheus http://127.0.0.1:9090 --json "$out/dashboard.json" \
  > "$out/dashboard.txt" 2>&1; dashboard_rc=$?
wait "$workload_pid" || status=1
cat "$out/workload.txt" "$out/nvidia-smi-during.csv" "$out/dashboard.txt"
probe dashboard --json "$out/dashboard.json" --rc "$dashboard_rc" | tee -a "$out/steps.txt" || status=1

echo "=== alert rules"
probe rules --want 9 --out "$out/rules.json" | tee "$out/rules.txt" || status=1
echo "=== scrape time"
probe scrape --fetches 20 --window 10m --out "$out/scrape.json" | tee "$out/scrape.txt" || status=1

# --- monitoring on (1 s scrapes) against off ----------------------------------------------------------------------
echo "=== overhead: off/on alternating, Prometheus at 1 s"
sed -E 's/^(  (scrape|evaluation)_interval:) .*/\1 1s/' "$dir/gpu-box-prometheus.yml" > "$out/prometheus-1s.yml"
grep -E '_interval' "$out/prometheus-1s.yml"
rm -f "$out/phases.jsonl" "$out/phases.txt"
for label in off1 on1 off2 on2 off3 on3; do
  on=()
  if [[ "$label" == on* ]]; then
    start_monitoring "$out/prometheus-1s.yml"
    probe targets --want "$targets" --timeout 60 --out "$out/targets-1s.json" > "$out/targets-1s.txt" \
      || { cat "$out/targets-1s.txt"; fail "targets at 1 s ($label)"; }
    sleep 2
    on=(--on)
  else
    stop_monitoring
  fi
  probe phase "$address" --label "$label" "${on[@]}" --tasks 2000 --repeats 2 --runs 3 --matmuls 100 \
    --out "$out/phases.jsonl" | tee -a "$out/phases.txt" || fail "phase $label"
done
stop_monitoring
probe overhead --phases "$out/phases.jsonl" --out "$out/overhead.json" | tee "$out/overhead.txt" || status=1

echo "=== stop"
stop_all
trap - EXIT
# Every port the run used: the scheduler's, one worker HTTP port per GPU from 8790, Prometheus and node exporter.
read -r -a ports <<<"8786 8787 $(seq -s ' ' 8790 $((8789 + ngpus))) 9090 9100"
if python3 -c 'import socket, sys
for port in map(int, sys.argv[1:]):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("127.0.0.1", port)); s.close()' "${ports[@]}"; then
  echo "PASS stopped: ports ${ports[*]} free" | tee -a "$out/steps.txt"
else
  fail "a port is still bound after stopping"
fi
grep -h -E '^(PASS|FAIL|INFO)' "$out"/{targets,mapping,workload,rules,scrape,overhead}.txt "$out/steps.txt" > "$out/checks.txt"

{
  echo "# Monitoring on real GPUs (tests/gpu/gpu-proof-monitoring.sh)"
  echo
  echo "GPUs (index, UUID, PCI, name, memory, driver):"; echo; sed 's/^/    /' "$out/gpus-full.csv"; echo
  echo "Versions:"; echo; sed 's/^/    /' "$out/versions.txt"; echo
  echo "Cluster: the bundle-tls units' commands (rendered with dask_monitoring_enabled, 5 s scrapes):"; echo
  sed 's/^/    /' "$out/commands.txt"; echo
  echo "Result: $(grep -c '^PASS' "$out/checks.txt") PASS, $(grep -c '^FAIL' "$out/checks.txt") FAIL"; echo
  for section in targets mapping workload dashboard rules scrape overhead; do
    echo "## $section"; echo
    case "$section" in
      dashboard) sed 's/^/    /' "$out/dashboard.txt"; grep -h 'dashboard_queries' "$out/steps.txt" | sed 's/^/    /' ;;
      overhead) sed 's/^/    /' "$out/overhead.txt" ;;
      *) sed 's/^/    /' "$out/$section.txt" ;;
    esac
    echo
  done
} > "$out/summary.md"
echo "=== checks"; cat "$out/checks.txt"
exit "$status"
