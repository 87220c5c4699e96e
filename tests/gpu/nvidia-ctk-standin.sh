#!/usr/bin/env bash
# STAND-IN for NVIDIA's `nvidia-ctk` (NVIDIA container toolkit), for the GPU host of tests/gpu/gpuhost.py only: the
# toolkit cannot be installed on the lent GPU machines (no network, not in Debian, NVIDIA's repository unreachable).
# tests/gpu/gpuhost.py installs it there as /usr/bin/nvidia-ctk, the way a vendor image ships the toolkit, and the
# inventory says nvidia_container_toolkit_source: installed; nothing in roles/ uses this file. It answers the three
# calls role nvidia_container_toolkit makes:
#   nvidia-ctk --version                          a version line, naming itself a stand-in
#   nvidia-ctk cdi generate [...] --output=FILE   tests/gpu/cdi-standin.sh's spec (devices by index, UUID and all)
#   nvidia-ctk cdi list                           the device names of the specs in /etc/cdi and /var/run/cdi
set -euo pipefail
here=$(dirname "$(readlink -f "$0")")
case "${1:-} ${2:-}" in
  "--version "*|"-v "*)
    echo "NVIDIA Container Toolkit CLI version 1.18.0 (STAND-IN: tests/gpu/nvidia-ctk-standin.sh)" ;;
  "cdi generate")
    output=/dev/stdout
    for arg in "${@:3}"; do case "$arg" in --output=*) output=${arg#--output=} ;; esac; done
    bash "$here/cdi-standin.sh" > "$output" ;;
  "cdi list")
    for spec in /etc/cdi/*.yaml /var/run/cdi/*.yaml; do
      [ -f "$spec" ] || continue
      kind=$(sed -n 's/^kind: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' "$spec" | head -1)
      sed -n 's/^  - name: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' "$spec" | sed "s|^|$kind=|"
    done | sort -u ;;
  *) echo "nvidia-ctk STAND-IN: only --version, cdi generate and cdi list (got: $*)" >&2; exit 2 ;;
esac
