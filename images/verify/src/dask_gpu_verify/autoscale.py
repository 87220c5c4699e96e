"""dask-gpu-autoscale: gives a cluster's worker hosts back when idle and takes them again when work waits (role
dask_autoscale, docs/autoscale.md). Runs on the scheduler host, beside the scheduler.

    dask-gpu-autoscale --scheduler tls://IP:8786 --host NAME,IP,WORKERS [...] --minimum 1 --maximum 8 \
        --idle 300 --cooldown 60 --step-down 0.25 [--by gpu] --state DIR --listen IP:PORT --ca CA --cert CRT --key KEY

Every --interval seconds it asks the scheduler (the cluster's TLS client certificate) for its adaptive target, its
workers and what they process, and decides (autoscale_policy). A host to release is retired first through the
scheduler (retirement.retire: its keys move, a task it runs finishes and its result moves); only when nothing is
left only there is it marked down; a retirement that cannot finish leaves it up. Each host's agent
(dask-gpu-autoscale-agent, a host service) asks this service for its desired state over mutual TLS on --listen and
starts or stops the host's worker unit. Nothing else listens; nothing is served without a client certificate of
the cluster's CA. A file `paused` in --state (site.yml writes it while it changes the cluster) holds every
decision; a file `floor` there ({"workers": N, "until": EPOCH}, playbooks/verify.yml) keeps N workers up until then.
Each decision is one line on stdout (the unit's journal); GET /metrics gives the desired and registered counts, and
which hosts are released (also in plain HTTP on --metrics, loopback only, for a Prometheus on this host).
With --by gpu each worker is a unit of scale of its own: the agent of its host writes the host's released workers to
the file that dask-gpu-worker-slots reads in the worker container (which keeps running).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from .autoscale_policy import DOWN, UP, Config, Decision, Host, Seen, State, apply, decide, observe, per_gpu
from .retirement import retire_workers
from .session import connect


def parse_host(text: str) -> Host:
    name, address, workers = text.split(",")
    return Host(name, address, int(workers))


def log(line: str) -> None:
    print(line, flush=True)


class Service:
    """The decisions and what the agents read, shared by the loop and the HTTPS server (one lock)."""

    def __init__(self, config: Config, folder: Path, by: str = "host") -> None:
        self.config = config
        self.folder = folder
        self.by = by
        self.lock = threading.Lock()
        self.state = self._load()
        self.state.ensure(config.hosts)
        self.registered = 0
        self.target = config.minimum
        self.paused = False
        self.waiting: dict[str, bool] = {}  # hosts whose agent waits for another cluster to release their GPUs

    def _load(self) -> State:
        path = self.folder / "state.json"
        try:
            data = json.loads(path.read_text())
            state = State.from_json(data)
        except (OSError, ValueError, AssertionError):
            return State()
        if str(data.get("by") or "host") != self.by:  # decisions about other units: every worker is wanted again
            log(f"the unit of scale changed from {data.get('by') or 'host'} to {self.by}: every worker is wanted up")
            return State()
        return state

    def save(self) -> None:
        path = self.folder / "state.json"
        temporary = path.with_suffix(".tmp")
        # `by` and each unit's host: site.yml reads which workers of which host are released (dask_autoscale_released).
        data = {**self.state.to_json(), "by": self.by,
                "machines": {host.name: host.on for host in self.config.hosts}}
        temporary.write_text(json.dumps(data, sort_keys=True) + "\n")
        os.replace(temporary, path)

    def host(self, name: str, waiting: bool = False) -> dict[str, Any] | None:
        """What a host's agent reads: its desired state and generation; with --by gpu its workers' desired states
        (`workers`, and `released`: those down), `desired` up while one of them is."""
        with self.lock:
            if self.by == "gpu":
                mine = {host.name: self.state.desired.get(host.name, UP) for host in self.config.hosts
                        if host.on == name}
                if not mine:
                    return None
                return {"host": name, "desired": UP if UP in mine.values() else DOWN, "workers": mine,
                        "released": sorted(worker for worker, desired in mine.items() if desired == DOWN),
                        "generation": sum(self.state.generation.get(worker, 0) for worker in mine),
                        "paused": self.paused}
            if name not in self.state.desired:
                return None
            self.waiting[name] = waiting
            return {"host": name, "desired": self.state.desired[name], "generation": self.state.generation[name],
                    "paused": self.paused}

    def released_on(self) -> dict[str, tuple[int, int]]:
        """Each worker host: (its workers released, its workers)."""
        counts: dict[str, tuple[int, int]] = {}
        for host in self.config.hosts:
            down, total = counts.get(host.on, (0, 0))
            gone = host.workers if self.state.desired.get(host.name) == DOWN else 0
            counts[host.on] = (down + gone, total + host.workers)
        return counts

    def metrics(self) -> str:
        with self.lock:
            up = sum(host.workers for host in self.config.hosts if self.state.desired.get(host.name) == UP)
            lines = ["# HELP dask_autoscale_desired_workers Workers on the hosts the autoscaler wants up.",
                     "# TYPE dask_autoscale_desired_workers gauge", f"dask_autoscale_desired_workers {up}",
                     "# HELP dask_autoscale_registered_workers Running workers registered with the scheduler.",
                     "# TYPE dask_autoscale_registered_workers gauge",
                     f"dask_autoscale_registered_workers {self.registered}",
                     "# HELP dask_autoscale_target_workers The scheduler's adaptive target, clamped.",
                     "# TYPE dask_autoscale_target_workers gauge", f"dask_autoscale_target_workers {self.target}",
                     "# HELP dask_autoscale_paused 1 while a site.yml run holds every decision.",
                     "# TYPE dask_autoscale_paused gauge", f"dask_autoscale_paused {int(self.paused)}",
                     "# HELP dask_autoscale_host_released 1 for a worker host the autoscaler released (all its "
                     "workers).", "# TYPE dask_autoscale_host_released gauge"]
            counts = self.released_on()
            lines += [f'dask_autoscale_host_released{{host="{name}",workers="{total}"}} {int(down == total)}'
                      for name, (down, total) in counts.items()]
            lines += ["# HELP dask_autoscale_released_workers Workers of a worker host the autoscaler released.",
                      "# TYPE dask_autoscale_released_workers gauge"]
            lines += [f'dask_autoscale_released_workers{{host="{name}"}} {down}'
                      for name, (down, _) in counts.items()]
            lines += ["# HELP dask_autoscale_host_waiting 1 for a worker host whose GPUs another cluster's workers "
                      "hold (its agent waits for them).", "# TYPE dask_autoscale_host_waiting gauge"]
            lines += [f'dask_autoscale_host_waiting{{host="{name}"}} {int(self.waiting.get(name, False))}'
                      for name in counts]
        return "\n".join(lines) + "\n"


def handler(service: Service, metrics_only: bool = False) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            if self.path == "/metrics":
                self._send(200, service.metrics(), "text/plain; version=0.0.4")
                return
            path, _, query = self.path.partition("?")
            if path.startswith("/v1/hosts/") and not metrics_only:
                answer = service.host(path.removeprefix("/v1/hosts/"), "waiting=1" in query.split("&"))
                if answer is not None:
                    self._send(200, json.dumps(answer), "application/json")
                    return
            self._send(404, json.dumps({"error": f"no such path: {self.path}"}), "application/json")

        def _send(self, status: int, body: str, kind: str) -> None:
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (http.server's signature)
            return  # the agents ask every few seconds: not one journal line each

    return Handler


def serve(service: Service, listen: str, ca: str, cert: str, key: str) -> ThreadingHTTPServer:
    """The agents' endpoint: HTTPS that requires a client certificate of the cluster's CA."""
    address, _, port = listen.rpartition(":")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert, key)
    context.load_verify_locations(ca)
    context.verify_mode = ssl.CERT_REQUIRED
    server = ThreadingHTTPServer((address, int(port)), handler(service))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, name="agents", daemon=True).start()
    return server


def serve_metrics(service: Service, listen: str) -> ThreadingHTTPServer:
    """/metrics alone, plain HTTP, for a Prometheus on the same host: loopback only (the caller checks)."""
    address, _, port = listen.rpartition(":")
    server = ThreadingHTTPServer((address, int(port)), handler(service, metrics_only=True))
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    return server


def belongs(name: str, host: Host) -> bool:
    """A worker of the unit: named after the host (`dask cuda worker --name HOST` names its workers HOST-0,
    HOST-1, ...), or with --by gpu that one worker. Names, not addresses: hosts may share an address (a test
    inventory on loopback)."""
    if host.machine:
        return name == host.name
    return name == host.name or re.fullmatch(re.escape(host.name) + r"-[0-9]+", name) is not None


def workers_of(workers: dict[str, Any], host: Host, running: bool = True) -> list[str]:
    return [address for address, info in workers.items() if belongs(str(info.get("name")), host)
            and (not running or str(info.get("status", "running")) == "running")]


def look(client: Any, config: Config, waiting: dict[str, bool]) -> tuple[dict[str, Seen], int]:
    """Each host's running workers and whether one has a task (and whether its agent waits for its GPUs); the
    scheduler's adaptive target."""
    workers = client.scheduler_info(n_workers=-1)["workers"]
    processing = client.processing()
    adaptive = int(client.sync(client.scheduler.adaptive_target))
    seen: dict[str, Seen] = {}
    for host in config.hosts:
        mine = workers_of(workers, host)
        seen[host.name] = Seen(len(mine), any(processing.get(address) for address in mine),
                               waiting.get(host.name, False))
    return seen, adaptive


def act(service: Service, client: Any, decision: Decision, retire_timeout: float) -> None:
    """Record an up at once; retire each host of a down first, and record only those whose data all moved."""
    config, now = service.config, time.time()
    if decision.kind == UP:
        with service.lock:
            apply(service.state, decision, decision.hosts, now)
            service.save()
        log(decision.line)
        return
    released: list[str] = []
    for name in decision.hosts:
        host = next(host for host in config.hosts if host.name == name)
        with service.lock:
            still_waiting = service.waiting.get(name, False)
        if decision.given_up and not still_waiting:
            # Its agent asked again since, no longer waiting: it took its turn and its workers are starting.
            log(f"kept up: {name}: its agent no longer waits for another cluster's GPUs (its workers start)")
            continue
        workers = client.scheduler_info(n_workers=-1)["workers"]
        result = retire_workers(client, workers_of(workers, host, running=False), retire_timeout, workers)
        if result["timed_out"] or result["keys_only_there"]:
            log(f"kept up: {name}: its retirement did not finish in {retire_timeout:g} s "
                f"({result['keys_only_there']} keys held only there, {result.get('running_left', 0)} tasks running)")
            continue
        released.append(name)
    with service.lock:
        apply(service.state, decision, tuple(released), now)
        service.save()
    if released:
        log(f"{decision.line}; retired {', '.join(released)} (data moved), "
            + ("their workers stop now" if service.by == "gpu" else "their units stop now"))


def floor(folder: Path, now: float) -> int:
    """Workers a client asked to keep up until a time (the file `floor`: {"workers": N, "until": EPOCH}), else 0."""
    try:
        asked = json.loads((folder / "floor").read_text())
        return int(asked["workers"]) if float(asked["until"]) > now else 0
    except (OSError, ValueError, KeyError, TypeError):
        return 0


def resume(service: Service, now: float) -> None:
    """A site.yml run ended (its pause file removed): the run changed the cluster, so the cooldown starts again from
    now, as after a scale; its restarted workers are idle from their registration."""
    with service.lock:
        service.state.last_change = now
        service.save()
    log(f"resumed: no release within the cooldown ({service.config.cooldown:g} s) after the site.yml run")


def step(service: Service, client: Any, retire_timeout: float) -> None:
    paused = (service.folder / "paused").exists()
    if paused != service.paused:
        service.paused = paused
        if paused:
            log("paused: a site.yml run changes the cluster")
        else:
            resume(service, time.time())
    with service.lock:
        waiting = dict(service.waiting)
    seen, adaptive = look(client, service.config, waiting)
    now = time.time()
    with service.lock:
        service.registered = sum(view.registered for view in seen.values())
        observe(service.state, service.config, seen, now)
        decision = decide(service.state, service.config, seen, adaptive, now, floor(service.folder, now))
        service.target = decision.target
    if decision.kind != "hold" and not paused:
        act(service, client, decision, retire_timeout)


def parser() -> argparse.ArgumentParser:
    parse = argparse.ArgumentParser(prog="dask-gpu-autoscale", description=__doc__.split("\n\n")[0])
    parse.add_argument("--scheduler", required=True)
    parse.add_argument("--host", action="append", required=True, type=parse_host, metavar="NAME,IP,WORKERS")
    parse.add_argument("--minimum", type=int, required=True)
    parse.add_argument("--maximum", type=int, required=True)
    parse.add_argument("--idle", type=float, required=True, help="seconds a host's workers are idle before it goes")
    parse.add_argument("--cooldown", type=float, required=True, help="seconds after a change before a scale-down")
    parse.add_argument("--step-down", type=float, required=True, help="largest share of the workers one step stops")
    parse.add_argument("--by", choices=("host", "gpu"), default="host",
                       help="the unit of scale: a worker host, or each worker (GPU) on its own")
    parse.add_argument("--interval", type=float, default=2.0)
    parse.add_argument("--retire-timeout", type=float, default=300.0)
    parse.add_argument("--state", type=Path, required=True, help="folder of state.json and the pause file")
    parse.add_argument("--listen", required=True, help="IP:PORT of the agents' HTTPS endpoint")
    parse.add_argument("--metrics", default="", help="127.0.0.1:PORT: /metrics in plain HTTP on loopback only")
    parse.add_argument("--ca", required=True)
    parse.add_argument("--cert", required=True)
    parse.add_argument("--key", required=True)
    return parse


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    hosts = per_gpu(tuple(args.host)) if args.by == "gpu" else tuple(args.host)
    config = Config(hosts, args.minimum, args.maximum, args.idle, args.cooldown, args.step_down)
    service = Service(config, args.state, args.by)
    down = [name for name, desired in service.state.desired.items() if desired == DOWN]
    units = "workers" if args.by == "gpu" else "hosts"
    log(f"started: {units} {', '.join(host.name for host in config.hosts)}; minimum {config.minimum}, maximum "
        f"{config.maximum}, idle {config.idle:g} s, cooldown {config.cooldown:g} s, step down {config.step_down:g}; "
        f"released now: {', '.join(down) or 'none'}")
    service.save()
    serve(service, args.listen, args.ca, args.cert, args.key)
    if args.metrics:
        if not args.metrics.startswith("127."):
            raise SystemExit(f"--metrics {args.metrics}: plain HTTP is served on loopback only")
        serve_metrics(service, args.metrics)
    # `docker stop` (the unit's stop, a restart by site.yml) sends SIGTERM: the step under way ends, then the service
    # exits 0, so its unit stops as "inactive", not "failed" (Python's default for SIGTERM is exit status 143).
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    client = None
    while not stopping.is_set():
        try:
            if client is None:
                client = connect(args.scheduler, None, timeout=30)
                log(f"connected to {args.scheduler}")
            step(service, client, args.retire_timeout)
        except (OSError, TimeoutError) as error:
            log(f"scheduler unreachable ({error}); holding every decision")
            if client is not None:
                client.close()
            client = None
        stopping.wait(args.interval)
    log("stopped")
    if client is not None:
        client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
