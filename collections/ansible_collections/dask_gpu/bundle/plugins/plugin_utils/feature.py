"""What a feature is: a role's part of the model, its checks, the ports it takes, in one module of `features/`.

The core (`model.py`, `checks.py`) builds what every cluster has; each feature adds its own facts under its own
keys and its own checks, and the registry (`features/__init__.py`) lists them. Adding a service is a module there,
one registry line and its role; the core is not edited.
"""
from __future__ import annotations

import ipaddress
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

WORKER_GROUPS = ("dask_cuda_workers", "dask_cpu_workers")


def group(groups: Mapping[str, Any], name: str) -> list[str]:
    return [str(host) for host in groups.get(name) or []]


def worker_hosts(groups: Mapping[str, Any]) -> list[str]:
    """GPU and CPU worker hosts, GPU hosts first, each once (inventory order)."""
    hosts: list[str] = []
    for name in WORKER_GROUPS:
        hosts += [host for host in group(groups, name) if host not in hosts]
    return hosts


def cluster_hosts(groups: Mapping[str, Any]) -> list[str]:
    hosts = group(groups, "dask_scheduler")
    return hosts + [host for host in worker_hosts(groups) if host not in hosts]


def scheduler_host(groups: Mapping[str, Any]) -> str:
    return (group(groups, "dask_scheduler") or [""])[0]


def exposed_without_ack(get: Callable[[str], Any], listen_option: str, ack_option: str) -> str | None:
    """The address a service is set to listen on when it is beyond loopback without its acknowledgement (None when
    it is on loopback, acknowledged, or refused already)."""
    listen = get(listen_option)
    if listen is None or ipaddress.IPv4Address(listen).is_loopback or get(ack_option) is True:
        return None
    return str(listen)


@dataclass
class HostInput:
    """One host: its typed settings, Ansible facts, GPU probe and the inventory's groups; `model` is the host's
    model so far (the core's facts), which a feature may read."""

    name: str
    settings: Mapping[str, Any]
    facts: Mapping[str, Any]
    gpus: Mapping[str, Any]
    groups: Mapping[str, Any]
    model: dict[str, Any] = field(default_factory=dict)


@dataclass
class ClusterInput:
    """The cluster: the scheduler host's typed settings, every host's model, the groups, the image hash, and the
    cluster model so far (`model`: the core's facts); `members` are the hosts not retired."""

    settings: Mapping[str, Any]
    hosts: Mapping[str, Mapping[str, Any]]
    groups: Mapping[str, Any]
    image_hash: str
    scheduler: str
    members: list[str]
    model: dict[str, Any] = field(default_factory=dict)


@dataclass
class CheckInput:
    """What the checks of one host read: `get(name)` is a setting's typed value (None when it was refused: that is
    reported already), the host's model, the cluster model and the groups."""

    host: str
    get: Callable[[str], Any]
    model: Mapping[str, Any]
    cluster: Mapping[str, Any]
    groups: Mapping[str, Any]
    facts: Mapping[str, Any]

    @property
    def is_scheduler(self) -> bool:
        return bool(self.model.get("scheduler"))

    @property
    def is_worker(self) -> bool:
        return bool(self.model.get("worker"))


@dataclass(frozen=True)
class Feature:
    """A role's part: `host` returns facts for dask_host (a `ports` mapping there is merged into the host's ports),
    `cluster` facts for dask_cluster, `checks` messages about the host (each becomes `host H: MESSAGE`), `advice`
    lines printed for the cluster (never refused). `units` and `containers` name what the feature runs on its hosts,
    as (key, suffix) pairs: the cluster's prefix joins each suffix (`dask-notebook`, `dask-blue-notebook`), and the
    model's `units.KEY` and `containers.KEY` are them (features.identity).

    What the feature's role manages on a host, outside the cluster's own folders: `packages` it may install (the
    record keeps their versions), `paths` it configures (the fast rerun fingerprints them) and `host_units`, the
    host's own systemd units it enables (the record keeps whether each is enabled or active); `tag`, the tag of its
    play in site.yml (a run that skips it is not a whole converge). What it needs in the images: `requirements`, a
    requirements file (repository-relative) built into them while the setting `switch` is true, and `image_needs`,
    the modules a user's own image must provide for it ({"scheduler"|"worker": [(module, what needs it)]}), read by
    the own-image check on the image that runs it (features.managed, features.image_needs). `teardown` is when
    role dask_teardown runs the role's teardown entry point (tasks/teardown.yml): `before` the units (nothing may
    start a worker while the cluster goes), with the `units` (before the scheduler's), or `after` them. `filters`
    are the Jinja filters its role calls, as (name, function) pairs: its spec builder and helpers, which the filter
    plugin `features` exposes as `dask_gpu.bundle.NAME` (features.filters)."""

    name: str
    role: str
    units: tuple[tuple[str, str], ...] = ()
    containers: tuple[tuple[str, str], ...] = ()
    host: Callable[[HostInput], dict[str, Any]] | None = None
    cluster: Callable[[ClusterInput], dict[str, Any]] | None = None
    checks: Callable[[CheckInput], list[str]] | None = None
    advice: Callable[[Mapping[str, Any]], list[str]] | None = None
    packages: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    host_units: tuple[str, ...] = ()
    tag: str = ""
    switch: str = ""
    requirements: str = ""
    image_needs: Callable[[Mapping[str, Any], Mapping[str, Any]], dict[str, list[tuple[str, str]]]] | None = None
    teardown: str = ""
    filters: tuple[tuple[str, Callable[..., Any]], ...] = ()
