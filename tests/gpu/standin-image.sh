#!/usr/bin/env bash
# STAND-IN for the production scheduler and worker images (images/Dockerfile), built on a lent GPU machine by
# tests/gpu/proofs.py (containers.py) and gpu-proof-compose.sh: that machine has no registry and no network, and the 2.2 GB image cannot
# travel (64 MiB a call). Tagged with exactly the names in the rendered specs, so the units' `docker run` lines
# run unchanged. What it is:
#   * a root filesystem made there: the machine's own Python (its interpreter, standard library and the shared
#     libraries they load), a virtual environment at /opt/dask (the production path) holding the carried dask,
#     distributed, dask-cuda, bokeh, nvtx... wheels (.whl/), this tree's images/verify (dask-gpu-verify,
#     dask-gpu-bench, dask-gpu-healthcheck) and, copied from the machine's Python environment, every other
#     distribution they need (CuPy 14 for CUDA 13 with its NVIDIA CUDA 13 wheels, numpy, pandas, ...);
#     /etc/passwd and /etc/group with the dask user and group 10001, /usr/bin/tini (Debian's tini-static, carried
#     as docker-init), /var/lib/dask and /var/lib/dask-reports owned by 10001, and id/sh/cat/ls for the proof;
#   * `docker import`ed as dask-gpu-standin-rootfs:latest (with the lent machines' rule that NVLink multicast
#     stays off, NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1, in its ENV), then images/Dockerfile's runtime, scheduler and worker
#     stages with their RUN and COPY dropped (their work is the root filesystem above) are built on it by
#     Docker's classic builder: ENV, LABEL, USER, WORKDIR, ENTRYPOINT, HEALTHCHECK, EXPOSE and CMD are the
#     production ones.
#   tests/gpu/standin-image.sh WORKER_IMAGE SCHEDULER_IMAGE [WHEEL_DIR]   (root; dockerd running; OUT=report dir)
# Reports in $OUT: standin-closure.json, standin-trace.json, standin-files.json, standin-versions.txt,
# standin.Dockerfile.
set -euo pipefail
cd "$(dirname "$0")/../.."
worker_image=$1 scheduler_image=$2 wheels=${3:-.whl}
out="${OUT:-/tmp/standin}"; mkdir -p "$out"
venv=/opt/dask
rootfs="${STANDIN_ROOTFS:-/var/tmp/standin-rootfs}"
tini="${STANDIN_TINI:-$(command -v docker-init)}"
hostpy=$(command -v "${STANDIN_PYTHON:-python3}")
roots="${STANDIN_ROOTS:-dask-cuda dask distributed rapids-dask-dependency ?bokeh cupy-cuda13x numba numba-cuda nvtx prometheus-client
  nvidia-ml-py numpy dask-gpu-verify ?nvidia-cuda-runtime ?nvidia-cuda-nvrtc ?nvidia-cublas ?nvidia-curand
  ?nvidia-cuda-cccl ?nvidia-nvjitlink ?cuda-toolkit ?cuda-bindings} ${STANDIN_EXTRA_ROOTS:-}"
clean=(env -i PATH=/usr/bin:/bin HOME=/tmp LANG=C.UTF-8)
step() { printf '[standin %s] %s\n' "$(date +%T)" "$*"; }

basepy=$("${clean[@]}" "$hostpy" -c 'import os, sys; print(os.path.realpath(getattr(sys, "_base_executable", sys.executable)))')
stdlib=$("${clean[@]}" "$basepy" -c 'import sysconfig; print(sysconfig.get_path("stdlib"))')
step "machine's python: $hostpy (interpreter $basepy, standard library $stdlib)"

step "virtual environment $venv with the carried wheels and images/verify"
rm -rf "$venv"
"${clean[@]}" "$basepy" -m venv --without-pip "$venv"
site=$("$venv/bin/python3" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
move_scripts() {  # pip --target puts console scripts in SITE/bin, with the machine's python in the #! line
  if [ -d "$site/bin" ]; then
    for f in "$site"/bin/*; do
      sed -i '1s|^#!.*python.*$|#!'"$venv"'/bin/python3|' "$f"; mv -f "$f" "$venv/bin/"
    done
    rmdir "$site/bin"
  fi
}
whl=()
for f in "$wheels"/*.whl; do  # ansible-core and resolvelib render on the machine; the image does not need them
  case "${f##*/}" in ansible_core-*|resolvelib-*) ;; *) whl+=("$f") ;; esac
done
"${clean[@]}" "$hostpy" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --disable-pip-version-check \
  --target "$site" "${whl[@]}"
move_scripts
if [ -f .ucx/ucx-site.tar.xz ]; then  # distributed-ucxx, ucxx, UCX, RMM (the lean profile's UCX and RMM), carried
  tar -xJf .ucx/ucx-site.tar.xz -C "$site"
  roots="$roots distributed-ucxx-cu13 rmm-cu13"
fi
"$venv/bin/python3" -I tests/gpu/standin_rootfs.py install-project images/verify "$site" "$venv/bin" "$venv/bin/python3"

step "distributions the wheels need, copied from the machine's Python environment"
# shellcheck disable=SC2086
"${clean[@]}" STANDIN_HOST_SITES="${STANDIN_HOST_SITES:-}" "$hostpy" tests/gpu/standin_rootfs.py closure "$site" $roots \
  > "$out/standin-closure.json"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(" copied:", len(d["copied_from_machine"]), "missing:", d["missing"], "conflicts:", d["conflicts"])' "$out/standin-closure.json"
# shellcheck disable=SC2086
imports="dask distributed dask_cuda numpy cupy nvtx dask_gpu_verify distributed.protocol.cupy"
[ -f .ucx/ucx-site.tar.xz ] && imports="$imports rmm distributed_ucxx"
[[ " ${STANDIN_EXTRA_ROOTS:-} " == *" ?cudf-cu13 "* ]] && imports="$imports cudf dask_cudf"
# shellcheck disable=SC2086  # a list of module names
"$venv/bin/python3" -I - ${STANDIN_IMPORTS:-$imports} <<'EOF'
import importlib, sys
mods = [importlib.import_module(name) for name in sys.argv[1:]]
print(" imports ok:", ", ".join(f"{m.__name__} {getattr(m, '__version__', '')}" for m in mods))
EOF

step "trace: what the stand-in's python loads when it runs the workers' GPU work (on the machine)"
trace_env=("${clean[@]}" PATH="$venv/bin:/usr/bin:/bin" CUPY_CACHE_DIR=/tmp/standin-trace-cupy)
if [ "${STANDIN_TRACE:-1}" = 1 ]; then
  if ! "${trace_env[@]}" "$venv/bin/python3" -I tests/gpu/standin_rootfs.py trace > "$out/standin-trace.json" 2>"$out/standin-trace.err"; then
    step "trace failed without LD_LIBRARY_PATH, again with the machine's (${LD_LIBRARY_PATH:-unset})"; tail -3 "$out/standin-trace.err"
    "${trace_env[@]}" LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}" "$venv/bin/python3" -I tests/gpu/standin_rootfs.py trace \
      > "$out/standin-trace.json" 2>"$out/standin-trace.err" || { tail -20 "$out/standin-trace.err"; exit 1; }
  fi
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(" cupy CUDA root:", d["cuda_path"], "| GPU:", d["gpu"].get("name"), d["gpu"].get("uuid"), "| copy GB/s:", round(d["bandwidth"]["copy_gbps"]), "| CuPy serialization:", d["cupy_serialization"])' "$out/standin-trace.json"
else
  echo '{"maps": [], "cuda_path": null}' > "$out/standin-trace.json"
fi

step "file list: the environment, the interpreter, its standard library, ldd dependencies, traced files"
"${clean[@]}" "$hostpy" tests/gpu/standin_rootfs.py files /tmp/standin-files.txt "$out/standin-trace.json" \
  "$venv" "$basepy" "$stdlib" /usr/bin/id /usr/bin/sh /usr/bin/cat /usr/bin/ls /usr/bin/env > "$out/standin-files.json"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(" files:", d["files"], "MB:", d["bytes"]>>20, "| traced outside the environment:", d["traced_outside_roots"][:12], "| ldd not found:", d["ldd_not_found"][:8])' "$out/standin-files.json"

step "root filesystem $rootfs"
rm -rf "$rootfs"; mkdir -p "$rootfs"
for d in bin sbin lib lib64; do [ -L "/$d" ] && ln -s "$(readlink "/$d")" "$rootfs/$d"; done
tar -C / -cf - --no-recursion -T /tmp/standin-files.txt | tar -C "$rootfs" -xpf -
install -d -m 0755 "$rootfs/etc" "$rootfs/usr/bin" "$rootfs/usr/lib/x86_64-linux-gnu" "$rootfs/dev" "$rootfs/proc" "$rootfs/sys"
install -d -m 1777 "$rootfs/tmp"
[ -d "$rootfs/root" ] || install -d -m 0700 "$rootfs/root"  # the python may live under /root (pyenv, uv)
install -d -o 10001 -g 10001 -m 0755 "$rootfs/home/dask"
install -d -o 10001 -g 10001 -m 0750 "$rootfs/var/lib/dask" "$rootfs/var/lib/dask-reports"
install -m 0755 "$tini" "$rootfs/usr/bin/tini"
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\ndask:x:10001:10001::/home/dask:/usr/sbin/nologin\n' > "$rootfs/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\ndask:x:10001:\n' > "$rootfs/etc/group"
[ -f /etc/nsswitch.conf ] && cp /etc/nsswitch.conf "$rootfs/etc/"
cat > "$rootfs/etc/dask-gpu-standin" <<EOF
STAND-IN for dask-gpu images, made by tests/gpu/standin-image.sh on $(hostname) $(date -u +%FT%TZ):
python $("$venv/bin/python3" -c 'import sys; print(sys.version.split()[0])') from $basepy (the GPU machine's), not Debian bookworm's python 3.11;
/opt/dask: carried wheels ($(basename -a "${whl[@]}" | tr '\n' ' ')) plus distributions copied from the machine;
added beyond the lean profile: ${STANDIN_EXTRA_ROOTS:-nothing}.
EOF
du -sh "$rootfs" | sed 's/^/ size: /'

step "docker import, then images/Dockerfile's runtime/scheduler/worker stages (without RUN/COPY) on it"
tar --numeric-owner -C "$rootfs" -cf - . | docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1' \
  --message "STAND-IN root filesystem (tests/gpu/standin-image.sh)" - dask-gpu-standin-rootfs:latest >/dev/null
tests/gpu/standin_rootfs.py dockerfile images/Dockerfile dask-gpu-standin-rootfs:latest > "$out/standin.Dockerfile"
tag=${worker_image##*:}
release=$(echo "$tag" | sed -E 's/^([0-9.]+)-cuda.*/\1/') cuda=$(echo "$tag" | sed -E 's/^[0-9.]+-cuda([0-9]+)-.*/\1/')
profile=$(echo "$tag" | sed -E 's/^[0-9.]+-cuda[0-9]+-([a-z]+).*/\1/')
mkdir -p /tmp/standin-context
for pair in "scheduler $scheduler_image" "worker $worker_image"; do
  read -r -a target <<<"$pair"
  set -- "${target[@]}"
  DOCKER_BUILDKIT=0 docker build -q --target "$1" -t "$2" -f "$out/standin.Dockerfile" \
    --build-arg RAPIDS_RELEASE="$release" --build-arg CUDA_MAJOR="$cuda" --build-arg PROFILE="$profile" \
    --label io.dask-gpu.standin="tests/gpu/standin-image.sh: machine's python + carried wheels, not images/Dockerfile's build" \
    /tmp/standin-context > "$out/standin-build-$1.log" 2>&1 || { cat "$out/standin-build-$1.log"; exit 1; }
  docker image inspect "$2" --format " $2: {{.Size}} bytes, user {{.Config.User}}, entrypoint {{.Config.Entrypoint}}, cmd {{.Config.Cmd}}"
done
"$venv/bin/python3" -I tests/gpu/standin_rootfs.py versions "$site" "images/pins/rapids-${release}-cuda${cuda}.txt" > "$out/standin-versions.txt"
rm -rf "$rootfs"
step "stand-in images ready"
