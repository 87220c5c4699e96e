#!/usr/bin/env bash
# Build what tests/gpu/gpu-proof-compose.sh carries to a lent GPU machine (one device call, 59.6 MB with the tree):
#   .dockerbin/docker-trixie.tar.xz   Debian trixie's docker.io (dockerd, docker-proxy), docker-cli, containerd (containerd,
#                                     containerd-shim-runc-v2), runc, tini (tini-static as docker-init), docker-compose
#                                     (the CLI plugin), iptables with libxtables/libnftnl/libmnl/libip4tc/libip6tc and the
#                                     xtables extensions; bin/, iptables/{sbin,lib,xtables}/, VERSIONS. 45.9 MB with
#                                     `xz -9e --lzma2=dict=256MiB` (about 3 minutes on 2 cores). tests/gpu/proofs.py
#                                     reads the same file (bin/ holds everything it needs).
#   .whl/                             the dask wheels the stand-in image needs (CPython 3.12, manylinux x86_64), as pinned by
#                                     images/pins/rapids-26.10-cuda13.txt; 14 wheels, 14 MB.
# The .deb files come through this machine's own apt configuration: its Debian source entries with the suite changed to
# trixie, in a list used for this download alone (the machine's apt state is untouched).
#   tests/gpu/carry-compose.sh            (NO_PACK=1: stage the binaries in /var/tmp/carry-compose/stage, skip xz)
# CONTAINERS_ONLY=1 packs only what tests/gpu/proofs.py's container proof needs (bin/ without docker-compose and
# docker-proxy, no iptables: 36 MB) and adds ansible-core and resolvelib to .whl/ (the renders on the machine), so one
# call carries the tree, .whl/, .dockerbin/ and .gpucerts/ (tests/gpu/README.md).
# Reproducible (issues 63, 65): the same .deb files and wheels make the same docker-trixie.tar.xz and .whl/ byte for byte
# (wheels-lib.sh's reproducible_tar, single-threaded xz); the carry folders are ignored through info/exclude.
set -euo pipefail
cd "$(dirname "$0")/../.."
export LC_ALL=C
# shellcheck source=tests/gpu/wheels-lib.sh
. tests/gpu/wheels-lib.sh
tmp=/var/tmp/carry-compose
rm -rf "$tmp"; mkdir -p "$tmp/parts" "$tmp/lists/partial" "$tmp/debs" "$tmp/x" "$tmp/stage/bin" \
  "$tmp/stage/iptables/sbin" "$tmp/stage/iptables/lib" "$tmp/stage/iptables/xtables"
exclude_carry_folders

src=/etc/apt/sources.list.d/debian.sources
[ -f "$src" ] || { echo "carry-compose: no $src (deb822 Debian sources) to derive a trixie list from" >&2; exit 1; }
sed -e 's/bookworm-updates//; s/bookworm-security/trixie-security/; s/bookworm/trixie/' "$src" > "$tmp/parts/trixie.sources"
apt_o=(-o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$tmp/parts" -o "Dir::State::Lists=$tmp/lists")
apt-get "${apt_o[@]}" update >/dev/null
pkgs=(docker.io docker-cli containerd runc tini docker-compose iptables libxtables12 libnftnl11 libmnl0 libip4tc2 libip6tc2)
only=${CONTAINERS_ONLY:-0}
[ "$only" != 1 ] || pkgs=(docker.io docker-cli containerd runc tini)
(cd "$tmp/debs" && apt-get "${apt_o[@]}" download "${pkgs[@]}" 2>&1 | grep -v -e '^Get:' -e 'unsandboxed' || true)
for f in "$tmp"/debs/*.deb; do dpkg -x "$f" "$tmp/x"; done
x=$tmp/x/usr s=$tmp/stage
cp "$x/bin/docker" "$x/sbin/dockerd" "$x/bin/containerd" "$x/bin/containerd-shim-runc-v2" "$x/sbin/runc" "$s/bin/"
cp "$x/bin/tini-static" "$s/bin/docker-init"
if [ "$only" != 1 ]; then
  cp "$x/sbin/docker-proxy" "$x/libexec/docker/cli-plugins/docker-compose" "$s/bin/"
  cp "$x/sbin/xtables-nft-multi" "$x/sbin/xtables-legacy-multi" "$s/iptables/sbin/"
  cp -a "$x"/lib/x86_64-linux-gnu/lib{xtables,nftnl,mnl,ip4tc,ip6tc}.so* "$s/iptables/lib/"
  cp "$x"/lib/x86_64-linux-gnu/xtables/lib{xt,ipt}_*.so "$s/iptables/xtables/"
else
  rm -rf "$s/iptables"
fi
for p in "${pkgs[@]:0:10}"; do dpkg-deb -f "$tmp"/debs/"${p}"_*.deb Package Version | paste -sd' '; done > "$s/VERSIONS"
cat "$s/VERSIONS"
if [ "${NO_PACK:-0}" != 1 ]; then
  mkdir -p .dockerbin
  # xz's output is fixed by its input and options, and by the thread count in multithreaded mode: -T1 is
  # single-threaded, so the same stage gives the same bytes with the same xz version on any machine.
  reproducible_tar "$s" . | xz -9e --lzma2=dict=256MiB -T1 > .dockerbin/docker-trixie.tar.xz
  ls -l .dockerbin/docker-trixie.tar.xz
fi

rm -rf .whl; mkdir -p .whl
mapfile -t specs < <(pinned_specs images/pins/rapids-26.10-cuda13.txt dask distributed dask-cuda rapids-dask-dependency \
  tornado zict tblib partd locket nvtx bokeh xyzservices pyyaml packaging)
[ "$only" != 1 ] || specs+=(ansible-core==2.19.14 resolvelib==1.2.1)  # requirements.txt's ansible-core
# wheels-lib.sh counts with `find DEST -name '*.whl'`, which also matches the folder .whl itself: count files here
download_wheels .whl "${specs[@]}" || [ "$(find .whl -type f -name '*.whl' | wc -l)" -eq "${#specs[@]}" ]
du -cb .dockerbin .whl 2>/dev/null | tail -1
