"""What dask-gpu-autoscale decides, from what it observed: pure, no Dask, no clock of its own (unit-tested alone).

The unit of scale is a worker host (dask_autoscale_by: host): its worker unit runs all of the host's Dask workers
(one per GPU), so a host is started or released whole. With dask_autoscale_by: gpu each worker (one GPU) is a unit
of its own, a `Host` of one worker whose `machine` is the host it runs on (`per_gpu`; dask-gpu-worker-slots starts
and stops it inside the host's worker container), and "host" below reads "worker". Counts are in Dask workers: the
scheduler's adaptive target, clamped to [minimum, maximum], rounded up to whole hosts for the minimum and down to
whole hosts for the maximum.
A client may ask for a floor for a while (a file `floor` beside the state: playbooks/verify.yml wants every worker).
- Up, at once (no cooldown: queued work waits for nothing): released hosts, in inventory order, until the hosts up
  hold the target.
- Down, after the cooldown since the last change: hosts (last in inventory order first) whose every worker is
  registered and has had no task for `idle` seconds, at most a `step_down` share of the workers up in one step
  (always at least one host), never below the target.
A host that is up but not fully registered (starting, or its worker killed) is never released: its unit's restart
brings it back, and monitoring sees desired and actual differ. The exception: a host whose agent waits because
another cluster's workers hold its GPUs (clusters taking turns) is given up at once, without cooldown, when the other
hosts hold the target; it is wanted again like any released host.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

UP, DOWN = "up", "down"


@dataclass(frozen=True)
class Host:
    """A unit of scale: a member worker host (its inventory name, the IP its workers advertise, how many workers its
    unit runs), or with dask_autoscale_by: gpu one worker of one (`machine`: that host's name; the worker's name)."""

    name: str
    address: str
    workers: int
    machine: str = ""

    @property
    def on(self) -> str:
        """The worker host it is, or is on."""
        return self.machine or self.name


def slot_names(host: str, workers: int) -> list[str]:
    """The names of a host's workers: HOST-0 ... HOST-(N-1), or HOST alone on a one-worker host (as `dask cuda worker
    --name HOST` names them; dask-gpu-worker-slots gives the same names)."""
    return [host] if workers == 1 else [f"{host}-{index}" for index in range(workers)]


def per_gpu(hosts: tuple[Host, ...]) -> tuple[Host, ...]:
    """Each worker of each host as a unit of scale of its own (dask_autoscale_by: gpu)."""
    return tuple(Host(name, host.address, 1, host.name)
                 for host in hosts for name in slot_names(host.name, host.workers))


@dataclass(frozen=True)
class Config:
    hosts: tuple[Host, ...]
    minimum: int
    maximum: int
    idle: float
    cooldown: float
    step_down: float


@dataclass(frozen=True)
class Seen:
    """One host as the scheduler shows it now: running workers registered, and whether any has a task; `waiting`:
    its agent says another cluster's workers hold its GPUs (they take turns, dask_autoscale_share_gpus)."""

    registered: int
    busy: bool
    waiting: bool = False


@dataclass
class State:
    """What the service keeps (its state file): each host's desired state and a generation the host's agent acts
    on once; when the last change was; since when each host has been idle (not kept: a restart waits again)."""

    desired: dict[str, str] = field(default_factory=dict)
    generation: dict[str, int] = field(default_factory=dict)
    last_change: float = 0.0
    idle_since: dict[str, float] = field(default_factory=dict)

    def ensure(self, hosts: tuple[Host, ...]) -> None:
        """Every member host has a desired state (up, as site.yml started it) and a generation."""
        for host in hosts:
            self.desired.setdefault(host.name, UP)
            self.generation.setdefault(host.name, 0)
        for name in [name for name in self.desired if name not in {host.name for host in hosts}]:
            del self.desired[name]
            self.generation.pop(name, None)

    def to_json(self) -> dict[str, object]:
        return {"desired": self.desired, "generation": self.generation, "last_change": self.last_change}

    @classmethod
    def from_json(cls, data: dict[str, object]) -> State:
        desired = data.get("desired") or {}
        generation = data.get("generation") or {}
        assert isinstance(desired, dict) and isinstance(generation, dict)
        last = data.get("last_change") or 0.0
        return cls(desired={str(k): str(v) for k, v in desired.items()},
                   generation={str(k): int(v) for k, v in generation.items()},
                   last_change=float(last) if isinstance(last, (int, float)) else 0.0)


@dataclass(frozen=True)
class Decision:
    kind: str  # up, down or hold
    hosts: tuple[str, ...]
    target: int  # the clamped target, in workers
    line: str
    given_up: bool = False  # a down of hosts whose agents waited for another cluster's GPUs


def observe(state: State, config: Config, seen: dict[str, Seen], now: float) -> None:
    """Idle clocks: a host is idle from the first look at which all its workers were registered and without a
    task; a task, or a worker missing, resets its clock."""
    for host in config.hosts:
        view = seen.get(host.name, Seen(0, False))
        if state.desired.get(host.name) == UP and view.registered >= host.workers and not view.busy:
            state.idle_since.setdefault(host.name, now)
        else:
            state.idle_since.pop(host.name, None)


def clamp(adaptive: int, config: Config) -> int:
    return max(config.minimum, min(config.maximum, adaptive))


def decide(state: State, config: Config, seen: dict[str, Seen], adaptive: int, now: float,
           floor: int = 0) -> Decision:
    """The next step; `floor` (workers) is a lower bound a client asked for a while (playbooks/verify.yml)."""
    target = clamp(max(adaptive, floor), config)
    up = [host for host in config.hosts if state.desired.get(host.name) == UP]
    capacity = sum(host.workers for host in up)
    registered = sum(seen.get(host.name, Seen(0, False)).registered for host in config.hosts)
    asked = f", floor {floor}" if floor else ""
    why = (f"adaptive target {adaptive} -> {target} (minimum {config.minimum}, maximum {config.maximum}{asked}); "
           f"workers up {capacity}, registered {registered}")
    if capacity < target:
        start: list[str] = []
        for host in config.hosts:
            if state.desired.get(host.name) == UP or capacity >= target:
                continue
            if capacity + host.workers > config.maximum and capacity >= config.minimum:
                continue
            start.append(host.name)
            capacity += host.workers
        if start:
            return Decision(UP, tuple(start), target, f"scale up: {why}; start {', '.join(start)} -> {capacity}")
        return Decision("hold", (), target, f"hold: {why}; no released host fits under the maximum")
    if capacity > target:
        # Hosts wanted up whose GPUs another cluster holds (none of their workers ever came) are given up at once
        # where the others hold the target: an idle cluster does not wait to take GPUs another cluster computes on.
        give_up: list[str] = []
        for host in reversed(up):
            view = seen.get(host.name, Seen(0, False))
            if view.waiting and not view.registered and capacity - host.workers >= target:
                give_up.append(host.name)
                capacity -= host.workers
        if give_up:
            return Decision(DOWN, tuple(give_up), target, f"scale down: {why}; give up {', '.join(give_up)} (another "
                            f"cluster's workers hold its GPUs) -> {capacity}", given_up=True)
        if now - state.last_change < config.cooldown:
            return Decision("hold", (), target, f"hold: {why}; cooldown ({config.cooldown:g} s after the last change)")
        allowed = max(math.floor(config.step_down * capacity), 1)
        release: list[str] = []
        removed = 0
        for host in reversed(up):
            since = state.idle_since.get(host.name)
            if since is None or now - since < config.idle:
                continue
            left = capacity - removed - host.workers
            if left < target or (release and removed + host.workers > allowed):
                continue
            release.append(host.name)
            removed += host.workers
        if release:
            return Decision(DOWN, tuple(release), target,
                            f"scale down: {why}; release {', '.join(release)} (idle {config.idle:g} s) -> "
                            f"{capacity - removed}")
        return Decision("hold", (), target, f"hold: {why}; no host idle {config.idle:g} s that can go")
    return Decision("hold", (), target, f"hold: {why}")


def apply(state: State, decision: Decision, hosts: tuple[str, ...], now: float) -> None:
    """Record a decision for these of its hosts (a release that could not move its data leaves its host up)."""
    if decision.kind not in (UP, DOWN):
        raise ValueError(f"only an up or a down is applied, not {decision.kind!r}")
    for name in hosts:
        state.desired[name] = decision.kind
        state.generation[name] = state.generation.get(name, 0) + 1
        state.idle_since.pop(name, None)
    if hosts:
        state.last_change = now
