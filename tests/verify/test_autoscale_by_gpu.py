"""dask-gpu-autoscale --by gpu without Dask: what a host's agent is told (each worker's desired state, those
released), the counts per host in /metrics, the state file site.yml reads (each worker's host), a state of the other
unit of scale forgotten; and the agent's side: the file of released workers written whole, once per change. (The
agent's systemctl is stood in for here; the sandbox's autoscale suite runs the real agent and unit.)"""
from __future__ import annotations

import json
import runpy
from pathlib import Path
from typing import Any

import pytest
from dask_gpu_verify.autoscale import Service
from dask_gpu_verify.autoscale_policy import DOWN, Config, Decision, Host, apply, per_gpu

AGENT = runpy.run_path(str(Path(__file__).resolve().parents[2] / "roles" / "dask_autoscale" / "files"
                           / "autoscale_agent.py"))
HOSTS = (Host("g1", "10.0.0.1", 2), Host("g2", "10.0.0.2", 1))


def service(folder: Path, by: str = "gpu") -> Service:
    hosts = per_gpu(HOSTS) if by == "gpu" else HOSTS
    return Service(Config(hosts, 1, 3, 60.0, 30.0, 0.5), folder, by)


def test_an_agent_is_told_its_workers_and_metrics_count_them_per_host(tmp_path: Path) -> None:
    scaler = service(tmp_path)
    apply(scaler.state, Decision(DOWN, ("g1-1",), 1, "test"), ("g1-1",), now=10.0)
    scaler.save()
    told = scaler.host("g1")
    assert told is not None and told["workers"] == {"g1-0": "up", "g1-1": "down"}
    assert (told["desired"], told["released"]) == ("up", ["g1-1"])
    assert scaler.host("g1-0") is None  # agents ask by host
    metrics = scaler.metrics()
    assert 'dask_autoscale_released_workers{host="g1"} 1' in metrics
    assert 'dask_autoscale_host_released{host="g1",workers="2"} 0' in metrics
    assert 'dask_autoscale_host_released{host="g2",workers="1"} 0' in metrics
    assert "dask_autoscale_desired_workers 2" in metrics
    saved = json.loads((tmp_path / "state.json").read_text())
    assert saved["by"] == "gpu" and saved["machines"] == {"g1-0": "g1", "g1-1": "g1", "g2": "g2"}
    assert saved["desired"]["g1-1"] == DOWN
    assert service(tmp_path).state.desired["g1-1"] == DOWN  # kept across a restart
    assert service(tmp_path, by="host").state.desired == {"g1": "up", "g2": "up"}  # the other unit: all up again


def test_the_agent_writes_the_released_workers_once_per_change(tmp_path: Path, capsys: Any,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    path = str(tmp_path / "released.json")
    agent = AGENT  # a copy of the script's globals; its functions look names up in their own
    scope = agent["slots_step"].__globals__
    started: list[str] = []
    monkeypatch.setitem(scope, "running", lambda unit: False)  # stand-in: the unit is not running
    monkeypatch.setitem(scope, "systemctl", lambda action, unit: started.append(f"{action} {unit}") or 0)
    answer = {"desired": "up", "released": ["g1-1"], "generation": 3}
    assert agent["slots_step"](path, "dask-worker", answer, None) == 3
    assert json.loads(Path(path).read_text()) == {"released": ["g1-1"]} and started == ["start dask-worker"]
    assert agent["slots_step"](path, "dask-worker", answer, 3) == 3  # the same decision: nothing written or started
    assert agent["slots_step"](path, "dask-worker", {**answer, "released": [], "generation": 4}, 3) == 4
    said = capsys.readouterr().out
    assert "workers released g1-1, wanted again none (generation 3)" in said
    assert "workers released none, wanted again g1-1 (generation 4)" in said
    assert said.count("workers released") == 2 and started == ["start dask-worker"] * 2
    assert oct(Path(path).stat().st_mode & 0o777) == "0o644"
