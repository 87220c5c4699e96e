"""Your own images (dask_images_scheduler_image, dask_images_worker_image; docs/images.md, "Bring your own image"):
the references as settings, the probe that runs inside each image on the build host before any host changes, and
what the units need that an image lacks, named.

The probe (PROBE) runs as `python -c PROBE` through the image's own entrypoint, as the user the units run as
(dask_container_uid:gid), with no network: what it finds is what the units would find. It needs no GPU and only the
standard library, and prints one line, MARKER followed by JSON."""
from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.transport import facets

SCHEDULER_SETTING = "dask_images_scheduler_image"
WORKER_SETTING = "dask_images_worker_image"
MARKER = "DASK-GPU-PROBE "

# The commands the units, the health checks and the bundle's clients run, from dask_gpu_verify (images/verify).
BUNDLE_COMMANDS = ("dask-gpu-healthcheck", "dask-gpu-verify", "dask-gpu-bench", "dask-gpu-job", "dask-gpu-roll")
# Modules the probe looks for (found, not imported: no GPU is needed).
MODULES = ("dask", "distributed", "dask_gpu_verify", "dask_cuda", "distributed_ucxx", "cudf", "dask_cudf",
           "prometheus_client", "bokeh", "jupyterlab", "dask_labextension", "dask_gpu_verify.gpu_metrics",
           "dask_gpu_verify.worker_ports", "dask_gpu_verify.gpu_affinity", "dask_gpu_verify.host_frames")
VERSIONED = ("dask", "distributed", "dask-cuda")

PROBE = r"""
import importlib.metadata as md, importlib.util, json, os, platform, shutil, sys
def found(name):
    try:
        return importlib.util.find_spec(name) is not None
    except Exception:
        return False
dists = {}
for dist in md.distributions():
    name = dist.metadata["Name"]
    if name and name.lower().replace("_", "-") not in dists:
        dists[name.lower().replace("_", "-")] = (name, dist.version)
try:
    cli = sorted(ep.name for ep in md.entry_points(group="dask_cli"))
except TypeError:
    cli = sorted(ep.name for ep in md.entry_points().get("dask_cli", []))
print("MARKER" + json.dumps({
    "python": platform.python_version(), "executable": sys.executable, "uid": os.getuid(), "gid": os.getgid(),
    "commands": {c: shutil.which(c) for c in ["dask"] + COMMANDS},
    "modules": {m: found(m) for m in MODULES}, "dask_cli": cli,
    "versions": {k: dists[k][1] for k in VERSIONED if k in dists},
    "lock": sorted("%s==%s" % v for k, v in dists.items() if k not in ("pip", "dask-gpu-verify")),
}))
""".replace("MARKER", MARKER).replace("COMMANDS", repr(list(BUNDLE_COMMANDS))).replace(
    "MODULES", repr(list(MODULES))).replace("VERSIONED", repr(list(VERSIONED)))


def references(settings: Mapping[str, Any]) -> dict[str, str] | None:
    """The own images' references by target (None when the bundle builds its own): the worker image, and the
    scheduler image or else the worker image for the scheduler too."""
    worker = str(settings.get(WORKER_SETTING) or "")
    if not worker:
        return None
    return {"scheduler": str(settings.get(SCHEDULER_SETTING) or "") or worker, "worker": worker}


def tag(refs: Mapping[str, str]) -> str:
    """The bundle's tag for own images: the references' hash (a new reference is a new tag; the same reference
    is the same tag, so pin a digest, `name@sha256:...`, for an image that moves)."""
    return "own-" + hashlib.sha256(f"{refs['scheduler']} {refs['worker']}".encode()).hexdigest()[:12]


def setting_problems(settings: Mapping[str, Any], user_extras: bool) -> list[str]:
    """What can be refused from the settings alone (a malformed reference is the argument spec's): a scheduler image
    without a worker image, your own packages (built into the bundle's images only) with an image of yours."""
    problems = []
    if settings.get(SCHEDULER_SETTING) and not settings.get(WORKER_SETTING):
        problems.append(f"{SCHEDULER_SETTING} is set without {WORKER_SETTING}: the workers would run the bundle's "
                        "image, whose Dask may differ from your scheduler's. Set dask_images_worker_image too (alone, "
                        "it serves the scheduler as well).")
    if settings.get(WORKER_SETTING) and user_extras:
        problems.append("dask_images_extra_packages, _extra_requirements_file and _extra_wheels_dir are built into "
                        f"the bundle's images; with {WORKER_SETTING} set, build your packages into your image instead "
                        "(docs/images.md, image contract), or leave those settings empty.")
    return problems


def parse(output: str) -> dict[str, Any] | None:
    """The probe's report from a container's output (banners of an entrypoint may come before it)."""
    for line in reversed(output.splitlines()):
        if line.startswith(MARKER):
            try:
                found = json.loads(line[len(MARKER):])
            except ValueError:
                return None
            return found if isinstance(found, dict) else None
    return None


def needs(cluster: Mapping[str, Any], settings: Mapping[str, Any],
          feature_needs: Mapping[str, list[tuple[str, str]]] | None = None) -> dict[str, list[tuple[str, str]]]:
    """What each target's image must provide for this cluster: (module or command, what needs it); the core's, then
    the features' (`feature_needs`, features.image_needs: what the features that are on need in each image)."""
    gpu = list(cluster.get("gpu_hosts") or [])
    scheduler = [("dask", "the units (`dask scheduler`, `dask worker`)"), ("distributed", "the units")]
    worker = scheduler + [("dask_gpu_verify", "the bundle's verify, benchmark and job clients, which run from the "
                           "worker image (images/verify: pip install --no-deps images/verify into your image)")]
    if gpu:
        worker += [("dask_cuda", f"`dask cuda worker` on the GPU worker hosts {', '.join(gpu)}"),
                   ("dask_gpu_verify.gpu_metrics", "the GPU workers' metrics preload"),
                   ("dask_gpu_verify.worker_ports", "the GPU workers' HTTP ports preload (/health, /metrics)"),
                   ("dask_gpu_verify.gpu_affinity", "the GPU workers' CPU affinity preload")]
    transport = str(settings.get("dask_transport") or "tls")
    decoded = facets(transport)
    if decoded["ucx_every_address"]:
        worker.append(("distributed_ucxx", f"dask_transport={transport}"))
        scheduler.append(("distributed_ucxx", f"dask_transport={transport}"))
    if decoded["scheduler_second_listener"]:
        scheduler.append(("dask_gpu_verify.host_frames", "dask_transport=tls-ucx (the scheduler's preload)"))
    if cluster.get("cudf_spill"):
        worker.append(("cudf", "dask_worker_cudf_spill=true"))
    scheduler += (feature_needs or {}).get("scheduler", [])
    worker += (feature_needs or {}).get("worker", [])
    return {"scheduler": scheduler, "worker": worker}


def _root(user: str) -> bool:
    name = user.split(":")[0].strip()
    return name in ("", "root", "0")


def problems(inspected: Mapping[str, Any], cluster: Mapping[str, Any], settings: Mapping[str, Any],
             build_host: str, feature_needs: Mapping[str, list[tuple[str, str]]] | None = None) -> list[str]:
    """Every way the own images fall short of the contract, each naming its setting, its reference and the build
    host it was inspected on. `inspected` maps scheduler and worker to {ref, user (the image's USER), output (the
    probe container's output), failed (the probe container's error, if any)}; `feature_needs` as needs()."""
    found: list[str] = []
    reports: dict[str, dict[str, Any]] = {}
    wanted = needs(cluster, settings, feature_needs)
    uid = cluster.get("uid", 10001)
    for target in ("scheduler", "worker"):
        entry = inspected.get(target) or {}
        ref = str(entry.get("ref") or "")
        setting = WORKER_SETTING if target == "worker" or not settings.get(SCHEDULER_SETTING) else SCHEDULER_SETTING
        where = f"{setting}={ref} ({target} image, inspected on {build_host})"
        if target == "scheduler" and ref == (inspected.get("worker") or {}).get("ref") and "worker" in reports:
            report: dict[str, Any] | None = reports["worker"]
        else:
            report = parse(str(entry.get("output") or ""))
        if report is None:
            said = str(entry.get("failed") or entry.get("output") or "")[-600:]
            found.append(f"{where}: its Python could not be run as uid {uid} through the image's entrypoint "
                         f"(`python -c <probe>`, no network): {said}. "
                         "The image must have `python` and `dask` of one environment on its PATH, usable by "
                         "dask_container_uid, and an entrypoint that runs the command it is given (docs/images.md).")
            continue
        reports[target] = report
        if _root(str(entry.get("user") or "")) and settings.get("dask_container_root_ack") is not True:
            found.append(f"{where}: the image's user is root (USER {entry.get('user') or 'unset'}). Rebuild it with a "
                         "non-root USER whose files dask_container_uid can read, or set dask_container_root_ack: true "
                         f"to take it as it is (its containers still run as uid {uid}).")
        missing = [(module, why) for module, why in wanted[target] if not report.get("modules", {}).get(module)]
        if not (report.get("commands") or {}).get("dask"):
            missing.insert(0, ("`dask` on the PATH", "the units' command lines"))
        if "dask_cuda" in [module for module, _ in wanted[target]] and "cuda" not in (report.get("dask_cli") or []):
            missing.append(("the `dask cuda` command (dask-cuda's dask_cli entry point)", "`dask cuda worker`"))
        absent = [command for command in ("dask-gpu-healthcheck", "dask-gpu-verify", "dask-gpu-job")
                  if not (report.get("commands") or {}).get(command)]
        if target == "worker" and absent and report.get("modules", {}).get("dask_gpu_verify"):
            missing.append((", ".join(absent) + " on the PATH", "dask_gpu_verify's commands"))
        for module, why in missing:
            found.append(f"{where}: lacks {module}, needed by {why}")
    if "scheduler" in reports and "worker" in reports:
        ours, theirs = reports["scheduler"].get("versions") or {}, reports["worker"].get("versions") or {}
        differ = [f"{name} {ours.get(name, 'none')} (scheduler) vs {theirs.get(name, 'none')} (worker)"
                  for name in ("dask", "distributed") if ours.get(name) != theirs.get(name)]
        if ours.get("dask-cuda") and theirs.get("dask-cuda") and ours["dask-cuda"] != theirs["dask-cuda"]:
            differ.append(f"dask-cuda {ours['dask-cuda']} (scheduler) vs {theirs['dask-cuda']} (worker)")
        if differ:
            found.append(f"{SCHEDULER_SETTING}={inspected['scheduler'].get('ref')} and {WORKER_SETTING}="
                         f"{inspected['worker'].get('ref')} carry other versions: {'; '.join(differ)}. Dask needs "
                         "the same versions on the scheduler, the workers and the clients.")
    return found


def result(inspected: Mapping[str, Any]) -> dict[str, Any]:
    """What the cluster keeps from an inspection that passed: the worker image's Dask versions, Python version and
    lock (the exact packages a matching client installs: scripts/client-env.sh), and whether it carries cuDF and
    dask-cudf (then the scheduler and the clients get a GPU, as with the full profile: spec.py's frames_gpu)."""
    report = parse(str((inspected.get("worker") or {}).get("output") or "")) or {}
    modules = report.get("modules") or {}
    return {"versions": report.get("versions") or {}, "python": report.get("python") or "",
            "lock": report.get("lock") or [], "cudf": bool(modules.get("cudf") and modules.get("dask_cudf"))}
