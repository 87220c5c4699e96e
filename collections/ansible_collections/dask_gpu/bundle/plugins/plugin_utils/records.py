"""The clusters' records on a host (module cluster_record writes them; the next run reads them back as local facts,
ansible_local.dask_cluster_NAME): what this cluster claims there and the folders it made, what the other clusters
on the host claim, the Dask versions a host last ran, and a deployment by an earlier release that kept no record.

The checks refuse a cluster that claims what another holds (a GPU, a port, a folder, a name, a one-per-host
service), naming both; an upgrade that changes the Dask versions is known from the record before anything restarts.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.dask_gpu.bundle.plugins.plugin_utils import ports as port_plan
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.identity import DEFAULT_NAME, identity
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.options import as_mapping

RECORD_DIR = "/etc/ansible/facts.d"
RECORD_PREFIX = "dask_cluster_"
# Local facts an earlier release of the bundle wrote on every host it deployed (it kept no cluster record).
LEGACY_FACTS = ("gpus", "docker_engine")


def local(facts: Mapping[str, Any]) -> Mapping[str, Any]:
    return as_mapping(as_mapping(facts).get("ansible_local"))


def path(name: str) -> str:
    return f"{RECORD_DIR}/{identity(name)['record']}.fact"


def mine(facts: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    """This cluster's record on the host ({} before its first run)."""
    return as_mapping(local(facts).get(identity(name)["record"]))


def others(facts: Mapping[str, Any], name: str) -> dict[str, Mapping[str, Any]]:
    """The other clusters' records on the host, by cluster name."""
    own = identity(name)["record"]
    found: dict[str, Mapping[str, Any]] = {}
    for key, value in local(facts).items():
        if str(key).startswith(RECORD_PREFIX) and key != own and isinstance(value, Mapping):
            found[str(value.get("name") or str(key)[len(RECORD_PREFIX):])] = value
    return found


def legacy(facts: Mapping[str, Any]) -> bool:
    """An earlier release deployed a cluster here (its local facts, and no cluster record at all)."""
    facts_here = local(facts)
    return any(name in facts_here for name in LEGACY_FACTS) and not any(
        str(key).startswith(RECORD_PREFIX) for key in facts_here)


def gpu_claims(worker_gpus: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The GPUs a host's workers hold: a whole GPU by UUID, a MIG instance by its GPU's UUID and its own."""
    return [{"uuid": str(gpu.get("uuid") or gpu.get("index")),
             "mig": str(gpu["device"]) if str(gpu.get("device", "")).startswith("MIG-") else None}
            for gpu in worker_gpus]


def _gpus_collide(first: Mapping[str, Any], second: Mapping[str, Any]) -> bool:
    return first.get("uuid") == second.get("uuid") and (
        first.get("mig") is None or second.get("mig") is None or first.get("mig") == second.get("mig"))


def _same_claim(first: Mapping[str, Any], second: Mapping[str, Any]) -> bool:
    return first.get("uuid") == second.get("uuid") and first.get("mig") == second.get("mig")


def _nested(first: str, second: str) -> bool:
    return bool(first and second) and (first == second or first.startswith(second.rstrip("/") + "/")
                                       or second.startswith(first.rstrip("/") + "/"))


def normalised_collision(name: str, holder: str) -> str:
    """Two cluster names that differ only where the bundle's names normalise them ('-' and '_' in the record's and
    the firewall table's names) would share one record and one table: the second would take the first's."""
    ours, theirs = identity(name), identity(holder)
    same = [what for what in ("record", "firewall_table") if ours[what] == theirs[what]]
    return (f"dask_cluster_name={name} gives the names {', '.join(ours[what] for what in same)}, which cluster "
            f"{holder} uses (its record {path(holder)} on this host): names that differ only in '-' and '_' "
            "collide there; pick another cluster name")


def collisions(claims: Mapping[str, Any], theirs: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """What this cluster's claims on a host take from the other clusters there, one message each."""
    problems: list[str] = []
    name = claims.get("name")
    for other, record in theirs.items():
        who = f"cluster {other} (its record {path(str(other))} on this host)"
        tables = {str(claims.get("firewall_table"))} & {str(record.get("firewall_table"))} - {"None"}
        same_names = sorted((set(claims.get("units") or []) & set(record.get("units") or [])) | tables)
        if same_names:
            problems.append(f"dask_cluster_name={name} gives the names {', '.join(same_names)}, which {who} uses; "
                            "pick another cluster name")
        for kind in ("config", "data"):
            for their_kind in ("config", "data"):
                if _nested(str(claims.get(kind) or ""), str(record.get(their_kind) or "")):
                    problems.append(f"dask_{kind}_dir ({claims.get(kind)}) of cluster {name} overlaps the "
                                    f"{their_kind} folder of {who} ({record.get(their_kind)}); give each cluster its "
                                    "own folders (leave dask_config_dir and dask_data_dir empty for /etc/dask-NAME and "
                                    "/var/lib/dask-NAME)")
        # Clusters that both share their GPUs (dask_autoscale_share_gpus) take turns on the same claims (gpu_turns.py
        # keys a whole GPU by its UUID, a MIG instance by its own): a whole GPU and a MIG instance of it never do.
        turns = claims.get("share_gpus") is True and record.get("share_gpus") is True
        for gpu in claims.get("gpus") or []:
            for held in record.get("gpus") or []:
                if _gpus_collide(gpu, held) and not (turns and _same_claim(gpu, held)):
                    shown = gpu.get("mig") or gpu.get("uuid")
                    problems.append(f"GPU {shown} is claimed by cluster {name} (dask_worker_gpus) and held by {who}; "
                                    "give each cluster its own GPUs with dask_worker_gpus, or let both take turns on "
                                    "them (dask_autoscale_share_gpus on both, each with the whole GPU or the same MIG "
                                    "instance)")
        ours = {key: list(value) for key, value in as_mapping(claims.get("ports")).items()}
        held_ports = {key: list(value) for key, value in as_mapping(record.get("ports")).items()}
        for mine_name, their_name in port_plan.between(ours, held_ports):
            shared = set(claims.get("shared_ports") or []) & set(record.get("shared_ports") or [])
            if mine_name == their_name and mine_name in shared and ours[mine_name] == held_ports[their_name]:
                continue
            problems.append(f"{port_plan.describe(mine_name, ours[mine_name])} of cluster {name} is also "
                            f"{port_plan.describe(their_name, held_ports[their_name])} of {who}; pick a free port")
        if "firewall" in record and bool(record.get("firewall")) != bool(claims.get("firewall")):
            on, off = (other, name) if record.get("firewall") else (name, other)
            problems.append(f"cluster {on} has the host firewall on here and cluster {off} has it off: the firewall "
                            f"refuses what no cluster on the host lets in, and cluster {off} lets in nothing, so its "
                            "hosts and clients would be refused. Give both clusters the same dask_firewall_enabled")
        for service, port in as_mapping(claims.get("services")).items():
            held = as_mapping(record.get("services")).get(service)
            if held is None:
                continue
            shares = service in set(claims.get("shared_services") or []) & set(record.get("shared_services") or [])
            if shares and held == port:
                continue
            problems.append(f"{service} runs on this host for {who}"
                            + (f" on port {held}; cluster {name} needs it on {port}: use the same port"
                               if shares else
                               f"; it is one service per host, so cluster {name} cannot run its own here: "
                               f"{SERVICE_HINTS.get(service, 'run it on another host')}"))
    return problems


# Services one host runs once, whatever the number of clusters (Debian packages): those a feature marks shared
# (claims' shared_services) serve every cluster that agrees on the port; the others belong to one cluster.
SERVICE_HINTS = {"docker-registry": "set dask_images_registry_host to another cluster host, or use the other "
                                    "cluster's images with dask_images_distribution registry",
                 "prometheus": "put another host in group dask_monitoring"}


def adoptable(settings: Mapping[str, Any], facts: Mapping[str, Any]) -> list[str]:
    """Folders of a deployment by an earlier release (no record yet) that count as the bundle's: those at the paths
    that release used (/etc/dask, /var/lib/dask and their bundle-made subfolders), for the cluster named dask."""
    name = str(settings.get("dask_cluster_name") or DEFAULT_NAME)
    if name != DEFAULT_NAME or not legacy(facts):
        return []
    ident = identity(name)
    config = str(settings.get("dask_config_dir") or ident["config_dir"])
    data = str(settings.get("dask_data_dir") or ident["data_dir"])
    roots = [folder for folder in (config, data) if folder in (ident["config_dir"], ident["data_dir"])]
    return roots + [f"{config}/tls", f"{data}/worker", f"{data}/reports"]
