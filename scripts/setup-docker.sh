#!/usr/bin/env bash
# Make sure a Docker daemon answers, with BuildKit (buildx) and the compose plugin.
# On a fresh Debian machine (root, no Docker engine) it installs Debian's docker.io and
# debootstrap and skopeo, adds trixie's static buildx/compose plugins, and starts dockerd directly
# when PID 1 is not systemd. Safe to run again: every step checks first.
set -euo pipefail

log() { printf '[setup-docker] %s\n' "$*"; }
plugins_dir="${DOCKER_CONFIG:-$HOME/.docker}/cli-plugins"
dockerd_log="${DOCKERD_LOG:-/var/log/dockerd.log}"

need_root() {
  if [ "$(id -u)" != 0 ]; then
    echo "[setup-docker] $1 needs root; install it yourself or rerun as root" >&2
    exit 1
  fi
}

apt_updated=false
apt_install() {
  need_root "installing $*"
  if [ "$apt_updated" = false ]; then apt-get update -qq; apt_updated=true; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

if ! command -v dockerd >/dev/null 2>&1 && ! docker info >/dev/null 2>&1; then
  log "installing docker.io"
  apt_install docker.io
fi
if ! command -v skopeo >/dev/null 2>&1; then
  # the build host's tool for own images with zstd layers (dask_images_convert_layers; the controller by default)
  log "installing skopeo"
  apt_install skopeo
fi
if ! command -v debootstrap >/dev/null 2>&1; then
  log "installing debootstrap"
  apt_install debootstrap
fi

install_plugin() { # $1: plugin binary name, $2: trixie package name
  if docker "${1#docker-}" version >/dev/null 2>&1; then return; fi
  need_root "installing the $1 plugin"
  log "installing $1 from Debian trixie"
  local work; work="$(mktemp -d)"
  mkdir -p "$work/lists/partial" "$work/cache/archives/partial"
  cat >"$work/trixie.sources" <<SRC
Types: deb
URIs: $(bash "$(dirname "$0")/debian-mirror.sh")
Suites: trixie
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  local opts=(-o "Dir::Etc::SourceList=$work/trixie.sources" -o "Dir::Etc::SourceParts=-"
              -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache"
              -o APT::Sandbox::User=root -qq)
  apt-get "${opts[@]}" update
  (cd "$work" && apt-get "${opts[@]}" download "$2")
  dpkg -x "$work"/"$2"_*.deb "$work/root"
  mkdir -p "$plugins_dir"
  install -m 0755 "$work/root/usr/libexec/docker/cli-plugins/$1" "$plugins_dir/$1"
  rm -rf "$work"
}

dockerd_running() { docker info >/dev/null 2>&1; }

if ! dockerd_running; then
  if [ "$(cat /proc/1/comm 2>/dev/null)" = systemd ]; then
    log "starting docker.service"
    systemctl start docker
  else
    need_root "starting dockerd"
    log "starting dockerd (log: $dockerd_log)"
    # The sandbox network's registry (molecule/default/registry.yml) is plain HTTP: allow it, and only it.
    nohup dockerd --insecure-registry "${SANDBOX_REGISTRY_NET:-10.231.7.0/24}" >"$dockerd_log" 2>&1 &
    echo $! >/var/run/dockerd-bundle.pid
  fi
  for _ in $(seq 1 60); do dockerd_running && break; sleep 1; done
  dockerd_running || { echo "[setup-docker] dockerd did not answer within 60 s; see $dockerd_log" >&2; exit 1; }
fi

install_plugin docker-buildx docker-buildx
install_plugin docker-compose docker-compose
log "docker $(docker version --format '{{.Server.Version}}') with buildx $(docker buildx version | awk '{print $2}') and $(docker compose version)"
