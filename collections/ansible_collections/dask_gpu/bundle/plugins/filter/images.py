"""Filters of the images' way to the hosts (roles/dask_images): the build context as files for one write, and whether
a host has room for the archive and the images it loads, which packages an apt install added, and what teardown puts
back in the registry package's folders."""
from __future__ import annotations

import fnmatch
import os
import re
from pathlib import Path
from typing import Any


def _ignored(relative: Path, patterns: list[str]) -> bool:
    """A path Docker leaves out: `**/NAME` patterns match any component of it, others the whole relative path."""
    for pattern in patterns:
        if pattern.startswith("**/"):
            if any(fnmatch.fnmatch(part, pattern[3:]) for part in relative.parts):
                return True
        elif fnmatch.fnmatch(str(relative), pattern):
            return True
    return False


def context_files(source: str, dest: str) -> list[dict[str, str]]:
    """The build context (tasks/build.yml) for the `files` module, one task instead of a module run per file:
    [{path, content, mode}] for each file under `source` (sorted), its path under `dest`. Text files only (the
    context is a Dockerfile, requirement lists, pins and Python sources); a binary file fails with its name."""
    root = Path(source)
    ignore = root / ".dockerignore"
    patterns = [line.strip() for line in ignore.read_text().splitlines()
                if line.strip() and not line.startswith("#")] if ignore.is_file() else []
    files: list[dict[str, str]] = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        relative = path.relative_to(root)
        if _ignored(relative, patterns):
            continue
        try:
            content = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as error:
            raise ValueError(f"{path}: the build context takes text files only ({error})") from error
        files.append({"path": os.path.join(dest, str(relative)), "content": content,
                      "mode": f"{path.stat().st_mode & 0o7777:04o}"})
    return files


def _gb(count: int) -> str:
    return f"{count / 1e9:.1f} GB"


def space_needs(report: dict[str, Any], refs: list[str], size: int, *, work_dir: str = "", build: bool = False,
                export_dir: str = "", registry_storage: str = "") -> list[dict[str, Any]]:
    """What a host must have room for before this converge, from its disk_space report (module disk_space): nothing
    when Docker holds every one of `refs`; else the images under Docker's root (`size` bytes, the larger image: the
    two share all but their last layers), twice that on a host that builds them (the build cache holds as much), the
    archive it receives in `work_dir` or exports to `export_dir`, and half the size in the cluster registry's
    `registry_storage` (it keeps compressed layers: docs/images.md). [{path, bytes, what}]."""
    if all(ref in report.get("images", {}) for ref in refs):
        return []
    needs = [{"path": report["docker_root"], "bytes": size * (2 if build else 1),
              "what": "the images and their build cache" if build else "the images"}]
    if work_dir:
        needs.append({"path": work_dir, "bytes": size, "what": "the images' archive (dask_images_work_dir)"})
    if export_dir:
        needs.append({"path": export_dir, "bytes": size, "what": "the images' archive, exported"})
    if registry_storage:
        needs.append({"path": registry_storage, "bytes": size // 2, "what": "the cluster registry's copy"})
    return needs


def space_shortfall(report: dict[str, Any], needs: list[dict[str, Any]], host: str, before: bool = True) -> str:
    """'' when each file system has room for what `needs` (space_needs) puts on it, the needs of one device added up;
    else one message naming the host, each short file system's folders, what is needed and what is free (and, when
    asked `before` the run changes anything, that nothing was changed)."""
    devices: dict[Any, list[dict[str, Any]]] = {}
    for need in needs:
        found = report["space"].get(need["path"])
        if found is None:
            return f"{host}: the free disk space of {need['path']} was not read"
        devices.setdefault(found["device"], []).append({**need, **found})
    short = []
    for group in devices.values():
        wanted, free = sum(need["bytes"] for need in group), group[0]["free"]
        if free < wanted:
            what = "; ".join(f"{need['what']} in {need['path']} ({_gb(need['bytes'])})" for need in group)
            short.append(f"{_gb(free)} free on the file system of {group[0]['read_at']}, {_gb(wanted)} needed for "
                         f"{what}")
    if not short:
        return ""
    changed = " Nothing was changed." if before else ""
    return (f"{host}: not enough free disk for this converge's images: {' | '.join(short)}.{changed} Free "
            "space there (unused images: docker image prune -a), or set dask_images_work_dir to a larger file system.")


def image_retention(builds: list[list[str]], current: list[str], keep: int, in_use: list[str]) -> dict[str, Any]:
    """A host's builds of the cluster's images after a converge that deployed `current` (references), from its
    record's `builds` (newest first): the newest `keep`, `current` first, stay; the references of the older ones are
    removed, except one that a kept build or something else on the host (`in_use`: another cluster's images, a
    container's) still uses. {"builds": [[ref, ...], ...], "remove": [ref, ...]}."""
    newest = sorted(current)
    history = [newest] + [sorted(build) for build in builds if build and sorted(build) != newest]
    kept, older = history[:max(keep, 1)], history[max(keep, 1):]
    stays = {ref for build in kept for ref in build} | set(in_use)
    return {"builds": kept, "remove": sorted({ref for build in older for ref in build} - stays)}


BUNDLE_LABEL = ("org.opencontainers.image.title", "dask-gpu")  # images/Dockerfile's LABEL


def retention_removable(refs: list[str], images: list[dict[str, Any]], containers: list[dict[str, Any]]) -> list[str]:
    """Those of `refs` that may go: their image (docker_image_info's `images`) carries the bundle's label and no
    container, running or stopped (docker_host_info's verbose `containers`), was made from it. Sorted."""
    used = {str(c.get(key)) for c in containers for key in ("Image", "ImageID") if c.get(key)}
    ours: set[str] = set()
    for image in images:
        labels = (image.get("Config") or {}).get("Labels") or {}
        if labels.get(BUNDLE_LABEL[0]) == BUNDLE_LABEL[1] and image.get("Id") not in used:
            ours.update(str(tag) for tag in image.get("RepoTags") or [])
    return sorted(ref for ref in refs if ref in ours and ref not in used)


def archive_tags(refs: list[str]) -> list[str]:
    """The image tags (what follows the last ':') of references, once each, sorted: the controller's archives and
    the build host's images are named by them."""
    return sorted({ref.rsplit(":", 1)[1] for ref in refs if ":" in ref.rsplit("/", 1)[-1]})


def tagged(tags: list[str], repositories: list[str]) -> list[str]:
    """Every repository (as named, and without its registry) with every tag: the names a build host may hold a build's
    images under. Sorted, once each."""
    names = set(repositories) | {repository.rsplit("/", 1)[-1] for repository in repositories}
    return sorted(f"{name}:{tag}" for name in names for tag in tags)


def apt_new_packages(stdout: str, wanted: str) -> list[str]:
    """The packages an apt-get install added, from its output's "The following NEW packages will be installed:" list
    (indented lines; names may carry an architecture), with `wanted` itself always among them; sorted."""
    added: set[str] = {wanted}
    lines = iter(stdout.splitlines())
    for line in lines:
        if line.startswith("The following NEW packages will be installed"):
            for item in lines:
                if not item.startswith(" "):
                    break
                added.update(item.split())
            break
    return sorted(added)


def registry_leftovers(found: list[dict[str, Any]], config: str, dropin: str) -> dict[str, Any]:
    """What teardown does in the registry package's folders, which stay with the package (tasks/teardown.yml), from what
    module find saw there (every entry of the configuration's folder and of the unit's drop-in folder). `restore`: the
    package's own configuration, the oldest of the backups the bundle's template made (CONFIG.PID.TIME~; a backup keeps
    its file's time, so the oldest is what was there before the bundle first wrote the file, later ones are the bundle's
    earlier configurations), '' when there is none. `remove`: the bundle's files there, every such backup, and the
    drop-in folder when the bundle's drop-in is all it holds (the bundle made it). Sorted."""
    backup = re.compile(re.escape(config) + r"\.[0-9]+\.[0-9]{4}-[0-9]{2}-[0-9]{2}@[0-9]{2}:[0-9]{2}:[0-9]{2}~")
    backups = sorted((entry for entry in found if backup.fullmatch(str(entry.get("path")))),
                     key=lambda entry: (float(entry.get("mtime", 0)), str(entry["path"])))
    folder = os.path.dirname(dropin)
    dropins = [str(entry.get("path")) for entry in found if os.path.dirname(str(entry.get("path"))) == folder]
    return {"restore": str(backups[0]["path"]) if backups else "",
            "remove": sorted([str(entry["path"]) for entry in backups] + ([folder] if dropins == [dropin] else []))}


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"context_files": context_files, "apt_new_packages": apt_new_packages,
                "space_needs": space_needs, "space_shortfall": space_shortfall, "image_retention": image_retention,
                "retention_removable": retention_removable, "archive_tags": archive_tags, "tagged": tagged,
                "registry_leftovers": registry_leftovers}
