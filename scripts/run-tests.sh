#!/usr/bin/env bash
# The whole test suite, as CI runs it: set-up, images (both profiles), then the molecule sandbox with lint and pytest
# over tests/ beside its feature suites.
# Needs root on a fresh Debian machine (it installs Docker and debootstrap when missing).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
step() { printf '\n== %s (%s)\n' "$1" "$(date -u +%H:%M:%S)"; }
# Where the time goes: `[ci-time] STAGE SECONDS` lines, read by scripts/ci_times.py (the table at the end of .ci/run,
# and the time guard after the sandbox). timed STAGE COMMAND... runs COMMAND and prints its line, failed or not.
ci_time() { printf '[ci-time] %s %s\n' "$1" "$2"; }
timed() {
  local stage=$1 since=$EPOCHSECONDS status=0
  shift
  "$@" || status=$?
  ci_time "$stage" $(( EPOCHSECONDS - since ))
  return "$status"
}
# .ci/run sets CI_TIME_SINCE when its apt step ends: the time from then is make's set-up (the virtualenv).
[ -z "${CI_TIME_SINCE:-}" ] || ci_time venv $(( EPOCHSECONDS - CI_TIME_SINCE ))

step "docker daemon and base images"
timed docker bash scripts/setup-docker.sh
timed base-images bash scripts/base-images.sh

step "images"
# .env's profile (lean: the sandbox's), then the polars one (full's cuDF and dask-cudf, plus cudf-polars and Polars):
# built every run, its packages imported (without a GPU) and checked with pip check by the build itself; the sandbox
# does not run it (docs/polars.md: its proofs run on lent GPU machines).
. scripts/dotenv.sh
# shellcheck disable=SC2153 # PROFILE comes from .env, through scripts/dotenv.sh
for profile in "$PROFILE" polars; do
  started=$(date +%s)
  PROFILE="$profile" bash scripts/build-images.sh >reports-build.log 2>&1 || { tail -40 reports-build.log; exit 1; }
  size="$(docker image inspect -f '{{.Size}}' "dask-gpu-worker:$RAPIDS_RELEASE-cuda$CUDA_MAJOR-$profile")"
  echo "images ($profile) built in $(( $(date +%s) - started )) s; worker image $(( size / 1000000 )) MB"
  ci_time "image:$profile" $(( $(date +%s) - started ))
  rm -f reports-build.log
  [ "$profile" != polars ] || break
done
# Earlier runs' images stay behind on a CI machine (each content hash tags a full set; the sandbox's converge tags
# its own, and the registry's copies): only this run's tags are kept, and the build cache is held to 40 GB (about
# twice the two profiles' layers), less where the disk needs it: the sandbox's three hosts keep their images on this
# machine's disk, and runs that found 12 GB and 31 GB free failed in `docker load` ("Archive potentially corrupt?",
# the converge and the teardown suite's redeploy), where 42 GB passed. The cache keeps its most recently used layers.
SANDBOX_DISK_GB=${SANDBOX_DISK_GB:-42}
keep="^dask-gpu-(scheduler|worker):$RAPIDS_RELEASE-cuda$CUDA_MAJOR-($PROFILE|polars)$"
stale=$(docker images --format '{{.Repository}}:{{.Tag}}' | grep -E '(^|/)dask-gpu-(scheduler|worker):' | grep -Ev "$keep" || true)
# shellcheck disable=SC2086 # one image reference a word
[ -z "$stale" ] || docker rmi $stale >/dev/null || echo "some earlier images are in use: kept"
docker image prune -f >/dev/null
free_gb() { df -BG --output=avail / | tail -1 | tr -dc '0-9'; }
for cache_gb in 40 30 24 18 12 6 0; do
  docker builder prune -f --keep-storage "${cache_gb}GB" >/dev/null
  [ "$(free_gb)" -lt "$SANDBOX_DISK_GB" ] || break
done
echo "disk: $(free_gb)G free after removing $(echo "$stale" | grep -c . || true) earlier images (build cache held to ${cache_gb} GB)"
[ "$(free_gb)" -ge "$SANDBOX_DISK_GB" ] \
  || echo "warning: the sandbox needs about $SANDBOX_DISK_GB GB free ($(free_gb) GB left): its docker loads may fail"

step "browser for the tests (before anything runs beside the sandbox: one apt at a time)"
timed browser bash scripts/setup-browser.sh

# Lint, then pytest, run beside the sandbox at a lower priority: they start when molecule's verify step starts, after
# the converge, not during it (whose image transfers took 18.6 minutes with pytest beside them against 8.1 without).
# Their output is shown after the sandbox's, each with its exit status; any failure fails the run. A sandbox that stops
# before its verify step lets them run after it. (Started with the side effect, 100 s later, pytest still ran beside
# the retire and certs suites, which took 206 and 120 s against 155 and 106 when it had ended before them.)
# `nice` alone does not lower them against the sandbox: the sandbox hosts are containers, each a CPU cgroup of its own
# weighed against the processes outside as one, so nice 10 left pytest an equal share (a full site.yml on the sandbox
# took 110 s with pytest -n 2 beside it, 57 s alone). They run in a CPU cgroup of their own with a small share: with
# cgroup v1 cpu.shares 64 (of the usual 1024) 65 s, verify.yml 20 s against 27 s, and a whole CI run 2,374 s against
# 2,621, but the slowest pytest waits (real Dask processes) ran out of time; 256 (v2 cpu.weight 25 of 100) leaves
# them a quarter of a busy core.
side_cgroup() {
  local dir
  if [ -w /sys/fs/cgroup/cpu ] && [ -e /sys/fs/cgroup/cpu/cpu.shares ]; then
    dir=/sys/fs/cgroup/cpu/dask-ci-side
    mkdir -p "$dir" && echo 256 >"$dir/cpu.shares" && echo "$dir/cgroup.procs" && return
  elif grep -qw cpu /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
    dir=/sys/fs/cgroup/dask-ci-side
    { grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control || echo +cpu >/sys/fs/cgroup/cgroup.subtree_control; } \
      2>/dev/null && mkdir -p "$dir" && echo 25 >"$dir/cpu.weight" && echo "$dir/cgroup.procs" && return
  fi
  return 1
}
step "lint, then pytest, started beside the sandbox from its verify step (output below, after the sandbox's)"
side="$(mktemp -d)"
if procs=$(side_cgroup 2>/dev/null); then
  echo "lint and pytest run in CPU cgroup ${procs%/cgroup.procs} (a small share beside the sandbox)"
else
  procs=/dev/null
  echo "no CPU cgroup could be made here: lint and pytest run beside the sandbox at nice 10 only"
fi
# shellcheck disable=SC2016 # the script is expanded by the inner bash
SIDE="$side" PROCS="$procs" setsid bash -c '
  until [ -e "$SIDE/go" ]; do sleep 5; done
  echo $$ 2>/dev/null >"$PROCS" || echo "[ci] lint and pytest could not join the CPU cgroup ($PROCS): nice 10 only" >&2
  started=$(date +%s)
  nice -n 10 bash scripts/lint.sh >"$SIDE/lint.log" 2>&1; echo $? >"$SIDE/lint.rc"
  echo "lint done in $(( $(date +%s) - started )) s" >>"$SIDE/lint.log"
  echo "[ci-time] lint $(( $(date +%s) - started ))" >>"$SIDE/lint.log"
  started=$(date +%s)
  nice -n 10 .venv/bin/python -m pytest -v -p no:cacheprovider -n 2 --dist loadfile --durations=15 \
    --ignore=tests/sandbox tests "$@" >"$SIDE/pytest.log" 2>&1
  echo $? >"$SIDE/pytest.rc"
  echo "pytest done in $(( $(date +%s) - started )) s" >>"$SIDE/pytest.log"
  echo "[ci-time] pytest $(( $(date +%s) - started ))" >>"$SIDE/pytest.log"
' bash "$@" &
side_pid=$!
trap 'kill -- -"$side_pid" 2>/dev/null || true' EXIT

step "sandbox: molecule (create, converge with site.yml, verify + testinfra, idempotence, suites, destroy)"
# Each line is shown and kept in $side/sandbox.log for the time guard; molecule's actions are timed here, from their
# `[default > ACTION] Executing` line to their `Executed:` one (molecule:ACTION, molecule:ACTION#2 for a second run;
# the ones molecule skips as missing are not), and the set-up before molecule's first line as sandbox:setup.
sandbox_lines() {
  local line action key since=$EPOCHSECONDS first=1
  local -A runs=()
  show() { printf '%s\n' "$1"; printf '%s\n' "$1" >&3; }
  while IFS= read -r line; do
    show "$line"
    case "$line" in
      *"[default > "*"] Executing"*)
        if [ "$first" = 1 ]; then first=0; show "[ci-time] sandbox:setup $(( EPOCHSECONDS - started ))"; fi
        since=$EPOCHSECONDS
        case "$line" in *"[default > verify] Executing"* | *"[default > side_effect] Executing"*) touch "$side/go" ;; esac ;;
      *"[default > "*"] Executed: "*[Mm]issing*) ;;
      *"[default > "*"] Executed: "*)
        action=${line#*"[default > "}
        action=${action%%"]"*}
        runs[$action]=$(( ${runs[$action]:-0} + 1 ))
        key="molecule:$action"
        [ "${runs[$action]}" = 1 ] || key+="#${runs[$action]}"
        show "[ci-time] $key $(( EPOCHSECONDS - since ))" ;;
    esac
  done 3>"$side/sandbox.log"
}
started=$EPOCHSECONDS
bash scripts/sandbox.sh test 2>&1 | sandbox_lines
echo "sandbox done in $(( EPOCHSECONDS - started )) s"
ci_time sandbox $(( EPOCHSECONDS - started ))
touch "$side/go"

step "time guard: the converge, idempotence and suites against tests/sandbox/timings.json (scripts/ci_times.py)"
guard_status=0
.venv/bin/python scripts/ci_times.py "$side/sandbox.log" --no-table --check tests/sandbox/timings.json \
  || guard_status=$?

step "lint and pytest (waited for)"
since=$EPOCHSECONDS
wait "$side_pid" || true
ci_time wait:lint-pytest $(( EPOCHSECONDS - since ))
trap - EXIT
step "lint"
cat "$side/lint.log"
step "pytest"
cat "$side/pytest.log"
lint_status="$(cat "$side/lint.rc" 2>/dev/null || echo 1)"
status="$(cat "$side/pytest.rc" 2>/dev/null || echo 1)"
rm -rf "$side"
if [ "$lint_status" != 0 ]; then echo "lint failed (exit $lint_status)" >&2; exit 1; fi
if [ "$guard_status" != 0 ]; then
  echo "time guard failed (exit $guard_status): its lines follow the sandbox's" >&2
  exit 1
fi
if [ "$status" = 5 ]; then echo "pytest collected no tests: that is a failure here" >&2; exit 1; fi
exit "$status"
