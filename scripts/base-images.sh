#!/usr/bin/env bash
# Make Debian base images locally, for machines that reach no container registry.
# Usage: scripts/base-images.sh [SUITE ...]   (default: .env's BASE_IMAGE when it is debian:SUITE-slim, else none)
# Each SUITE becomes debian:SUITE-slim, the name the Dockerfiles' FROM expects.
# An image that already exists is kept; set BASE_IMAGES_REBUILD=1 to make it again.
set -euo pipefail

mirror="$(bash "$(dirname "$0")/debian-mirror.sh")"  # the machine's own apt mirror (or DEBIAN_MIRROR)
suites=("$@")
if [ ${#suites[@]} -eq 0 ]; then
  # shellcheck source=scripts/dotenv.sh
  . "$(dirname "$0")/dotenv.sh"
  [ -n "$BASE_SUITE" ] || { echo "[base-images] BASE_IMAGE=$BASE_IMAGE is not made here (only debian:SUITE-slim)"; exit 0; }
  suites=("$BASE_SUITE")
fi

for suite in "${suites[@]}"; do
  image="debian:${suite}-slim"
  if [ "${BASE_IMAGES_REBUILD:-0}" != 1 ] && docker image inspect "$image" >/dev/null 2>&1; then
    echo "[base-images] $image is present"
    continue
  fi
  root="$(mktemp -d)"
  trap 'rm -rf "$root"' EXIT
  echo "[base-images] debootstrap $suite (minbase) from $mirror"
  debootstrap --variant=minbase "$suite" "$root" "$mirror" >"$root.log" 2>&1 \
    || { tail -20 "$root.log" >&2; exit 1; }
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/archives/*.deb "$root.log"
  tar -C "$root" -c . | docker import -c 'CMD ["bash"]' - "$image" >/dev/null
  rm -rf "$root"; trap - EXIT
  echo "[base-images] $image imported ($(docker image inspect -f '{{.Size}}' "$image" | numfmt --to=iec))"
done
