"""The inventory-only check: every host's settings, model and problems worked out in one controller task, without
reaching a host (playbooks/check.yml -e dask_check_inventory_only=true). For fleets: the per-host path reads each
host's facts and GPUs (a connection per host and task); this one reads only the inventory, so 1,000 hosts take
seconds. What needs the hosts (their addresses, GPUs, driver, other clusters' records) is checked by the full
check, which site.yml always runs; the report says so.

It calls the same functions as the per-host path (settings.typed_settings, model.host_model and cluster_model,
checks.problems), so a problem is worded the same in both."""
from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ansible_collections.dask_gpu.bundle.plugins.plugin_utils import checks, model, settings
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.feature import cluster_hosts, group, worker_hosts

NOT_READ = ("host facts were not read (inventory only): addresses, GPUs, the driver and other clusters' records are "
            "checked when site.yml or playbooks/check.yml reaches the hosts")


def _groups(groups: Mapping[str, Any]) -> dict[str, list[str]]:
    """The inventory's groups, completed as model.yml's add_host tasks complete them."""
    found = {name: group(groups, name) for name in checks.GROUP_NAMES}
    found["dask_workers"] = found["dask_workers"] or worker_hosts(found)
    found["dask_cluster"] = found["dask_cluster"] or cluster_hosts(found)
    return found


def _facts(values: Mapping[str, Any]) -> dict[str, Any]:
    """What the model takes from facts, as far as the inventory tells it: an IPv4 ansible_host is the address."""
    try:
        return {"default_ipv4": {"address": str(ipaddress.IPv4Address(str(values.get("ansible_host", ""))))}}
    except ValueError:
        return {}


def inventory_check(hostvars: Mapping[str, Any], groups: Mapping[str, Any], specs: Mapping[str, Any],
                    defaults: Mapping[str, Any]) -> dict[str, Any]:
    """{hosts, workers, problems, not_checked}: `defaults` are the roles' defaults as the controller resolves them
    (a host's inventory and extra vars win over them)."""
    all_groups = _groups(groups)
    spec_names = set(settings.options(specs))
    prefix = re.compile("^(" + "|".join(map(re.escape, specs)) + ")_[a-z0-9_]*$")
    raw: dict[str, dict[str, Any]] = {}
    set_names: dict[str, list[str]] = {}
    typed: dict[str, dict[str, Any]] = {}
    hosts: dict[str, dict[str, Any]] = {}
    for host in all_groups["dask_cluster"]:
        values = hostvars[host]
        names = [str(name) for name in values if prefix.match(str(name)) and "__" not in str(name)]
        provided = {name: value for name, value in defaults.items() if name in spec_names}
        provided.update({name: values[name] for name in names if name in spec_names})
        raw[host], set_names[host] = settings.resolve(provided, specs), names
        typed[host] = settings.typed_settings(provided, specs, all_groups["all"])
        hosts[host] = model.host_model(host, typed[host], _facts(values), {}, all_groups)
    scheduler = group(all_groups, "dask_scheduler")
    first = scheduler[0] if scheduler and scheduler[0] in typed else next(iter(typed), "")
    cluster = model.cluster_model(typed[first], hosts, all_groups, "inventory") if first else {}
    repo = Path(str(typed[first].get("dask_repo_dir") or ".")) if first else Path()
    pins = sorted(path.name for path in (repo / "images" / "pins").glob("*.txt"))
    problems: list[str] = []
    for index, host in enumerate(hosts):
        problems += checks.problems({
            "host": host, "settings": raw[host], "set": set_names[host], "specs": specs, "groups": all_groups,
            "facts": {}, "facts_read": False, "gpus": {}, "host_model": hosts[host], "cluster": cluster,
            "pins": pins, "inventory_checks": index == 0})
    if not hosts:
        problems.append("inventory: no host in dask_scheduler, dask_cuda_workers or dask_cpu_workers")
    return {"hosts": len(hosts), "worker_hosts": len(cluster.get("worker_hosts") or []),
            "problems": problems, "not_checked": NOT_READ}


__all__ = ["inventory_check"]
