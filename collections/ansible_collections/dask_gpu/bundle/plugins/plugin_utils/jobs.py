"""A job (playbooks/job.yml, docs/jobs.md): what runs, from the dask_job_* settings, and the problems the
controller can see before anything on a host changes: a script that is not there, an entry point missing from a
folder, a requirements lock the cluster's image does not satisfy."""
from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

# A job folder's requirements, first found: the exact lock, or requirement lines.
REQUIREMENT_FILES = ("requirements.lock", "requirements.txt")


def plan(settings: Mapping[str, Any], stamp: str) -> dict[str, Any]:
    """The job: its id (name and UTC time), the source on the controller (a file or a folder), the entry point
    inside the job's src folder, its arguments, timeout and environment."""
    script = Path(str(settings.get("dask_job_script") or ""))
    folder = script.is_dir()
    name = str(settings.get("dask_job_name") or "") or re.sub(r"[^a-z0-9-]+", "-", script.stem.lower()).strip("-")
    name = (name or "job")[:40].strip("-") or "job"
    entry = str(settings.get("dask_job_entry") or "main.py") if folder else script.name
    requirements = next((str(script / file) for file in REQUIREMENT_FILES if folder and (script / file).is_file()),
                        "")
    return {"id": f"{name}-{stamp.lower()}", "name": name, "source": str(script), "folder": folder, "entry": entry,
            "args": [str(arg) for arg in settings.get("dask_job_args") or []],
            "timeout": int(settings.get("dask_job_timeout") or 3600),
            "env": {str(key): str(value) for key, value in (settings.get("dask_job_env") or {}).items()},
            "requirements": requirements}


def locked(lock_text: str) -> dict[str, str]:
    """name (canonical) -> version of a lock's `name==version` lines."""
    found = re.findall(r"(?m)^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)\s*$", lock_text)
    return {canonicalize_name(name): version for name, version in found}


def unmet(requirements_file: str, lock_text: str) -> list[str]:
    """Each requirement line of the job's file that the image's lock does not satisfy, named by file and line."""
    have = locked(lock_text)
    problems: list[str] = []
    for number, raw in enumerate(Path(requirements_file).read_text().splitlines(), start=1):
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        where = f"{requirements_file} line {number}"
        if line.startswith("-"):
            problems.append(f"{where}: '{line}' is a pip option; a job's requirements are requirement lines")
            continue
        try:
            requirement = Requirement(line)
        except InvalidRequirement as error:
            problems.append(f"{where}: '{line}' is not a requirement ({error})")
            continue
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue
        version = have.get(canonicalize_name(requirement.name))
        if version is None:
            problems.append(f"{where}: {requirement.name} is not in the cluster's image (add it with "
                            "dask_images_extra_packages and run site.yml)")
        elif requirement.specifier and not requirement.specifier.contains(version, prereleases=True):
            problems.append(f"{where}: {line} is not met: the cluster's image has {requirement.name}=={version}")
    return problems


def problems(settings: Mapping[str, Any], job: Mapping[str, Any], lock_file: str) -> list[str]:
    """What stops the job before any host changes (each names the variable)."""
    source = str(settings.get("dask_job_script") or "")
    if not source:
        return ["dask_job_script is not set: give the script (a .py file) or a folder with it, e.g. "
                "-e dask_job_script=jobs/etl.py"]
    path = Path(source)
    if not path.exists():
        return [f"dask_job_script={source} does not exist on the controller"]
    if not job["folder"] and path.suffix != ".py":
        return [f"dask_job_script={source} is neither a folder nor a Python file (.py)"]
    found: list[str] = []
    if job["folder"] and not (path / job["entry"]).is_file():
        found.append(f"dask_job_entry={job['entry']} is not a file in the job folder dask_job_script={source}")
    if job["requirements"]:
        try:
            lock_text = Path(lock_file).read_text()
        except OSError:
            return found + [f"the cluster's lock {lock_file} cannot be read on the controller, so the job's "
                            f"{job['requirements']} cannot be checked: run site.yml for this cluster first"]
        found += [f"dask_job_script={source}: {problem}" for problem in unmet(job["requirements"], lock_text)]
    return found
