"""The container side of the GPU proofs on a lent GPU machine (root, no systemd, no network, no registry):
Docker from carried Debian binaries with CDI, the STAND-INs for `nvidia-ctk cdi generate` (tests/gpu/cdi-standin.sh)
and for the production images (tests/gpu/standin-image.sh), and Containers, the harness's runner that starts and
stops a rendered variant through its units' own ExecStartPre, ExecStart and ExecStop lines. The one change to a unit's
line: `docker run --rm --name X` in the foreground becomes `docker run --detach --name X` (no systemd holds it), and
the container is removed after ExecStop.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import carried
import harness
import units

ROOT = harness.ROOT
DOCKERBIN = ROOT / ".dockerbin" / "docker-trixie.tar.xz"
# userland-proxy off: docker-proxy is not carried (no published ports: every container uses the host network); no
# iptables binary on the machines, so no bridge
DAEMON = {"features": {"cdi": True}, "cdi-spec-dirs": ["/etc/cdi"], "iptables": False, "ip6tables": False,
          "bridge": "none", "userland-proxy": False}
IN_USR_BIN = ("docker", "containerd", "containerd-shim-runc-v2", "docker-init")
IN_USR_SBIN = ("dockerd", "runc")
STANDIN_LABEL = "io.dask-gpu.standin"


def docker(*argv: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *argv], capture_output=True, text=True, timeout=timeout, check=check)


def start_docker(work: Path) -> dict[str, str]:
    """dockerd from .dockerbin/ with CDI on, /etc/cdi/nvidia.yaml from the nvidia-ctk STAND-IN; what it runs."""
    unpacked = work / "dockerbin"
    unpacked.mkdir(parents=True, exist_ok=True)
    with tarfile.open(DOCKERBIN) as archive:
        archive.extractall(unpacked, filter="data")
    for names, folder in ((IN_USR_BIN, "/usr/bin"), (IN_USR_SBIN, "/usr/sbin")):
        for name in names:
            shutil.copyfile(unpacked / "bin" / name, Path(folder) / name)
            (Path(folder) / name).chmod(0o755)
    Path("/etc/docker").mkdir(parents=True, exist_ok=True)
    Path("/etc/docker/daemon.json").write_text(json.dumps(DAEMON) + "\n")
    Path("/etc/cdi").mkdir(parents=True, exist_ok=True)
    spec = subprocess.run(["bash", str(ROOT / "tests" / "gpu" / "cdi-standin.sh")], capture_output=True, text=True,
                          check=True).stdout
    Path("/etc/cdi/nvidia.yaml").write_text(spec)
    (work / "cdi-standin-nvidia.yaml").write_text(spec)
    with (work / "dockerd.log").open("ab") as log:
        subprocess.Popen(["/usr/sbin/dockerd", "--config-file", "/etc/docker/daemon.json"], stdout=log,
                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 40
    while docker("info", check=False, timeout=10).returncode:
        if time.monotonic() > deadline:
            raise RuntimeError("dockerd did not answer in 40 s: " + (work / "dockerd.log").read_text()[-1500:])
        time.sleep(0.5)
    return {"versions": (unpacked / "VERSIONS").read_text().strip(),
            "docker": docker("version", "--format", "client {{.Client.Version}}, server {{.Server.Version}}").stdout
            .strip(),
            "info": docker("info", "--format", "storage {{.Driver}}, cgroup {{.CgroupDriver}} v{{.CgroupVersion}}, "
                           "CDI spec dirs {{.CDISpecDirs}}").stdout.strip()}


def stop_docker() -> str:
    """Every container left removed, dockerd stopped; what happened."""
    if shutil.which("docker") is None or docker("info", check=False, timeout=10).returncode:
        return "no dockerd"
    left = docker("ps", "-aq", check=False).stdout.split()
    if left:
        docker("rm", "-f", *left, check=False)
    pid_file = Path("/var/run/docker.pid")
    if not pid_file.exists():
        return "dockerd without a pid file"
    pid = int(pid_file.read_text())
    os.kill(pid, 15)
    for _ in range(40):  # the call's end takes what is left
        if not running(pid):
            return f"dockerd stopped ({len(left)} containers removed)"
        time.sleep(0.25)
    return "dockerd still running"


def running(pid: int) -> bool:
    """Whether the process runs: dockerd is this script's child (start_docker), so once it exits it stays a zombie
    until reaped here; a zombie has stopped."""
    try:
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    except ChildProcessError:  # not our child
        pass
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status


def standin_images(rendered: harness.Rendered, report: Path, extra_roots: str = "") -> list[str]:
    """The STAND-IN images under the rendered image names (tests/gpu/standin-image.sh); reused when this machine
    already built them. Their description lines."""
    names = [rendered.spec("worker")["image"], rendered.spec("scheduler")["image"]]
    if docker("image", "inspect", *names, check=False).returncode:
        report.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(["bash", str(ROOT / "tests" / "gpu" / "standin-image.sh"), *names, ".whl"], cwd=ROOT,
                              capture_output=True, text=True, timeout=300, check=False,
                              env={**os.environ, "OUT": str(report), "STANDIN_EXTRA_ROOTS": extra_roots,
                                   "STANDIN_HOST_SITES": str(carried.SITE) if extra_roots else ""})
        (report / "standin.log").write_text(done.stdout + done.stderr)
        if done.returncode:
            raise RuntimeError("stand-in images failed: " + (done.stdout + done.stderr)[-2000:])
    return [docker("image", "inspect", name, "--format", f"{name}: {{{{.Size}}}} bytes, user {{{{.Config.User}}}}, "
                   f"label {{{{index .Config.Labels \"{STANDIN_LABEL}\"}}}}").stdout.strip() for name in names]


def wait_ports_script() -> None:
    """The units' ExecStartPre runs /usr/bin/python3 /etc/dask/wait_ports.py (the role copies it with the unit)."""
    Path("/etc/dask").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(ROOT / "roles" / "dask" / "files" / "wait_ports.py", "/etc/dask/wait_ports.py")
    if not Path("/usr/bin/python3").exists():
        Path("/usr/bin/python3").symlink_to(sys.executable)


@dataclass
class Containers:
    """A variant's scheduler and worker as their units run them (harness.Runner)."""

    started: list[tuple[harness.Rendered, str, Path]] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)

    def _run(self, argv: list[str], ignore: bool = False, timeout: float = 120) -> None:
        self.lines.append("+ " + " ".join(argv))
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
        if done.returncode and not ignore:
            raise RuntimeError(f"{argv[:4]}... exit {done.returncode}: {(done.stdout + done.stderr)[-1500:]}")

    def launch(self, rendered: harness.Rendered, kind: str, log: Path, env: dict[str, str]) -> None:
        unit = rendered.unit(kind)
        (start, _), = units.commands(unit, "ExecStart")
        env_file = Path(units.option(start, "--env-file"))
        env_file.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(rendered.env_file(kind), env_file)
        wait_ports_script()
        for argv, ignore in units.commands(unit, "ExecStartPre"):
            self._run(argv, ignore)
        self._run(units.detached(unit))
        self.started.append((rendered, kind, log))

    def name(self, kind: str) -> str:
        found = [rendered.spec(k)["name"] for rendered, k, _ in self.started if k == kind]
        return found[-1] if found else ""

    def alive(self, kind: str) -> bool:
        done = docker("inspect", "-f", "{{.State.Running}}", self.name(kind), check=False, timeout=20)
        return done.stdout.strip() == "true"

    def halt(self) -> None:
        """The units' ExecStop lines, the worker first; the logs kept, the containers removed."""
        for rendered, kind, log in reversed(self.started):
            name = rendered.spec(kind)["name"]
            for argv, _ in units.commands(rendered.unit(kind), "ExecStop"):
                self._run(argv, ignore=True, timeout=90)  # stopping goes on; the next start waits for the ports
            logs = docker("logs", name, check=False)
            with log.open("a") as sink:
                sink.write(logs.stdout + logs.stderr)
            docker("rm", "-f", name, check=False)
        self.started = []


def run_client(spec: dict[str, object], log: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    """A client spec (verify, bench) as its container, the way playbooks/verify.yml and benchmark.yml run it."""
    argv = units.client(dict(spec))
    log.parent.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        docker("rm", "-f", str(spec["name"]), check=False)
        done = subprocess.CompletedProcess(argv, 124, "", f"timed out after {timeout:.0f} s")
    log.write_text("+ " + " ".join(argv) + "\n" + done.stdout + "\n--- stderr\n" + done.stderr)
    return done
