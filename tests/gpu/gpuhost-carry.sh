#!/usr/bin/env bash
# What tests/gpu/gpuhost.py (the gpuhost proof, issue 65) carries to a lent GPU machine, made here (debootstrap, apt and
# pip reach their archives; the GPU machine reaches nothing):
#   rootfs.tar   the GPU host's root filesystem: the sandbox's host image (molecule/default/Dockerfile.host, target
#                `packages`: systemd, sshd, Docker Engine, node exporter, Prometheus) on Debian trixie (Docker 26: CDI
#                devices), plus nftables (the firewall) and the places a driver install gives (ld.so.conf names
#                /usr/local/nvidia/lib64, /usr/bin/nvidia-smi: the machine's /usr/local/nvidia is bind-mounted there
#                read-only when the host starts); its own dockerd, containerd and runc also run the machine's Docker
#   controller/  for Ansible on the GPU machine: the collections the playbooks use beyond the bundle's own
#                (community.docker, community.crypto, ansible.posix, from the pinned `ansible` of requirements.txt in
#                .venv), the cryptography wheels for the cluster's CA and requests for community.docker's modules on
#                the controller (the image's export), CPython 3.12, at .venv's versions
# all in one carry.tar.xz, split into parts of PART_SIZE (56M: one beside the tree; the last beside the tree and .whl/) under .gpuhost/pN/, one device call each; checksums in
# tests/gpu/results/gpuhost/carry.sha256 (rewritten only when its content changes).
#
#   tests/gpu/gpuhost-carry.sh          (root; Docker running: make setup; .venv: make venv)
#
# Reproducible: the exported tree and the carry are tarred sorted by name, with one fixed time and numeric owners (the
# tree's own: its services' folders belong to their users; the carry's root), and
# xz runs with a fixed thread count (its output then depends only on the input), so the same image and wheels give the
# same bytes. The image itself follows Debian's archive of the day.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=.gpuhost sums=tests/gpu/results/gpuhost/carry.sha256 image=dask-gpu-host:trixie part_size=${PART_SIZE:-56M}
grep -qxF "/$out/" .git/info/exclude 2>/dev/null || { mkdir -p .git/info && echo "/$out/" >> .git/info/exclude; }
step() { printf '[gpuhost-carry %s] %s\n' "$(date +%T)" "$*"; }
retar() {  # folder [tar options] -> tar on stdout, the same bytes for the same files
  local folder=$1; shift
  tar -C "$folder" --sort=name --mtime=@1767225600 --numeric-owner "$@" \
    --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime -cf - .
}

step "base image debian:trixie-slim (scripts/base-images.sh)"
bash scripts/base-images.sh trixie
step "the sandbox's host image on trixie (Dockerfile.host, target packages)"
docker build -q -t dask-sandbox-host:trixie-packages --target packages --build-arg BASE_IMAGE=debian:trixie-slim \
  -f molecule/default/Dockerfile.host molecule/default >/dev/null
step "the GPU host's layer: nftables, the driver's places, systemd-modules-load masked (no kmod in a container)"
# Docker's recommended git and buildx go (nothing a host of the cluster runs: images are built on the build host), and
# apt's caches, documentation and locales: 1 GB -> about 600 MB.
docker build -q -t "$image" - >/dev/null <<'EOF'
FROM dask-sandbox-host:trixie-packages
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends nftables \
 && DEBIAN_FRONTEND=noninteractive apt-get purge -y --auto-remove git docker-buildx \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/* /usr/share/doc/* /usr/share/man/* /usr/share/locale/* /usr/share/info/* \
 && systemctl disable nftables.service \
 && systemctl mask systemd-modules-load.service \
 && echo /usr/local/nvidia/lib64 > /etc/ld.so.conf.d/nvidia.conf \
 && ln -s /usr/local/nvidia/bin/nvidia-smi /usr/bin/nvidia-smi \
 && : > /etc/machine-id
EOF
work=$(mktemp -d /var/tmp/gpuhost-carry.XXXX)
trap 'rm -rf "$work"; docker rm -f dask-gpu-host-export >/dev/null 2>&1 || true' EXIT
mkdir -p "$work/tree" "$work/carry/controller/collections/ansible_collections" "$work/carry/controller/wheels"
step "rootfs.tar: the image exported, tarred again"
docker create --name dask-gpu-host-export "$image" /sbin/init >/dev/null
docker export dask-gpu-host-export | tar -C "$work/tree" --numeric-owner -xpf - --exclude='dev/*'
retar "$work/tree" > "$work/carry/rootfs.tar"  # the files' own owners: Prometheus' folders are its user's
rm -rf "$work/tree"
step "controller/: collections from .venv's ansible, cryptography wheels for CPython 3.12"
collections=$(.venv/bin/python -c 'import ansible_collections, os; print(list(ansible_collections.__path__)[0])')
for c in community/docker community/crypto ansible/posix; do
  mkdir -p "$work/carry/controller/collections/ansible_collections/$(dirname $c)"
  cp -r "$collections/$c" "$work/carry/controller/collections/ansible_collections/$c"
done
find "$work/carry/controller/collections" -name __pycache__ -prune -exec rm -rf {} +
read -r -a pins < <(.venv/bin/python -c 'import importlib.metadata as m
print(*(f"{n}=={m.version(n)}" for n in ("cryptography", "cffi", "pycparser", "requests", "urllib3", "idna",
                                         "certifi", "charset-normalizer")))')
.venv/bin/python -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_34_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 -d "$work/carry/controller/wheels" "${pins[@]}"
step "carry.tar.xz (xz -T2), parts of $part_size"
rm -rf "$out" && mkdir -p "$out"
retar "$work/carry" --owner=0 --group=0 | xz -T2 -6 > "$out/carry.tar.xz"
(cd "$out" && split -b "$part_size" -d -a 1 carry.tar.xz part-)
for part in "$out"/part-*; do n=$(( ${part##*-} + 1 )); mkdir -p "$out/p$n"; mv "$part" "$out/p$n/"; done
new=$(cd "$out" && sha256sum carry.tar.xz p*/part-*)
mkdir -p "$(dirname "$sums")"
if [ ! -f "$sums" ] || [ "$(cat "$sums")" != "$new" ]; then echo "$new" > "$sums"; step "wrote $sums"; fi
step "$(du -b "$out/carry.tar.xz" | cut -f1) bytes in $(find "$out" -maxdepth 1 -name 'p[0-9]*' | wc -l) parts ($(du -b "$work/carry/rootfs.tar" | cut -f1) bytes of rootfs.tar)"
