#!/usr/bin/env bash
# Prints the path of a usable promtool on stdout (nothing else goes there; messages go to stderr):
#   1. promtool on PATH;
#   2. else the cached copy in .cache/promtool/ of this repository;
#   3. else Debian's prometheus package, fetched with apt-get download into a temporary directory and unpacked
#      with dpkg-deb -x; only promtool is kept, in the cache. Needs apt-get's lists (apt-get update) and, as CI
#      runs it, root.
# Used by tests/monitoring/test_alert_rules.py (unless PROMTOOL is set).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cache="$root/.cache/promtool"
cached="$cache/promtool"

if found="$(command -v promtool)"; then
  echo "$found"
  exit 0
fi
if [ -x "$cached" ] && "$cached" --version >/dev/null 2>&1; then
  echo "$cached"
  exit 0
fi

for tool in apt-get dpkg-deb; do
  if ! command -v "$tool" >/dev/null; then
    echo "promtool.sh: no promtool on PATH, none in $cache, and no $tool to fetch Debian's prometheus package" >&2
    exit 1
  fi
done

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# As root, apt downloads as its sandbox user _apt, which must be able to write there.
if [ "$(id -u)" = 0 ] && id _apt >/dev/null 2>&1; then chown _apt "$tmp"; fi
echo "promtool.sh: fetching promtool from Debian's prometheus package (apt-get download) into $cache" >&2
# apt-get download writes into the current directory; its progress goes to stderr, stdout stays the path alone.
if ! (cd "$tmp" && apt-get download prometheus) >&2; then
  echo "promtool.sh: apt-get download prometheus failed (run apt-get update first; as root)" >&2
  exit 1
fi
debs=("$tmp"/prometheus_*.deb)
if [ ! -f "${debs[0]}" ]; then
  echo "promtool.sh: apt-get download left no prometheus_*.deb in $tmp" >&2
  exit 1
fi
dpkg-deb -x "${debs[0]}" "$tmp/root"
if [ ! -x "$tmp/root/usr/bin/promtool" ]; then
  echo "promtool.sh: ${debs[0]##*/} holds no usr/bin/promtool" >&2
  exit 1
fi
mkdir -p "$cache"
# Copy then rename: another run reading the cache never sees a half-written file.
install -m 0755 "$tmp/root/usr/bin/promtool" "$cache/.promtool.$$"
mv -f "$cache/.promtool.$$" "$cached"
"$cached" --version >&2
echo "$cached"
