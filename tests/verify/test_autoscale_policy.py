"""dask-gpu-autoscale's decisions (autoscale_policy), from what it observed, without Dask or a clock."""
from __future__ import annotations

from dask_gpu_verify.autoscale_policy import (
    DOWN,
    UP,
    Config,
    Decision,
    Host,
    Seen,
    State,
    apply,
    decide,
    observe,
    per_gpu,
    slot_names,
)

HOSTS = (Host("w1", "10.0.0.1", 4), Host("w2", "10.0.0.2", 4), Host("w3", "10.0.0.3", 4), Host("w4", "10.0.0.4", 4))


def config(**changes: object) -> Config:
    values: dict[str, object] = {"hosts": HOSTS, "minimum": 4, "maximum": 16, "idle": 60.0, "cooldown": 30.0,
                                 "step_down": 0.5}
    values.update(changes)
    return Config(**values)  # type: ignore[arg-type]


def all_up(state: State, cfg: Config) -> dict[str, Seen]:
    state.ensure(cfg.hosts)
    return {host.name: Seen(host.workers, False) for host in cfg.hosts}


def test_idle_hosts_go_after_the_idle_time_last_first_within_the_step_and_never_below_the_minimum() -> None:
    cfg, state = config(), State()
    seen = all_up(state, cfg)
    observe(state, cfg, seen, now=1000.0)
    assert decide(state, cfg, seen, adaptive=0, now=1030.0).kind == "hold"  # idle 30 s of 60
    decision = decide(state, cfg, seen, adaptive=0, now=1061.0)
    # step 0.5 of 16 workers: 8 at most; last in inventory order first
    assert (decision.kind, decision.hosts, decision.target) == (DOWN, ("w4", "w3"), 4), decision.line
    apply(state, decision, decision.hosts, now=1061.0)
    seen.update(w3=Seen(0, False), w4=Seen(0, False))
    observe(state, cfg, seen, now=1062.0)
    assert "cooldown" in decide(state, cfg, seen, adaptive=0, now=1080.0).line
    decision = decide(state, cfg, seen, adaptive=0, now=1100.0)
    assert (decision.kind, decision.hosts) == (DOWN, ("w2",)), decision.line  # w1 holds the minimum
    apply(state, decision, decision.hosts, now=1100.0)
    seen["w2"] = Seen(0, False)
    assert decide(state, cfg, seen, adaptive=0, now=2000.0).kind == "hold"


def test_a_busy_or_starting_host_never_goes() -> None:
    cfg, state = config(minimum=0), State()
    seen = all_up(state, cfg)
    seen.update(w4=Seen(4, True), w3=Seen(2, False))  # w4 computes; w3 has two of its four workers
    observe(state, cfg, seen, now=0.0)
    decision = decide(state, cfg, seen, adaptive=0, now=1000.0)
    assert decision.hosts == ("w2", "w1"), decision.line


def test_work_waiting_starts_released_hosts_at_once_in_inventory_order_up_to_the_maximum() -> None:
    cfg, state = config(maximum=12), State()
    seen = all_up(state, cfg)
    for name in ("w2", "w3", "w4"):
        state.desired[name] = DOWN
        seen[name] = Seen(0, False)
    state.last_change = 100.0
    decision = decide(state, cfg, seen, adaptive=40, now=101.0)  # no cooldown for scale-up
    assert (decision.kind, decision.hosts, decision.target) == (UP, ("w2", "w3"), 12), decision.line
    apply(state, decision, decision.hosts, now=101.0)
    assert state.generation == {"w1": 0, "w2": 1, "w3": 1, "w4": 0}
    # Hosts starting count as up: no second start while their workers register.
    assert decide(state, cfg, seen, adaptive=40, now=102.0).kind == "hold"


def test_the_minimum_rounds_up_to_whole_hosts_and_the_floor_brings_every_host() -> None:
    cfg, state = config(minimum=5), State()
    seen = all_up(state, cfg)
    for name in ("w2", "w3", "w4"):
        state.desired[name] = DOWN
    decision = decide(state, cfg, seen, adaptive=0, now=0.0)
    assert decision.hosts == ("w2",), decision.line  # 4 workers < 5: one more host, 8
    state.desired["w2"] = UP
    decision = decide(state, cfg, seen, adaptive=0, now=0.0, floor=16)
    assert decision.hosts == ("w3", "w4") and "floor 16" in decision.line, decision.line


def test_state_survives_a_restart_and_follows_the_inventory() -> None:
    cfg, state = config(), State()
    all_up(state, cfg)
    apply(state, Decision(DOWN, ("w4",), 4, "scale down"), ("w4",), now=5.0)
    again = State.from_json(state.to_json())
    again.ensure(HOSTS[:3])  # w4 left the inventory (retired)
    assert again.desired == {"w1": UP, "w2": UP, "w3": UP} and again.last_change == 5.0
    again.ensure(HOSTS)
    assert again.desired["w4"] == UP


def test_a_host_whose_gpus_another_cluster_holds_is_given_up_at_once_only_when_the_others_hold_the_target() -> None:
    """Clusters taking turns (dask_autoscale_share_gpus): a host wanted up whose agent waits for another cluster to
    release its GPUs goes without the idle time or the cooldown where the other hosts hold the target, and stays
    wanted while the target needs it."""
    cfg, state = config(minimum=0), State()
    seen = all_up(state, cfg)
    seen["w4"] = Seen(0, False, waiting=True)
    state.last_change = 1000.0
    observe(state, cfg, seen, now=1001.0)
    decision = decide(state, cfg, seen, adaptive=8, now=1001.0)  # within the cooldown, idle for no time at all
    assert (decision.kind, decision.hosts) == (DOWN, ("w4",)), decision.line
    assert "give up w4 (another cluster's workers hold its GPUs) -> 12" in decision.line
    assert decision.given_up  # act() gives it up only if its agent still waits then
    assert decide(state, cfg, seen, adaptive=16, now=1001.0).kind == "hold"  # the target needs it: it waits
    seen["w4"] = Seen(4, False, waiting=True)  # its workers came after all: an ordinary host again
    assert decide(state, cfg, seen, adaptive=8, now=1001.0).kind == "hold"


def test_by_gpu_each_worker_is_a_unit_idle_ones_go_one_at_a_time_and_the_target_starts_single_workers() -> None:
    """dask_autoscale_by gpu: a 4-GPU host's idle workers go one by one within the step (not the whole host), the
    busy worker of the same host stays, and a target of 2 more workers starts exactly 2 released ones."""
    slots = per_gpu((Host("w1", "10.0.0.1", 4), Host("w2", "10.0.0.2", 1)))
    assert [(slot.name, slot.on, slot.workers) for slot in slots] == [
        ("w1-0", "w1", 1), ("w1-1", "w1", 1), ("w1-2", "w1", 1), ("w1-3", "w1", 1), ("w2", "w2", 1)]
    assert slot_names("w2", 1) == ["w2"]
    cfg, state = config(hosts=slots, minimum=1, maximum=5, step_down=0.4), State()
    seen = all_up(state, cfg)
    seen["w1-0"] = Seen(1, True)  # computing
    observe(state, cfg, seen, now=1000.0)
    decision = decide(state, cfg, seen, adaptive=1, now=1061.0)
    assert (decision.kind, decision.hosts) == (DOWN, ("w2", "w1-3")), decision.line  # 40 % of 5 workers: 2
    apply(state, decision, decision.hosts, now=1061.0)
    seen.update({"w2": Seen(0, False), "w1-3": Seen(0, False)})
    decision = decide(state, cfg, seen, adaptive=1, now=1100.0)
    assert (decision.kind, decision.hosts) == (DOWN, ("w1-2",)), decision.line  # 40 % of 3: 1; w1-0 is busy
    apply(state, decision, decision.hosts, now=1100.0)
    seen["w1-2"] = Seen(0, False)
    decision = decide(state, cfg, seen, adaptive=4, now=1101.0)
    assert (decision.kind, decision.hosts) == (UP, ("w1-2", "w1-3")), decision.line
