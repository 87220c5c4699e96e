#!/usr/bin/env bash
# The whole test suite, as CI runs it: set-up, images (both profiles), lint, the molecule sandbox, then pytest over
# tests/.
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

step "lint"
bash scripts/lint.sh

step "sandbox: molecule (create, converge with site.yml, idempotence, verify + testinfra, destroy)"
started=$(date +%s)
bash scripts/sandbox.sh test
echo "sandbox done in $(( $(date +%s) - started )) s"

step "pytest"
set +e
.venv/bin/python -m pytest -v -p no:cacheprovider -n 2 --dist loadfile --durations=15 --ignore=tests/sandbox tests "$@"
status=$?
set -e
if [ "$status" = 5 ]; then echo "pytest collected no tests: that is a failure here" >&2; exit 1; fi
exit "$status"
