#!/usr/bin/env bash
# Print the Debian archive this machine's apt uses (a mirror or proxy its owner set), from its deb822 sources or
# sources.list: the first URI of a Debian suite that is not the security archive. DEBIAN_MIRROR wins when set.
# Used by scripts/base-images.sh (debootstrap) and scripts/setup-docker.sh (trixie's buildx and compose plugins),
# so no mirror is written in the code.
set -euo pipefail
if [ -n "${DEBIAN_MIRROR:-}" ]; then echo "$DEBIAN_MIRROR"; exit 0; fi
found=""
shopt -s nullglob
for file in /etc/apt/sources.list.d/*.sources; do
  found="$(awk '/^URIs:/ { for (i = 2; i <= NF; i++) if ($i !~ /security/) { print $i; exit } }' "$file")"
  [ -z "$found" ] || break
done
if [ -z "$found" ]; then
  for file in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$file" ] || continue
    found="$(awk '$1 == "deb" { uri = ($2 ~ /^\[/) ? $3 : $2; if (uri !~ /security/) { print uri; exit } }' "$file")"
    [ -z "$found" ] || break
  done
fi
if [ -z "$found" ]; then
  echo "[debian-mirror] no Debian archive in this machine's apt sources; set DEBIAN_MIRROR" >&2
  exit 1
fi
echo "${found%/}"
