#!/usr/bin/env bash
# GPU proof of the bundle's CONTAINERS (issue 11), on a lent GPU machine (root, no systemd, no network):
#  1. playbooks/render-commands.yml (tests/gpu/inventory.yml, real GPU facts, dask_worker_gpu_request cdi) writes
#     the units exactly as site.yml installs them; tests/gpu/render-bench.yml adds the benchmark client's spec;
#  2. Docker (Debian trixie's dockerd/containerd/runc/tini, carried in .dockerbin/) starts with CDI enabled, and
#     tests/gpu/cdi-standin.sh, a STAND-IN for `nvidia-ctk cdi generate`, writes /etc/cdi/nvidia.yaml;
#  3. tests/gpu/standin-image.sh builds a STAND-IN image on the machine, tagged with the rendered image names;
#  4. the units' own ExecStartPre/ExecStart/ExecStop lines run, read back from the rendered .service files; the
#     one change: `docker run --rm --name X` in the foreground becomes `docker run --detach --name X` (no
#     systemd to hold it), and the container is removed after ExecStop. Env files, TLS material and data folders
#     sit where the units expect them (/etc/dask, /etc/dask/tls, /var/lib/dask/{worker,reports});
#  5. the verification client (dask-gpu-verify) and the benchmark client (dask-gpu-bench) run as containers
#     from their specs (flags from the spec builder's docker_run_args); the workers' containers are inspected;
#     tests/gpu/gpu_metrics_probe.py reads each worker container's /metrics (its own GPU's series, utilisation
#     under load, memory used against a CuPy allocation, scrape time, the fixed ports 8790+N);
#  6. everything stops through the units' ExecStop lines; dockerd is stopped.
#   OUT=/tmp/out CERTS_DIR=.gpucerts [BENCH=0] [MACHINE=h100-1gpu] [RENDER_EXTRA='{"dask_transport": ...}']
#     [STANDIN_REUSE=1] tests/gpu/gpu-proof-containers.sh
# Carried: .whl/ (dask wheels + ansible-core, resolvelib), .dockerbin/docker-trixie.tar.xz, .gpucerts/.
# $OUT gets at most 8 files: summary.txt, verify.json, bench.json, bench.md, standin.json, logs.tar.xz.
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${OUT:-/tmp/gpu-proof-containers}"; mkdir -p "$out"
work=/var/tmp/gpu-proof-containers; rm -rf "$work"; mkdir -p "$work/rendered"
certs="${CERTS_DIR:-.gpucerts}"
t0=$(date +%s.%N)
elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
step() { printf '[%6s s] %s\n' "$(elapsed "$t0")" "$*" | tee -a "$work/steps.txt"; }
export ANSIBLE_NOCOLOR=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
status=0

finish() {  # always: collect logs, stop what is left, pack the results
  local rc=$?
  set +e
  if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
    for c in dask-verify dask-bench dask-worker dask-scheduler; do
      docker inspect "$c" >/dev/null 2>&1 || continue
      docker logs "$c" > "$work/$c.log" 2>&1
      docker rm -f "$c" >/dev/null 2>&1
    done
    docker ps -a > "$work/docker-ps-end.txt" 2>&1
  fi
  if [ -f /var/run/docker.pid ]; then
    pid=$(cat /var/run/docker.pid); kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -0 "$pid" 2>/dev/null && echo "dockerd still running" >> "$work/steps.txt" || echo "dockerd stopped" >> "$work/steps.txt"
  fi
  [ "$rc" = 0 ] || echo "FAILED (exit $rc) at: $(tail -1 "$work/steps.txt")" | tee -a "$work/steps.txt"
  python3 tests/gpu/container_summary.py "$work" "${MACHINE:-}" "$rc" > "$out/summary.txt" 2> "$work/summary.err" \
    || { echo "summary failed:"; cat "$work/summary.err"; }
  cat "$out/summary.txt" 2>/dev/null
  for f in verify.json bench.json bench.md; do [ -f "$work/$f" ] && cp "$work/$f" "$out/$f"; done
  python3 - "$work" "$out/standin.json" <<'EOF' 2>/dev/null
import json, sys, pathlib
w = pathlib.Path(sys.argv[1]) / "standin"
d = {}
for name in ("standin-closure.json", "standin-files.json"):
    p = w / name
    if p.exists():
        d[name] = json.loads(p.read_text())
p = w / "standin-trace.json"
if p.exists():
    t = json.loads(p.read_text()); t["maps"] = [m for m in t.get("maps", []) if "/opt/dask/" not in m]; d["standin-trace.json"] = t
json.dump(d, open(sys.argv[2], "w"), indent=1)
EOF
  tar -C "$work" --exclude=./dockerbin -cJf "$out/logs.tar.xz" . 2>/dev/null
  exit "$rc"
}
trap finish EXIT

step "GPUs of this machine"
nvidia-smi --query-gpu=index,uuid,name,memory.total,driver_version,compute_cap --format=csv,noheader,nounits \
  | tee "$work/nvidia-smi-query.csv"
nvidia-smi -L > "$work/nvidia-smi-L.txt"
uname -r > "$work/uname.txt"; python3 --version >> "$work/uname.txt"

step "python set-up (carried wheels for ansible-playbook)"
. tests/gpu/python-env.sh

step "render: playbooks/render-commands.yml with dask_worker_gpu_request cdi, tests/gpu/render-bench.yml"
render() {
  ansible-playbook -i tests/gpu/inventory.yml playbooks/render-commands.yml -e "render_dir=$work/rendered" \
    -e '{"dask_worker_gpu_request":"cdi"}' -e "${RENDER_EXTRA:-{\}}" >"$work/render.log" 2>&1
}
if ! render; then
  # The lent machines have no `ip` binary, so Ansible's network facts are empty and the model's check rejects
  # dask_cluster_address 127.0.0.1 ("not an IPv4 address of this host (its addresses: none)"). Without fact
  # gathering the check is skipped (it returns early on empty facts); the rendered files are byte-identical
  # (checked on the controller with the nvidia-smi fixture).
  grep -q "is not an IPv4 address of this host" "$work/render.log" || { tail -40 "$work/render.log"; exit 1; }
  echo "render with gathered facts failed: $(grep -o "dask_cluster_address[^']*" "$work/render.log" | head -1);" \
    "\`command -v ip\`: '$(command -v ip || true)'; rendered again with ANSIBLE_GATHERING=explicit" | tee "$work/render-note.txt"
  export ANSIBLE_GATHERING=explicit
  render || { tail -40 "$work/render.log"; exit 1; }
fi
ansible-playbook -i tests/gpu/inventory.yml tests/gpu/render-bench.yml -e "render_dir=$work/rendered" \
  -e '{"dask_worker_gpu_request":"cdi"}' -e "${RENDER_EXTRA:-{\}}" >"$work/render-bench.log" 2>&1 \
  || { tail -40 "$work/render-bench.log"; exit 1; }
r="$work/rendered/gpu-box-dask"
ls "$work/rendered"
spec() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }
scheduler_image=$(spec "$r-scheduler.json" image) worker_image=$(spec "$r-worker.json" image)
workers=$(python3 tests/gpu/spec_value.py "$r-verify.json" arg --expect-workers)
echo "scheduler image $scheduler_image, worker image $worker_image, expected workers $workers"

step "Docker (Debian trixie binaries from .dockerbin/) with CDI; /etc/cdi/nvidia.yaml from the nvidia-ctk STAND-IN"
mkdir -p "$work/dockerbin" && tar -C "$work/dockerbin" -xJf .dockerbin/docker-trixie.tar.xz
cat "$work/dockerbin/VERSIONS"
b="$work/dockerbin/bin"
install -m 0755 "$b/docker" "$b/containerd" "$b/containerd-shim-runc-v2" "$b/docker-init" /usr/bin/
install -m 0755 "$b/dockerd" "$b/runc" /usr/sbin/
mkdir -p /etc/docker /etc/cdi
# userland-proxy off: docker-proxy is not carried (no published ports: every container uses the host network)
echo '{"features": {"cdi": true}, "cdi-spec-dirs": ["/etc/cdi"], "iptables": false, "ip6tables": false,' \
  '"bridge": "none", "userland-proxy": false}' > /etc/docker/daemon.json
tests/gpu/cdi-standin.sh > /etc/cdi/nvidia.yaml
cp /etc/cdi/nvidia.yaml "$work/cdi-standin-nvidia.yaml"
setsid /usr/sbin/dockerd --config-file /etc/docker/daemon.json > "$work/dockerd.log" 2>&1 < /dev/null &
for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 0.5; done
docker info >/dev/null 2>&1 || { tail -20 "$work/dockerd.log"; exit 1; }
docker version --format 'docker client {{.Client.Version}}, server {{.Server.Version}}' | tee "$work/docker-version.txt"
docker info --format 'storage {{.Driver}}, cgroup {{.CgroupDriver}} v{{.CgroupVersion}}, CDI spec dirs {{.CDISpecDirs}}' \
  | tee -a "$work/docker-version.txt" || true

step "STAND-IN images (tests/gpu/standin-image.sh), tagged $worker_image and $scheduler_image"
# numba and numba-cuda (distributed's CuPy host-frame deserializer, in the lean profile) come from the machine;
# STANDIN_EXTRA_ROOTS adds more.
export STANDIN_EXTRA_ROOTS="${STANDIN_EXTRA_ROOTS:-}"
echo "${STANDIN_EXTRA_ROOTS:-none}" > "$work/standin-extra-roots.txt"
if [ "${STANDIN_REUSE:-0}" = 1 ] && docker image inspect "$worker_image" "$scheduler_image" >/dev/null 2>&1; then
  echo "STANDIN_REUSE=1: the stand-in images of an earlier run on this machine are used again" | tee "$work/standin.log"
else
  OUT="$work/standin" tests/gpu/standin-image.sh "$worker_image" "$scheduler_image" .whl 2>&1 | tee "$work/standin.log"
fi
docker run --rm --device nvidia.com/gpu=all --user 10001:10001 "$worker_image" \
  python3 -c 'import cupy; print("smoke test in the stand-in worker image:", cupy.cuda.runtime.getDeviceCount(), "GPU(s),", float(cupy.arange(10).sum()))'

step "host files where the units expect them: env files, TLS material (owned by 10001), data folders"
envfile() { python3 - "$1" <<'EOF'
import shlex, subprocess, sys
argv = shlex.split(subprocess.run([sys.executable, "tests/gpu/unit_command.py", "line", sys.argv[1], "ExecStart"],
                                  capture_output=True, text=True, check=True).stdout)
print(argv[argv.index("--env-file") + 1])
EOF
}
for name in scheduler worker; do install -D -m 0644 "$r-$name.env" "$(envfile "$r-$name.service")"; done
install -d -o root -g 10001 -m 0750 /etc/dask/tls
install -o 10001 -g 10001 -m 0644 "$certs/ca.crt" /etc/dask/tls/ca.crt
install -o 10001 -g 10001 -m 0644 "$certs/gpu-box.crt" /etc/dask/tls/host.crt
install -o 10001 -g 10001 -m 0600 "$certs/gpu-box.key" /etc/dask/tls/host.key
install -d -m 0755 /var/lib/dask
install -d -o 10001 -g 10001 -m 0750 /var/lib/dask/worker /var/lib/dask/reports
ls -ln /etc/dask /etc/dask/tls /var/lib/dask > "$work/host-files.txt"

run_unit() {  # ExecStartPre, then ExecStart detached, as the unit's own lines
  local unit=$1 line
  line=$(python3 tests/gpu/unit_command.py line "$unit" ExecStartPre); echo "+ $line" >> "$work/commands.txt"
  eval "$line" >/dev/null 2>&1 || true   # "-" prefix in the unit: failure ignored
  line=$(python3 tests/gpu/unit_command.py detached "$unit"); echo "+ $line" | tee -a "$work/commands.txt"
  eval "$line" > /dev/null
}
step "scheduler container: the unit's command line"
run_unit "$r-scheduler.service"
for _ in $(seq 120); do
  python3 -c 'import urllib.request as u; u.urlopen("http://127.0.0.1:8787/health", timeout=1)' 2>/dev/null && break
  [ "$(docker inspect -f '{{.State.Running}}' dask-scheduler)" = true ] || { docker logs dask-scheduler 2>&1 | tail -30; exit 1; }
  sleep 0.5
done
step "scheduler answers /health"

step "worker container: the unit's command line (--device nvidia.com/gpu=all through CDI)"
started=$(date +%s.%N)
run_unit "$r-worker.service"
python3 tests/gpu/wait_workers.py "$workers" "$started" | tee "$work/registration.txt" \
  || { docker logs dask-worker 2>&1 | tail -40; exit 1; }

step "containers inspected: flags, user, capabilities, GPUs inside the worker container"
for c in dask-scheduler dask-worker; do docker inspect "$c" > "$work/$c-inspect.json"; done
docker exec dask-worker id > "$work/worker-id.txt" 2>&1
docker exec dask-worker nvidia-smi -L > "$work/worker-nvidia-smi-L.txt" 2>&1
docker exec dask-scheduler id > "$work/scheduler-id.txt" 2>&1
for c in dask-scheduler dask-worker; do
  docker exec -i "$c" python3 - > "$work/$c-proc.txt" 2>&1 <<'EOF' || true
import os, resource
status = dict(line.split(":", 1) for line in open("/proc/1/status") if ":" in line)
print("pid1:", open("/proc/1/cmdline").read().replace("\0", " ").strip())
for key in ("Uid", "Gid", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp"):
    print(f"{key}: {status[key].split()}")
print("memlock (soft, hard):", resource.getrlimit(resource.RLIMIT_MEMLOCK), "stack:", resource.getrlimit(resource.RLIMIT_STACK))
st = os.statvfs("/dev/shm"); print("/dev/shm bytes:", st.f_blocks * st.f_frsize)
try:
    open("/standin-write-test", "w").close(); os.remove("/standin-write-test"); print("root filesystem: writable")
except OSError as error:
    print("root filesystem: not writable:", error.strerror)
print("CUDA devices node(s):", sorted(d for d in os.listdir("/dev") if d.startswith("nvidia")))
EOF
done
docker exec -e DASK_HEALTH_URL=http://127.0.0.1:8787/health dask-scheduler dask-gpu-healthcheck \
  && echo "scheduler: dask-gpu-healthcheck ok" > "$work/healthchecks.txt" || echo "scheduler: dask-gpu-healthcheck FAILED" > "$work/healthchecks.txt"
docker exec dask-worker dask-gpu-healthcheck \
  && echo "worker: dask-gpu-healthcheck ok" >> "$work/healthchecks.txt" || echo "worker: dask-gpu-healthcheck FAILED" >> "$work/healthchecks.txt"
docker top dask-worker -eo pid,args > "$work/worker-top.txt"
nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory --format=csv,noheader > "$work/compute-apps.csv" 2>&1 || true

step "verification client container (dask-gpu-verify, the verify spec as rendered: a GPU only when the images carry cuDF)"
line=$(python3 tests/gpu/unit_command.py client "$r-verify.json"); echo "+ $line" | tee -a "$work/commands.txt"
rm -f /var/lib/dask/reports/verify-latest.json
vt=$(date +%s.%N); vrc=0
eval "$line" > "$work/verify.txt" 2>&1 || { vrc=$?; status=1; }
echo "verify container: exit $vrc after $(elapsed "$vt") s" >> "$work/verify.txt"
tail -12 "$work/verify.txt"
cp /var/lib/dask/reports/verify-latest.json "$work/verify.json" || { echo "no verification report"; status=1; }
nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory --format=csv,noheader > "$work/compute-apps.csv" 2>&1 || true
docker top dask-worker -eo pid,args > "$work/worker-top.txt"

step "gather probe from the host through the client address (persisted CuPy arrays gathered by the scheduler)"
(
  eval "$(python3 tests/gpu/spec_value.py "$r-verify.json" exports)"
  address=$(python3 tests/gpu/spec_value.py "$r-verify.json" arg --scheduler)
  probe=(); [ "$(python3 tests/gpu/spec_value.py "$r-scheduler.json" arg --protocol)" = tls,ucx ] && probe=(--without-preload)
  python3 tests/gpu/gather_probe.py "$address" "${probe[@]}"
) > "$work/gather.txt" 2>&1 || { echo "gather probe FAILED"; status=1; }
grep -E '^(PASS|FAIL|pass|fail)' "$work/gather.txt" || tail -5 "$work/gather.txt"

step "GPU series in each worker container's /metrics (tests/gpu/gpu_metrics_probe.py from the host)"
(
  eval "$(python3 tests/gpu/spec_value.py "$r-verify.json" exports)"
  address=$(python3 tests/gpu/spec_value.py "$r-verify.json" arg --scheduler)
  # GPU worker N serves HTTP on the fixed port dask_worker_http_port + N (the worker_ports nanny preload)
  first=$(python3 tests/gpu/spec_value.py "$r-worker.json" arg --dashboard-address | sed 's/.*://')
  python3 tests/gpu/gpu_metrics_probe.py "$address" --first-port "$first"
) > "$work/gpu-metrics.txt" 2>&1 || { echo "GPU metrics probe FAILED"; status=1; }
grep -E '^(PASS|FAIL)' "$work/gpu-metrics.txt" || tail -5 "$work/gpu-metrics.txt"

if [ "${BENCH:-1}" = 1 ]; then
  step "benchmark client container (dask-gpu-bench, the bench spec, GPUs through CDI)"
  line=$(python3 tests/gpu/unit_command.py client "$r-bench.json"); echo "+ $line" | tee -a "$work/commands.txt"
  bt=$(date +%s.%N)
  eval "$line" > "$work/bench.txt" 2>&1 || { tail -20 "$work/bench.txt"; status=1; }
  echo "bench container wall seconds: $(elapsed "$bt")" >> "$work/bench.txt"
  base=$(python3 tests/gpu/spec_value.py "$r-bench.json" arg --out); base=/var/lib/dask/reports/$(basename "$base")
  cp "$base.json" "$work/bench.json" && cp "$base.md" "$work/bench.md" || { echo "no benchmark report"; status=1; }
fi

for c in dask-scheduler dask-worker; do  # the images' HEALTHCHECK (images/Dockerfile), as Docker ran it
  docker inspect -f '{{if .State.Health}}{{.State.Health.Status}} (failing streak {{.State.Health.FailingStreak}}, {{len .State.Health.Log}} checks logged, up since {{.State.StartedAt}}){{else}}no healthcheck{{end}}' "$c" > "$work/$c-health.txt"
done
step "stop: the units' ExecStop lines, worker first"
for name in worker scheduler; do
  line=$(python3 tests/gpu/unit_command.py line "$r-$name.service" ExecStop); echo "+ $line" | tee -a "$work/commands.txt"
  st=$(date +%s.%N); eval "$line" > /dev/null
  echo "dask-$name: stopped in $(elapsed "$st") s, exit code $(docker inspect -f '{{.State.ExitCode}}' "dask-$name")" | tee -a "$work/stop.txt"
  docker logs "dask-$name" > "$work/dask-$name.log" 2>&1; docker rm "dask-$name" > /dev/null
done
docker ps -a --format '{{.Names}}' > "$work/left-running.txt"
step "done (status $status)"
exit "$status"
