#!/usr/bin/env bash
# Stop a dockerd that scripts/setup-docker.sh started (and nothing else).
set -euo pipefail
pidfile=/var/run/dockerd-bundle.pid
[ -f "$pidfile" ] || exit 0
pid="$(cat "$pidfile")"
if kill -0 "$pid" 2>/dev/null; then
  kill "$pid"
  for _ in $(seq 1 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
fi
rm -f "$pidfile"
