#!/usr/bin/env bash
# The whole test suite, as CI runs it: set-up, images (both profiles), then the molecule sandbox with lint and pytest
# over tests/ beside its feature suites.
# Needs root on a fresh Debian machine (it installs Docker and debootstrap when missing).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
step() { printf '\n== %s (%s)\n' "$1" "$(date -u +%H:%M:%S)"; }

step "docker daemon and base images"
bash scripts/setup-docker.sh
bash scripts/base-images.sh

step "images"
# .env's profile (lean: the sandbox's), then the full one (cuDF, dask-cudf): built every run, its packages imported
# (without a GPU) and checked with pip check by the build itself; the sandbox does not run it.
. scripts/dotenv.sh
for profile in "$PROFILE" full; do
  started=$(date +%s)
  PROFILE="$profile" bash scripts/build-images.sh >reports-build.log 2>&1 || { tail -40 reports-build.log; exit 1; }
  size="$(docker image inspect -f '{{.Size}}' "dask-gpu-worker:$RAPIDS_RELEASE-cuda$CUDA_MAJOR-$profile")"
  echo "images ($profile) built in $(( $(date +%s) - started )) s; worker image $(( size / 1000000 )) MB"
  rm -f reports-build.log
  [ "$profile" != full ] || break
done

step "browser for the tests (before anything runs beside the sandbox: one apt at a time)"
bash scripts/setup-browser.sh

# Lint, then pytest, run beside the sandbox's feature suites at a lower priority (nice 10): they start when molecule's
# side effect starts, not during the converge (whose image transfers took 18.6 minutes with pytest beside them against
# 8.1 without; the first suites slow down instead, by less: about 5 minutes gained in all on 2 cores). Their output is
# shown after the sandbox's, each with its exit status; any failure fails the run. A sandbox that stops before its side
# effect lets them run after it.
step "lint, then pytest, started beside the sandbox's feature suites (output below, after the sandbox's)"
side="$(mktemp -d)"
SIDE="$side" setsid bash -c '
  until [ -e "$SIDE/go" ]; do sleep 5; done
  started=$(date +%s)
  nice -n 10 bash scripts/lint.sh >"$SIDE/lint.log" 2>&1; echo $? >"$SIDE/lint.rc"
  echo "lint done in $(( $(date +%s) - started )) s" >>"$SIDE/lint.log"
  started=$(date +%s)
  nice -n 10 .venv/bin/python -m pytest -v -p no:cacheprovider -n 2 --dist loadfile --durations=15 \
    --ignore=tests/sandbox tests "$@" >"$SIDE/pytest.log" 2>&1
  echo $? >"$SIDE/pytest.rc"
  echo "pytest done in $(( $(date +%s) - started )) s" >>"$SIDE/pytest.log"
' bash "$@" &
side_pid=$!
trap 'kill -- -"$side_pid" 2>/dev/null || true' EXIT

step "sandbox: molecule (create, converge with site.yml, idempotence, verify + testinfra, suites, destroy)"
started=$(date +%s)
bash scripts/sandbox.sh test 2>&1 | while IFS= read -r line; do
  printf '%s\n' "$line"
  case "$line" in *"[default > side_effect] Executing"*) touch "$side/go" ;; esac
done
echo "sandbox done in $(( $(date +%s) - started )) s"
touch "$side/go"

step "lint and pytest (waited for)"
wait "$side_pid" || true
trap - EXIT
step "lint"
cat "$side/lint.log"
step "pytest"
cat "$side/pytest.log"
lint_status="$(cat "$side/lint.rc" 2>/dev/null || echo 1)"
status="$(cat "$side/pytest.rc" 2>/dev/null || echo 1)"
rm -rf "$side"
if [ "$lint_status" != 0 ]; then echo "lint failed (exit $lint_status)" >&2; exit 1; fi
if [ "$status" = 5 ]; then echo "pytest collected no tests: that is a failure here" >&2; exit 1; fi
exit "$status"
