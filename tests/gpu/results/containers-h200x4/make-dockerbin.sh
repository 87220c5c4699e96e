#!/usr/bin/env bash
# Docker binaries only (what gpu-proof-containers.sh needs: bin/ + VERSIONS), as tests/gpu/carry-compose.sh fetches them
set -euo pipefail
cd /work/main
tmp=/var/tmp/c4-docker
rm -rf "$tmp"; mkdir -p "$tmp/parts" "$tmp/lists/partial" "$tmp/debs" "$tmp/x" "$tmp/stage/bin"
src=/etc/apt/sources.list.d/debian.sources
sed -e 's/bookworm-updates//; s/bookworm-security/trixie-security/; s/bookworm/trixie/' "$src" > "$tmp/parts/trixie.sources"
apt_o=(-o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$tmp/parts" -o "Dir::State::Lists=$tmp/lists")
apt-get "${apt_o[@]}" update >/dev/null
pkgs=(docker.io docker-cli containerd runc tini)
(cd "$tmp/debs" && apt-get "${apt_o[@]}" download "${pkgs[@]}" 2>&1 | grep -v -e '^Get:' -e 'unsandboxed' || true)
for f in "$tmp"/debs/*.deb; do dpkg -x "$f" "$tmp/x"; done
x=$tmp/x/usr s=$tmp/stage
cp "$x/bin/docker" "$x/sbin/dockerd" "$x/bin/containerd" "$x/bin/containerd-shim-runc-v2" "$x/sbin/runc" "$s/bin/"
cp "$x/bin/tini-static" "$s/bin/docker-init"
for p in "${pkgs[@]}"; do dpkg-deb -f "$tmp"/debs/"${p}"_*.deb Package Version | paste -sd' '; done > "$s/VERSIONS"
cat "$s/VERSIONS"; du -sh "$s/bin"/*
mkdir -p .dockerbin
tar -C "$s" -cf - . | xz -9e --lzma2=dict=256MiB -T1 > .dockerbin/docker-trixie.tar.xz
ls -l .dockerbin/docker-trixie.tar.xz
