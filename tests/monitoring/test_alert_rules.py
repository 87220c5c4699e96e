"""The bundle's Prometheus alert rules (roles/dask_monitoring/templates/dask-alerts.yml.j2) under promtool.

The template is rendered as Ansible renders it (its variables in [[ ]], Prometheus's own {{ }} left alone) with the
role's defaults from meta/argument_specs.yml, checked with `promtool check rules`, then tested with `promtool test
rules`: CASES holds one firing and one quiet case per alert, each with its input series and the alerts expected
(exact labels and annotations) at given times. Every time comes from the rendered rules (their `for` and range
windows) and the scrape interval (Prometheus's evaluation interval too), so a changed default keeps the cases right.

promtool: $PROMTOOL, else what scripts/promtool.sh prints (PATH, .cache/promtool/, else Debian's prometheus
package). Without one the tests are skipped, and fail where CI=true.

promtool 2.42 (Debian bookworm) reads external labels per test group (`external_labels` next to `input_series`),
not at the top of the file; that is where they are given here. Its series notation loses trailing samples after a
missing one (`_`), so no case uses gaps.
"""
from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
ROLE = ROOT / "roles" / "dask_monitoring"
TEMPLATE = ROLE / "templates" / "dask-alerts.yml.j2"
SPEC = ROLE / "meta" / "argument_specs.yml"
PROMTOOL_SCRIPT = ROOT / "scripts" / "promtool.sh"
CLUSTER = "dask-test"  # the external label dask_cluster (prometheus.yml.j2 sets it to the cluster's name)
GIB = 2**30
MIB = 2**20

Labels = dict[str, str]


# Durations -------------------------------------------------------------------------------------------------------

_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000, "y": 31_536_000_000}
_DURATION = re.compile(r"(\d+)(ms|s|m|h|d|w|y)")


def parse_duration(text: str) -> int:
    """A Prometheus duration ("2m", "1h30m", "500ms") in milliseconds."""
    assert re.fullmatch(f"(?:{_DURATION.pattern})+", text), f"not a Prometheus duration: {text!r}"
    return sum(int(number) * _UNIT_MS[unit] for number, unit in _DURATION.findall(text))


def duration(ms: int) -> str:
    """Milliseconds as a Prometheus duration in the largest unit that divides them (h, m, s, ms)."""
    for unit in ("h", "m", "s"):
        if ms % _UNIT_MS[unit] == 0:
            return f"{ms // _UNIT_MS[unit]}{unit}"
    return f"{ms}ms"


# Prometheus's template functions, as Go formats them --------------------------------------------------------------


def go_value(value: float) -> str:
    """{{ $value }}: Go's %v of a float64 (shortest form, whole numbers without a decimal point)."""
    return str(int(value)) if value.is_integer() and abs(value) < 1e21 else repr(value)


def humanize_percentage(value: float) -> str:
    return f"{value * 100:.4g}%"


def humanize1024(value: float) -> str:
    if abs(value) <= 1 or math.isnan(value) or math.isinf(value):
        return f"{value:.4g}"
    prefix = ""
    for candidate in ("ki", "Mi", "Gi", "Ti", "Pi", "Ei", "Zi", "Yi"):
        if abs(value) < 1024:
            break
        prefix, value = candidate, value / 1024
    return f"{value:.4g}{prefix}"


# The rendered rules -----------------------------------------------------------------------------------------------


def spec_defaults() -> dict[str, Any]:
    options = yaml.safe_load(SPEC.read_text())["argument_specs"]["main"]["options"]
    return {name: option["default"] for name, option in options.items() if "default" in option}


def render(settings: dict[str, Any], out: Path) -> Path:
    """The template as the role's template task renders it: [[ ]] delimiters, trim_blocks (Ansible's default)."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATE.parent), variable_start_string="[[", variable_end_string="]]",
        undefined=jinja2.StrictUndefined, trim_blocks=True, keep_trailing_newline=True,
        autoescape=False,  # noqa: S701 - YAML for Prometheus, not HTML; Ansible does not escape either
    )
    path = out / "dask-alerts.yml"
    path.write_text(env.get_template(TEMPLATE.name).render(dask_settings=settings))
    return path


@dataclass(frozen=True)
class Rule:
    alert: str
    expr: str
    for_ms: int
    window_ms: int  # the longest range selector of the expression ([5m]), 0 without one

    @classmethod
    def from_yaml(cls, rule: dict[str, Any]) -> Rule:
        expr = str(rule["expr"])
        windows = [parse_duration(text) for text in re.findall(r"\[([0-9a-z]+)\]", expr)]
        return cls(str(rule["alert"]), expr, parse_duration(str(rule.get("for", "0s"))), max(windows, default=0))


def load_rules(path: Path) -> dict[str, Rule]:
    rules: dict[str, Rule] = {}
    for group in yaml.safe_load(path.read_text())["groups"]:
        for item in group["rules"]:
            if "alert" in item:
                rule = Rule.from_yaml(item)
                assert rule.alert not in rules, f"alert {rule.alert} defined twice"
                rules[rule.alert] = rule
    return rules


@dataclass(frozen=True)
class Rendered:
    path: Path
    rules: dict[str, Rule]
    step_ms: int  # input series interval and evaluation interval
    warmup_ms: int  # healthy samples before any trouble: the longest range window of all rules
    ratio: float  # dask_monitoring_gpu_memory_ratio


# Cases ------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Expected:
    labels: Labels  # every label of the alert but alertname
    annotations: dict[str, str]


@dataclass(frozen=True)
class Scenario:
    series: dict[str, str]  # series (metric{labels}) -> promtool's values notation
    checks: list[tuple[int, list[Expected]]]  # (evaluation time in ms, the alerts firing then)


@dataclass(frozen=True)
class Ctx:
    """What a case's times are computed from. t=0 starts healthy; trouble starts at onset (the warm-up: every
    range window full of healthy samples); a rule that holds from onset fires at fires_at."""
    rule: Rule
    step: int
    onset: int
    ratio: float

    @property
    def fires_at(self) -> int:
        return self.onset + self.rule.for_ms

    @property
    def late(self) -> int:
        """Well after anything could fire: the rule's `for` and another warm-up past onset."""
        return self.fires_at + self.onset + self.step

    @property
    def end(self) -> int:
        """Series run up to and including late."""
        return self.late + self.step

    def values(self, *pieces: tuple[int | None, float, float]) -> str:
        """promtool's notation for consecutive pieces (until in ms, exclusive, None for the end; first value;
        increase per step), one sample per step from t=0."""
        parts: list[str] = []
        t = 0
        for until, first, per_step in pieces:
            stop = self.end if until is None else until
            count = -(-(stop - t) // self.step)
            assert count > 0, f"empty piece ending at {stop} ms"
            start = _number(first)
            parts.append(start if count == 1 else f"{start}+{_number(per_step)}x{count - 1}" if per_step
                         else f"{start}x{count - 1}")
            t += count * self.step
        assert t >= self.end, "the last piece must run to the end"
        return " ".join(parts)


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def flat(value: float, until: int | None = None) -> tuple[int | None, float, float]:
    return (until, value, 0.0)


def rising(first: float, per_step: float, until: int | None = None) -> tuple[int | None, float, float]:
    return (until, first, per_step)


def series(name: str, labels: Labels) -> str:
    return name + "{" + ", ".join(f'{key}="{value}"' for key, value in labels.items()) + "}"


SCHEDULER: Labels = {"job": "dask-scheduler", "instance": "sched01:8787", "host": "sched01"}


def worker(host: str, index: int, mode: str = "gpu") -> Labels:
    return {"job": "dask-workers", "instance": f"{host}:{8790 + index}", "host": host, "worker": str(index),
            "mode": mode}


def node(host: str) -> Labels:
    return {"job": "node", "instance": f"{host}:9100", "host": host}


def gpu_uuid(host: str, index: int) -> str:
    return f"GPU-{uuid.uuid5(uuid.NAMESPACE_DNS, f'{index}.{host}')}"


def gpu(host: str, index: int) -> Labels:
    """A GPU worker's NVML series (dask_gpu_verify.gpu_metrics): the target's labels and the GPU's."""
    return {**worker(host, index), "gpu_uuid": gpu_uuid(host, index), "gpu_index": str(index),
            "gpu_name": "NVIDIA H200"}


def dcgm(host: str, index: int) -> Labels:
    return {"job": "dcgm", "instance": f"{host}:9400", "host": host, "gpu": str(index),
            "UUID": gpu_uuid(host, index), "device": f"nvidia{index}", "modelName": "NVIDIA H200", "Hostname": host}


def workers_by_state(c: Ctx, **states: list[tuple[int | None, float, float]]) -> dict[str, str]:
    """dask_scheduler_workers for every state (0 where not given)."""
    names = ("idle", "partially_saturated", "saturated", "paused", "retiring")
    assert set(states) <= set(names)
    return {series("dask_scheduler_workers", {**SCHEDULER, "state": name}):
            c.values(*states.get(name, [flat(0)])) for name in names}


# DaskSchedulerDown


def scheduler_down_fires(c: Ctx) -> Scenario:
    alert = Expected({**SCHEDULER, "severity": "critical"},
                     {"summary": f"Dask scheduler of {CLUSTER} on sched01 does not answer"})
    return Scenario({series("up", SCHEDULER): c.values(flat(1, c.onset), flat(0)),
                     series("up", node("sched01")): c.values(flat(1))},
                    [(c.fires_at - c.step, []), (c.fires_at, [alert])])


def scheduler_down_quiet(c: Ctx) -> Scenario:
    """Down one step less than `for`; the scheduler host's node exporter (another job) down all along."""
    return Scenario({series("up", SCHEDULER): c.values(flat(1, c.onset), flat(0, c.fires_at), flat(1)),
                     series("up", node("sched01")): c.values(flat(0))},
                    [(c.fires_at - c.step, []), (c.fires_at, []), (c.late, [])])


# DaskWorkersMissing: three worker targets in the inventory

INVENTORY = [worker("gpu01", 0), worker("gpu01", 1), worker("gpu02", 0)]


def workers_missing_fires(c: Ctx) -> Scenario:
    """gpu02's worker stops: its target is down and the scheduler counts 2 workers."""
    up = {series("up", labels): c.values(flat(1, c.onset), flat(0)) if labels["host"] == "gpu02"
          else c.values(flat(1)) for labels in INVENTORY}
    states = workers_by_state(c, idle=[flat(1)], saturated=[flat(1)],
                              partially_saturated=[flat(1, c.onset), flat(0)])
    alert = Expected({"severity": "warning"}, {"summary": "2 workers registered, fewer than the inventory's"})
    return Scenario({**up, **states}, [(c.fires_at - c.step, []), (c.fires_at, [alert])])


def workers_missing_quiet(c: Ctx) -> Scenario:
    """Workers in every state count (idle, paused, retiring: 3 of 3); one away for one step less than `for`."""
    up = {series("up", labels): c.values(flat(1)) for labels in INVENTORY}
    states = workers_by_state(c, idle=[flat(1, c.onset), flat(0, c.fires_at), flat(1)], paused=[flat(1)],
                              retiring=[flat(1)])
    return Scenario({**up, **states}, [(c.fires_at - c.step, []), (c.fires_at, []), (c.late, [])])


def workers_missing_released_quiet(c: Ctx) -> Scenario:
    """gpu02 is released by the autoscaler (docs/autoscale.md): its target is down and 2 workers count, on purpose."""
    up = {series("up", labels): c.values(flat(1, c.onset), flat(0)) if labels["host"] == "gpu02"
          else c.values(flat(1)) for labels in INVENTORY}
    states = workers_by_state(c, idle=[flat(1)], saturated=[flat(1)],
                              partially_saturated=[flat(1, c.onset), flat(0)])
    released = {series("dask_autoscale_host_released", {**AUTOSCALE, "host": host, "workers": count}):
                c.values(flat(0, c.onset), flat(1)) if host == "gpu02" else c.values(flat(0))
                for host, count in (("gpu01", "2"), ("gpu02", "1"))}
    return Scenario({**up, **states, **released}, [(c.fires_at - c.step, []), (c.fires_at, []), (c.late, [])])


AUTOSCALE: Labels = {"job": "dask-autoscale", "instance": "127.0.0.1:8784"}


def by_gpu(c: Ctx, gpu02_stops: bool) -> dict[Any, Any]:
    """gpu01's second worker released on its own (dask_autoscale_by gpu): its target down, gpu01 keeps the other; with
    gpu02_stops, gpu02's worker stops too, not released."""
    gone = [worker("gpu01", 1)] + ([worker("gpu02", 0)] if gpu02_stops else [])
    up = {series("up", labels): c.values(flat(1, c.onset), flat(0)) if labels in gone else c.values(flat(1))
          for labels in INVENTORY}
    states = workers_by_state(c, idle=[flat(1)], saturated=[flat(1, c.onset), flat(0)],
                              partially_saturated=[flat(1, c.onset), flat(0 if gpu02_stops else 1)])
    released = {series("dask_autoscale_released_workers", {**AUTOSCALE, "host": host}):
                c.values(flat(0, c.onset), flat(1)) if host == "gpu01" else c.values(flat(0))
                for host in ("gpu01", "gpu02")}
    hosts = {series("dask_autoscale_host_released", {**AUTOSCALE, "host": host, "workers": count}): c.values(flat(0))
             for host, count in (("gpu01", "2"), ("gpu02", "1"))}
    return {**up, **states, **released, **hosts}


def workers_missing_gpu_released_quiet(c: Ctx) -> Scenario:
    """gpu01's second worker released by GPU: 2 of 3 registered, on purpose."""
    return Scenario(by_gpu(c, gpu02_stops=False), [(c.fires_at - c.step, []), (c.fires_at, []), (c.late, [])])


def workers_missing_gpu_released_fires(c: Ctx) -> Scenario:
    """gpu01's second worker released by GPU, and gpu02's worker stops unasked: 1 registered, 2 expected."""
    alert = Expected({"severity": "warning"}, {"summary": "1 workers registered, fewer than the inventory's"})
    return Scenario(by_gpu(c, gpu02_stops=True), [(c.fires_at - c.step, []), (c.fires_at, [alert])])


# DaskHostWorkersGone: gpu01 and gpu03 have two workers each


def host_workers_gone_fires(c: Ctx) -> Scenario:
    """Both of gpu01's workers stop; one of gpu03's two stops too (that host still has one)."""
    gone = [worker("gpu01", 0), worker("gpu01", 1), worker("gpu03", 1)]
    targets = [*gone, worker("gpu03", 0), worker("gpu02", 0)]
    up = {series("up", labels): c.values(flat(1, c.onset), flat(0)) if labels in gone else c.values(flat(1))
          for labels in targets}
    alert = Expected({"host": "gpu01", "severity": "critical"}, {"summary": "No Dask worker answers on gpu01"})
    return Scenario(up, [(c.fires_at - c.step, []), (c.fires_at, [alert])])


def host_workers_gone_quiet(c: Ctx) -> Scenario:
    """gpu03 keeps one of its two workers all along; gpu01's two are gone one step less than `for`."""
    brief = [worker("gpu01", 0), worker("gpu01", 1)]
    up = {series("up", labels): c.values(flat(1, c.onset), flat(0, c.fires_at), flat(1)) for labels in brief}
    up[series("up", worker("gpu03", 0))] = c.values(flat(1))
    up[series("up", worker("gpu03", 1))] = c.values(flat(0))
    return Scenario(up, [(c.fires_at - c.step, []), (c.fires_at, []), (c.late, [])])


def host_workers_gone_released_quiet(c: Ctx) -> Scenario:
    """gpu01's two workers stop because the autoscaler released gpu01."""
    gone = [worker("gpu01", 0), worker("gpu01", 1)]
    up = {series("up", labels): c.values(flat(1, c.onset), flat(0)) for labels in gone}
    up[series("up", worker("gpu03", 0))] = c.values(flat(1))
    up[series("dask_autoscale_host_released", {**AUTOSCALE, "host": "gpu01", "workers": "2"})] = c.values(
        flat(0, c.onset), flat(1))
    return Scenario(up, [(c.fires_at - c.step, []), (c.fires_at, []), (c.late, [])])


def host_workers_gone_waiting_quiet(c: Ctx) -> Scenario:
    """gpu01's two workers stop and stay stopped while another cluster's workers hold its GPUs (clusters taking turns,
    dask_autoscale_share_gpus): its agent waits, and the autoscaler says so."""
    gone = [worker("gpu01", 0), worker("gpu01", 1)]
    up = {series("up", labels): c.values(flat(1, c.onset), flat(0)) for labels in gone}
    up[series("up", worker("gpu03", 0))] = c.values(flat(1))
    up[series("dask_autoscale_host_waiting", {**AUTOSCALE, "host": "gpu01"})] = c.values(flat(0, c.onset), flat(1))
    return Scenario(up, [(c.fires_at - c.step, []), (c.fires_at, []), (c.late, [])])


# DaskAutoscaleBehind and DaskAutoscaleHeld: the autoscaler's own series (on the scheduler host, sched01)

AUTOSCALER: Labels = {**AUTOSCALE, "host": "sched01"}


def autoscale_behind_fires(c: Ctx) -> Scenario:
    """The autoscaler wants 4 workers up; 2 register, and stay 2."""
    alert = Expected({**AUTOSCALER, "severity": "warning"},
                     {"summary": f"The autoscaler of {CLUSTER} wants 4 workers up; the registered count differs"})
    return Scenario({series("dask_autoscale_desired_workers", AUTOSCALER): c.values(flat(2, c.onset), flat(4)),
                     series("dask_autoscale_registered_workers", AUTOSCALER): c.values(flat(2))},
                    [(c.fires_at - c.step, []), (c.fires_at, [alert])])


def autoscale_behind_quiet(c: Ctx) -> Scenario:
    """A host takes one step less than `for` to register."""
    return Scenario({series("dask_autoscale_desired_workers", AUTOSCALER): c.values(flat(2, c.onset), flat(4)),
                     series("dask_autoscale_registered_workers", AUTOSCALER): c.values(flat(2, c.fires_at - c.step),
                                                                                        flat(4))},
                    [(c.fires_at - c.step, []), (c.fires_at, []), (c.late, [])])


def autoscale_held_fires(c: Ctx) -> Scenario:
    alert = Expected({**AUTOSCALER, "severity": "warning"},
                     {"summary": f"The autoscaler of {CLUSTER} has been held by a site.yml run for an hour "
                                 "(rerun site.yml)"})
    return Scenario({series("dask_autoscale_paused", AUTOSCALER): c.values(flat(0, c.onset), flat(1))},
                    [(c.fires_at - c.step, []), (c.fires_at, [alert])])


def autoscale_held_quiet(c: Ctx) -> Scenario:
    """A site.yml run that holds it one step less than `for`."""
    return Scenario({series("dask_autoscale_paused", AUTOSCALER): c.values(flat(0, c.onset), flat(1, c.fires_at),
                                                                             flat(0))},
                    [(c.fires_at - c.step, []), (c.fires_at, []), (c.late, [])])


# DaskNodeDown


def node_down_fires(c: Ctx) -> Scenario:
    alert = Expected({**node("gpu01"), "severity": "critical"}, {"summary": "Node exporter on gpu01 does not answer"})
    return Scenario({series("up", node("gpu01")): c.values(flat(1, c.onset), flat(0)),
                     series("up", node("sched01")): c.values(flat(1))},
                    [(c.fires_at - c.step, []), (c.fires_at, [alert])])


def node_down_quiet(c: Ctx) -> Scenario:
    """gpu01's node exporter down one step less than `for`; gpu02's worker (another job) down all along."""
    return Scenario({series("up", node("gpu01")): c.values(flat(1, c.onset), flat(0, c.fires_at), flat(1)),
                     series("up", node("gpu02")): c.values(flat(1)),
                     series("up", worker("gpu02", 0)): c.values(flat(0))},
                    [(c.fires_at - c.step, []), (c.fires_at, []), (c.late, [])])


# DaskGPUMemoryHigh: 80 GiB GPUs

TOTAL = 80 * GIB


def used(fraction: float) -> int:
    return int(TOTAL * fraction)


def high_fraction(ratio: float) -> float:
    """Halfway between the ratio and a full GPU; past total where the ratio is 1 (the rule is tested as written)."""
    return (1 + ratio) / 2 if ratio < 1 else ratio * 1.01


def gpu_memory(c: Ctx, gpu0: list[tuple[int | None, float, float]]) -> dict[str, str]:
    """gpu01's GPU 0 as given, GPU 1 just below the ratio all along."""
    return {series("dask_worker_gpu_memory_used_bytes", gpu("gpu01", 0)): c.values(*gpu0),
            series("dask_worker_gpu_memory_used_bytes", gpu("gpu01", 1)): c.values(flat(used(c.ratio * 0.99))),
            series("dask_worker_gpu_memory_total_bytes", gpu("gpu01", 0)): c.values(flat(TOTAL)),
            series("dask_worker_gpu_memory_total_bytes", gpu("gpu01", 1)): c.values(flat(TOTAL))}


def gpu_memory_high_fires(c: Ctx) -> Scenario:
    high = used(high_fraction(c.ratio))
    full = humanize_percentage(high / TOTAL)
    alert = Expected({**gpu("gpu01", 0), "severity": "warning"},
                     {"summary": f"GPU 0 ({gpu_uuid('gpu01', 0)}) on gpu01 is {full} full"})
    return Scenario(gpu_memory(c, [flat(used(c.ratio / 2), c.onset), flat(high)]),
                    [(c.fires_at - c.step, []), (c.fires_at, [alert])])


def gpu_memory_high_quiet(c: Ctx) -> Scenario:
    """GPU 0 past the ratio one step less than `for`, GPU 1 just below it all along."""
    gpu0 = [flat(used(c.ratio / 2), c.onset), flat(used(high_fraction(c.ratio)), c.fires_at), flat(used(c.ratio / 2))]
    return Scenario(gpu_memory(c, gpu0), [(c.fires_at - c.step, []), (c.fires_at, []), (c.late, [])])


# DaskWorkersSpilling: 1 MiB/s to disk

SPILL_RATE = MIB  # bytes per second


def spill(c: Ctx, labels: Labels, activity: str, *pieces: tuple[int | None, float, float]) -> tuple[str, str]:
    return series("dask_worker_spill_bytes_total", {**labels, "activity": activity}), c.values(*pieces)


def workers_spilling_fires(c: Ctx) -> Scenario:
    """bigmem01's worker writes to disk from onset (and reads back all along); gpu01's wrote before t=0 only."""
    per_step = SPILL_RATE * c.step / 1000
    cpu = worker("bigmem01", 0, "cpu")
    written = 4 * GIB
    data = dict([spill(c, cpu, "disk_write", flat(written, c.onset), rising(written + per_step, per_step)),
                 spill(c, cpu, "disk_read", rising(0, per_step)),
                 spill(c, worker("gpu01", 0), "disk_write", flat(written))])
    # The rate over the window is exact once the window lies in the writing; later if `for` is shorter.
    at = c.onset + max(c.rule.for_ms, c.rule.window_ms)
    alert = Expected({**cpu, "activity": "disk_write", "severity": "warning"},
                     {"summary": f"Worker 0 on bigmem01 spills to disk ({humanize1024(SPILL_RATE)}B/s)"})
    return Scenario(data, [(c.fires_at - c.step, []), (at, [alert])])


def workers_spilling_quiet(c: Ctx) -> Scenario:
    """Spilled data read back from disk and memory all along, nothing written since before t=0."""
    per_step = SPILL_RATE * c.step / 1000
    cpu = worker("bigmem01", 0, "cpu")
    data = dict([spill(c, cpu, "disk_write", flat(4 * GIB)), spill(c, cpu, "disk_read", rising(0, per_step)),
                 spill(c, cpu, "memory_read", rising(0, per_step))])
    return Scenario(data, [(c.fires_at, []), (c.late, [])])


# DaskWorkersPaused


def workers_paused_fires(c: Ctx) -> Scenario:
    alert = Expected({**SCHEDULER, "state": "paused", "severity": "warning"},
                     {"summary": "1 workers paused: their memory is near its limit"})
    states = workers_by_state(c, idle=[flat(2)], paused=[flat(0, c.onset), flat(1)])
    return Scenario(states, [(c.fires_at - c.step, []), (c.fires_at, [alert])])


def workers_paused_quiet(c: Ctx) -> Scenario:
    """A worker paused one step less than `for`; one retiring and two saturated all along."""
    states = workers_by_state(c, saturated=[flat(2)], retiring=[flat(1)],
                              paused=[flat(0, c.onset), flat(1, c.fires_at), flat(0)])
    return Scenario(states, [(c.fires_at - c.step, []), (c.fires_at, []), (c.late, [])])


# DaskGPUUncorrectedECCErrors


def ecc(c: Ctx, host: str, index: int, kind: str, *pieces: tuple[int | None, float, float]) -> tuple[str, str]:
    return series("dask_worker_gpu_ecc_errors_total", {**gpu(host, index), "type": kind}), c.values(*pieces)


def ecc_errors_fires(c: Ctx) -> Scenario:
    """gpu01's GPU 0 counts an uncorrected error at onset; corrected ones rise all along; GPU 1 had 3 before t=0."""
    data = dict([ecc(c, "gpu01", 0, "uncorrected", flat(0, c.onset), flat(1)),
                 ecc(c, "gpu01", 0, "corrected", rising(0, 1)),
                 ecc(c, "gpu01", 1, "uncorrected", flat(3))])
    alert = Expected({**gpu("gpu01", 0), "type": "uncorrected", "severity": "critical"},
                     {"summary": f"GPU 0 ({gpu_uuid('gpu01', 0)}) on gpu01 reports uncorrected ECC errors"})
    # Fires at once, and stops once the window has passed the error.
    return Scenario(data, [(c.fires_at - c.step, []), (c.fires_at, [alert]),
                           (c.fires_at + c.rule.window_ms + c.step, [])])


def ecc_errors_quiet(c: Ctx) -> Scenario:
    """Uncorrected errors counted before t=0 (the count is volatile: since the driver loaded) never rise;
    corrected ones rise all along."""
    data = dict([ecc(c, "gpu01", 0, "uncorrected", flat(2)), ecc(c, "gpu01", 0, "corrected", rising(0, 1))])
    return Scenario(data, [(c.fires_at, []), (c.late, [])])


# DaskGPUUnhealthy


def unhealthy_fires(c: Ctx) -> Scenario:
    """gpu01's GPU 1 turns unfit at onset and stays so; GPU 0 stays fit."""
    data = {series("dask_worker_gpu_healthy", gpu("gpu01", 0)): c.values(flat(1)),
            series("dask_worker_gpu_healthy", gpu("gpu01", 1)): c.values(flat(1, c.onset), flat(0))}
    alert = Expected({**gpu("gpu01", 1), "severity": "critical"},
                     {"summary": f"GPU 1 ({gpu_uuid('gpu01', 1)}) on gpu01 is unfit for work (docs/gpu-health.md)"})
    return Scenario(data, [(c.fires_at - c.step, []), (c.fires_at, [alert])])


def unhealthy_quiet(c: Ctx) -> Scenario:
    """GPU 1 is unfit for one step less than `for`, then fit again."""
    data = {series("dask_worker_gpu_healthy", gpu("gpu01", 1)): c.values(flat(1, c.onset), flat(0, c.fires_at),
                                                                          flat(1))}
    return Scenario(data, [(c.fires_at - c.step, []), (c.fires_at, []), (c.late, [])])


# DaskGPUXidErrors


def xid_errors_fires(c: Ctx) -> Scenario:
    """gpu01's GPU 0 reports XID 79 at onset; GPU 1 none."""
    data = {series("DCGM_FI_DEV_XID_ERRORS", dcgm("gpu01", 0)): c.values(flat(0, c.onset), flat(79)),
            series("DCGM_FI_DEV_XID_ERRORS", dcgm("gpu01", 1)): c.values(flat(0))}
    alert = Expected({**dcgm("gpu01", 0), "severity": "critical"},
                     {"summary": "GPU 0 on gpu01 reported new XID errors (1 changes in 10 minutes)"})
    return Scenario(data, [(c.fires_at - c.step, []), (c.fires_at, [alert]),
                           (c.fires_at + c.rule.window_ms + c.step, [])])


def xid_errors_quiet(c: Ctx) -> Scenario:
    """The last XID (13) came before t=0 and stays."""
    data = {series("DCGM_FI_DEV_XID_ERRORS", dcgm("gpu01", 0)): c.values(flat(13)),
            series("DCGM_FI_DEV_XID_ERRORS", dcgm("gpu01", 1)): c.values(flat(0))}
    return Scenario(data, [(c.fires_at, []), (c.late, [])])


def xid_errors_reset_quiet(c: Ctx) -> Scenario:
    """The last XID (79) drops back to 0 at onset (dcgm-exporter restarted): no new error, no alert."""
    data = {series("DCGM_FI_DEV_XID_ERRORS", dcgm("gpu01", 0)): c.values(flat(79, c.onset), flat(0))}
    return Scenario(data, [(c.fires_at, []), (c.late, [])])


@dataclass(frozen=True)
class Case:
    alert: str
    fires: bool
    build: Callable[[Ctx], Scenario]

    @property
    def id(self) -> str:
        return f"{self.alert}-{self.build.__name__}"


CASES = [
    Case("DaskSchedulerDown", True, scheduler_down_fires),
    Case("DaskSchedulerDown", False, scheduler_down_quiet),
    Case("DaskWorkersMissing", True, workers_missing_fires),
    Case("DaskWorkersMissing", False, workers_missing_quiet),
    Case("DaskWorkersMissing", False, workers_missing_released_quiet),
    Case("DaskWorkersMissing", False, workers_missing_gpu_released_quiet),
    Case("DaskWorkersMissing", True, workers_missing_gpu_released_fires),
    Case("DaskHostWorkersGone", True, host_workers_gone_fires),
    Case("DaskHostWorkersGone", False, host_workers_gone_quiet),
    Case("DaskHostWorkersGone", False, host_workers_gone_released_quiet),
    Case("DaskHostWorkersGone", False, host_workers_gone_waiting_quiet),
    Case("DaskAutoscaleBehind", True, autoscale_behind_fires),
    Case("DaskAutoscaleBehind", False, autoscale_behind_quiet),
    Case("DaskAutoscaleHeld", True, autoscale_held_fires),
    Case("DaskAutoscaleHeld", False, autoscale_held_quiet),
    Case("DaskNodeDown", True, node_down_fires),
    Case("DaskNodeDown", False, node_down_quiet),
    Case("DaskGPUMemoryHigh", True, gpu_memory_high_fires),
    Case("DaskGPUMemoryHigh", False, gpu_memory_high_quiet),
    Case("DaskWorkersSpilling", True, workers_spilling_fires),
    Case("DaskWorkersSpilling", False, workers_spilling_quiet),
    Case("DaskWorkersPaused", True, workers_paused_fires),
    Case("DaskWorkersPaused", False, workers_paused_quiet),
    Case("DaskGPUUncorrectedECCErrors", True, ecc_errors_fires),
    Case("DaskGPUUncorrectedECCErrors", False, ecc_errors_quiet),
    Case("DaskGPUUnhealthy", True, unhealthy_fires),
    Case("DaskGPUUnhealthy", False, unhealthy_quiet),
    Case("DaskGPUXidErrors", True, xid_errors_fires),
    Case("DaskGPUXidErrors", False, xid_errors_quiet),
    Case("DaskGPUXidErrors", False, xid_errors_reset_quiet),
]


def unit_test_file(rendered: Rendered, case: Case) -> dict[str, Any]:
    """promtool's unit test file for one case (one test group)."""
    rule = rendered.rules[case.alert]
    scenario = case.build(Ctx(rule, rendered.step_ms, rendered.warmup_ms, rendered.ratio))
    times = [at for at, _ in scenario.checks]
    assert len(set(times)) == len(times), f"{case.id}: two checks at one time"
    assert case.fires == any(alerts for _, alerts in scenario.checks), f"{case.id}: fires must expect an alert"
    checks = [{"eval_time": duration(at), "alertname": case.alert,
               "exp_alerts": [{"exp_labels": alert.labels, "exp_annotations": alert.annotations} for alert in alerts]}
              for at, alerts in scenario.checks]
    return {"rule_files": [str(rendered.path)], "evaluation_interval": duration(rendered.step_ms),
            "tests": [{"name": case.id, "interval": duration(rendered.step_ms),
                       "external_labels": {"dask_cluster": CLUSTER},
                       "input_series": [{"series": name, "values": values} for name, values in scenario.series.items()],
                       "alert_rule_test": checks}]}


# Fixtures and tests -----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def promtool() -> str:
    explicit = os.environ.get("PROMTOOL")
    if explicit:
        found = shutil.which(explicit)
        reason = f"PROMTOOL={explicit} is not an executable"
    else:
        result = subprocess.run(["bash", str(PROMTOOL_SCRIPT)], capture_output=True, text=True, timeout=600)
        found = result.stdout.strip() if result.returncode == 0 else None
        reason = f"scripts/promtool.sh found no promtool (exit {result.returncode}): {result.stderr.strip()[-1500:]}"
    if found:
        return found
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}; promtool is required where CI=true")
    pytest.skip(f"{reason} (set PROMTOOL, or let scripts/promtool.sh fetch Debian's prometheus package)")


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Rendered:
    settings = spec_defaults()
    path = render(settings, tmp_path_factory.mktemp("rules"))
    rules = load_rules(path)
    durations = [parse_duration(str(settings["dask_monitoring_scrape_interval"]))]
    durations += [ms for rule in rules.values() for ms in (rule.for_ms, rule.window_ms) if ms]
    step = math.gcd(*durations)
    return Rendered(path, rules, step, max([rule.window_ms for rule in rules.values()] + [step]),
                    float(settings["dask_monitoring_gpu_memory_ratio"]))


def run(promtool: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool, *args], capture_output=True, text=True, timeout=300)


def test_rules_pass_promtool_check(promtool: str, rendered: Rendered) -> None:
    result = run(promtool, "check", "rules", str(rendered.path))
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"promtool check rules failed:\n{output}"
    assert f"SUCCESS: {len(rendered.rules)} rules found" in output, output


def test_every_alert_has_a_firing_and_a_quiet_case(rendered: Rendered) -> None:
    """A rule added to the template without its cases fails here; so does a case for a rule that is gone."""
    cases = {(case.alert, case.fires) for case in CASES}
    assert len({case.id for case in CASES}) == len(CASES), "every case has its own scenario"
    missing = sorted(f"{alert} ({'firing' if fires else 'quiet'})" for alert in rendered.rules
                     for fires in (True, False) if (alert, fires) not in cases)
    assert not missing, f"alerts without a case: {', '.join(missing)}"
    unknown = sorted({case.alert for case in CASES} - set(rendered.rules))
    assert not unknown, f"cases for alerts not in the rendered rules: {', '.join(unknown)}"


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_alert_rule_case(promtool: str, rendered: Rendered, case: Case, tmp_path: Path) -> None:
    test_file = tmp_path / f"{case.id}.test.yml"
    test_file.write_text(yaml.safe_dump(unit_test_file(rendered, case), sort_keys=False, width=10_000))
    result = run(promtool, "test", "rules", str(test_file))
    assert result.returncode == 0, (f"promtool test rules failed for {case.id}:\n{result.stdout}{result.stderr}\n"
                                    f"--- {test_file.name}\n{test_file.read_text()}")
