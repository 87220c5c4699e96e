#!/usr/bin/env bash
# The single-host main job: set up Docker, build the images, start the compose stack, verify it,
# and print how to connect. GPU mode when `nvidia-smi` finds a GPU, else CPU mode (compose.cpu.yaml);
# force one with DASK_MODE=gpu|cpu. Stop it with `make compose-down` (`make down` removes the
# multi-host sandbox, not this stack).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

mode="${DASK_MODE:-}"
if [ -z "$mode" ]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then mode=gpu; else mode=cpu; fi
fi
files=(-f compose.yaml)
if [ "$mode" = cpu ]; then
  files+=(-f compose.cpu.yaml)
  export DASK_EXPECT_WORKERS="${DASK_EXPECT_WORKERS:-1}"
else
  gpus="${DASK_GPUS:-all}"
  if [ "$gpus" = all ]; then count="$(nvidia-smi -L | grep -c '^GPU')"; else count="$(tr ',' '\n' <<<"$gpus" | grep -c .)"; fi
  export DASK_EXPECT_WORKERS="${DASK_EXPECT_WORKERS:-$count}"
fi

started=$(date +%s)
bash scripts/setup-docker.sh
bash scripts/base-images.sh
bash scripts/build-images.sh
echo "[compose-up] starting the stack in $mode mode (expecting $DASK_EXPECT_WORKERS workers)"
up_started=$(date +%s)
docker compose "${files[@]}" up -d --wait
docker rm -f dask-gpu-verify >/dev/null 2>&1 || true
status=0
docker compose "${files[@]}" run --name dask-gpu-verify verify || status=$?
mkdir -p reports
report="reports/compose-verify-$(date -u +%Y%m%dT%H%M%SZ).json"
docker cp dask-gpu-verify:/var/lib/dask-reports/verify.json "$report" >/dev/null 2>&1 && echo "[compose-up] report: $report"
docker rm -f dask-gpu-verify >/dev/null
now=$(date +%s)
echo "[compose-up] up to verified: $((now - up_started)) s (whole job: $((now - started)) s)"
[ "$status" = 0 ] || { echo "[compose-up] verification FAILED (exit $status); the stack is still up: stop it with make compose-down" >&2; exit "$status"; }
cat <<MSG

Dask cluster is up and verified ($mode mode).
  scheduler:  tcp://127.0.0.1:${DASK_SCHEDULER_PORT:-8786}   (from this host)
  dashboard:  http://127.0.0.1:${DASK_DASHBOARD_PORT:-8787}/status   (from elsewhere: ssh -L 8787:127.0.0.1:8787 $(hostname))
  connect:    python -c 'from distributed import Client; print(Client("tcp://127.0.0.1:${DASK_SCHEDULER_PORT:-8786}"))'
  stop:       make compose-down
MSG
