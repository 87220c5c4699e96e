#!/usr/bin/env bash
# STAND-IN for `nvidia-ctk cdi generate` (NVIDIA container toolkit), for the lent GPU machines only, where the
# toolkit cannot be installed (not in Debian, NVIDIA's repository unreachable). Production hosts get their CDI
# spec from the real nvidia-ctk (role nvidia_container_toolkit); nothing in roles/ uses this file.
#
#   tests/gpu/cdi-standin.sh > /etc/cdi/nvidia.yaml
#
# What the spec holds (tests/gpu/README.md, "The lent machines"), from what the machine has:
#   * kind nvidia.com/gpu; one device per /dev/nvidiaN, named by its index and its UUID, and "all"
#   * common device nodes /dev/nvidiactl, /dev/nvidia-uvm, /dev/nvidia-uvm-tools (and nvidia-modeset if present)
#   * the driver's user-space libraries (libcuda, libnvidia-ml, libnvidia-ptxjitcompiler, libnvidia-nvvm,
#     libnvidia-gpucomp, libcudadebugger, libnvidia-cfg) bind-mounted read-only into the container's
#     /usr/lib/x86_64-linux-gnu under every name the host has for them (glibc searches there, so no ldconfig
#     hook is needed), and nvidia-smi at /usr/bin/nvidia-smi.
# What the real nvidia-ctk does differently: it mounts the libraries at their host paths and adds hooks
# (nvidia-cdi-hook update-ldcache, create-symlinks), mounts firmware and more binaries (nvidia-persistenced,
# nvidia-cuda-mps-*), and names devices by index, UUID and "all" the same way.
set -euo pipefail

KIND=nvidia.com/gpu
CLIB=/usr/lib/x86_64-linux-gnu
LIBNAMES="libcuda libnvidia-ml libnvidia-ptxjitcompiler libnvidia-nvvm libnvidia-gpucomp libcudadebugger libnvidia-cfg"

dirs=""
cuda1=$(ldconfig -p 2>/dev/null | awk '/libcuda\.so\.1 .*x86-64/ {print $NF; exit}')
[ -n "$cuda1" ] && dirs="$dirs $(dirname "$cuda1")"
for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu /usr/lib64; do
  [ -e "$d/libcuda.so.1" ] && dirs="$dirs $d"
done
LDP=${LD_LIBRARY_PATH:-}; for d in ${LDP//:/ }; do [ -e "$d/libcuda.so.1" ] && dirs="$dirs $d"; done
DRVDIR=""; for d in $dirs; do DRVDIR=$d; break; done
[ -n "$DRVDIR" ] || { echo "cdi-standin: no libcuda.so.1 found" >&2; exit 1; }

declare -a MOUNT_HOST MOUNT_CTR
seen=" "
for n in $LIBNAMES; do
  for f in "$DRVDIR"/"$n".so*; do
    [ -e "$f" ] || continue
    b=$(basename "$f")
    case "$seen" in *" $b "*) continue;; esac
    seen="$seen$b "
    MOUNT_HOST+=("$(readlink -f "$f")"); MOUNT_CTR+=("$CLIB/$b")
  done
done
smi=$(command -v nvidia-smi 2>/dev/null || true)
[ -z "$smi" ] && [ -x /usr/local/nvidia/bin/nvidia-smi ] && smi=/usr/local/nvidia/bin/nvidia-smi
if [ -n "$smi" ]; then MOUNT_HOST+=("$(readlink -f "$smi")"); MOUNT_CTR+=(/usr/bin/nvidia-smi); fi

COMMON_NODES=""
for n in /dev/nvidiactl /dev/nvidia-uvm /dev/nvidia-uvm-tools /dev/nvidia-modeset; do
  [ -c "$n" ] && COMMON_NODES="$COMMON_NODES $n"
done
GPU_NODES=$(find /dev -maxdepth 1 -name 'nvidia[0-9]*' 2>/dev/null | sort -V || true)
[ -n "$GPU_NODES" ] || { echo "cdi-standin: no /dev/nvidiaN" >&2; exit 1; }

# device minor -> UUID: /proc/driver/nvidia/gpus/<bus>/information ("Device Minor:" holds a tab)
declare -A UUID_OF; NU=0
while IFS=', ' read -r bus uuid; do
  [ -n "$bus" ] || continue
  bus=$(echo "$bus" | tr 'A-F' 'a-f'); bus=${bus#0000}; bus=${bus#0000}
  for info in /proc/driver/nvidia/gpus/*/information; do
    case "$info" in *"${bus#:}"*) ;; *) continue;; esac
    minor=$(awk -F: '/Device Minor/ {gsub(/[^0-9]/,"",$2); print $2}' "$info")
    [ -n "$minor" ] && { UUID_OF[$minor]=$uuid; NU=$((NU+1)); }
  done
done < <(nvidia-smi --query-gpu=pci.bus_id,uuid --format=csv,noheader 2>/dev/null || true)
if [ "$NU" -eq 0 ] && [ "$(echo "$GPU_NODES" | wc -w)" = 1 ]; then
  u=$(nvidia-smi --query-gpu=uuid --format=csv,noheader 2>/dev/null | head -1 || true)
  [ -n "$u" ] && UUID_OF[${GPU_NODES#/dev/nvidia}]=$u
fi

echo "# STAND-IN for 'nvidia-ctk cdi generate': written by tests/gpu/cdi-standin.sh on $(hostname)"
echo "# $(date -u +%FT%TZ); driver libraries from $DRVDIR (not NVIDIA's toolkit; see the script's header)"
echo "cdiVersion: \"0.5.0\""
echo "kind: $KIND"
echo "devices:"
for n in $GPU_NODES; do
  m=${n#/dev/nvidia}
  names="$m"
  [ -n "${UUID_OF[$m]:-}" ] && names="$names ${UUID_OF[$m]}"
  for name in $names; do
    echo "  - name: \"$name\""
    echo "    containerEdits:"
    echo "      deviceNodes:"
    echo "        - path: $n"
  done
done
echo "  - name: all"
echo "    containerEdits:"
echo "      deviceNodes:"
for n in $GPU_NODES; do echo "        - path: $n"; done
echo "containerEdits:"
echo "  env:"
echo "    - NVIDIA_VISIBLE_DEVICES=void"
echo "  deviceNodes:"
for n in $COMMON_NODES; do echo "    - path: $n"; done
echo "  mounts:"
for i in "${!MOUNT_HOST[@]}"; do
  echo "    - hostPath: ${MOUNT_HOST[$i]}"
  echo "      containerPath: ${MOUNT_CTR[$i]}"
  echo "      options: [ro, nosuid, nodev, bind]"
done
