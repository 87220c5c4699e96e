#!/usr/bin/env bash
# Create .venv from requirements.txt (pinned) and install the verification client into it.
set -euo pipefail
cd "$(dirname "$0")/.."
stamp=.venv/.installed
if [ -f "$stamp" ] && [ "$stamp" -nt requirements.txt ] && [ "$stamp" -nt images/verify/pyproject.toml ]; then
  exit 0
fi
if ! python3 -m venv --help >/dev/null 2>&1 || ! python3 -c 'import ensurepip' 2>/dev/null; then
  [ "$(id -u)" = 0 ] || { echo "python3-venv is missing; install it (apt-get install python3-venv)" >&2; exit 1; }
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
fi
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -r requirements.txt
.venv/bin/python -m pip install -q --no-deps -e images/verify
touch "$stamp"
echo "[setup-venv] .venv ready"
