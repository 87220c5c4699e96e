"""Feature `notebook` (role dask_notebook, docs/notebook.md): JupyterLab beside the cluster, from the cluster's own
image (JupyterLab and the Dask JupyterLab extension are then built into it: extras.py), with the cluster's client
certificate and the scheduler's address, so `Client()` connects with no argument. Its model part is
`dask_cluster.notebook`; its checks are the exposure acknowledgement and a host that is a cluster host."""
from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.feature import (
    CheckInput,
    ClusterInput,
    Feature,
    HostInput,
    cluster_hosts,
    exposed_without_ack,
    scheduler_host,
)
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.identity import cluster_paths
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.ports import span
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.spec import (
    CUPY_CACHE,
    base,
    client_env,
    with_frames_gpu,
)

# Where the working folder is inside the container (the host's folder: dask_notebook_dir).
CONTAINER_DIR = "/home/dask/work"
# Where the container reads the cluster's Dask configuration file (DASK_ROOT_CONFIG; the host's folder is
# notebook.config_dir): the partitioning advice, whose workers count a retired or added host changes.
CONFIG_CONTAINER_DIR = "/etc/dask-gpu"


def enabled(settings: Mapping[str, Any]) -> bool:
    return settings.get("dask_notebook_enabled") is True


def notebook_host(settings: Mapping[str, Any], groups: Mapping[str, Any]) -> str:
    return str(settings.get("dask_notebook_host") or scheduler_host(groups))


def folder(settings: Mapping[str, Any]) -> str:
    """The working folder on the host: dask_notebook_dir, else the cluster's data folder's notebooks/."""
    return str(settings.get("dask_notebook_dir") or f"{cluster_paths(settings)['data']}/notebooks")


def host(inp: HostInput) -> dict[str, Any]:
    """The notebook host's port, and its working folder (kept at teardown unless empty: your notebooks
    live there)."""
    if not enabled(inp.settings) or inp.name != notebook_host(inp.settings, inp.groups):
        return {}
    port = int(inp.settings["dask_notebook_port"])
    uid, gid = int(inp.settings["dask_container_uid"]), int(inp.settings["dask_container_gid"])
    data = cluster_paths(inp.settings)["data"]
    # The data folder holds the default working folder; worker hosts have it already (model.folders).
    made = [{"path": data, "owner": 0, "group": 0, "mode": "0755", "remove": "empty"}]
    if inp.model.get("worker") or not folder(inp.settings).startswith(data + "/"):
        made = []
    # Each cluster runs its own JupyterLab (its own unit and port): a port, not a one-per-host service.
    return {"ports": {"dask_notebook_port": span(port)},
            "folders": made + [{"path": folder(inp.settings), "owner": uid, "group": gid, "mode": "0750",
                                "remove": "empty"}]}


def cluster(inp: ClusterInput) -> dict[str, Any]:
    settings = inp.settings
    # The host's folder of JupyterLab's Dask configuration file (removed with its unit when it no longer runs here).
    config_dir = f"{cluster_paths(settings)['config']}/notebook"
    if not enabled(settings):
        # Its working folder too: teardown removes the bundle's example notebooks there even when it is off now.
        return {"notebook": {"enabled": False, "config_dir": config_dir, "dir": folder(settings)}}
    where = notebook_host(settings, inp.groups)
    listen = str(settings.get("dask_notebook_listen_address") or "127.0.0.1")
    port = int(settings["dask_notebook_port"])
    return {"notebook": {"enabled": True, "host": where, "listen": listen, "port": port,
                         "url": f"http://{listen}:{port}/lab", "dir": folder(settings),
                         "container_dir": CONTAINER_DIR, "config_dir": config_dir}}


def examples_removable(found: list[Mapping[str, Any]], examples: str, source: str) -> list[str]:
    """What teardown removes of the example notebooks the bundle put in the working folder (run.yml copies the files of
    `source`, the role's, into `examples` once), given what module find saw under `examples` (recursive, hidden, any
    type, sha256 checksums): each example still as the bundle wrote it; JupyterLab's checkpoint of it
    (.ipynb_checkpoints/NAME-checkpoint.ipynb) with that content, once the example goes or is gone; then the checkpoints
    folder and `examples` when nothing else is in them. A notebook of yours there, or an example you changed, stays, and
    with it its folder."""
    bundle = {path.name: hashlib.sha256(path.read_bytes()).hexdigest()
              for path in sorted(Path(source).iterdir()) if path.is_file()}
    checkpoints = f"{examples}/.ipynb_checkpoints"
    entries = {str(entry["path"]): entry for entry in found}
    goes = {f"{examples}/{name}" for name, digest in bundle.items()
            if entries.get(f"{examples}/{name}", {}).get("checksum") == digest}
    for name, digest in bundle.items():
        kept = f"{examples}/{name}" in entries and f"{examples}/{name}" not in goes
        checkpoint = f"{checkpoints}/{Path(name).stem}-checkpoint{Path(name).suffix}"
        if not kept and entries.get(checkpoint, {}).get("checksum") == digest:
            goes.add(checkpoint)
    removed = sorted(goes, key=lambda path: (-path.count("/"), path))
    if checkpoints in entries and all(path in goes for path in entries if path.startswith(checkpoints + "/")):
        goes.add(checkpoints)
        removed.append(checkpoints)
    return removed + ([examples] if all(path in goes for path in entries) else [])


def token_unwritable(token: Path) -> str:
    """Why the controller cannot keep the token file ('' when it can): read it if it is there, else create it in the
    nearest folder that exists."""
    if token.exists():
        return "" if os.access(token, os.R_OK) else f"{token} cannot be read on the controller"
    folder = token.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if folder.is_dir() and os.access(folder, os.W_OK | os.X_OK):
        return ""
    return f"{token} cannot be written on the controller ({folder} is not a writable folder)"


def checks(inp: CheckInput) -> list[str]:
    if inp.get("dask_notebook_enabled") is not True:
        return []
    problems: list[str] = []
    listen = exposed_without_ack(inp.get, "dask_notebook_listen_address", "dask_notebook_exposed_ack")
    if listen:
        problems.append(f"dask_notebook_listen_address={listen} puts JupyterLab (which runs any code as the "
                        "cluster's user, behind its token) beyond this host. Keep 127.0.0.1 and use an SSH tunnel, or "
                        "set dask_notebook_exposed_ack: true (with dask_firewall_enabled, only the cluster's hosts and "
                        "dask_firewall_allowed_sources reach it)")
    controller = inp.get("dask_controller_dir")
    if inp.is_scheduler and controller:
        problem = token_unwritable(Path(str(controller)) / "notebook" / "token")
        if problem:
            problems.append(f"dask_controller_dir={controller}: JupyterLab's token {problem}")
    # The configuration folder is the bundle's: JupyterLab's Dask file goes into it, and teardown removes it whole.
    config = cluster_paths({name: inp.get(name) for name in ("dask_cluster_name", "dask_config_dir")})["config"]
    work = inp.get("dask_notebook_dir")
    if inp.is_scheduler and work and Path(str(work)).resolve().is_relative_to(Path(config).resolve()):
        problems.append(f"dask_notebook_dir={work} is inside the cluster's configuration folder {config}, which the "
                        "bundle writes and its teardown removes; give your notebooks a folder of their own")
    where = inp.get("dask_notebook_host")
    if inp.is_scheduler and where and where not in cluster_hosts(inp.groups):
        problems.append(f"dask_notebook_host={where} is not a host of this cluster (the scheduler or a worker host)")
    return problems


def image_needs(cluster: Mapping[str, Any], settings: Mapping[str, Any]) -> dict[str, list[tuple[str, str]]]:
    """JupyterLab runs from the worker image."""
    if not enabled(settings):
        return {}
    return {"worker": [("jupyterlab", "dask_notebook_enabled=true (JupyterLab runs from the worker image)"),
                       ("dask_labextension", "dask_notebook_enabled=true (the Dask JupyterLab extension)")]}


def notebook_spec(cluster: dict[str, Any], token: str, host: dict[str, Any] | None = None,
                  settings: dict[str, Any] | None = None) -> dict[str, Any]:
    """JupyterLab on the notebook host (dask_cluster.notebook): the scheduler image (JupyterLab and the Dask
    extension are built into the cluster's images when the notebook is on), the host's TLS material and the
    scheduler's address, so `Client()` connects with no argument; the working folder mounted; the token from the
    unit's env file (0600), never on the command line; a GPU when the images carry cuDF (frames_gpu). The cluster's
    partitioning advice comes from a Dask configuration file in a read-only folder (dataframe_config, DASK_ROOT_CONFIG),
    not the environment: a retired or added host changes its workers count, which each new kernel then reads, and
    JupyterLab, with the kernels it runs, keeps running. A renewed certificate does not restart it either: JupyterLab
    holds no TLS connection of its own, and its kernels read the TLS folder's files when they connect."""
    notebook = cluster["notebook"]
    spec = base(cluster, "notebook", f"JupyterLab for cluster {cluster['name']}",
                cluster["images"]["scheduler"])
    spec.update(argv=["jupyter", "lab", "--no-browser", f"--ServerApp.ip={notebook['listen']}",
                      f"--ServerApp.port={int(notebook['port'])}", "--ServerApp.port_retries=0",
                      f"--ServerApp.root_dir={notebook['container_dir']}",
                      # Clusters are often offline: no news feed, no update check (nothing fetched from outside).
                      "--LabApp.news_url=None", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
                env={**client_env(cluster, advice=False), "DASK_SCHEDULER_ADDRESS": cluster["scheduler_address"],
                     "DASK_ROOT_CONFIG": CONFIG_CONTAINER_DIR, "JUPYTER_TOKEN": token, "CUPY_CACHE_DIR": CUPY_CACHE},
                ulimits={}, restart_on_certificate=False)
    spec["volumes"] = spec["volumes"] + [f"{notebook['dir']}:{notebook['container_dir']}",
                                         f"{notebook['config_dir']}:{CONFIG_CONTAINER_DIR}:ro"]
    return with_frames_gpu(spec, cluster, host, settings)


FEATURE = Feature(name="notebook", role="dask_notebook", units=(("notebook", "notebook"),),
                  containers=(("notebook", "notebook"),), host=host, cluster=cluster, checks=checks,
                  tag="notebook", switch="dask_notebook_enabled",
                  requirements="roles/dask_notebook/files/requirements.txt", image_needs=image_needs, teardown="units",
                  filters=(("notebook_spec", notebook_spec), ("notebook_examples_removable", examples_removable)))
