"""dask-gpu-worker-slots: the worker container of a host runs one Dask worker process per GPU, each started and
stopped on its own (dask_autoscale_by: gpu, role dask_autoscale, docs/autoscale.md).

    dask-gpu-worker-slots --name HOST --workers N --control /etc/dask-slots/released.json -- \
        dask cuda worker tls://SCHEDULER:8786 --name HOST --dashboard-address IP:8790 ...

Slot p runs the command given after `--` as its own process with CUDA_VISIBLE_DEVICES set to its GPU alone (entry p
of the container's own CUDA_VISIBLE_DEVICES, or p), `--name` HOST-p (HOST on a one-worker host, as `dask cuda worker`
names them) and the HTTP port of `--dashboard-address` moved by p (the port the host's monitoring scrapes for it).
All slots are in one container: one PID namespace and every GPU's device node, so UCX's CUDA IPC between them works
as between the workers of one `dask cuda worker` (tests/gpu/results/per-gpu-containers-h200x2/summary.md).

The control file, written by the host's autoscale agent, is `{"released": ["HOST-1", ...]}`: a released slot's
process is stopped (SIGTERM, the worker closes; the autoscaler retired it first, so its data moved) and no process is
left on its GPU; a slot no longer released starts again. No file: every slot runs. A slot that exits while wanted
starts again after --restart-delay seconds. SIGTERM (the container's stop) stops every slot and exits 0. Each action
is one line on stdout (the unit's journal). The URLs of the running slots' /health are written to --health-file,
which dask-gpu-healthcheck reads (DASK_HEALTH_FILE), so a released slot does not make the container unhealthy.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from .autoscale_policy import slot_names

NEVER = float("-inf")


def log(line: str) -> None:
    print(f"[slots] {line}", flush=True)


@dataclass
class Slot:
    name: str
    gpu: str  # CUDA_VISIBLE_DEVICES of its process ("" on a CPU host: left as the container has it)
    argv: list[str]
    health: str  # its /health URL ("" when its HTTP port is not fixed)
    process: subprocess.Popen[bytes] | None = None
    down_since: float = NEVER  # when its worker last exited unasked (monotonic seconds)


def with_option(argv: list[str], option: str, value: str) -> list[str]:
    """argv with OPTION's value replaced (`--opt V` or `--opt=V`), or OPTION V appended when absent."""
    out, found, index = [], False, 0
    while index < len(argv):
        item = argv[index]
        if item == option and index + 1 < len(argv):
            out += [option, value]
            found, index = True, index + 2
            continue
        if item.startswith(option + "="):
            out.append(f"{option}={value}")
            found = True
        else:
            out.append(item)
        index += 1
    return out if found else out + [option, value]


def option(argv: list[str], name: str) -> str:
    for index, item in enumerate(argv):
        if item == name and index + 1 < len(argv):
            return argv[index + 1]
        if item.startswith(name + "="):
            return item.split("=", 1)[1]
    return ""


def shifted(address: str, offset: int) -> str:
    """HOST:PORT moved to HOST:PORT+offset; a port of 0 (random) or no port is left alone."""
    host, separator, port = address.rpartition(":")
    if not separator or not port.isdigit() or int(port) == 0:
        return address
    return f"{host}:{int(port) + offset}"


def plan(name: str, count: int, argv: list[str], visible: str) -> list[Slot]:
    """The slots of a host: names, GPUs, each one's command and /health URL."""
    gpus = [entry.strip() for entry in visible.split(",") if entry.strip()] or [str(index) for index in range(count)]
    dashboard = option(argv, "--dashboard-address")
    slots = []
    for index, slot_name in enumerate(slot_names(name, count)):
        command = with_option(argv, "--name", slot_name)
        address = shifted(dashboard, index) if dashboard else ""
        if address:
            command = with_option(command, "--dashboard-address", address)
        port = address.rpartition(":")[2]
        health = f"http://{address}/health" if port.isdigit() and int(port) else ""
        gpu = gpus[index] if count > 1 or visible else ""
        slots.append(Slot(slot_name, gpu, command, health))
    return slots


def released(path: Path, known: set[str]) -> set[str] | None:
    """The slots the control file releases; None when the file cannot be read as one (the last reading stays)."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return set()
    except (OSError, ValueError):
        return None
    names = data.get("released") if isinstance(data, dict) else None
    if not isinstance(names, list):
        return None
    return {str(name) for name in names} & known


class Supervisor:
    def __init__(self, slots: list[Slot], control: Path, health_file: Path | None, stop_timeout: float,
                 restart_delay: float) -> None:
        self.slots = slots
        self.control = control
        self.health_file = health_file
        self.stop_timeout = stop_timeout
        self.restart_delay = restart_delay
        self.released: set[str] = set()
        self.unreadable = False

    def start(self, slot: Slot, why: str) -> None:
        env = dict(os.environ)
        if slot.gpu:
            env["CUDA_VISIBLE_DEVICES"] = slot.gpu
        slot.process = subprocess.Popen(slot.argv, env=env)  # noqa: S603 (the unit's own command line)
        gpu = f" (GPU {slot.gpu})" if slot.gpu else ""
        log(f"{slot.name}{gpu}: started, {why} (pid {slot.process.pid})")

    def stop(self, slots: list[Slot], why: str) -> None:
        """SIGTERM to each (the worker closes), then wait; SIGKILL to one still there after the stop timeout."""
        running = [slot for slot in slots if slot.process is not None and slot.process.poll() is None]
        for slot in running:
            assert slot.process is not None
            slot.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + self.stop_timeout
        for slot in running:
            assert slot.process is not None
            try:
                code = slot.process.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                slot.process.kill()
                code = slot.process.wait()
            log(f"{slot.name}: stopped, {why} (exit {code})")
        for slot in slots:
            slot.process = None

    def write_health(self) -> None:
        if self.health_file is None:
            return
        urls = [slot.health for slot in self.slots if slot.process is not None and slot.health]
        temporary = self.health_file.with_suffix(".tmp")
        temporary.write_text("".join(f"{url}\n" for url in urls))
        os.replace(temporary, self.health_file)

    def step(self, now: float) -> None:
        names = {slot.name for slot in self.slots}
        reading = released(self.control, names)
        if reading is None:
            if not self.unreadable:
                log(f"{self.control} cannot be read as {{\"released\": [...]}}; the slots stay as they are")
            self.unreadable = True
        else:
            self.unreadable = False
            self.released = reading
        for slot in self.slots:
            wanted = slot.name not in self.released
            alive = slot.process is not None and slot.process.poll() is None
            if slot.process is not None and not alive:
                log(f"{slot.name}: its worker exited ({slot.process.returncode})"
                    + (f"; it starts again in {self.restart_delay:g} s" if wanted else ""))
                slot.process, slot.down_since = None, now
            if wanted and slot.process is None and now - slot.down_since >= self.restart_delay:
                self.start(slot, "wanted" if slot.down_since == NEVER else "again after its exit")
            elif not wanted and alive:
                self.stop([slot], "released by the autoscaler")
            if not wanted:
                slot.down_since = NEVER
        self.write_health()

    def run(self, interval: float, stopping: threading.Event) -> int:
        log(f"slots {', '.join(f'{slot.name}' + (f' (GPU {slot.gpu})' if slot.gpu else '') for slot in self.slots)}; "
            f"control file {self.control}")
        while not stopping.is_set():
            self.step(time.monotonic())
            stopping.wait(interval)
        self.stop(self.slots, "the container stops")
        self.write_health()
        log("stopped")
        return 0


def parser() -> argparse.ArgumentParser:
    parse = argparse.ArgumentParser(prog="dask-gpu-worker-slots", description=__doc__.split("\n\n")[0])
    parse.add_argument("--name", required=True, help="the host's worker name (slot p: NAME-p)")
    parse.add_argument("--workers", type=int, required=True, help="slots: one per GPU of the host's workers")
    parse.add_argument("--control", type=Path, required=True, help="the agent's file of released slots")
    parse.add_argument("--health-file", type=Path, default=None, help="where the running slots' /health URLs go")
    parse.add_argument("--stop-timeout", type=float, default=60.0)
    parse.add_argument("--restart-delay", type=float, default=5.0)
    parse.add_argument("--interval", type=float, default=1.0)
    parse.add_argument("command", nargs=argparse.REMAINDER, help="-- the worker command line")
    return parse


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command or args.workers < 1:
        parser().error("needs --workers of 1 or more and a worker command after --")
    slots = plan(args.name, args.workers, command, os.environ.get("CUDA_VISIBLE_DEVICES", ""))
    supervisor = Supervisor(slots, args.control, args.health_file, args.stop_timeout, args.restart_delay)
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    signal.signal(signal.SIGINT, lambda *_: stopping.set())
    return supervisor.run(args.interval, stopping)


if __name__ == "__main__":
    sys.exit(main())
