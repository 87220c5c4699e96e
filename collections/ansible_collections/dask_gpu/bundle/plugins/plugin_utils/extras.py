"""The users' own packages built into the images (dask_images_extra_packages, dask_images_extra_requirements_file,
dask_images_extra_wheels_dir; docs/images.md, "Your own packages"): what they ask for, read on the controller, and
the conflicts with the release's pins that can be seen before anything is built. A conflict that only a package's
own dependencies reveal is pip's to report at build time (the Dockerfile holds every install to the pins)."""
from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

# The packages whose change would break the cluster: a conflict with one of these is named as such.
CORE = ("dask", "distributed", "dask-cuda", "rmm", "librmm", "cupy", "numpy", "cuda-toolkit", "cudf", "dask-cudf")


def pinned(pins_text: str) -> dict[str, str]:
    """name (canonical) -> version, from a pins file's `name==version` lines."""
    found = re.findall(r"(?m)^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)$", pins_text)
    return {canonicalize_name(name): version for name, version in found}


def packages(settings: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The requirement lines given as values (where, line): dask_images_extra_packages' entries, then those of the
    features that are on (each feature's `requirements` file while its `switch` is on: JupyterLab for
    dask_notebook_enabled), which the image tag's hash takes one by one."""
    # The registry's features (the images feature among them) import this module: it is read when called.
    from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.features import image_requirements

    lines = [("dask_images_extra_packages", str(entry)) for entry in settings.get("dask_images_extra_packages") or []]
    for switch, relative in image_requirements():
        if settings.get(switch) is not True:
            continue
        path = Path(str(settings.get("dask_repo_dir") or ".")) / relative
        lines += [(f"{switch} ({relative})", line.strip()) for line in path.read_text().splitlines()
                  if line.strip() and not line.lstrip().startswith("#")]
    return lines


def package_lines(settings: Mapping[str, Any]) -> list[str]:
    return [line for _, line in packages(settings)]


def requirements(settings: Mapping[str, Any]) -> tuple[list[tuple[str, str]], list[str]]:
    """The extra requirements as (where, line): dask_images_extra_packages' entries and the features' (packages),
    then the requirements file's requirement lines; and the problems reading them (a missing file, an option line
    pip would need)."""
    lines = packages(settings)
    problems: list[str] = []
    name = str(settings.get("dask_images_extra_requirements_file") or "")
    if not name:
        return lines, problems
    try:
        text = Path(name).read_text()
    except OSError as error:
        return lines, [f"dask_images_extra_requirements_file={name} cannot be read on the controller: "
                       f"{error.strerror or error}"]
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        where = f"dask_images_extra_requirements_file={name} line {number}"
        if line.startswith("-"):
            problems.append(f"{where}: '{line}' is a pip option; only requirement lines are taken (put wheels in "
                            "dask_images_extra_wheels_dir, set the index with dask_images_pip_index_url)")
            continue
        lines.append((where, line))
    return lines, problems


def wheels(settings: Mapping[str, Any]) -> tuple[list[Path], list[str]]:
    """The wheels of dask_images_extra_wheels_dir, and the problems finding them."""
    name = str(settings.get("dask_images_extra_wheels_dir") or "")
    if not name:
        return [], []
    folder = Path(name)
    if not folder.is_dir():
        return [], [f"dask_images_extra_wheels_dir={name} is not a folder on the controller"]
    found = sorted(folder.glob("*.whl"))
    if not found:
        return [], [f"dask_images_extra_wheels_dir={name} holds no wheel (*.whl) on the controller"]
    return found, []


def _against_pins(where: str, name: str, allows: Any, shown: str, pins: Mapping[str, str]) -> str | None:
    version = pins.get(canonicalize_name(name))
    if version is None or allows(version):
        return None
    core = " (the cluster needs the release's own" + (f" {name}" if canonicalize_name(name) in CORE else "") + ")"
    return (f"{where}: {shown} conflicts with the release's pin {name}=={version}{core}; the image must keep the "
            "pinned version (images/pins). Drop the version constraint, or choose a RAPIDS release whose pins have it")


def problems(settings: Mapping[str, Any], pins_text: str) -> list[str]:
    """Every problem of the extras that the controller can see: unreadable inputs, malformed requirements, direct
    references, and a requirement or wheel that asks for another version of a pinned package."""
    pins = pinned(pins_text)
    lines, found = requirements(settings)
    for where, line in lines:
        try:
            requirement = Requirement(line)
        except InvalidRequirement as error:
            found.append(f"{where}: '{line}' is not a pip requirement ({error})")
            continue
        if requirement.url:
            found.append(f"{where}: '{line}' is a direct reference; put the wheel in dask_images_extra_wheels_dir")
            continue
        problem = _against_pins(where, requirement.name, lambda version, spec=requirement.specifier:
                                spec.contains(version, prereleases=True), f"'{line}'", pins)
        if problem:
            found.append(problem)
    files, missing = wheels(settings)
    found += missing
    for wheel in files:
        where = f"dask_images_extra_wheels_dir={settings.get('dask_images_extra_wheels_dir')}"
        try:
            name, version, _build, _tags = parse_wheel_filename(wheel.name)
        except InvalidWheelFilename as error:
            found.append(f"{where}: {wheel.name} is not a wheel's file name ({error})")
            continue
        problem = _against_pins(where, str(name), lambda pin, own=str(version): pin == own,
                                f"{wheel.name} ({name} {version})", pins)
        if problem:
            found.append(problem)
    return found


def summary(settings: Mapping[str, Any]) -> dict[str, Any]:
    """What the build adds (the model's images.extras): the requirement lines and the wheels' file names."""
    lines, _ = requirements(settings)
    files, _ = wheels(settings)
    return {"requirements": [line for _, line in lines], "wheels": [wheel.name for wheel in files],
            "wheels_dir": str(settings.get("dask_images_extra_wheels_dir") or "")}
