#!/usr/bin/env bash
# Build the scheduler and worker images from images/Dockerfile.
#   scripts/build-images.sh            build with the settings in .env (override them in the environment)
# Settings: RAPIDS_RELEASE, CUDA_MAJOR, PROFILE (lean|full|cpu), BASE_IMAGE; optional PIP_INDEX_URL,
# EXTRA_CA_FILE (default: the host's CA bundle, when present), BAKE_EXTRA_CA=true to keep it in the image.
# Tags: dask-gpu-{scheduler,worker}:<release>-cuda<major>-<profile>. Labels carry the Dask versions.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
. "$root/scripts/dotenv.sh"  # defaults from .env; the environment wins

tag="${RAPIDS_RELEASE}-cuda${CUDA_MAJOR}-${PROFILE}"
pins="$root/images/pins/rapids-${RAPIDS_RELEASE}-cuda${CUDA_MAJOR}.txt"
[ -f "$pins" ] || { echo "no pins for RAPIDS $RAPIDS_RELEASE with CUDA $CUDA_MAJOR ($pins); run scripts/pin-versions.py" >&2; exit 1; }
pin() { sed -n "s/^$1==//p" "$pins"; }

extra_ca="${EXTRA_CA_FILE:-/etc/ssl/certs/ca-certificates.crt}"
secret=()
[ -s "$extra_ca" ] && secret=(--secret "id=extra_ca,src=$extra_ca")

for target in scheduler worker; do
  echo "[build-images] dask-gpu-$target:$tag"
  DOCKER_BUILDKIT=1 docker buildx build --load --target "$target" \
    --build-arg BASE_IMAGE="$BASE_IMAGE" --build-arg RAPIDS_RELEASE="$RAPIDS_RELEASE" \
    --build-arg CUDA_MAJOR="$CUDA_MAJOR" --build-arg PROFILE="$PROFILE" \
    --build-arg PIP_INDEX_URL="${PIP_INDEX_URL:-}" --build-arg BAKE_EXTRA_CA="${BAKE_EXTRA_CA:-false}" \
    "${secret[@]}" \
    --label "org.dask.dask.version=$(pin dask)" --label "org.dask.distributed.version=$(pin distributed)" \
    --label "io.rapids.dask-cuda.version=$(pin dask-cuda)" \
    -t "dask-gpu-$target:$tag" "$root/images"
done
