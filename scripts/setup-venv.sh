#!/usr/bin/env bash
# Create .venv from requirements.txt (pinned) and install the verification client into it.
set -euo pipefail
cd "$(dirname "$0")/.."
stamp=.venv/.installed
# ansible-core imports cryptography's DSA classes for its SSH agent, and cryptography warns on that import: every
# playbook run began with a CryptographyDeprecationWarning about a key type the bundle never uses. This start-up
# filter ignores that one warning from that one module, nothing else.
quiet() {
  local site
  site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
  printf '%s\n' "import warnings; warnings.filterwarnings('ignore', message='DSA is deprecated', module=r'ansible\._internal\._ssh\._ssh_agent')" \
    > "$site/dask-gpu-quiet-dsa.pth"
}
if [ -f "$stamp" ] && [ "$stamp" -nt requirements.txt ] && [ "$stamp" -nt images/verify/pyproject.toml ]; then
  quiet
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
quiet
touch "$stamp"
echo "[setup-venv] .venv ready"
