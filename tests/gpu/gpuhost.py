"""The `gpuhost` proof of tests/gpu/proofs.py (issue 65): a GPU host of our own on a lent GPU machine, deployed and
run by the bundle's own playbooks as a user runs them.

The host: the sandbox's host image on Debian trixie (tests/gpu/gpuhost-carry.sh: molecule/default/Dockerfile.host's
`packages` target, so systemd as PID 1, sshd, Docker Engine 26 from Debian, node exporter, Prometheus; plus nftables),
carried in parts and started under a Docker of the machine (the same image's own dockerd, containerd and runc) as a
privileged container: the GPU's device nodes come with privileged mode, the driver's libraries and nvidia-smi are
bind-mounted read-only from the machine's /usr/local/nvidia and found through ld.so.conf and /usr/bin as a driver
install places them, its own /var/lib/docker is a folder of the machine's disk. Ansible runs on the machine as the
controller (the carried ansible-core and collections) and reaches the host over SSH as root with a key of its own.

The inventory is a user's with an offline, vendor-installed GPU host: one host, scheduler and GPU worker
(inventory/single-gpu's layout); Docker already installed (docker_engine_source: none), the toolkit already installed
(nvidia_container_toolkit_source: installed), CDI devices (dask_worker_gpu_request: cdi), the user's own image
(dask_images_worker_image) distributed as an archive from the controller.

STAND-INs, named in every output: the image (tests/gpu/standin-image.sh: the machine's Python and CuPy with the
carried Dask wheels, built with images/Dockerfile's stages: the 2.5 GB image cannot travel) and the toolkit's binary
(tests/gpu/nvidia-ctk-standin.sh, which writes tests/gpu/cdi-standin.sh's spec, as /usr/bin/nvidia-ctk: NVIDIA's
packages cannot be had there). Everything else is the bundle's own, run for real: systemd, Docker, the units, TLS,
the firewall, the GPU health gate on the real GPU, the playbooks.

State lives in /var/tmp/gpuhost between calls while the machine stays warm, so the steps can be spread over calls:
`host` makes the host (once), each later step acts on it. `--cpu` rehearses the same steps on a machine without a GPU
(the build and CI machines: named capabilities instead of privileged mode, CPU workers, no toolkit).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from carried import sha256  # tests/gpu/carried.py: the one checksum of carried files

ROOT = Path(__file__).resolve().parents[2]
WORK = Path("/var/tmp/gpuhost")
CARRY = ROOT / ".gpuhost"
SUMS = ROOT / "tests" / "gpu" / "results" / "gpuhost" / "carry.sha256"
NAME = "dask-gpu-host"  # the container, its host name and the inventory's host
IMAGE = "dask-gpu-host:trixie"
# The user's own image, tagged RELEASE-cudaMAJOR-PROFILE-... as standin-image.sh reads it; it serves the scheduler too.
OWN_IMAGE = "dask-gpu-own/worker:26.10-cuda13-lean-standin"
STANDIN_LABEL = "io.dask-gpu.standin"
DOCKER_BINARIES = ("dockerd", "docker", "containerd", "containerd-shim-runc-v2", "runc", "docker-init", "docker-proxy")
# The tasks whose share of site.yml the note names: the GPU health gate (NVML read and judged on the host) and the wait
# for every worker to register.
HEALTH_TASK = "GPUs' health is read through NVML and judged"
READY_TASK = "Every expected worker has registered with the scheduler"


def sh(*argv: str, timeout: float = 120, check: bool = True, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False, **kwargs)
    if check and done.returncode:
        raise RuntimeError(f"{' '.join(argv)[:300]}: exit {done.returncode}: {(done.stderr or done.stdout)[-1200:]}")
    return done


def on_host(*argv: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess[str]:
    return sh("docker", "exec", NAME, *argv, timeout=timeout, check=check)


def nvml() -> dict[str, Any]:
    """The machine's GPU as NVML sees it from outside the host: memory in use and the compute processes."""
    if shutil.which("nvidia-smi") is None:
        return {"gpu": False}
    memory = sh("nvidia-smi", "--query-gpu=memory.used,memory.total", "--format=csv,noheader,nounits").stdout.split(",")
    apps = sh("nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits").stdout.split("\n")
    return {"used_mib": int(memory[0]), "total_mib": int(memory[1]),
            "processes": [app.strip() for app in apps if app.strip()]}


# ---- the carry ----------------------------------------------------------------------------------------------------
def carried_parts() -> Path:
    """The carry put together from this call's parts and earlier calls' (WORK/parts), checked against SUMS, unpacked
    once to WORK/carry (rootfs.tar and controller/); the folder."""
    parts = WORK / "parts"
    parts.mkdir(parents=True, exist_ok=True)
    for part in CARRY.glob("p*/part-*"):
        shutil.copyfile(part, parts / part.name)
    wanted = {name: digest for digest, name in (line.split() for line in SUMS.read_text().splitlines() if line.strip())}
    bad = [name for name, digest in wanted.items() if name.startswith("p")
           and not ((parts / Path(name).name).exists() and sha256(parts / Path(name).name) == digest)]
    if bad:
        raise RuntimeError(f"carry incomplete or not as {SUMS.name} says: {', '.join(bad)} (carry each .gpuhost/pN in "
                           "its own call first, tests/gpu/README.md)")
    unpacked = WORK / "carry"
    stamp = unpacked / ".sha256"
    if stamp.exists() and stamp.read_text() == wanted["carry.tar.xz"]:
        return unpacked
    joined = WORK / "carry.tar.xz"
    with joined.open("wb") as sink:
        for name in sorted(n for n in wanted if n.startswith("p")):
            sink.write((parts / Path(name).name).read_bytes())
    if sha256(joined) != wanted["carry.tar.xz"]:
        raise RuntimeError("the joined parts are not carry.tar.xz as carry.sha256 says")
    shutil.rmtree(unpacked, ignore_errors=True)
    unpacked.mkdir(parents=True)
    sh("tar", "-C", str(unpacked), "-xJf", str(joined), timeout=300)
    joined.unlink()
    stamp.write_text(wanted["carry.tar.xz"])
    return unpacked


def controller_env(carry: Path, cpu: bool) -> dict[str, str]:
    """Ansible on this machine as the controller: the bundle's ansible.cfg, its collection and the carried ones
    (community.docker, community.crypto, ansible.posix) and Python libraries (cryptography for the cluster's CA,
    requests for community.docker's modules on the controller)."""
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1",
           "ANSIBLE_CALLBACKS_ENABLED": "ansible.posix.profile_tasks", "PROFILE_TASKS_TASK_OUTPUT_LIMIT": "all",
           "ANSIBLE_PYTHON_INTERPRETER": "auto_silent"}
    # proofs.py turns fact gathering off for its renders on a machine without `ip`; the host has it, and check.yml
    # reads its network facts
    env.pop("ANSIBLE_GATHERING", None)
    if not cpu:
        site = WORK / "controller-site"
        if not site.exists():
            wheels = sorted(str(p) for p in (carry / "controller" / "wheels").glob("*.whl"))
            sh(sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile", "--target",
               str(site), *wheels, timeout=300)
        env["PYTHONPATH"] = ":".join(p for p in (env.get("PYTHONPATH", ""), str(site)) if p)
        env["ANSIBLE_COLLECTIONS_PATH"] = f"{ROOT / 'collections'}:{carry / 'controller' / 'collections'}"
    return env


# ---- the machine's Docker and the images --------------------------------------------------------------------------
def machine_docker(carry: Path) -> str:
    """A Docker on this machine: the one running, or the host image's own dockerd started (setsid: it outlives the
    call) with its data on the machine's disk."""
    if shutil.which("docker") and sh("docker", "info", check=False, timeout=20).returncode == 0:
        return "the machine's running Docker"
    rootfs = WORK / "rootfs"
    if not (rootfs / "usr" / "sbin" / "dockerd").exists():
        rootfs.mkdir(parents=True, exist_ok=True)
        # docker-init is a link to tini-static
        names = [f"./usr/{d}/{n}" for d in ("bin", "sbin") for n in (*DOCKER_BINARIES, "tini-static")]
        sh("tar", "-C", str(rootfs), "-xf", str(carry / "rootfs.tar"), "--wildcards", *names, check=False)
    bindir = WORK / "bin"
    bindir.mkdir(parents=True, exist_ok=True)
    for name in DOCKER_BINARIES:
        for folder in ("usr/bin", "usr/sbin"):
            found = rootfs / folder / name
            if found.exists() and not (bindir / name).exists():
                (bindir / name).symlink_to(found.resolve() if not found.is_symlink()
                                           else (found.parent / os.readlink(found)).resolve())
    os.environ["PATH"] = f"{bindir}:{os.environ['PATH']}"
    config = WORK / "daemon.json"
    # No iptables binary on the lent machines (the default bridge still works); no docker-proxy needed (no -p).
    config.write_text(json.dumps({"data-root": str(WORK / "machine-docker"), "iptables": False, "ip6tables": False,
                                  "userland-proxy": False}))
    with (WORK / "dockerd.log").open("ab") as log:
        subprocess.Popen(["dockerd", "--config-file", str(config)], stdout=log, stderr=subprocess.STDOUT,
                         stdin=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 60
    while sh("docker", "info", check=False, timeout=20).returncode:
        if time.monotonic() > deadline:
            raise RuntimeError("dockerd did not answer in 60 s: " + (WORK / "dockerd.log").read_text()[-1500:])
        time.sleep(0.5)
    return "the host image's dockerd " + sh("docker", "version", "--format", "{{.Server.Version}}").stdout.strip()


def host_image(carry: Path) -> str:
    digest = sha256(carry / "rootfs.tar")[:12]
    found = sh("docker", "image", "inspect", IMAGE, "--format", "{{index .Config.Labels \"carry\"}}", check=False)
    if found.returncode or found.stdout.strip() != digest:
        sh("docker", "import", "--change", 'CMD ["/sbin/init"]', "--change", "ENV container=docker",
           "--change", f"LABEL carry={digest}", str(carry / "rootfs.tar"), IMAGE,
           timeout=300)
    return f"{IMAGE} (rootfs.tar {digest})"


def own_image(report: Path, cpu: bool) -> str:
    """The user's own image: the STAND-IN (tests/gpu/standin-image.sh) under OWN_IMAGE, built once a machine."""
    if sh("docker", "image", "inspect", OWN_IMAGE, check=False).returncode:
        report.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "OUT": str(report)}
        if cpu:  # no CuPy, no GPU: the CPU workers' distributions, and no GPU trace
            env.update(STANDIN_TRACE="0", STANDIN_IMPORTS="dask distributed numpy dask_gpu_verify",
                       STANDIN_ROOTS="dask-cuda dask distributed rapids-dask-dependency ?bokeh numpy nvtx "
                                     "prometheus-client ?nvidia-ml-py dask-gpu-verify pandas ?pyarrow")
        # GPUHOST_WHEELS: the Dask wheels for this machine's Python (.whl/, CPython 3.12, on the lent machines)
        done = sh("bash", str(ROOT / "tests" / "gpu" / "standin-image.sh"), OWN_IMAGE,
                  OWN_IMAGE.replace("/worker:", "/scheduler-stage:"), os.environ.get("GPUHOST_WHEELS", ".whl"),
                  cwd=ROOT, env=env, timeout=420, check=False)
        (report / "standin.log").write_text(done.stdout + done.stderr)
        if done.returncode:
            raise RuntimeError("stand-in image failed: " + (done.stdout + done.stderr)[-2000:])
        # the worker stage is the one image (scheduler too); the scheduler stage's tag is not the user's
        sh("docker", "image", "rm", OWN_IMAGE.replace("/worker:", "/scheduler-stage:"), check=False)
    size = sh("docker", "image", "inspect", OWN_IMAGE, "--format", "{{.Size}}").stdout.strip()
    return f"{OWN_IMAGE}: {int(size) >> 20} MiB (STAND-IN: tests/gpu/standin-image.sh)"


# ---- the host -----------------------------------------------------------------------------------------------------
def ssh_key() -> Path | None:
    """Ansible's key for the host (made once), or None where the machine has no SSH client (Docker's connection)."""
    key = WORK / "ssh" / "id_ed25519"
    if shutil.which("ssh") is None or shutil.which("ssh-keygen") is None:
        return None
    if not key.exists():
        key.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "dask-gpu-host", "-f", str(key))
    return key


def start_host(cpu: bool) -> dict[str, Any]:
    """The host container, booted (systemd), the driver's libraries known to ld.so, the toolkit STAND-IN installed."""
    state = sh("docker", "inspect", "-f", "{{.State.Running}}", NAME, check=False).stdout.strip()
    if state != "true":
        sh("docker", "rm", "-f", NAME, check=False)
        (WORK / "host-docker").mkdir(parents=True, exist_ok=True)
        flags = ["--cap-add", "SYS_ADMIN", "--cap-add", "NET_ADMIN", "--security-opt", "seccomp=unconfined",
                 "--security-opt", "apparmor=unconfined", "--cgroupns=host", "-v", "/sys/fs/cgroup:/sys/fs/cgroup:rw"] \
            if cpu else ["--privileged", "--cgroupns=private", "-v", "/usr/local/nvidia:/usr/local/nvidia:ro"]
        key = ssh_key()
        keys = ["-v", f"{key}.pub:/root/.ssh/authorized_keys:ro"] if key else []
        sh("docker", "run", "-d", "--name", NAME, "--hostname", NAME, *flags, "--stop-signal", "SIGRTMIN+3",
           "--tmpfs", "/run", "--tmpfs", "/run/lock", "--tmpfs", "/tmp",
           "-v", f"{WORK / 'host-docker'}:/var/lib/docker", *keys, IMAGE, "/sbin/init")
    deadline, booted = time.monotonic() + 90, ""
    while booted not in ("running", "degraded") and time.monotonic() < deadline:  # before D-Bus: nothing, or starting
        booted = on_host("systemctl", "is-system-running", "--wait", timeout=120, check=False).stdout.strip()
        time.sleep(0.0 if booted in ("running", "degraded") else 0.5)
    failed = on_host("systemctl", "--failed", "--no-legend", "--plain", check=False).stdout.strip()
    found: dict[str, Any] = {"systemd": booted, "failed_units": failed.splitlines()}
    if not cpu:
        on_host("ldconfig")
        on_host("install", "-d", "/usr/local/lib/nvidia-ctk-standin")
        for script in ("nvidia-ctk-standin.sh", "cdi-standin.sh"):
            sh("docker", "cp", str(ROOT / "tests" / "gpu" / script), f"{NAME}:/usr/local/lib/nvidia-ctk-standin/")
            # executable whatever mode the checkout gave it (the first GPU run: a 644 file, "executable not found")
            on_host("chmod", "0755", f"/usr/local/lib/nvidia-ctk-standin/{script}")
        on_host("ln", "-sf", "/usr/local/lib/nvidia-ctk-standin/nvidia-ctk-standin.sh", "/usr/bin/nvidia-ctk")
        found["nvidia_smi"] = on_host("nvidia-smi", "-L").stdout.strip()
        found["toolkit"] = on_host("nvidia-ctk", "--version").stdout.strip()
    found["docker_in_host"] = on_host("dpkg-query", "-W", "-f=${Version}", "docker.io").stdout.strip()
    found["python_in_host"] = on_host("python3", "--version").stdout.strip()
    found["address"] = address()
    return found


def address(what: str = "IPAddress") -> str:
    """The host's address on the machine's bridge (or the bridge's own, the machine's side: what="Gateway")."""
    return sh("docker", "inspect", "-f", f"{{{{range .NetworkSettings.Networks}}}}{{{{.{what}}}}}{{{{end}}}}",
              NAME).stdout.strip()


def inventory(cpu: bool) -> Path:
    """The user's inventory: one offline GPU server, scheduler and worker, with the vendor's Docker and toolkit."""
    key = ssh_key()
    connection: dict[str, Any] = {
        "ansible_host": address(), "ansible_user": "root", "ansible_ssh_private_key_file": str(key),
        "ansible_ssh_common_args": "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null",
        "ansible_python_interpreter": "/usr/bin/python3"}
    if key is None:  # no SSH client on the machine: Docker's connection into the same host
        connection = {"ansible_connection": "community.docker.docker", "ansible_host": NAME,
                      "ansible_python_interpreter": "/usr/bin/python3"}
    settings: dict[str, Any] = {
        "dask_controller_dir": str(WORK / "controller"), "dask_images_worker_image": OWN_IMAGE,
        "dask_images_distribution": "archive", "dask_images_build_host": "localhost",
        "docker_engine_source": "none", "dask_cuda_major": 13,
        # the firewall on, the controller (this machine, the clients of the steps) among the allowed sources
        "dask_firewall_enabled": True, "dask_firewall_allowed_sources": [f"{address('Gateway')}/32"],
        # the lent machines' open-files hard limit is 20000: runc cannot raise a container's above it
        "dask_container_nofile": 16384}
    if cpu:
        settings["dask_worker_allow_cpu"] = True
    else:
        settings.update({"nvidia_container_toolkit_source": "installed", "dask_worker_gpu_request": "cdi"})
    hosts = {NAME: connection}
    text = {"all": {"vars": settings, "children": {"dask_scheduler": {"hosts": hosts},
                                                   "dask_cuda_workers": {"hosts": {NAME: None}}}}}
    path = WORK / "inventory" / "hosts.yml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(text, indent=1) + "\n")  # JSON is YAML
    return path


# ---- the playbooks ------------------------------------------------------------------------------------------------
RECAP = re.compile(r"^(\S+)\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)
PROFILE = re.compile(r"^(.+?) -+ (\d+\.\d+)s$", re.M)


@dataclass
class Host:
    """What each step sees: the run's record, the controller's environment, the inventory."""

    out: Path
    cpu: bool
    record: Callable[[dict[str, Any]], dict[str, Any]]
    left: Callable[[], float] = lambda: 3600.0  # seconds the call has left (proofs.py's budget)
    env: dict[str, str] = field(default_factory=dict)
    inventory: Path = WORK / "inventory" / "hosts.yml"
    baseline_mib: int | None = None

    def playbook(self, name: str, *args: str) -> dict[str, Any]:
        """ansible-playbook as the user runs it; wall time, the recap, the profile's named tasks, the log kept."""
        timeout = max(30.0, self.left() - 10)
        log = WORK / "logs" / f"{len(list((WORK / 'logs').glob('*.log'))):02d}-{Path(name).stem}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        argv = ["ansible-playbook", "-i", str(self.inventory), str(ROOT / name), *args]
        started = time.monotonic()
        try:
            done = subprocess.run(argv, cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=timeout,
                                  check=False)
            output, rc = done.stdout + done.stderr, done.returncode
        except subprocess.TimeoutExpired as expired:
            said = expired.stdout.decode() if isinstance(expired.stdout, bytes) else expired.stdout or ""
            output, rc = f"{said}\nTIMEOUT after {timeout} s", 124
        wall = round(time.monotonic() - started, 1)
        log.write_text(" ".join(argv) + "\n" + output)
        recap = {m[1]: {"ok": int(m[2]), "changed": int(m[3]), "unreachable": int(m[4]), "failed": int(m[5])}
                 for m in RECAP.finditer(output)}
        tasks = [(m[1].strip(), float(m[2])) for m in PROFILE.finditer(output)]
        named = {label: round(sum(s for task, s in tasks if key in task), 1)
                 for label, key in (("health_gate_s", HEALTH_TASK), ("ready_wait_s", READY_TASK))}
        return {"command": " ".join(["ansible-playbook", "-i", "INV", name, *args]), "wall_s": wall, "rc": rc,
                "recap": recap, **named, "passed": rc == 0,
                **({} if rc == 0 else {"tail": "\n".join(output.splitlines()[-25:])[-2500:]}), "log": log.name}

    def client_env(self, controller: str = "controller") -> dict[str, str]:
        """A cluster's TLS client bundle (its controller folder's client/env.sh) for a client on this machine."""
        text = next((WORK / controller).glob("**/client/env.sh")).read_text()
        pairs = (line.removeprefix("export ").split("=", 1) for line in text.splitlines() if line.startswith("export "))
        return {**os.environ, **{key: value.strip("'\"") for key, value in pairs}}


def step_host(host: Host) -> dict[str, Any]:
    deadline = time.monotonic() + 30  # an earlier proof's processes may still be leaving the GPU
    while nvml().get("processes") and time.monotonic() < deadline:
        time.sleep(1)
    host.baseline_mib = nvml().get("used_mib")  # the GPU with nothing on it: what a release and teardown go back to
    carry = carried_parts()
    found = {"machine_docker": machine_docker(carry), "image": host_image(carry),
             "own_image": own_image(WORK / "standin", host.cpu), **start_host(host.cpu),
             "nvml_before": nvml(), "connection": "ssh" if ssh_key() else "docker"}
    host.env = controller_env(carry, host.cpu)
    host.inventory = inventory(host.cpu)
    found["passed"] = found["systemd"] in ("running", "degraded")
    return found


def step_site(host: Host) -> dict[str, Any]:
    return host.playbook("site.yml")


def step_rerun(host: Host) -> dict[str, Any]:
    found = host.playbook("site.yml")
    changed = [r["changed"] for r in found["recap"].values()]
    found["passed"] = found["passed"] and bool(changed) and not any(changed)
    return found


def newest(pattern: str) -> Path | None:
    found = sorted((WORK / "controller").glob(pattern), key=lambda p: p.stat().st_mtime)
    return found[-1] if found else None


def step_verify(host: Host) -> dict[str, Any]:
    found = host.playbook("playbooks/verify.yml")
    report = newest("**/reports/verify-*.json")
    if report:
        data = json.loads(report.read_text())
        shutil.copyfile(report, host.out / "gpuhost-verify.json")
        found.update({"failures": data.get("failures"), "workers": len(data.get("workers") or ()),
                      "workload": data.get("workload"), "report": report.name})
    found["passed"] = found["passed"] and report is not None
    if report and (WORK / "verify-processes.json").exists():
        found["against_processes"] = against_processes(json.loads((WORK / "verify-processes.json").read_text()),
                                                       json.loads(report.read_text()))
        found["passed"] = found["passed"] and all(r >= 0.97 for r in found["against_processes"].values())
    return found


def against_processes(processes: dict[str, Any], here: dict[str, Any]) -> dict[str, float]:
    """verify.yml's CuPy figures on the GPU host over the same client's as processes on the same machine (the harness's
    `processes` proof, earlier in the same run): bandwidths here / there, the workload's time there / here (>= 1:
    the host as fast)."""
    def bandwidth(report: dict[str, Any], key: str) -> float:
        return float(sum(w["bandwidth"][key] for w in report["workers"].values()))

    ratios = {key: bandwidth(here, key) / bandwidth(processes, key) for key in ("sum_gbps", "copy_gbps")}
    ratios["workload_time"] = float(processes["workload"]["seconds"]) / float(here["workload"]["seconds"])
    return {key: round(value, 3) for key, value in ratios.items()}


def step_benchmark(host: Host) -> dict[str, Any]:
    found = host.playbook("playbooks/benchmark.yml")
    report = newest("**/reports/*-bench-*.json")
    if report:
        shutil.copyfile(report, host.out / "gpuhost-bench.json")
        data = json.loads(report.read_text())
        found.update({"report": report.name,
                      "workloads": {row["workload"]: row["all"]["seconds"] for row in data.get("scaling", [])},
                      "noop_tasks_per_s": data.get("overhead", {}).get("tasks_per_s")})
    found["passed"] = found["passed"] and report is not None
    return found


WORKLOAD = r"""
import sys, time
from distributed import Client
import dask.array as da
with Client(timeout=60) as client:
    gpu = bool(client.run(lambda: __import__("importlib").util.find_spec("cupy") is not None))
    array = da.ones((16384, 16384), chunks=(4096, 4096))
    if all(client.run(lambda: __import__("importlib").util.find_spec("cupy") is not None).values()):
        import cupy
        array = array.map_blocks(cupy.asarray)
    array = array.persist()
    futures, ends = [], []
    def inc(x, pause):
        import time; time.sleep(pause); return x + 1
    value = client.submit(inc, 0, 0.0, pure=False)
    started = time.monotonic()
    for i in range(int(sys.argv[1])):
        value = client.submit(inc, value, 1.0, pure=False)
    chain = value.result()
    total = float(array.sum().compute())
    print(f"WORKLOAD chain={chain} sum={total} expected_sum={16384*16384} seconds={time.monotonic()-started:.1f}")
    sys.exit(0 if chain == int(sys.argv[1]) + 1 and total == 16384 * 16384 else 1)
"""


def step_rolling(host: Host) -> dict[str, Any]:
    """A worker change rolls out (site.yml with dask_worker_nthreads=3) while a client's work runs; the work's
    results are exact (lost results recomputed from the graph: one worker, nowhere to move keys). The change stays for
    the next step's run, which rolls the worker back to the inventory's settings (a site.yml run saved: device time)."""
    client = subprocess.Popen([sys.executable, "-c", WORKLOAD, "60"], env=host.client_env(), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    time.sleep(10)
    found = host.playbook("site.yml", "-e", "dask_worker_nthreads=3")
    try:
        said, _ = client.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        client.kill()
        said = "client timed out"
    line = next((x for x in said.splitlines() if x.startswith("WORKLOAD")), said[-800:])
    log = (WORK / "logs" / found["log"]).read_text()
    return {**found, "workload": line, "workload_rc": client.returncode,
            "rolled": "Rolling restart of" in " ".join(log.split()),
            "passed": found["passed"] and client.returncode == 0 and "Rolling restart of" in " ".join(log.split())}


def released() -> list[str]:
    """The workers the agent's file says are released ({"released": [...]}; none without the file)."""
    done = on_host("cat", "/var/lib/dask/worker-slots/released.json", check=False)
    found = json.loads(done.stdout) if done.returncode == 0 and done.stdout.strip() else {}
    return [str(name) for name in found.get("released") or []]


def step_autoscale(host: Host) -> dict[str, Any]:
    """dask_autoscale_by: gpu on the GPU host: the idle worker's process stops inside its running container (the
    per-GPU supervisor under systemd), NVML shows its memory back at the baseline; work brings it back."""
    settings = ["-e", "dask_autoscale_enabled=true", "-e", "dask_autoscale_by=gpu", "-e", "dask_autoscale_minimum=0",
                "-e", "dask_autoscale_idle=10", "-e", "dask_autoscale_cooldown=5"]
    found = host.playbook("site.yml", *settings)
    if not found["passed"]:
        return found
    deadline, release_at = time.monotonic() + 150, None
    while time.monotonic() < deadline:
        if released():
            release_at = time.monotonic()
            break
        time.sleep(1)
    found["released"] = released()
    baseline = host.baseline_mib
    back_s = None
    if release_at is not None and baseline is not None:
        while time.monotonic() < release_at + 30:
            if nvml()["used_mib"] <= baseline + 64:
                back_s = round(time.monotonic() - release_at, 1)
                break
            time.sleep(0.5)
    found.update({"nvml_after_release": nvml(), "baseline_mib": baseline, "memory_back_s": back_s})
    started = time.monotonic()
    up = subprocess.run([sys.executable, "-c", "from distributed import Client\nwith Client(timeout=60) as c:\n"
                         "    print(c.submit(sum, [1, 2, 3], pure=False).result(timeout=120))"],
                        env=host.client_env(), capture_output=True, text=True, timeout=180, check=False)
    found["scale_up_s"] = round(time.monotonic() - started, 1)
    found["scale_up_result"] = up.stdout.strip()[-200:] or up.stderr[-600:]
    # Turned off while the worker is released again: no file of released workers may stay behind (the agent wrote it
    # again after the run removed it, before the fix of roles/dask_autoscale/tasks/slots.yml).
    deadline = time.monotonic() + 90
    while not released() and time.monotonic() < deadline:
        time.sleep(1)
    found["released_again_before_off"] = released()
    off = host.playbook("site.yml")
    time.sleep(5)
    found.update({"off_again_s": off["wall_s"], "file_after_off": on_host(
        "test", "-e", "/var/lib/dask/worker-slots/released.json", check=False).returncode == 0})
    found["passed"] = (release_at is not None and up.stdout.strip() == "6" and off["passed"]
                       and not found["file_after_off"]
                       and (host.cpu or (back_s is not None and back_s <= 10)) and found["scale_up_s"] <= 30)
    return found


# Cluster green: a second cluster on the same host with its own name, ports and controller folder, the same own image
# from an archive, no monitoring (one Prometheus a host); both clusters share the GPU (dask_autoscale_share_gpus).
GREEN = {"dask_cluster_name": "green", "dask_scheduler_port": 6786, "dask_dashboard_port": 6787,
         "dask_worker_http_port": 6790, "dask_autoscale_port": 6785, "dask_autoscale_metrics_port": 6784,
         "dask_controller_dir": str(WORK / "controller-green"), "dask_monitoring_enabled": False}
SHARED = {"dask_autoscale_enabled": True, "dask_autoscale_by": "host", "dask_autoscale_share_gpus": True,
          "dask_autoscale_minimum": 0, "dask_autoscale_idle": 10, "dask_autoscale_cooldown": 5}
GREEN_STATE = "/var/lib/dask-green/autoscale"  # green's autoscaler's state folder (its scheduler: the same host)
ON_GPU = r"""
import sys
from distributed import Client
with Client(timeout=60) as client:
    def square_on_the_gpu(n):
        try:
            import cupy
        except ImportError:  # the CPU rehearsal's workers
            import numpy as cupy
        return int(cupy.arange(n, dtype="int64").sum()), cupy.__name__
    futures = client.map(square_on_the_gpu, [10**6 + i for i in range(int(sys.argv[1]))], pure=False)
    results = client.gather(futures)
    exact = all(total == n * (n - 1) // 2 for (total, _), n in zip(results, [10**6 + i for i in range(len(results))]))
    print(f"ON_GPU tasks={len(results)} exact={exact} module={results[0][1]}")
    sys.exit(0 if exact else 1)
"""


def unit_state(unit: str) -> str:
    return on_host("systemctl", "show", "-p", "ActiveState", "--value", unit, check=False).stdout.strip()


def wait_for(condition: Callable[[], bool], seconds: float, step: float = 0.5) -> float | None:
    """Seconds until the condition held, or None where it did not within the time."""
    started = time.monotonic()
    while time.monotonic() < started + seconds:
        if condition():
            return round(time.monotonic() - started, 1)
        time.sleep(step)
    return None


def on_the_gpu(host: Host, controller: str, tasks: int) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", ON_GPU, str(tasks)], env=host.client_env(controller),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def said(client: subprocess.Popen[str], timeout: float) -> str:
    try:
        out, _ = client.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        client.kill()
        out = "client timed out"
    return next((x for x in out.splitlines() if x.startswith("ON_GPU")), out[-600:])


def step_turns(host: Host) -> dict[str, Any]:
    """dask_autoscale_by: host, then two clusters taking turns on the one GPU (dask_autoscale_share_gpus on both).
    dask's idle worker unit stops (NVML back at the baseline), and work brings it back; green is deployed while dask is
    released and its worker takes the GPU; dask's work then waits (its agent says which cluster holds the GPU) until
    green idles down, and runs on the GPU it gave back. green's teardown, then dask's autoscaler off again."""
    settings = [arg for key, value in SHARED.items()
                for arg in ("-e", f"{key}={value if isinstance(value, str) else json.dumps(value)}")]
    found = host.playbook("site.yml", *settings)
    if not found["passed"]:
        return found
    baseline = host.baseline_mib
    gpu_free = (lambda: True) if host.cpu or baseline is None else (lambda: nvml()["used_mib"] <= baseline + 64)
    released_s = wait_for(lambda: unit_state("dask-worker") == "inactive", 120)
    back_s = wait_for(gpu_free, 30) if released_s is not None else None
    found.update({"released_after_s": released_s, "memory_back_s": back_s, "nvml_after_release": nvml()})
    started = time.monotonic()
    found["dask_scale_up"] = said(on_the_gpu(host, "controller", 4), 120)
    found["scale_up_s"] = round(time.monotonic() - started, 1)
    # green is deployed while dask is released again; its floor (its state folder's `floor` file, as verify.yml asks
    # for one) keeps its worker until dask's work waits for the GPU
    again_s = wait_for(lambda: unit_state("dask-worker") == "inactive", 120)
    vars_file = WORK / "green.json"
    vars_file.write_text(json.dumps({**GREEN, **SHARED}))
    floor = (f"while [ ! -d {GREEN_STATE} ]; do sleep 0.5; done; "
             f"printf '{{\"workers\": 1, \"until\": %s}}' $(( $(date +%s) + 600 )) > {GREEN_STATE}/floor")
    holder = subprocess.Popen(["docker", "exec", NAME, "sh", "-c", floor], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    green = host.playbook("site.yml", "-e", f"@{vars_file}")
    holder.kill()
    found.update({"released_again_s": again_s, "green_site_s": green["wall_s"], "green_site_rc": green["rc"]})
    if not green["passed"]:
        found.update({"passed": False, "tail": green.get("tail")})
        return found
    found["green_on_gpu"] = said(on_the_gpu(host, "controller-green", 4), 120)
    found["nvml_green"] = nvml()
    asked = time.time()
    dask = on_the_gpu(host, "controller", 8)
    journal = ("journalctl", "-u", "dask-autoscale-agent", "-o", "cat", "--no-pager", "--since", f"@{int(asked)}")
    found["dask_waited_s"] = wait_for(lambda: "is in use by cluster green" in on_host(*journal).stdout, 60, 1)
    found["dask_started_while_green_ran"] = unit_state("dask-worker") != "inactive"
    on_host("rm", "-f", f"{GREEN_STATE}/floor")
    green_down_s = wait_for(lambda: unit_state("dask-green-worker") == "inactive", 90)
    down_at = time.monotonic()
    found["dask_result"] = said(dask, 120)
    found.update({"green_released_s": green_down_s, "dask_computed_after_green_s": round(time.monotonic() - down_at, 1),
                  # who took the GPU's turn last (gpu_turns.py's file, named by the GPU's UUID; `cpu` without one)
                  "turn": on_host("sh", "-c", "cat /run/dask-gpu-turns/*", check=False).stdout.strip()})
    gone = host.playbook("playbooks/teardown.yml", "-e", f"@{vars_file}")
    off = host.playbook("site.yml")
    found.update({"green_teardown_s": gone["wall_s"], "off_again_s": off["wall_s"],
                  "dask_worker_after_off": unit_state("dask-worker")})
    found["passed"] = (released_s is not None and again_s is not None and "exact=True" in found["dask_scale_up"]
                       and (host.cpu or (back_s is not None and back_s <= 10)) and found["scale_up_s"] <= 30
                       and "exact=True" in found["green_on_gpu"] and found["dask_waited_s"] is not None
                       and not found["dask_started_while_green_ran"] and green_down_s is not None
                       and "exact=True" in found["dask_result"] and found["dask_computed_after_green_s"] <= 30
                       and '"unit": "dask-worker", "cluster": "dask"' in found["turn"]
                       and gone["passed"] and off["passed"] and found["dask_worker_after_off"] == "active")
    return found


def step_monitoring(host: Host) -> dict[str, Any]:
    """dask_monitoring_enabled: Prometheus on the host scrapes the worker's GPU series through the units. Left on for
    the teardown that follows (which removes it; one site.yml run saved)."""
    found = host.playbook("site.yml", "-e", "dask_monitoring_enabled=true")
    query = ("import json, urllib.request as u; print(json.dumps(json.load(u.urlopen("
             "'http://127.0.0.1:9090/api/v1/query?query=dask_worker_gpu_memory_used_bytes'))['data']['result']))")
    series: list[Any] = []
    deadline = time.monotonic() + 90
    while found["passed"] and time.monotonic() < deadline:
        done = on_host("python3", "-c", query, check=False)
        series = json.loads(done.stdout) if done.returncode == 0 and done.stdout.strip() else []
        if series:
            break
        time.sleep(3)
    found.update({"gpu_series": series[:2], "passed": found["passed"] and (bool(series) or host.cpu)})
    return found


def step_teardown(host: Host) -> dict[str, Any]:
    found = host.playbook("playbooks/teardown.yml")
    time.sleep(2)
    gpu = nvml()
    kept = {"docker_active": on_host("systemctl", "is-active", "docker", check=False).stdout.strip(),
            # the user's image, under the names the bundle gave it on the host (dask-gpu-worker:own-HASH): kept
            "images_kept": on_host("docker", "image", "ls", "--format", "{{.Repository}}:{{.Tag}}").stdout.split(),
            "units_left": on_host("sh", "-c", "ls /etc/systemd/system | grep -c '^dask' || true").stdout.strip(),
            "containers_left": on_host("docker", "ps", "-aq").stdout.split()}
    found.update({"nvml_after": gpu, "baseline_mib": host.baseline_mib, **kept})
    clean_gpu = host.cpu or (not gpu.get("processes") and host.baseline_mib is not None
                             and gpu["used_mib"] <= host.baseline_mib + 64)
    found["passed"] = (found["passed"] and clean_gpu and not kept["containers_left"] and kept["units_left"] == "0"
                       and kept["docker_active"] == "active" and bool(kept["images_kept"]))
    return found


# What the summary's table shows of a step, where the step has it.
FIGURES = ("health_gate_s", "ready_wait_s", "workers", "failures", "against_processes", "noop_tasks_per_s", "workload",
           "memory_back_s", "scale_up_s", "green_site_s", "dask_waited_s", "green_released_s",
           "dask_computed_after_green_s", "green_on_gpu", "dask_result", "turn",
           "file_after_off", "rolled", "baseline_mib", "nvml_after",
           "nvml_after_release", "gpu_series", "images_kept", "systemd", "nvidia_smi", "toolkit", "own_image", "error")

STEPS: dict[str, Callable[[Host], dict[str, Any]]] = {
    "host": step_host, "site": step_site, "verify": step_verify, "benchmark": step_benchmark, "rerun": step_rerun,
    "rolling": step_rolling, "autoscale": step_autoscale, "turns": step_turns, "monitoring": step_monitoring,
    "teardown": step_teardown}


def resume(host: Host) -> None:
    """A later call on the same warm machine: the controller's environment and the inventory from the made host."""
    carry = WORK / "carry"
    if (WORK / "bin").exists():
        os.environ["PATH"] = f"{WORK / 'bin'}:{os.environ['PATH']}"
    host.env = controller_env(carry, host.cpu)
    baseline = WORK / "baseline_mib"
    if host.baseline_mib is None and baseline.exists():
        host.baseline_mib = int(baseline.read_text())


# About how long each step takes on a lent H100 (the CPU rehearsal's times; the host's stand-in build and the site's
# archive of the bigger GPU image as the earlier proofs measured them there): a step that would not fit the call's
# budget is skipped and says so (the next call, on the same warm machine, runs it).
NEED_S = {"host": 130, "site": 150, "verify": 40, "benchmark": 150, "rerun": 40, "rolling": 150, "autoscale": 150,
          "turns": 240, "monitoring": 60, "teardown": 40}


def prove(host: Host, steps: list[str]) -> None:
    """Each step in turn, recorded with its wall time; a failed `host` step stops the rest."""
    if (host.out / "verify-processes.json").exists():  # this call's processes proof: for a later verify
        WORK.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(host.out / "verify-processes.json", WORK / "verify-processes.json")
    for name in steps:
        if host.left() < NEED_S[name]:
            host.record({"run": f"gpuhost/{name}", "skipped": f"{host.left():.0f} s left, needs about {NEED_S[name]}"})
            continue
        if name != "host" and not host.env:
            resume(host)
        started = time.monotonic()
        try:
            result = STEPS[name](host)
        except (RuntimeError, subprocess.SubprocessError, OSError, KeyError, ValueError, StopIteration) as error:
            result = {"passed": False, "error": repr(error)[-1500:]}
        host.record({"run": f"gpuhost/{name}", "step_s": round(time.monotonic() - started, 1), **result})
        if name == "host" and host.baseline_mib is not None:
            (WORK / "baseline_mib").write_text(str(host.baseline_mib))
        if name == "host" and not result.get("passed"):
            break
