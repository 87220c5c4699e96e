#!/usr/bin/env bash
# The dashboard's GPU pages in a real browser on a GPU machine ("every web page tried in a browser"): the compose
# stack's scheduler and dask-cuda worker command lines as plain processes (tests/gpu/compose_commands.py, the worker
# on GPU 0), a CuPy load on the worker (tests/gpu/dashboard_load.py: HOLD_GIB GiB held, float32 matrix products for
# BUSY_SECONDS), then headless Chromium driven by Selenium (tests/sandbox/browser/drive.py --bokeh-facts) over
# PAGES of the dashboard on 127.0.0.1:8787: per page the canvases drawn, the title, and what the plots draw read
# from BokehJS (titles, the GPU data sources, the memory plot's range); a screenshot each. tests/gpu/dashboard_checks.py
# then holds that against nvidia-smi and the load (checks.txt, result.json) and keeps every PNG under 300 KB.
# The machine reaches no network: Chromium 156 and chromedriver come from Debian bookworm's packages as built by
# tests/gpu/carry-browser.sh, in parts copied to PARTS (/var/tmp/parts) by earlier calls, the wheels (dask, dask-cuda,
# bokeh, selenium...) in CARRY/whl; every file is checked against tests/gpu/results/dashboard-gpu-h100/carry.sha256.
# The browser is unpacked in /tmp/chromium, never into /; its libraries are found through LD_LIBRARY_PATH, set for
# chromedriver and the browser only (the machine's glibc is used).
#   PARTS=/var/tmp/parts OUT=/tmp/dashboard tests/gpu/gpu-proof-dashboard.sh
# OUT gets device.txt, gpu.csv, versions.txt, commands.txt, the logs, load.json, nvidia-smi-during.csv,
# browser.json, dashboard-PAGE.png, checks.txt and result.json.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
out="${OUT:-/tmp/gpu-proof-dashboard}"; mkdir -p "$out"
carry="${CARRY:-.browser}" browser=/tmp/chromium
sums="$PWD/tests/gpu/results/dashboard-gpu-h100/carry.sha256"
pages="${PAGES:-status,gpu,individual-gpu-memory,individual-gpu-utilization}"
hold_gib="${HOLD_GIB:-8}" busy="${BUSY_SECONDS:-150}"

# --- install: the browser from its parts, the wheels -------------------------------------------------------------
if [ -n "${PARTS:-}" ]; then
  (cd "$PARTS" && sed -n 's# p[0-9]*/part-# part-#p' "$sums" | sha256sum --quiet -c -) || { echo "parts: checksums differ"; exit 3; }
  [ "$(cat "$PARTS"/part-* | sha256sum | cut -d' ' -f1)" = "$(grep ' browser.tar.xz$' "$sums" | cut -d' ' -f1)" ] \
    || { echo "browser.tar.xz: checksum differs"; exit 3; }
  mkdir -p "$browser" && cat "$PARTS"/part-* | xz -dc | tar -C "$browser" -xf - || exit 3
fi
[ -x "$browser/chromium/chromium" ] || { echo "no browser in $browser (PARTS unset?)"; exit 3; }
(cd "$carry" && grep ' whl/' "$sums" | sha256sum --quiet -c -) || { echo "wheels: checksums differ"; exit 3; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  "$carry"/whl/*.whl || exit 3
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} PATH=/tmp/site/bin:$PATH
# shellcheck source=tests/gpu/python-env.sh
. tests/gpu/python-env.sh  # images/verify/src on the path: the worker preloads dask_gpu_verify.gpu_metrics
mkdir -p /tmp/fontconfig-cache
cat >"$browser/fonts.conf" <<EOF
<?xml version="1.0"?>
<fontconfig>
  <dir>$browser/fonts</dir>
  <cachedir>/tmp/fontconfig-cache</cachedir>
  <alias><family>sans-serif</family><prefer><family>Liberation Sans</family></prefer></alias>
  <alias><family>monospace</family><prefer><family>Liberation Mono</family></prefer></alias>
</fontconfig>
EOF
cat >"$browser/chromedriver.sh" <<EOF
#!/bin/sh
export LD_LIBRARY_PATH=$browser/lib FONTCONFIG_FILE=$browser/fonts.conf
exec $browser/chromium/chromedriver "\$@"
EOF
chmod 0755 "$browser/chromedriver.sh"

# --- what runs here ------------------------------------------------------------------------------------------------
{ nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,memory.total --format=csv,noheader; nproc
  uname -r; ldd --version | head -1; python3 -V; grep PRETTY_NAME /etc/os-release; } | tee "$out/device.txt"
nvidia-smi --query-gpu=index,name,uuid,memory.total,driver_version --format=csv,noheader -i 0 >"$out/gpu.csv"
{ python3 -c 'import bokeh, cupy, dask, dask_cuda, distributed, numpy, pynvml, selenium, tornado
from importlib.metadata import version
print("dask", dask.__version__, "distributed", distributed.__version__, "dask-cuda", dask_cuda.__version__, "bokeh",
      bokeh.__version__, "tornado", tornado.version, "cupy", cupy.__version__, "numpy", numpy.__version__,
      "nvidia-ml-py", version("nvidia-ml-py"), "selenium", selenium.__version__)'
  LD_LIBRARY_PATH=$browser/lib "$browser/chromium/chromium" --version
  LD_LIBRARY_PATH=$browser/lib "$browser/chromium/chromedriver" --version
  echo "libraries not found: $(LD_LIBRARY_PATH=$browser/lib ldd "$browser/chromium/chromium" | grep -c 'not found')"
  grep -E '^Package: chromium(-driver)? ' "$browser/debs.txt"; } 2>&1 | tee "$out/versions.txt"

# --- the cluster and its load --------------------------------------------------------------------------------------
work=$(mktemp -d)
read -r -a scheduler_cmd <<<"$(python3 tests/gpu/compose_commands.py scheduler "$work")"
read -r -a worker_cmd <<<"$(python3 tests/gpu/compose_commands.py worker "$work")"
printf 'scheduler: %s\nworker:    CUDA_VISIBLE_DEVICES=0 %s\n' "${scheduler_cmd[*]}" "${worker_cmd[*]}" \
  | tee "$out/commands.txt"
sessions=()
stop_session() {  # PID: TERM to its session, KILL after 15 s
  kill -TERM -- "-$1" 2>/dev/null
  for _ in $(seq 60); do kill -0 -- "-$1" 2>/dev/null || return 0; sleep 0.25; done
  kill -KILL -- "-$1" 2>/dev/null
}
# shellcheck disable=SC2317,SC2329  # reached through the trap
cleanup() {
  local i
  for (( i = ${#sessions[@]} - 1; i >= 0; i-- )); do stop_session "${sessions[i]}"; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 143' TERM INT
setsid python3 -m dask "${scheduler_cmd[@]:1}" >"$out/scheduler.log" 2>&1 & sessions+=($!)
for _ in $(seq 120); do
  python3 -c 'import urllib.request as u; u.urlopen("http://127.0.0.1:8787/health", timeout=1)' 2>/dev/null && break
  sleep 0.5
done
started=$(date +%s.%N)
CUDA_VISIBLE_DEVICES=0 setsid python3 -m dask "${worker_cmd[@]:1}" >"$out/worker.log" 2>&1 & sessions+=($!)
timeout 150 python3 tests/gpu/wait_workers.py 1 "$started" | tee "$out/registration.txt" || exit 4
load=(python3 tests/gpu/dashboard_load.py --scheduler tcp://127.0.0.1:8786 --hold-gib "$hold_gib"
      --busy-seconds "$busy" --ready "$out/load.json")
echo "load: ${load[*]}" | tee -a "$out/commands.txt"
setsid "${load[@]}" >"$out/load.log" 2>&1 & sessions+=($!)
for _ in $(seq 240); do [ -s "$out/load.json" ] && break; sleep 0.5; done
[ -s "$out/load.json" ] || { echo "the load never started"; tail -20 "$out/load.log"; exit 4; }
cat "$out/load.json"

# --- the browser ---------------------------------------------------------------------------------------------------
setsid nvidia-smi --query-gpu=timestamp,memory.used,memory.total,utilization.gpu --format=csv -i 0 -lms 1000 \
  >"$out/nvidia-smi-during.csv" 2>&1 & sessions+=($!)
drive=(python3 tests/sandbox/browser/drive.py --out "$out" --dashboard http://127.0.0.1:8787 --pages "$pages"
       --bokeh-facts --chromium "$browser/chromium/chromium" --chromedriver "$browser/chromedriver.sh")
echo "browser: ${drive[*]}" | tee -a "$out/commands.txt"
status=0
timeout -k 10 240 "${drive[@]}" >"$out/drive.log" 2>&1 || { status=5; echo "drive.py failed:"; tail -40 "$out/drive.log"; }
stop_session "${sessions[-1]}"; unset 'sessions[-1]'
if [ -s "$out/browser.json" ]; then
  python3 tests/gpu/dashboard_checks.py "$out" || status=6
fi
exit "$status"
