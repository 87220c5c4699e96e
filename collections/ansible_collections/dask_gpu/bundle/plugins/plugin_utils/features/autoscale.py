"""Feature `autoscale` (role dask_autoscale, docs/autoscale.md): worker hosts given back when idle and taken again
when work waits. dask-gpu-autoscale (images/verify, autoscale.py) runs on the scheduler host and decides; an agent
on each worker host starts and stops the host's worker unit. Its model part is `dask_cluster.autoscale`, its spec
builder `autoscale_spec`; its checks refuse limits that cannot hold and a cluster without TLS (the agents and the
autoscaler authenticate each other with the cluster's certificates)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.feature import (
    CheckInput,
    ClusterInput,
    Feature,
    HostInput,
)
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.identity import cluster_paths
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.ports import span
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.records import gpu_claims, mine
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.spec import SLOTS_FILE, tls_files, tool_spec, wait_ports

# Where the autoscaler keeps its state (state.json) and site.yml its pause file, inside its container.
CONTAINER_STATE = "/autoscale"


def enabled(settings: Mapping[str, Any]) -> bool:
    return settings.get("dask_autoscale_enabled") is True


def state_dir(settings: Mapping[str, Any]) -> str:
    return f"{cluster_paths(settings)['data']}/autoscale"


def per_gpu(settings: Mapping[str, Any]) -> bool:
    """Whether each worker (GPU) is a unit of scale of its own (dask_autoscale_by gpu), not its whole host."""
    return enabled(settings) and settings.get("dask_autoscale_by") == "gpu"


def sharing(settings: Mapping[str, Any]) -> bool:
    """Whether the cluster takes turns on its worker hosts' GPUs with other clusters that share them too."""
    return enabled(settings) and settings.get("dask_autoscale_share_gpus") is True


def turns(inp: HostInput) -> list[str]:
    """What a worker host's workers take turns on with the other clusters that share them (gpu_turns.py's keys):
    each of its worker GPUs (a MIG instance by its own UUID), or `cpu` on a CPU worker host; [] when not sharing."""
    if not sharing(inp.settings) or not inp.model.get("worker") or inp.model.get("retired"):
        return []
    if inp.model.get("worker_mode") != "gpu":
        return ["cpu"]
    return [claim["mig"] or claim["uuid"] for claim in gpu_claims(inp.model.get("worker_gpus") or [])]


def host(inp: HostInput) -> dict[str, Any]:
    """The scheduler host's port for the agents, and the autoscaler's state folder there; on a worker host of a
    cluster that shares its GPUs, what its workers take turns on (and the claim that lets another sharing cluster
    claim the same GPUs); by GPU, the folder of the agent's file of released workers (teardown removes it)."""
    keys = turns(inp)
    # What the last run left here (this cluster's record, as the run began): turns taken on a worker host. A run that
    # stops sharing gives them up only where they were taken.
    record = mine(inp.facts, str(inp.settings.get("dask_cluster_name") or "dask"))
    before = {"autoscale_before": {"share_gpus": record.get("share_gpus") is True}}
    # Written on every host, true or false: a record is merged key by key, so a mark left from an earlier run would
    # let another sharing cluster claim GPUs this one no longer takes turns on.
    shared: dict[str, Any] = {**before, "claims": {"share_gpus": bool(keys)}, **({"turns": keys} if keys else {})}
    slots = ([{"path": slots_dir(inp.settings), "owner": 0, "group": 0, "mode": "0755", "remove": "tree"}]
             if per_gpu(inp.settings) and inp.model.get("worker") and not inp.model.get("retired") else [])
    if not enabled(inp.settings) or not inp.model.get("scheduler"):
        return {**shared, "folders": slots} if slots else shared
    uid, gid = int(inp.settings["dask_container_uid"]), int(inp.settings["dask_container_gid"])
    data = cluster_paths(inp.settings)["data"]
    made = [] if inp.model.get("worker") else [{"path": data, "owner": 0, "group": 0, "mode": "0755",
                                                 "remove": "empty"}]
    return {**shared, "ports": {"dask_autoscale_port": span(int(inp.settings["dask_autoscale_port"])),
                                "dask_autoscale_metrics_port": span(int(inp.settings["dask_autoscale_metrics_port"]))},
            "folders": made + [{"path": state_dir(inp.settings), "owner": uid, "group": gid, "mode": "0750",
                                "remove": "tree"}] + slots}


def turn_files(inp: ClusterInput) -> dict[str, str]:
    """The worker unit's turn check on a worker host (gpu_turns.py) and the drop-in that makes its start run it
    (ExecCondition): sharing clusters keep them; named when off too, so that a run turning sharing off removes them.
    A drop-in, not a line of the unit: it acts at the unit's next start only, so adding or removing it restarts no
    worker (the unit's own file changing would: a rolling restart)."""
    unit = inp.model["units"]["worker"]
    return {"turns_script": f"{cluster_paths(inp.settings)['config']}/gpu_turns.py",
            "turns_dropin": f"/etc/systemd/system/{unit}.service.d/dask-turns.conf"}


def slots_dir(settings: Mapping[str, Any]) -> str:
    """On a worker host with dask_autoscale_by: gpu, the folder of the agent's file of released workers (mounted
    read-only in the worker container, spec.SLOTS_MOUNT): run-time state, in the data folder, not among the files
    the converge's record checks (the agent changes it between runs)."""
    return f"{cluster_paths(settings)['data']}/worker-slots"


def slots_files(settings: Mapping[str, Any]) -> dict[str, str]:
    return {"slots_dir": slots_dir(settings), "slots_file": f"{slots_dir(settings)}/{SLOTS_FILE}"}


def cluster(inp: ClusterInput) -> dict[str, Any]:
    settings, model = inp.settings, inp.model
    files = {**turn_files(inp), **slots_files(settings)}
    if not enabled(settings):
        return {"autoscale": {"enabled": False, "share_gpus": False, "by": "host", "per_gpu": False, **files,
                              "state_dir": state_dir(settings)}}
    counts = dict(model["workers_per_host"])
    maximum = settings.get("dask_autoscale_maximum")
    scheduler_ip = model["hosts"].get(inp.scheduler, "")
    port = int(settings["dask_autoscale_port"])
    return {"autoscale": {
        "enabled": True, "minimum": int(settings["dask_autoscale_minimum"]),
        "maximum": int(maximum) if maximum else int(model["expected_workers"]),
        "idle": int(settings["dask_autoscale_idle"]), "cooldown": int(settings["dask_autoscale_cooldown"]),
        "step_down": float(settings["dask_autoscale_step_down"]), "port": port,
        "listen": f"{scheduler_ip}:{port}", "url": f"https://{scheduler_ip}:{port}",
        # /metrics on the scheduler host's loopback (Prometheus scrapes it when it runs there).
        "metrics": f"127.0.0.1:{int(settings['dask_autoscale_metrics_port'])}",
        "state_dir": state_dir(settings),
        # Taking turns on the worker hosts' GPUs with other clusters (gpu_turns.py, the worker unit's ExecCondition).
        "share_gpus": sharing(settings), **files,
        # The unit of scale: a worker host (its unit started and stopped), or each worker (GPU) on its own
        # (dask-gpu-worker-slots in the host's worker container, which keeps running).
        "by": "gpu" if per_gpu(settings) else "host", "per_gpu": per_gpu(settings),
        "hosts": [{"name": name, "address": model["hosts"].get(name, ""), "workers": counts[name]}
                  for name in model["worker_hosts"]]}}


def autoscale_spec(cluster: dict[str, Any]) -> dict[str, Any]:
    """dask-gpu-autoscale on the scheduler host: the scheduler image, the host's TLS material as the cluster's
    client (to the scheduler) and server (to the agents), its state folder; no GPU, a read-only root."""
    scale = cluster["autoscale"]
    files = tls_files(cluster)
    argv = ["dask-gpu-autoscale", "--scheduler", cluster["scheduler_address"]]
    for host in scale["hosts"]:
        argv += ["--host", f"{host['name']},{host['address']},{host['workers']}"]
    argv += ["--minimum", str(scale["minimum"]), "--maximum", str(scale["maximum"]), "--idle", str(scale["idle"]),
             "--cooldown", str(scale["cooldown"]), "--step-down", str(scale["step_down"]),
             *(["--by", "gpu"] if scale["per_gpu"] else []),
             "--state", CONTAINER_STATE, "--listen", scale["listen"], "--metrics", scale["metrics"],
             "--ca", files["ca"], "--cert", files["cert"], "--key", files["key"]]
    spec = tool_spec(cluster, "autoscaler", f"Autoscaler of cluster {cluster['name']}", argv)
    spec["wait_ports"] = wait_ports([("tcp", scale["port"]), ("http", int(scale["metrics"].rpartition(":")[2]))])
    spec["volumes"] = spec["volumes"] + [f"{scale['state_dir']}:{CONTAINER_STATE}"]
    return spec


def released(state: Mapping[str, Any] | None, cluster: Mapping[str, Any]) -> dict[str, Any]:
    """What the autoscaler released, from its state file (None before its first start): `hosts`, the worker hosts
    whose unit stays stopped (by host), and `workers`, each worker host's count of released workers (by host: all of
    them; by GPU: those its dask-gpu-worker-slots keeps stopped while the unit runs). A state of the other unit of
    scale releases nothing: the autoscaler forgets it at its restart and wants every worker up."""
    scale, counts = cluster.get("autoscale") or {}, cluster.get("workers_per_host") or {}
    state = state or {}
    desired = state.get("desired") or {}
    down = [str(name) for name, value in desired.items() if value == "down"]
    if not scale.get("enabled") or str(state.get("by") or "host") != scale.get("by"):
        return {"hosts": [], "workers": {}}
    if not scale.get("per_gpu"):
        hosts = [name for name in down if name in counts]
        return {"hosts": hosts, "workers": {name: int(counts[name]) for name in hosts}}
    machines = state.get("machines") or {}
    workers: dict[str, int] = {}
    for name in down:
        host = str(machines.get(name) or "")
        if host in counts:
            workers[host] = min(workers.get(host, 0) + 1, int(counts[host]))
    return {"hosts": [], "workers": workers}


def checks(inp: CheckInput) -> list[str]:
    if inp.get("dask_autoscale_share_gpus") is True and inp.get("dask_autoscale_enabled") is not True \
            and inp.is_scheduler:
        return ["dask_autoscale_share_gpus needs dask_autoscale_enabled: a cluster that never gives its GPUs back "
                "would keep the other clusters off them for good"]
    if inp.get("dask_autoscale_enabled") is not True or not inp.is_scheduler:
        return []
    problems: list[str] = []
    minimum, maximum = inp.get("dask_autoscale_minimum"), inp.get("dask_autoscale_maximum")
    workers = int(inp.cluster.get("expected_workers") or 0)
    maximum = maximum or None  # 0: every worker
    if isinstance(minimum, int) and isinstance(maximum, int) and minimum > maximum:
        problems.append(f"dask_autoscale_minimum={minimum} is above dask_autoscale_maximum={maximum}")
    for name, value in (("dask_autoscale_minimum", minimum), ("dask_autoscale_maximum", maximum)):
        if isinstance(value, int) and value > workers:
            problems.append(f"{name}={value} is above the {workers} workers the inventory's worker hosts run")
    transport = inp.cluster.get("transport")
    if inp.cluster.get("tls_off"):
        problems.append(f"dask_autoscale_enabled needs the cluster's TLS (dask_transport={transport} turns it off): "
                        "the agents and the autoscaler know each other by the cluster's certificates. Use tls or "
                        "tls-ucx, or turn dask_autoscale_enabled off")
    if inp.get("dask_autoscale_by") == "gpu" and inp.get("dask_autoscale_share_gpus") is True:
        problems.append("dask_autoscale_by=gpu with dask_autoscale_share_gpus=true: clusters take turns on a host's "
                        "GPUs through its worker unit's start, which takes all of them, while by GPU the unit keeps "
                        "running; turns per GPU are not built. Use dask_autoscale_by=host to share the GPUs, or "
                        "give each cluster GPUs of its own (dask_worker_gpus)")
    if not inp.cluster.get("worker_hosts"):
        problems.append("dask_autoscale_enabled with no worker host to scale (dask_cuda_workers, dask_cpu_workers)")
    return problems


FEATURE = Feature(name="autoscale", role="dask_autoscale",
                  units=(("autoscaler", "autoscaler"), ("autoscale_agent", "autoscale-agent")),
                  containers=(("autoscaler", "autoscaler"),), host=host, cluster=cluster, checks=checks,
                  tag="autoscale", teardown="before",
                  filters=(("autoscale_spec", autoscale_spec), ("autoscale_released", released)))
