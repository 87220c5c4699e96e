# shellcheck shell=bash
# Sourced (`. scripts/dotenv.sh`), not run: exports .env's image settings (RAPIDS_RELEASE, CUDA_MAJOR, PROFILE,
# BASE_IMAGE) as defaults, the environment winning, and BASE_SUITE: the Debian suite of a BASE_IMAGE of the form
# debian:SUITE-slim (what scripts/base-images.sh makes locally), empty for any other base image.
while IFS='=' read -r key value; do
  case "$key" in ''|\#*) continue ;; esac
  [ -n "${!key:-}" ] || export "$key=$value"
done <"$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/.env"
BASE_SUITE="$(sed -n 's/^debian:\(.*\)-slim$/\1/p' <<<"$BASE_IMAGE")"
export BASE_SUITE
