#!/usr/bin/env bash
# Make a Python environment whose client matches a cluster exactly, from the cluster's client bundle
# (requirements.lock and python-version, written by site.yml from the image itself; docs/client.md).
#   scripts/client-env.sh CLIENT_DIR VENV_DIR [--all]
# CLIENT_DIR: the bundle, e.g. inventory/<env>/artifacts/<cluster>/client (or a copy on a workstation).
# Default: the packages distributed compares on every connect (dask, distributed, msgpack, cloudpickle, tornado, toolz,
# numpy, pandas, lz4, as the image has them) and pyarrow, at the image's exact versions. --all: every package of the
# image (CUDA libraries included: several GB). Python: the image's exact version is looked for as $PYTHON, then
# python3.X on PATH and /usr/bin/python3.X; a different patch level is used with a note (distributed then shows a
# python row, harmless: docs/client.md); another minor version is refused.
set -euo pipefail
usage() { echo "usage: $0 CLIENT_DIR VENV_DIR [--all]" >&2; exit 2; }
[ "$#" -ge 2 ] || usage
client="$1"; venv="$2"; mode="${3:-}"
case "$mode" in ''|--all) ;; *) usage ;; esac
lock="$client/requirements.lock"
[ -s "$lock" ] || { echo "[client-env] $lock is missing: run site.yml (it writes the lock from the image)" >&2; exit 1; }
want="$(tr -d '[:space:]' <"$client/python-version")"
minor="${want%.*}"
version() { "$1" -c 'import platform; print(platform.python_version())' 2>/dev/null || true; }
python=""; fallback=""
for candidate in ${PYTHON:-} "python$minor" "/usr/bin/python$minor" python3; do
  command -v "$candidate" >/dev/null 2>&1 || continue
  found="$(version "$candidate")"
  if [ "$found" = "$want" ]; then python="$candidate"; break; fi
  [ -n "$fallback" ] || [ "${found%.*}" != "$minor" ] || fallback="$candidate"
done
if [ -z "$python" ]; then
  [ -n "$fallback" ] || { echo "[client-env] no Python $minor found (the image runs $want); set PYTHON=/path/to/python$minor" >&2; exit 1; }
  python="$fallback"
  echo "[client-env] note: the image runs Python $want, this environment $(version "$python"): distributed will show a python row (patch level only, harmless)"
fi
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
# Lines pip cannot take as constraints (local wheels: NAME @ file://...) are left out and named.
grep -v -e '^#' -e ' @ ' "$lock" >"$work/constraints.txt" || true
grep ' @ ' "$lock" | sed 's/^/[client-env] not installed (a local wheel of the image; install it yourself): /' || true
"$python" -m venv "$venv"
if [ "$mode" = --all ]; then
  "$venv/bin/pip" install -q --disable-pip-version-check --only-binary=:all: --no-deps -r "$work/constraints.txt"
else
  packages=()
  for name in dask distributed msgpack cloudpickle tornado toolz numpy pandas lz4 pyarrow; do
    grep -qi "^$name==" "$work/constraints.txt" && packages+=("$name")
  done
  "$venv/bin/pip" install -q --disable-pip-version-check --only-binary=:all: -c "$work/constraints.txt" "${packages[@]}"
fi
"$venv/bin/python" - "$client" <<'PY'
import sys
import dask, distributed, platform
print(f"[client-env] {sys.prefix}: Python {platform.python_version()}, dask {dask.__version__}, "
      f"distributed {distributed.__version__}")
print(f"[client-env] use: DASK_CONFIG={sys.argv[1]}/dask.yaml {sys.prefix}/bin/python  "
      f"(or: source {sys.argv[1]}/env.sh)")
PY
