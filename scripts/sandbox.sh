#!/usr/bin/env bash
# The multi-host sandbox: three systemd "hosts" in containers, deployed with the real site.yml.
#   scripts/sandbox.sh up      create the hosts, converge with site.yml, run playbooks/verify.yml, show how to connect
#   scripts/sandbox.sh test    the full molecule sequence: create, converge, idempotence, verify, destroy
#   scripts/sandbox.sh down    remove the hosts and their network
#   scripts/sandbox.sh host-image  build only the hosts' images, dask-sandbox-host:bookworm (bare: tests/fleet/fleet.py
#                  uses it) and dask-sandbox-host:bookworm-packages
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
action="${1:-up}"
export PATH="$root/.venv/bin:$PATH"
export ANSIBLE_FORCE_COLOR=0 PY_COLORS=0 NO_COLOR=1

host_image() {
  . scripts/dotenv.sh
  bash scripts/base-images.sh
  # bare (dask-w2, the fleet's hosts) and packages (dask-sched, dask-w1: Docker Engine and monitoring preinstalled)
  docker build -q -t dask-sandbox-host:bookworm --target bare --build-arg "BASE_IMAGE=$BASE_IMAGE" \
    -f molecule/default/Dockerfile.host molecule/default >/dev/null
  docker build -q -t dask-sandbox-host:bookworm-packages --target packages --build-arg "BASE_IMAGE=$BASE_IMAGE" \
    -f molecule/default/Dockerfile.host molecule/default >/dev/null
}

# The sandbox's SSH key: molecule.yml mounts its public half as root's authorized_keys on each host, and Ansible logs in
# with it (as it does on servers). Made once per checkout, kept in .cache/ (not committed).
ssh_key() {
  local key=.cache/sandbox/ssh/id_ed25519
  if [ ! -s "$key" ] || [ ! -s "$key.pub" ]; then
    mkdir -p "$(dirname "$key")" && chmod 0700 "$(dirname "$key")"
    rm -f "$key" "$key.pub"
    ssh-keygen -q -t ed25519 -N '' -C dask-sandbox -f "$key"
  fi
}

prepare() {
  bash scripts/setup-venv.sh
  bash scripts/setup-docker.sh
  local missing=()
  command -v rsync >/dev/null || missing+=(rsync)
  command -v ssh >/dev/null && command -v ssh-keygen >/dev/null || missing+=(openssh-client)
  if [ "${#missing[@]}" -gt 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
  ssh_key
  host_image
}

case "$action" in
  up)
    prepare
    started=$(date +%s)
    molecule create
    molecule converge
    echo "[sandbox] converged in $(( $(date +%s) - started )) s"
    molecule verify
    # shellcheck disable=SC2012 # the newest first; molecule names its folders molecule.XXXX.default
    bundle="$(ls -t "$HOME"/.ansible/tmp/molecule.*.default/artifacts/client/env.sh 2>/dev/null | head -1 || true)"
    # shellcheck disable=SC2012 # as above
    inventory="$(ls -td "$HOME"/.ansible/tmp/molecule.*.default 2>/dev/null | head -1 || true)/inventory"
    address() { docker exec "$1" sh -c "ip -4 -o addr show eth0 | awk '{print \$4}' | cut -d/ -f1"; }
    cat <<MSG

Sandbox cluster is up and verified: hosts dask-sched, dask-w1, dask-w2 (docker ps).
  ssh:        ssh -i .cache/sandbox/ssh/id_ed25519 -o StrictHostKeyChecking=no root@$(address dask-sched)  (as Ansible
              reaches the hosts; the workers: $(address dask-w1), $(address dask-w2))
  scheduler:  tls://$(address dask-sched):8786
  dashboard:  docker exec dask-sched python3 -c 'import urllib.request as u; print(u.urlopen("http://127.0.0.1:8787/json/counts.json").read())'
  client:     source ${bundle:-<molecule ephemeral dir>/artifacts/client/env.sh}  (TLS client bundle; from this machine
              the scheduler is reachable on the sandbox network)
  notebook:   JupyterLab on dask-sched 127.0.0.1:8888, token in $(dirname "$(dirname "${bundle:-x/x/x}")")/notebook/token
              (docs/notebook.md). On real hosts: ssh -L 8888:127.0.0.1:8888 SCHEDULER_HOST, open http://127.0.0.1:8888/lab;
              here the sandbox host is a container: nsenter --net=/proc/\$(docker inspect -f '{{.State.Pid}}' dask-sched)/ns/net
              chromium --headless=new --no-sandbox --screenshot http://127.0.0.1:8888/lab   (or a browser run the same way)
  jobs:       ansible-playbook -i $inventory playbooks/job.yml -e dask_job_script=my_script.py  (docs/jobs.md)
  autoscale:  off (docs/autoscale.md); to turn it on and watch an idle host go and come back:
              ansible-playbook -i $inventory site.yml -e dask_autoscale_enabled=true -e dask_autoscale_idle=30 -e dask_autoscale_cooldown=10
              then journalctl -u dask-autoscaler on dask-sched: the first release comes the idle time plus the cooldown
              after the run (40 s with these; the cooldown is 120 s by default); a run without the -e turns it off again.
              Each worker on its own (by GPU): add -e dask_autoscale_by=gpu; the released worker's process stops
              in its running container (cat /var/lib/dask/worker-slots/released.json on a worker host).
              Two clusters taking turns on the hosts: docs/autoscale.md, "Two clusters taking turns on the same
              GPUs", has the two commands for this sandbox
  stop:       make down
MSG
    ;;
  test)
    prepare
    # From a clean slate: an earlier sandbox (`make up`) is removed with its controller artifacts (CA, reports,
    # markers), which a later run would read (molecule's destroy prunes its folder too, but for molecule.yml's
    # safe_files). Only this sandbox's folders (their inventory names its hosts): another project's scenario is left.
    # The images' archives with their markers (which name the images and their IDs) stay, the two newest (the lean and
    # the CPU profile's): a converge that wants the same images copies the archive without exporting it again
    # (docs/ci-time.md). An archive without its marker would be exported again anyway: it goes.
    molecule destroy
    for dir in "$HOME"/.ansible/tmp/molecule.*.default; do
      if grep -qs 'dask-sched:' "$dir/inventory/ansible_inventory.yml"; then
        kept=()
        for archive in "$dir"/artifacts/images/dask-gpu-*.tar; do
          if [ -f "$archive" ] && [ -f "$archive.done" ]; then kept+=("$archive"); fi
        done
        keep="$(mktemp -d "$dir/kept.XXXX")"
        if [ "${#kept[@]}" -gt 0 ]; then
          # shellcheck disable=SC2012 # the newest first; the names are dask-gpu-TAG.tar, no newline in them
          ls -t -- "${kept[@]}" | head -2 | while read -r archive; do mv "$archive" "$archive.done" "$keep/"; done
        fi
        rm -rf "$dir/artifacts" "$dir/archive-redeployed"
        mkdir -p "$dir/artifacts/images"
        find "$keep" -mindepth 1 -maxdepth 1 -exec mv -t "$dir/artifacts/images/" {} +
        rmdir "$keep"
      fi
    done
    molecule test
    ;;
  down)
    molecule destroy
    ;;
  host-image)
    host_image
    ;;
  *) echo "usage: $0 up|test|down|host-image" >&2; exit 2 ;;
esac
