#!/usr/bin/env bash
# Converge benchmark of the 3-host sandbox: time a converge from scratch (images already built on this machine)
# and an idempotent rerun, with the rerun's task headers and changed count. Leaves the sandbox up.
#   bash scripts/converge-bench.sh [LABEL]     prints one line per step; `make down` removes the sandbox
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
label="${1:-$(git rev-parse --short HEAD)}"
export PATH="$root/.venv/bin:$PATH" ANSIBLE_FORCE_COLOR=0 PY_COLORS=0 NO_COLOR=1
log="$(mktemp -d)"
molecule destroy >"$log/destroy.log" 2>&1
molecule create >"$log/create.log" 2>&1
run() {  # NAME: one converge, timed; prints seconds, task headers, and the recap's changed counts
  local started=$SECONDS
  molecule converge >"$log/$1.log" 2>&1 || { tail -40 "$log/$1.log"; exit 1; }
  local secs=$(( SECONDS - started ))
  local tasks changed
  tasks=$(grep -c '^TASK \[' "$log/$1.log" || true)
  changed=$(grep -oE 'changed=[0-9]+' "$log/$1.log" | cut -d= -f2 | paste -sd+ | bc)
  printf '[converge-bench] %s %-8s %4d s  %4d task headers  changed=%s\n' "$label" "$1" "$secs" "$tasks" "$changed"
}
run converge
run rerun
echo "[converge-bench] logs in $log"
