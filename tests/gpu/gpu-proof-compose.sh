#!/usr/bin/env bash
# GPU proof of the single-host compose path (compose.yaml, compose.cdi.yaml) on a lent GPU machine (root, no systemd,
# no network, no Docker installed). What runs, in order:
#  1. Docker from Debian trixie (dockerd/containerd/runc/tini, docker CLI, docker-proxy, the docker-compose 2.26 CLI
#     plugin and iptables 1.8.11 for Docker's embedded DNS), carried in .dockerbin/docker-trixie.tar.xz, started with
#     CDI enabled. /etc/cdi/nvidia.yaml comes from tests/gpu/cdi-standin.sh, a STAND-IN for `nvidia-ctk cdi generate`
#     (NVIDIA's toolkit cannot be installed on these machines).
#  2. tests/gpu/standin-image.sh builds a STAND-IN image on the machine (the machine's Python 3.12 and CuPy 14.2 for
#     CUDA 13 plus the carried dask wheels in .whl/, with images/Dockerfile's USER, ENTRYPOINT and HEALTHCHECK), tagged
#     with the image names compose resolves (the real 2.6 GB images cannot travel: 64 MiB a call).
#  3. A network probe: a container on a fresh user-defined bridge network must resolve its own name through Docker's
#     embedded DNS (which needs NAT in the kernel: dockerd puts DNAT/SNAT rules for 127.0.0.11 in each container).
#     If it cannot, the same bridge network with the name in /etc/hosts and a port published on 127.0.0.1 is tried:
#     if that works, tests/gpu/compose.standin-staticdns.yaml (a STAND-IN for the name resolution only: the scheduler at
#     a fixed address, `scheduler` in the others' /etc/hosts) is added to every compose command below; failing that,
#     tests/gpu/compose.standin-hostnet.yaml (a STAND-IN network: host network, `scheduler` -> 127.0.0.1). The summary
#     says which. The lent H100 (kernel 6.18.44-fc) has no netfilter NAT: the static-name stand-in is what ran there.
#  4. Compose cycles, each: `up -d --wait` (timed to healthy), `ps`, `nvidia-smi -L` and CuPy's device in the worker
#     container, the stack's own verification (`run verify`, as scripts/compose-up.sh runs it: the verify profile's
#     service, report copied out of the container), the scheduler's published port from the host, then
#     `--profile verify down -v --remove-orphans` (what `make compose-down` runs):
#       as-asked   docker compose -f compose.yaml -f compose.cdi.yaml      (the two files together)
#       cdi        docker compose -f compose.cdi.yaml                      (compose.cdi.yaml's own header and docs/compose.md)
#       fixed      docker compose -f compose.yaml -f <compose.cdi.yaml with `devices: !override`>   (FIX_CHECK=1)
#  5. dockerd is stopped; $OUT gets summary.md, verify.json (the cdi cycle's report) and logs.tar.xz.
#   OUT=/tmp/out [CUDA_MAJOR=13] [CYCLES="as-asked cdi fixed"] [NETWORK=auto|bridge|hostnet]   (bridge: fail unless the embedded DNS works) tests/gpu/gpu-proof-compose.sh
# CUDA_MAJOR defaults to 13 here (the .env says 12): the stand-in carries the machine's CuPy for CUDA 13, and the
# image tag should say what is inside. Carried: .dockerbin/ (built by hand, see the summary), .whl/ (the dask wheels).
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${OUT:-/tmp/gpu-proof-compose}"; mkdir -p "$out"
work=/var/tmp/gpu-proof-compose; rm -rf "$work"; mkdir -p "$work"
dockerbin="${DOCKERBIN:-.dockerbin/docker-trixie.tar.xz}"
[ -f "$dockerbin" ] || dockerbin=/var/tmp/carry/docker-trixie.tar.xz   # carried by an earlier call (gpu-carry.md)
export CUDA_MAJOR="${CUDA_MAJOR:-13}"
cycles="${CYCLES:-as-asked cdi fixed}"
t0=$(date +%s.%N)
elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
step() { printf '[%6s s] %s\n' "$(elapsed "$t0")" "$*" | tee -a "$work/steps.txt"; }
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export COMPOSE_ANSI=never COMPOSE_PROGRESS=plain COMPOSE_STATUS_STDOUT=1 DOCKER_CLI_HINTS=false
network=unknown; overlay=(); worker_image="" scheduler_image=""
wait_timeout="${WAIT_TIMEOUT:-240}"

# shellcheck disable=SC2329  # called by the EXIT trap
finish() {
  local rc=$?
  set +e
  if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
    docker ps -a > "$work/docker-ps-end.txt" 2>&1
    docker compose -f compose.cdi.yaml "${overlay[@]}" --profile verify down -v --remove-orphans >/dev/null 2>&1
  fi
  if [ -f /var/run/docker.pid ]; then
    pid=$(cat /var/run/docker.pid); kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -0 "$pid" 2>/dev/null && echo "dockerd still running" >> "$work/steps.txt" || echo "dockerd stopped" >> "$work/steps.txt"
  fi
  [ "$rc" = 0 ] || echo "FAILED (exit $rc) at: $(tail -1 "$work/steps.txt")" | tee -a "$work/steps.txt"
  summary "$rc" > "$out/summary.md" 2> "$work/summary.err" || cat "$work/summary.err"
  cat "$out/summary.md"
  [ -f "$work/cdi/verify.json" ] && cp "$work/cdi/verify.json" "$out/verify.json"
  tar -C "$work" --exclude=./dockerbin -cJf "$out/logs.tar.xz" . 2>/dev/null
  exit "$rc"
}
trap finish EXIT

# shellcheck disable=SC2329  # called by finish
summary() {  # RC: the run's summary in Markdown, from the files under $work
  local rc=$1 c
  echo "# tests/gpu/gpu-proof-compose.sh on $(hostname), $(date -u '+%F %H:%M UTC'): $( [ "$rc" = 0 ] && echo PASS || echo "FAIL (exit $rc)")"
  echo
  echo "## Substitutions (every one of them)"
  echo "- **Image: STAND-IN.** \`$worker_image\` and \`$scheduler_image\` were built on the machine by"
  echo "  tests/gpu/standin-image.sh (machine's Python $(python3 -c 'import sys; print(sys.version.split()[0])'), its CuPy for CUDA 13, carried dask wheels;"
  echo "  images/Dockerfile's USER, ENTRYPOINT (tini), HEALTHCHECK, ENV and LABELs), not by images/Dockerfile: no registry or"
  echo "  network there, and the real images (2.6 GB) cannot travel (64 MiB a call)."
  echo "- **CDI spec: STAND-IN.** /etc/cdi/nvidia.yaml was written by tests/gpu/cdi-standin.sh, not \`nvidia-ctk cdi generate\`"
  echo "  (NVIDIA's toolkit cannot be installed there). Devices: $(grep -c '^  - name:' "$work/cdi-standin-nvidia.yaml" 2>/dev/null) names ($(grep '^  - name:' "$work/cdi-standin-nvidia.yaml" 2>/dev/null | sed 's/.*name: //' | tr -d '"' | paste -sd' ' | sed 's/ /, /g'))."
  echo "- **Docker: Debian trixie's binaries, carried** ($(paste -sd';' "$work/dockerbin/VERSIONS" 2>/dev/null | sed 's/Package: //g; s/ Version: / /g; s/;/, /g')),"
  echo "  daemon.json \`$(cat /etc/docker/daemon.json 2>/dev/null)\` ($(cat "$work/iptables-choice.txt" 2>/dev/null))."
  echo "- **Network: $network.** $(cat "$work/network-probe.txt" 2>/dev/null)"
  echo "- **CUDA_MAJOR=$CUDA_MAJOR** in the environment (the .env says 12), so the tags name the CUDA 13 CuPy inside the stand-in."
  echo
  echo "## Machine"
  echo '```'; cat "$work/machine.txt" "$work/docker-version.txt" 2>/dev/null; echo '```'
  for c in $cycles; do
    [ -d "$work/$c" ] || continue
    echo
    echo "## Cycle \`$c\`: $(cat "$work/$c/result.txt" 2>/dev/null || echo 'not finished')"
    echo '```'; cat "$work/$c/commands.txt" 2>/dev/null; echo '```'
    if [ -s "$work/$c/up.txt" ]; then echo "up (last lines):"; echo '```'; tail -8 "$work/$c/up.txt"; echo '```'; fi
    for f in health-times.txt ps.txt devicerequests.txt nvidia-smi-L.txt cupy.txt published.txt; do
      [ -s "$work/$c/$f" ] || continue; echo "$f:"; echo '```'; cat "$work/$c/$f"; echo '```'
    done
    if [ -s "$work/$c/verify.txt" ]; then echo "verification output:"; echo '```'; tail -14 "$work/$c/verify.txt"; echo '```'; fi
    if [ -s "$work/$c/down.txt" ]; then echo "down:"; echo '```'; tail -4 "$work/$c/down.txt"; echo '```'; fi
  done
  echo
  echo "## Steps"
  echo '```'; cat "$work/steps.txt"; echo '```'
}

step "GPUs of this machine"
{ nvidia-smi --query-gpu=index,uuid,name,memory.total,driver_version,compute_cap --format=csv,noheader
  uname -r; python3 --version; } | tee "$work/machine.txt"
nvidia-smi -L > "$work/host-nvidia-smi-L.txt"

step "Docker (Debian trixie binaries from $dockerbin), the compose plugin, iptables for the embedded DNS"
mkdir -p "$work/dockerbin" && tar -C "$work/dockerbin" -xJf "$dockerbin"
b="$work/dockerbin/bin"
install -m 0755 "$b/docker" "$b/containerd" "$b/containerd-shim-runc-v2" "$b/docker-init" "$b/docker-proxy" /usr/bin/
install -m 0755 "$b/dockerd" "$b/runc" /usr/sbin/
install -D -m 0755 "$b/docker-compose" /usr/libexec/docker/cli-plugins/docker-compose
ipt="$work/dockerbin/iptables"
use_iptables() {  # BACKEND: /usr/sbin/iptables (and friends) run the carried xtables-BACKEND-multi
  local name
  for name in iptables ip6tables iptables-save iptables-restore ip6tables-save ip6tables-restore; do
    ln -sf "xtables-$1-multi" "$ipt/sbin/$name"
    printf '#!/bin/sh\nLD_LIBRARY_PATH=%s/lib XTABLES_LIBDIR=%s/xtables exec %s/sbin/%s "$@"\n' "$ipt" "$ipt" "$ipt" "$name" \
      > "/usr/sbin/$name"
    chmod 0755 "/usr/sbin/$name"
  done
}
iptables_ok() {  # the nat rules Docker's embedded DNS puts in each container's namespace, tried on the host
  iptables -t nat -N DNSPROBE && iptables -t nat -I OUTPUT -d 127.0.0.11 -j DNSPROBE &&
    iptables -t nat -A DNSPROBE -d 127.0.0.11 -p udp --dport 53 -j DNAT --to-destination 127.0.0.11:40000 &&
    iptables -t nat -A DNSPROBE -s 127.0.0.11 -p udp --sport 40000 -j SNAT --to-source :53 &&
    iptables -t nat -D OUTPUT -d 127.0.0.11 -j DNSPROBE && iptables -t nat -F DNSPROBE && iptables -t nat -X DNSPROBE
}
have_iptables=false
for backend in nft legacy; do
  use_iptables "$backend"
  if iptables_ok > "$work/iptables-$backend.txt" 2>&1; then have_iptables=true; break; fi
done
if [ "$have_iptables" = true ]; then
  echo "iptables $backend backend works (nat DNAT/SNAT); dockerd manages iptables" > "$work/iptables-choice.txt"
else
  rm -f /usr/sbin/iptables /usr/sbin/ip6tables /usr/sbin/iptables-save /usr/sbin/iptables-restore \
    /usr/sbin/ip6tables-save /usr/sbin/ip6tables-restore
  echo "no iptables backend works here: $(tail -1 "$work/iptables-nft.txt") / $(tail -1 "$work/iptables-legacy.txt")" > "$work/iptables-choice.txt"
fi
cat "$work/iptables-choice.txt"
mkdir -p /etc/docker /etc/cdi
start_dockerd() {  # IPTABLES(true|false)
  # "bridge": "none": no default docker0 (compose makes its own network); the rest as gpu-docker.md
  echo "{\"features\": {\"cdi\": true}, \"cdi-spec-dirs\": [\"/etc/cdi\"], \"iptables\": $1, \"ip6tables\": false, \"bridge\": \"none\"}" \
    > /etc/docker/daemon.json
  setsid /usr/sbin/dockerd --config-file /etc/docker/daemon.json > "$work/dockerd.log" 2>&1 < /dev/null &
  for _ in $(seq 60); do docker info >/dev/null 2>&1 && return 0; sleep 0.5; done
  return 1
}
if ! start_dockerd "$have_iptables"; then
  [ "$have_iptables" = true ] || { tail -20 "$work/dockerd.log"; exit 1; }
  cp "$work/dockerd.log" "$work/dockerd-iptables-true.log"; tail -5 "$work/dockerd.log"
  pkill_pid=$(cat /var/run/docker.pid 2>/dev/null || true); [ -n "$pkill_pid" ] && kill "$pkill_pid" 2>/dev/null; sleep 2
  echo "dockerd did not start with iptables true (dockerd-iptables-true.log); started with iptables false" >> "$work/iptables-choice.txt"
  start_dockerd false || { tail -20 "$work/dockerd.log"; exit 1; }
fi
{ docker version --format 'docker client {{.Client.Version}}, server {{.Server.Version}}'
  docker info --format 'storage {{.Driver}}, cgroup {{.CgroupDriver}} v{{.CgroupVersion}}, CDI spec dirs {{.CDISpecDirs}}' || true
  docker compose version; } | tee "$work/docker-version.txt"
tests/gpu/cdi-standin.sh > /etc/cdi/nvidia.yaml
cp /etc/cdi/nvidia.yaml "$work/cdi-standin-nvidia.yaml"
echo "CDI spec: STAND-IN for nvidia-ctk (tests/gpu/cdi-standin.sh) in /etc/cdi/nvidia.yaml"

step "image names compose resolves (CUDA_MAJOR=$CUDA_MAJOR), then the STAND-IN images under those names"
docker compose -f compose.cdi.yaml --profile verify config > "$work/compose-cdi-config.yaml"
docker compose -f compose.yaml -f compose.cdi.yaml --profile verify config > "$work/compose-both-config.yaml"
img() { python3 -c 'import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))["services"][sys.argv[2]]["image"])' "$work/compose-cdi-config.yaml" "$1"; }
scheduler_image=$(img scheduler) worker_image=$(img worker)
echo "scheduler $scheduler_image, worker $worker_image"
OUT="$work/standin" tests/gpu/standin-image.sh "$worker_image" "$scheduler_image" .whl 2>&1 | tee "$work/standin.log"

step "network probe: a user-defined bridge network and Docker's embedded DNS"
probe_bridge() {  # a container on a new bridge network resolves its own name through the embedded DNS
  docker network rm dask-gpu-probe >/dev/null 2>&1 || true
  docker network create dask-gpu-probe >> "$work/network-probe.log" 2>&1 &&
    docker run --rm --network dask-gpu-probe --name dask-gpu-probe-dns "$worker_image" python3 -c \
      'import socket; print("embedded DNS: dask-gpu-probe-dns ->", socket.gethostbyname("dask-gpu-probe-dns"))' \
      >> "$work/network-probe.log" 2>&1
  local rc=$?
  docker network rm dask-gpu-probe >/dev/null 2>&1 || true
  return $rc
}
want="${NETWORK:-auto}" bridge_ok=false
if [ "$want" != hostnet ]; then
  if probe_bridge; then bridge_ok=true
  elif grep -q '"iptables": true' /etc/docker/daemon.json; then
    # the embedded DNS needs only nat DNAT/SNAT; Docker's own bridge rules need more (MASQUERADE, addrtype...)
    echo "bridge probe failed with iptables true; dockerd restarted with iptables false" | tee -a "$work/iptables-choice.txt"
    cp "$work/dockerd.log" "$work/dockerd-iptables-true.log"
    kill "$(cat /var/run/docker.pid)"; for _ in $(seq 40); do [ -f /var/run/docker.pid ] || break; sleep 0.25; done; sleep 1
    start_dockerd false || { tail -20 "$work/dockerd.log"; exit 1; }
    probe_bridge && bridge_ok=true
  fi
fi
static_ok() {  # the same bridge network, the name from /etc/hosts (--add-host), a port published on 127.0.0.1
  docker network rm dask-gpu-probe >/dev/null 2>&1 || true
  docker network create --subnet 172.31.251.0/24 dask-gpu-probe >> "$work/network-probe.log" 2>&1 &&
    docker run --rm --network dask-gpu-probe --ip 172.31.251.10 --add-host probe-peer:172.31.251.10 -p 127.0.0.1:8799:8799 \
      "$worker_image" python3 -c 'import socket; print("static name: probe-peer ->", socket.gethostbyname("probe-peer"))' \
      >> "$work/network-probe.log" 2>&1
  local rc=$?
  docker network rm dask-gpu-probe >/dev/null 2>&1 || true
  return $rc
}
if [ "$bridge_ok" = true ]; then
  network="compose's own (a bridge network per project, service names from Docker's embedded DNS, as in production)"
  echo "A container on a new bridge network resolved its own name through Docker's embedded DNS ($(grep 'embedded DNS' "$work/network-probe.log")): compose.yaml's network is used as it is." > "$work/network-probe.txt"
elif [ "$want" != hostnet ] && static_ok; then
  network="compose's own bridge network, with STAND-IN name resolution (tests/gpu/compose.standin-staticdns.yaml: scheduler at a fixed address, named in /etc/hosts)"
  overlay=(-f tests/gpu/compose.standin-staticdns.yaml)
  { echo "Docker's embedded DNS failed on this machine ($(grep -m1 -o 'gaierror.*' "$work/network-probe.log"); dockerd: $(grep -m1 -o 'setting up IP table rules failed[^\\"]*' "$work/dockerd.log"));"
    echo "  the kernel has no netfilter NAT ($(cat "$work/iptables-choice.txt" | head -1))."
    echo "  The same bridge network with an /etc/hosts entry and a port published on 127.0.0.1 worked ($(grep 'static name' "$work/network-probe.log")),"
    echo "  so every compose command below adds -f tests/gpu/compose.standin-staticdns.yaml; everything else is compose.yaml's own."; } > "$work/network-probe.txt"
else
  [ "$want" = bridge ] && { cat "$work/network-probe.log"; exit 1; }
  network="STAND-IN (tests/gpu/compose.standin-hostnet.yaml: host network, scheduler -> 127.0.0.1)"
  overlay=(-f tests/gpu/compose.standin-hostnet.yaml)
  echo "The bridge probes failed ($(tail -2 "$work/network-probe.log" | tr '\n' ' ')); every compose command below adds -f tests/gpu/compose.standin-hostnet.yaml." > "$work/network-probe.txt"
  grep -i -E 'resolver|iptables' "$work/dockerd.log" | tail -3 >> "$work/network-probe.txt" || true
fi
cat "$work/network-probe.txt"

cycle() {  # NAME COMPOSE-FILE-ARGS...: up, checks, verification, down; writes $work/NAME/
  local name=$1 d="$work/$1" st rc=0 vrc=0; shift
  local dc=(docker compose "$@" "${overlay[@]}")
  mkdir -p "$d"
  step "cycle $name: ${dc[*]} up -d --wait --wait-timeout $wait_timeout"
  echo "+ ${dc[*]} up -d --wait --wait-timeout $wait_timeout" >> "$d/commands.txt"
  st=$(date +%s.%N)
  "${dc[@]}" up -d --wait --wait-timeout "$wait_timeout" > "$d/up.txt" 2>&1 || rc=$?
  local up_s; up_s=$(elapsed "$st")
  echo "exit $rc after $up_s s" >> "$d/up.txt"
  "${dc[@]}" ps -a > "$d/ps.txt" 2>&1 || true
  "${dc[@]}" logs --no-color > "$d/compose-logs.txt" 2>&1 || true
  if [ "$rc" != 0 ]; then
    echo "up FAILED (exit $rc after $up_s s): $(grep -i -E 'error|fail' "$d/up.txt" | tail -1)" > "$d/result.txt"
    step "cycle $name: up failed: $(grep -i -E 'error|fail' "$d/up.txt" | tail -1)"
    "${dc[@]}" --profile verify down -v --remove-orphans > "$d/down.txt" 2>&1 || true
    return 1
  fi
  step "cycle $name: healthy after $up_s s"
  for s in scheduler worker; do
    docker inspect "dask-gpu-$s-1" > "$d/$s-inspect.json" 2>/dev/null || true
  done
  python3 - "$d" "$up_s" > "$d/health-times.txt" <<'EOF' || true
import datetime, json, pathlib, sys
d = pathlib.Path(sys.argv[1])
def t(s):  # Docker's RFC 3339 with nanoseconds
    s = s.rstrip("Z")
    head, _, frac = s.partition(".")
    return datetime.datetime.fromisoformat(head).replace(tzinfo=datetime.timezone.utc).timestamp() + float("0." + (frac or "0")[:6])
print(f"docker compose up -d --wait returned after {sys.argv[2]} s")
for s in ("scheduler", "worker"):
    p = d / f"{s}-inspect.json"
    if not p.exists():
        continue
    c = json.loads(p.read_text())[0]
    h = c["State"].get("Health") or {}
    ok = [e for e in h.get("Log", []) if e.get("ExitCode") == 0]
    started = t(c["State"]["StartedAt"])
    first = f"{t(ok[0]['Start']) - started:.1f} s after its start" if ok else "no passing check logged"
    print(f"{s}: {h.get('Status')}; first passing health check {first} (HEALTHCHECK interval "
          f"{c['Config'].get('Healthcheck', {}).get('Interval', 0) / 1e9:.0f} s)")
EOF
  python3 - "$d/worker-inspect.json" > "$d/devicerequests.txt" <<'EOF' || true
import json, sys
c = json.load(open(sys.argv[1]))[0]
print("worker HostConfig.DeviceRequests:", json.dumps(c["HostConfig"].get("DeviceRequests")))
print("worker HostConfig.NetworkMode:", c["HostConfig"].get("NetworkMode"), "| ShmSize:", c["HostConfig"].get("ShmSize"),
      "| Ulimits:", json.dumps(c["HostConfig"].get("Ulimits")), "| User:", c["Config"].get("User"))
EOF
  { docker network inspect dask-gpu_default --format 'network {{.Name}}: driver {{.Driver}}, subnet {{range .IPAM.Config}}{{.Subnet}}{{end}}, containers: {{range .Containers}}{{.Name}} {{.IPv4Address}}; {{end}}' 2>/dev/null || echo "no project network (host network)"
    for s in scheduler worker; do echo "$s /etc/hosts: $(docker exec "dask-gpu-$s-1" cat /etc/hosts 2>/dev/null | grep -v -E '^(#|$)|localhost|ip6-' | paste -sd';')"; done
  } >> "$d/devicerequests.txt"
  cat "$d/health-times.txt" "$d/devicerequests.txt"
  echo "+ ${dc[*]} exec -T worker nvidia-smi -L" >> "$d/commands.txt"
  "${dc[@]}" exec -T worker nvidia-smi -L > "$d/nvidia-smi-L.txt" 2>&1 || echo "(exit $?)" >> "$d/nvidia-smi-L.txt"
  echo "+ ${dc[*]} exec -T worker python3 -c '<CuPy device info>'" >> "$d/commands.txt"
  "${dc[@]}" exec -T worker python3 -c '
import os, cupy
r = cupy.cuda.runtime; p = r.getDeviceProperties(0)
x = cupy.arange(10**7, dtype=cupy.float64)
print("uid", os.getuid(), "| CUDA_VISIBLE_DEVICES", os.environ.get("CUDA_VISIBLE_DEVICES"), "| devices", r.getDeviceCount(),
      "|", p["name"].decode(), "| cc", str(p["major"]) + "." + str(p["minor"]), "| memory GiB", round(p["totalGlobalMem"] / 2**30, 1),
      "| driver", r.driverGetVersion(), "| runtime", r.runtimeGetVersion(), "| cupy", cupy.__version__,
      "| sum(arange(1e7)) =", float(x.sum()), "expected", (10**7 - 1) * 10**7 / 2)
' > "$d/cupy.txt" 2>&1 || echo "(exit $?)" >> "$d/cupy.txt"
  cat "$d/nvidia-smi-L.txt" "$d/cupy.txt"
  step "cycle $name: verification (the verify profile's service, as scripts/compose-up.sh runs it)"
  docker rm -f dask-gpu-verify >/dev/null 2>&1 || true
  echo "+ ${dc[*]} run --name dask-gpu-verify verify" >> "$d/commands.txt"
  st=$(date +%s.%N)
  "${dc[@]}" run --name dask-gpu-verify verify > "$d/verify.txt" 2>&1 || vrc=$?
  echo "verify: exit $vrc after $(elapsed "$st") s" >> "$d/verify.txt"
  docker cp dask-gpu-verify:/var/lib/dask-reports/verify.json "$d/verify.json" >/dev/null 2>&1 || echo "no verify.json" >> "$d/verify.txt"
  docker rm -f dask-gpu-verify >/dev/null 2>&1 || true
  tail -6 "$d/verify.txt"
  python3 - > "$d/published.txt" 2>&1 <<'EOF' || true
import json, urllib.request
import socket
for path in ("/health", "/json/counts.json"):
    try:
        body = urllib.request.urlopen("http://127.0.0.1:8787" + path, timeout=3).read().decode()
        print(f"host -> 127.0.0.1:8787{path}: {body.strip()[:200]}")
    except OSError as error:
        print(f"host -> 127.0.0.1:8787{path}: {error}")
try:
    socket.create_connection(("127.0.0.1", 8786), timeout=3).close(); print("host -> 127.0.0.1:8786 (scheduler port): connected")
except OSError as error:
    print(f"host -> 127.0.0.1:8786 (scheduler port): {error}")
EOF
  cat "$d/published.txt"
  "${dc[@]}" ps -a > "$d/ps-after-verify.txt" 2>&1 || true
  "${dc[@]}" logs --no-color > "$d/compose-logs.txt" 2>&1 || true
  step "cycle $name: ${dc[*]} --profile verify down -v --remove-orphans"
  echo "+ ${dc[*]} --profile verify down -v --remove-orphans" >> "$d/commands.txt"
  st=$(date +%s.%N)
  "${dc[@]}" --profile verify down -v --remove-orphans > "$d/down.txt" 2>&1 || rc=$?
  echo "down: exit $rc after $(elapsed "$st") s; containers left: $(docker ps -aq | wc -l)" >> "$d/down.txt"
  if [ "$vrc" = 0 ] && grep -q '^PASS' "$d/verify.txt" && [ "$rc" = 0 ]; then
    echo "PASS (healthy after $up_s s; $(grep -m1 -E '^The workload ran' "$d/verify.txt" || echo 'verify exit 0'))" > "$d/result.txt"
  else
    echo "FAIL (up $up_s s, verify exit $vrc, down exit $rc)" > "$d/result.txt"; return 1
  fi
  step "cycle $name: $(cat "$d/result.txt")"
}

status=0
for c in $cycles; do
  case $c in
    as-asked) cycle as-asked -f compose.yaml -f compose.cdi.yaml || true ;;   # outcome recorded, judged in the summary
    cdi) cycle cdi -f compose.cdi.yaml || status=1 ;;
    fixed)
      # compose.cdi.yaml with its GPU requests tagged !override, so that it also works as an override of compose.yaml
      sed 's/^          devices:$/          devices: !override/' compose.cdi.yaml > "$work/compose.cdi.override-fix.yaml"
      diff -u compose.cdi.yaml "$work/compose.cdi.override-fix.yaml" > "$work/compose.cdi.override-fix.diff" || true
      cycle fixed -f compose.yaml -f "$work/compose.cdi.override-fix.yaml" || status=1 ;;
  esac
done
step "done (status $status)"
exit "$status"
