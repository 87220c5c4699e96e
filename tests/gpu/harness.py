"""The GPU proofs' harness: render a variant of the cluster from inventory settings, start its rendered scheduler and
worker as plain processes on a GPU machine (no Docker, no systemd there), and stop them so the next variant can bind
the same ports.

    rendered = render("tcp-1", {"dask_transport": "tcp", "dask_worker_gpus": ["0"]}, out)
    with Cluster(rendered, out / "logs") as cluster:
        run_client(rendered, ["python3", "-m", "dask_gpu_verify.etl", "--scheduler", rendered.address, ...])

Everything about a variant comes from what playbooks/render-commands.yml wrote (tests/gpu/inventory.yml, the GPU
machine's own facts, `-e render_model=true`): the command lines and environments of the units, the worker count, the
addresses and the ports are read from the rendered specs and model, never parsed back out of an argv or rewritten. A
variant is inventory settings, exactly what a user would set. The TLS files the rendered scripts name
(/etc/dask/tls) come from tests/gpu/certs.yml (carried as .gpucerts/).

One start and stop for every proof: Cluster waits for the ports, starts the scheduler, waits for its counts, starts
the worker and waits for the model's worker count; what starts and stops a component is its runner: Processes here
(the rendered scripts as process groups), containers.Containers (the rendered units' own docker lines).
"""
from __future__ import annotations

import contextlib
import json
import os
import runpy
import shutil
import signal
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

ROOT = Path(__file__).resolve().parents[2]
INVENTORY = ROOT / "tests" / "gpu" / "inventory.yml"
HOST = "gpu-box"
# The units' own wait for ports (their ExecStartPre): one copy of the rule.
WAIT_PORTS = runpy.run_path(str(ROOT / "roles" / "dask" / "files" / "wait_ports.py"))


@dataclass(frozen=True)
class Rendered:
    """One variant's rendered specs and model (HOST-dask-*.json, HOST-model.json) in `folder`."""

    name: str
    folder: Path

    def spec(self, kind: str) -> dict[str, Any]:
        return dict(json.loads((self.folder / f"{HOST}-dask-{kind}.json").read_text()))

    def script(self, kind: str) -> Path:
        return self.folder / f"{HOST}-dask-{kind}.sh"

    def unit(self, kind: str) -> Path:
        return self.folder / f"{HOST}-dask-{kind}.service"

    def env_file(self, kind: str) -> Path:
        return self.folder / f"{HOST}-dask-{kind}.env"

    @property
    def model(self) -> dict[str, Any]:
        return dict(json.loads((self.folder / f"{HOST}-model.json").read_text()))

    @property
    def cluster(self) -> dict[str, Any]:
        return dict(self.model["cluster"])

    @property
    def workers(self) -> int:
        return int(self.cluster["expected_workers"])

    @property
    def address(self) -> str:
        """The address clients use (tls:// or ucx:// or tcp://)."""
        return str(self.cluster["scheduler_address"])

    @property
    def client_env(self) -> dict[str, str]:
        """The verification client's environment (TLS files, encryption, spilling), as verify.yml runs it."""
        return {key: str(value) for key, value in self.spec("verify")["env"].items()}

    @property
    def ports(self) -> list[tuple[str, str, int]]:
        """Every fixed port the scheduler and workers bind, with its listener's protocol: the specs' wait_ports, which
        the units' ExecStartPre waits for (wait_ports.py's endpoints)."""
        return [WAIT_PORTS["endpoint"](text) for kind in ("scheduler", "worker")
                for text in self.spec(kind).get("wait_ports") or []]


def render(name: str, settings: dict[str, Any], out: Path, bench: bool = False) -> Rendered:
    """Render the cluster with these inventory settings (extra vars, typed as a user's host_vars would be); with
    `bench`, the benchmark client's spec too (tests/gpu/render-bench.yml: HOST-dask-bench.json)."""
    folder = out / "rendered" / name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    (folder / "vars.json").write_text(json.dumps(settings, indent=1) + "\n")
    playbooks = [ROOT / "playbooks" / "render-commands.yml"]
    # each playbook its own run: a second one in the same run sees the first one's facts as unknown variables
    playbooks += [ROOT / "tests" / "gpu" / "render-bench.yml"] if bench else []
    for playbook in playbooks:
        command = ["ansible-playbook", "-i", str(INVENTORY), str(playbook),
                   "-e", f"render_dir={folder}", "-e", "render_model=true", "-e", f"@{folder / 'vars.json'}",
                   # each render its own controller folder: renders may run side by side
                   "-e", f"dask_controller_dir={out / 'controller' / name}"]
        log = folder / f"render-{playbook.stem}.log"
        with log.open("w") as sink:
            done = subprocess.run(command, cwd=ROOT, stdout=sink, stderr=subprocess.STDOUT, check=False,
                                  env={**os.environ, "ANSIBLE_NOCOLOR": "1"})
        if done.returncode:
            raise RuntimeError(f"render {name} ({playbook.name}) failed:\n"
                               + "\n".join(log.read_text().splitlines()[-30:]))
    return Rendered(name, folder)


def render_all(variants: dict[str, dict[str, Any]], out: Path, bench: bool = False) -> dict[str, Rendered]:
    """Render every variant side by side (each ansible-playbook run takes seconds on its own)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max(1, len(variants))) as pool:
        futures = {name: pool.submit(render, name, settings, out, bench) for name, settings in variants.items()}
        return {name: future.result() for name, future in futures.items()}


def _get_json(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=2) as answer:  # noqa: S310 - the local scheduler
        return dict(json.load(answer))


class Runner(Protocol):
    """Starts and stops the scheduler and worker of a rendered variant."""

    def launch(self, rendered: Rendered, kind: str, log: Path, env: dict[str, str]) -> None: ...

    def alive(self, kind: str) -> bool: ...

    def halt(self) -> None: ...


@dataclass
class Processes:
    """The rendered scripts (HOST-dask-KIND.sh) as process groups, as the units' containers run their commands."""

    started: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def launch(self, rendered: Rendered, kind: str, log: Path, env: dict[str, str]) -> None:
        with log.open("ab") as sink:
            self.started[kind] = subprocess.Popen(["sh", str(rendered.script(kind))], stdout=sink,
                                                  stderr=subprocess.STDOUT, start_new_session=True,
                                                  env={**os.environ, **env})

    def alive(self, kind: str) -> bool:
        return kind in self.started and self.started[kind].poll() is None

    def halt(self) -> None:
        """TERM to each process group (the nannies' workers too), KILL what is left after 20 s."""
        processes = list(reversed(self.started.values()))  # the worker first
        for process in processes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + 20
        for process in processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(max(0.1, deadline - time.monotonic()))
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        self.started = {}


@dataclass
class Cluster:
    """The rendered scheduler and worker of one variant, started and stopped by its runner; a context manager."""

    rendered: Rendered
    logs: Path
    env: dict[str, str] = field(default_factory=dict)
    runner: Runner = field(default_factory=Processes)
    registered_s: float = 0.0
    ports_waited_s: float = 0.0

    def _start(self, kind: str) -> None:
        self.logs.mkdir(parents=True, exist_ok=True)
        self.runner.launch(self.rendered, kind, self.logs / f"{self.rendered.name}-{kind}.log", self.env)

    def start(self, timeout: float = 150) -> Cluster:
        waited, taken = WAIT_PORTS["wait"](self.rendered.ports, 90)
        if taken:
            raise RuntimeError(f"{self.rendered.name}: ports still taken after {waited} s: {taken}")
        self.ports_waited_s = waited
        urls = self.rendered.cluster["scheduler_urls"]
        self._start("scheduler")
        deadline = time.monotonic() + 60
        while True:
            try:
                _get_json(urls["counts"])
                break
            except OSError:
                if time.monotonic() > deadline or not self.runner.alive("scheduler"):
                    raise RuntimeError(f"{self.rendered.name}: the scheduler did not come up: "
                                       f"{self.tail('scheduler')}") from None
                time.sleep(0.2)
        started = time.monotonic()
        self._start("worker")
        want = self.rendered.workers
        while _get_json(urls["counts"]).get("workers", 0) < want:
            if time.monotonic() - started > timeout or not self.runner.alive("worker"):
                raise RuntimeError(f"{self.rendered.name}: {want} workers did not register in {timeout} s: "
                                   f"{self.tail('worker')}")
            time.sleep(0.2)
        self.registered_s = round(time.monotonic() - started, 1)
        return self

    def tail(self, kind: str, lines: int = 15) -> str:
        path = self.logs / f"{self.rendered.name}-{kind}.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else "(no log)"

    def stop(self) -> None:
        """The runner stops both, the worker first. The next start waits for its ports (start())."""
        self.runner.halt()

    def __enter__(self) -> Cluster:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *_: object) -> None:
        self.stop()


def run_client(rendered: Rendered, argv: list[str], log: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    """A client command against the variant's cluster with the verification client's environment (TLS)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(argv, env={**os.environ, **rendered.client_env}, capture_output=True, text=True,
                              timeout=timeout, check=False, cwd=ROOT)
    except subprocess.TimeoutExpired as expired:
        output = [part.decode(errors="replace") if isinstance(part, bytes) else (part or "")
                  for part in (expired.stdout, expired.stderr)]
        done = subprocess.CompletedProcess(argv, 124, output[0], output[1] + f"\ntimed out after {timeout:.0f} s")
    log.write_text(done.stdout + "\n--- stderr\n" + done.stderr)
    return done


def install_tls(out: Path, certs: Path = ROOT / ".gpucerts", owner: int = 10001) -> None:
    """The folders the rendered scripts use (their container paths; the units' host folders /var/lib/dask/worker and
    /var/lib/dask/reports) and the TLS files of tests/gpu/certs.yml, where the units mount them (/etc/dask/tls:
    ca.crt, host.crt, host.key 0600), owned by the containers' user (root processes read them too)."""
    for folder in ("/etc/dask/tls", "/var/lib/dask", "/var/lib/dask-reports", "/var/lib/dask/worker",
                   "/var/lib/dask/reports"):
        Path(folder).mkdir(parents=True, exist_ok=True)
        os.chown(folder, owner, owner)
    if not certs.is_dir():
        (out / "no-tls.txt").write_text(f"no {certs}: tls variants cannot start\n")
        return
    for source, target, mode in (("ca.crt", "ca.crt", 0o644), (f"{HOST}.crt", "host.crt", 0o644),
                                 (f"{HOST}.key", "host.key", 0o600)):
        path = Path("/etc/dask/tls") / target
        shutil.copyfile(certs / source, path)
        path.chmod(mode)
        os.chown(path, owner, owner)
