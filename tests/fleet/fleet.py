"""Fleet benchmark: N light sandbox hosts on this machine, each step of a cluster's life timed as a user runs it.

    tests/fleet/fleet.py --hosts 3,10,20 [--steps check,converge,rerun,fastrerun,roll,verify,teardown]
                         [--out reports/fleet] [--connection ssh|docker]

Each host is a systemd container from the sandbox's host image (molecule/default/Dockerfile.host, with sshd; built
by scripts/sandbox.sh) with its own Docker Engine, which site.yml installs as on a fresh server, reached over SSH
(a key made for the run) as servers and the sandbox's hosts are, or with docker exec (whose docker CLI calls cost
the controller more per task); one host is the scheduler, the
others CPU workers. The images use the `cpu` profile (Dask without CUDA libraries, 338 MB) and
reach the hosts through the cluster registry: the point is the orchestration, not the image. For each N the
steps run in order, and each is timed three ways: wall seconds, the controller's CPU seconds (ansible-playbook and
every process it forked), and the whole machine's CPU seconds (/proc/stat), whose rest is the hosts' own work (their
systemd, Docker, apt, containers) with whatever else ran. Rows go to OUT/fleet.jsonl as they finish;
tests/fleet/report.py fits them and projects 100 and 1,000 hosts, also for hosts on machines of their own. Not part
of CI (CI keeps tests/fleet/test_fleet_guard.py, the model part at 1,000 hosts). The hosts are removed after each N
unless --keep.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
NETWORK, SUBNET, PREFIX = "dask-fleet", "10.232.0.0/16", "10.232"
HOST_IMAGE = "dask-sandbox-host:bookworm"
STEPS = ("check", "converge", "rerun", "fastrerun", "roll", "verify", "teardown")
PLAYBOOK = {"check": ["playbooks/check.yml"], "converge": ["site.yml"],
            # Every task of the rerun runs (the fast rerun is the default, and the step after this one).
            "rerun": ["site.yml", "-e", "dask_fast_rerun=false"],
            # The rerun as it runs by default: the fast rerun (the rerun before it recorded every host).
            "fastrerun": ["site.yml"],
            # A worker setting changes on every worker host: the rolling restart retires and restarts them in batches.
            "roll": ["site.yml", "-e", "dask_worker_death_timeout=91"],
            "verify": ["playbooks/verify.yml"], "teardown": ["playbooks/teardown.yml"]}


def names(count: int) -> list[str]:
    return ["fleet-sched"] + [f"fleet-w{index:03d}" for index in range(1, count)]


def address(index: int) -> str:
    return f"{PREFIX}.{index // 250}.{index % 250 + 2}"


def docker(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *argv], capture_output=True, text=True, check=check)


def create(hosts: list[str], connection: str, key: Path) -> None:
    """The host containers, as molecule makes the sandbox's (molecule/default/molecule.yml); for ssh, with sshd and
    the run's public key."""
    if docker("network", "inspect", NETWORK, check=False).returncode != 0:
        docker("network", "create", "--subnet", SUBNET, NETWORK)
    # Built each time (from Docker's cache when nothing changed): an image left by an older checkout may lack sshd.
    subprocess.run(["bash", str(ROOT / "scripts" / "sandbox.sh"), "host-image"], check=True)
    if connection == "ssh" and not key.exists():
        key.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    for index, host in enumerate(hosts):
        docker("run", "-d", "--name", host, "--hostname", host, "--network", NETWORK, "--ip", address(index),
               "--cap-add", "SYS_ADMIN", "--cap-add", "NET_ADMIN", "--security-opt", "seccomp=unconfined",
               "--security-opt", "apparmor=unconfined", "--cgroupns", "host", "--tmpfs", "/run",
               "--tmpfs", "/run/lock", "--tmpfs", "/tmp", "-v", "/sys/fs/cgroup:/sys/fs/cgroup:rw",
               "-v", "/var/lib/docker", HOST_IMAGE, "/sbin/init")
        if connection == "ssh":
            subprocess.run(["docker", "exec", "-i", host, "sh", "-c", "cat > /root/.ssh/authorized_keys && "
                            "chmod 0600 /root/.ssh/authorized_keys"], input=key.with_suffix(".pub").read_text(),
                           text=True, check=True, capture_output=True)


def wait_for_sshd(hosts: list[str], seconds: float = 180) -> None:
    """Every host's sshd accepts connections (a loaded machine starts the last ones late)."""
    deadline = time.monotonic() + seconds
    for index, host in enumerate(hosts):
        while True:
            try:
                socket.create_connection((address(index), 22), timeout=2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    message = f"{host}: sshd does not answer on {address(index)}:22 after {seconds:.0f} s"
                    raise SystemExit(message) from None
                time.sleep(1)


def destroy(hosts: list[str]) -> None:
    for host in hosts:
        docker("rm", "-f", "-v", host, check=False)


def inventory(hosts: list[str], out: Path, connection: str, key: Path) -> Path:
    """The fleet's inventory: what a user of a CPU fleet would write, plus the sandbox's container limits."""
    reach: dict[str, Any] = {"ansible_connection": "community.docker.docker"}
    if connection == "ssh":
        reach = {"ansible_connection": "ssh", "ansible_user": "root", "ansible_ssh_private_key_file": str(key),
                 "ansible_ssh_common_args": "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null"}
    data = {"all": {
        "vars": {**reach, "dask_images_build_host": "localhost",
                 "dask_image_profile": "cpu", "dask_images_distribution": "cluster-registry",
                 "dask_controller_dir": str(out / "artifacts"), "dask_notebook_enabled": False,
                 # Host containers cannot raise their open-files limit above the machine's (see molecule.yml).
                 "dask_container_nofile": 16384, "dask_worker_nthreads": 1, "dask_worker_rolling_batch": "25%",
                 "docker_engine_daemon_config": {"storage-driver": "overlay2"}},
        "children": {"dask_scheduler": {"hosts": {hosts[0]: {"ansible_host": address(0)}}},
                     "dask_cpu_workers": {"hosts": {host: {"ansible_host": address(index)}
                                                    for index, host in enumerate(hosts) if index}}}}}
    out.mkdir(parents=True, exist_ok=True)
    path = out / "hosts.yml"
    path.write_text(yaml.safe_dump(data, sort_keys=False, explicit_start=True))
    return path


def controller_cpu() -> float:
    usage = os.times()
    return usage.children_user + usage.children_system


def machine_cpu(stat: Path = Path("/proc/stat")) -> float:
    """CPU seconds the whole machine has spent busy since it started: the first line of /proc/stat (user, nice,
    system, irq, softirq and steal; idle and iowait are not busy; guest time is already inside user)."""
    fields = stat.read_text().splitlines()[0].split()
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(value) for value in fields[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def run_step(step: str, inv: Path, out: Path) -> dict[str, Any]:
    env = {**os.environ, "ANSIBLE_PIPELINING": "true", "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
           "ANSIBLE_CALLBACKS_ENABLED": "ansible.posix.profile_tasks", "ANSIBLE_NOCOLOR": "1"}
    cpu, machine, started = controller_cpu(), machine_cpu(), time.monotonic()
    run = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inv), *PLAYBOOK[step]],
                         cwd=ROOT, capture_output=True, text=True, env=env, check=False)
    wall, cpu, machine = time.monotonic() - started, controller_cpu() - cpu, machine_cpu() - machine
    (out / f"{step}.log").write_text(run.stdout + run.stderr)
    recap = re.findall(r"^(\S+)\s+: ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", run.stdout, re.M)
    tasks = len(re.findall(r"^TASK \[", run.stdout, re.M))
    cores = os.cpu_count() or 1
    return {"step": step, "rc": run.returncode, "wall_s": round(wall, 1), "controller_cpu_s": round(cpu, 1),
            "machine_cpu_s": round(machine, 1), "hosts_cpu_s": round(max(machine - cpu, 0.0), 1), "cores": cores,
            # How busy the machine's cores were: near 1, the step waited for CPU, and the hosts' work took it.
            "busy": round(machine / (wall * cores), 2) if wall > 0 else 0.0,
            "tasks": tasks, "changed": sum(int(row[2]) for row in recap),
            "failed": sum(int(row[3]) + int(row[4]) for row in recap)}


def bench(count: int, steps: list[str], out: Path, keep: bool, connection: str) -> list[dict[str, Any]]:
    hosts = names(count)
    destroy(hosts)
    started = time.monotonic()
    key = out / "ssh" / "id_ed25519"
    create(hosts, connection, key)
    if connection == "ssh":
        wait_for_sshd(hosts)
    print(f"[fleet] N={count}: {count} hosts started ({connection}) in {time.monotonic() - started:.1f} s", flush=True)
    inv = inventory(hosts, out / f"n{count}", connection, key)
    rows = []
    try:
        for step in steps:
            row = {"hosts": count, "connection": connection, **run_step(step, inv, out / f"n{count}")}
            row["controller_cpu_per_host_s"] = round(row["controller_cpu_s"] / count, 3)
            rows.append(row)
            with (out / "fleet.jsonl").open("a") as sink:
                sink.write(json.dumps(row) + "\n")
            print("[fleet] " + " | ".join(f"{key} {value}" for key, value in row.items()), flush=True)
            if row["rc"] != 0:
                print(f"[fleet] N={count}: {step} failed (log: {out / f'n{count}' / f'{step}.log'}); next N",
                      flush=True)
                break
    finally:
        if not keep:
            destroy(hosts)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", default="3,10", help="host counts, comma-separated (scheduler included)")
    parser.add_argument("--steps", default=",".join(STEPS), help=f"steps in order, from {', '.join(STEPS)}")
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "fleet")
    parser.add_argument("--keep", action="store_true", help="leave the last N's hosts running")
    parser.add_argument("--connection", choices=("ssh", "docker"), default="ssh",
                        help="how Ansible reaches the hosts: ssh (sshd in each host, as on servers) or docker exec")
    args = parser.parse_args(argv)
    steps = [step for step in args.steps.split(",") if step]
    unknown = sorted(set(steps) - set(STEPS))
    if unknown:
        parser.error(f"--steps: unknown {', '.join(unknown)}; known: {', '.join(STEPS)}")
    counts = [int(value) for value in args.hosts.split(",")]
    if any(count < 2 for count in counts):
        parser.error("--hosts: each count needs a scheduler and at least one worker (2 or more)")
    args.out = args.out.resolve()  # the controller folder must be absolute (check.yml refuses a relative one)
    args.out.mkdir(parents=True, exist_ok=True)
    failed = False
    for count in counts:
        rows = bench(count, steps, args.out, args.keep and count == counts[-1], args.connection)
        failed |= any(row["rc"] != 0 for row in rows)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
