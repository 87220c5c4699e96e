#!/usr/bin/env bash
# The whole test suite, as CI runs it: set-up, images, lint, the molecule sandbox with part of pytest beside it,
# then the rest of pytest over tests/.
# Needs root on a fresh Debian machine (it installs Docker and debootstrap when missing).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
step() { printf '\n== %s (%s)\n' "$1" "$(date -u +%H:%M:%S)"; }

step "docker daemon and base images"
bash scripts/setup-docker.sh
base="$(sed -n 's/^BASE_IMAGE=debian:\(.*\)-slim$/\1/p' .env)"
[ -z "$base" ] || bash scripts/base-images.sh "$base"

step "images"
started=$(date +%s)
bash scripts/build-images.sh >reports-build.log 2>&1 || { tail -40 reports-build.log; exit 1; }
echo "images built in $(( $(date +%s) - started )) s"; rm -f reports-build.log

step "lint"
bash scripts/lint.sh

# The tests that need neither Docker, apt, the network nor a quiet machine (model, unit, golden, inventory, fleet
# guard: Ansible and Python on the controller) run beside the sandbox at low priority, in the CPU time its waits
# leave; the rest (real Dask processes with timeouts, image builds, compose, promtool) after it, on a quiet machine.
BESIDE=(tests/model tests/unit tests/golden tests/inventory tests/fleet)
pytest_args=(-v -p no:cacheprovider --durations=15)
beside_log="$(mktemp)"
step "pytest beside the sandbox (${BESIDE[*]}; output after the sandbox)"
nice -n 10 .venv/bin/python -m pytest "${pytest_args[@]}" "${BESIDE[@]}" "$@" >"$beside_log" 2>&1 &
beside_pid=$!
stop_beside() { kill "$beside_pid" 2>/dev/null || true; }
trap stop_beside EXIT

step "sandbox: molecule (create, converge with site.yml, idempotence, verify + testinfra, destroy)"
started=$(date +%s)
set +e
bash scripts/sandbox.sh test
sandbox=$?
set -e
echo "sandbox done in $(( $(date +%s) - started )) s (exit $sandbox)"

step "pytest beside the sandbox: its output"
set +e
wait "$beside_pid"
beside=$?
set -e
trap - EXIT
cat "$beside_log"; rm -f "$beside_log"

step "pytest after the sandbox"
set +e
.venv/bin/python -m pytest "${pytest_args[@]}" -n 2 --dist loadfile --ignore=tests/sandbox \
  $(printf -- '--ignore=%s ' "${BESIDE[@]}") tests "$@"
after=$?
set -e
for status in "$beside" "$after"; do
  if [ "$status" = 5 ]; then echo "pytest collected no tests: that is a failure here" >&2; exit 1; fi
done
echo "sandbox exit $sandbox, pytest beside it exit $beside, pytest after it exit $after"
[ "$sandbox" = 0 ] && [ "$beside" = 0 ] && [ "$after" = 0 ]
