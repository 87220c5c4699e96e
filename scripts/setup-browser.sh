#!/usr/bin/env bash
# Headless Chromium and its WebDriver from the distribution (the browser tests: tests/sandbox/browser).
set -euo pipefail
if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then
  echo "[setup-browser] $(chromium --version 2>/dev/null | head -1) present"
  exit 0
fi
echo "[setup-browser] installing chromium and chromium-driver"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null
echo "[setup-browser] $(chromium --version 2>/dev/null | head -1) installed"
