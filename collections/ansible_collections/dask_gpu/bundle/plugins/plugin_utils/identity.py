"""A cluster's identity on its hosts, derived from dask_cluster_name alone (as dask-kubernetes names everything
`f"{name}-scheduler"`): unit, container, folder, firewall-table and record names. The default name `dask` gives
the names of the bundle's first releases (dask-scheduler, /etc/dask, table dask_firewall), so a deployment made
by them is this cluster; any other name gives its own (dask-NAME-scheduler, /etc/dask-NAME, dask_NAME_firewall),
so several clusters share hosts without colliding."""
from __future__ import annotations

import re
from typing import Any

DEFAULT_NAME = "dask"
# The cluster's CA is named after it ("NAME Dask CA", its certificate's common name since the first release): the
# controller folder that holds it is that cluster's.
CA_SUFFIX = " Dask CA"
# Docker labels on every container the bundle starts (as dask-kubernetes labels its pods): its cluster and what it is
# (the containers key below), so `docker ps --filter label=dask.org/cluster-name=NAME` lists a cluster's containers
# and teardown removes them by label.
CLUSTER_LABEL, COMPONENT_LABEL = "dask.org/cluster-name", "dask.org/component"


def prefix(name: str) -> str:
    return DEFAULT_NAME if name == DEFAULT_NAME else f"{DEFAULT_NAME}-{name}"


def _token(text: str) -> str:
    """A name usable as an nft table or an Ansible local fact (letters, digits, underscores)."""
    return re.sub(r"[^A-Za-z0-9_]", "_", text)


def identity(name: str) -> dict[str, Any]:
    base = prefix(name)
    return {
        "prefix": base,
        # The core's units and containers; each feature adds its own (Feature.units and .containers, merged by
        # features.identity: what the model, the record and teardown read).
        "units": {"scheduler": f"{base}-scheduler", "worker": f"{base}-worker"},
        # Client containers (verification, benchmark) and dask-gpu-roll steps take these prefixes too.
        "containers": {"scheduler": f"{base}-scheduler", "worker": f"{base}-worker", "verify": f"{base}-verify",
                       "bench": f"{base}-bench", "roll": f"{base}-roll", "lock": f"{base}-lock"},
        "labels": {CLUSTER_LABEL: name},
        "label_filter": f"{CLUSTER_LABEL}={name}",
        "firewall_table": f"{_token(base)}_firewall",
        # The cluster's record on each host: /etc/ansible/facts.d/RECORD.fact, read as ansible_local.RECORD.
        "record": f"dask_cluster_{_token(name)}",
        "ca_name": f"{name}{CA_SUFFIX}",
        "config_dir": f"/etc/{base}",
        "data_dir": f"/var/lib/{base}",
    }


def cluster_paths(settings: dict[str, Any] | Any) -> dict[str, str]:
    """The cluster's configuration and data folders on its hosts: the settings, else the ones its name gives."""
    ident = identity(str(settings.get("dask_cluster_name") or DEFAULT_NAME))
    return {"config": str(settings.get("dask_config_dir") or ident["config_dir"]),
            "data": str(settings.get("dask_data_dir") or ident["data_dir"])}


def ca_cluster(common_name: str) -> str:
    """The cluster a CA was made for, from its common name (the name itself where it is not one of the bundle's)."""
    return common_name[: -len(CA_SUFFIX)] if common_name.endswith(CA_SUFFIX) else common_name
