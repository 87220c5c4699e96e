#!/usr/bin/env bash
# Build the bring-your-own-image test images (Dockerfile beside this script) as dask-own-test:TARGET.
#   tests/images/own/build.sh [TARGET ...]    default: own lacking rooted other-dask
# Release and CUDA major from the repository's .env; the host's CA bundle for pip, when present (as the bundle's
# builds take it). Docker's cache makes a second run take seconds.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
setting() { sed -n "s/^$1=//p" "$root/.env"; }
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(own lacking rooted other-dask)
context="$(mktemp -d)"; trap 'rm -rf "$context"' EXIT
cp "$here/Dockerfile" "$context/"
cp -r "$root/images/pins" "$context/pins"
mkdir "$context/verify"
cp -r "$root/images/verify/pyproject.toml" "$root/images/verify/src" "$context/verify/"
find "$context/verify" \( -name __pycache__ -o -name '*.egg-info' \) -prune -exec rm -rf {} +
secret=()
ca=/etc/ssl/certs/ca-certificates.crt
[ -s "$ca" ] && secret=(--secret "id=extra_ca,src=$ca")
for target in "${targets[@]}"; do
  DOCKER_BUILDKIT=1 docker buildx build --load -q --target "$target" \
    --build-arg RAPIDS_RELEASE="$(setting RAPIDS_RELEASE)" --build-arg CUDA_MAJOR="$(setting CUDA_MAJOR)" \
    --build-arg PIP_INDEX_URL="${PIP_INDEX_URL:-}" "${secret[@]}" -t "dask-own-test:$target" "$context" >/dev/null
  echo "[own-image] dask-own-test:$target $(docker image inspect -f '{{.Size}}' "dask-own-test:$target" | numfmt --to=si)B"
done
