"""Folders the bundle manages on the hosts: where they are, and which ones it may never take.

A folder the bundle creates is recorded on the host (the cluster's record, `records.py`) and teardown removes only
recorded folders. Folders a variable names (dask_config_dir, dask_data_dir, dask_images_work_dir) must not be a
system or home folder, nor a parent of one: checked before any host changes, so a typo such as `/var` or `/home`
never becomes a folder the bundle writes into and later removes.
"""
from __future__ import annotations

import posixpath

# System folders (and /home, /root: users' homes). A managed folder may be none of these, no parent of one, and no
# home folder (/home/NAME).
SYSTEM_FOLDERS = frozenset({
    "/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/libx32", "/lost+found", "/media",
    "/mnt", "/opt", "/proc", "/root", "/run", "/sbin", "/snap", "/srv", "/sys", "/tmp", "/usr", "/var",
    "/usr/bin", "/usr/lib", "/usr/lib64", "/usr/libexec", "/usr/local", "/usr/local/bin", "/usr/local/lib",
    "/usr/sbin", "/usr/share", "/usr/src", "/var/backups", "/var/cache", "/var/lib", "/var/local", "/var/lock",
    "/var/log", "/var/mail", "/var/opt", "/var/run", "/var/spool", "/var/tmp", "/var/lib/docker",
    "/etc/ansible", "/etc/cdi", "/etc/docker", "/etc/systemd", "/etc/systemd/system", "/etc/default"})
HOMES = ("/home/",)


def normalized(path: str) -> str:
    """An absolute path without '.', '..', doubled or trailing slashes ('' for a relative path)."""
    if not path.startswith("/"):
        return ""
    return posixpath.normpath(path).replace("//", "/")


def why_unmanageable(path: str) -> str:
    """'' when the bundle may create and remove this folder, else why not (a phrase for a message)."""
    clean = normalized(path)
    if not clean:
        return "is not an absolute path"
    if clean != path.rstrip("/") and path != "/":
        return f"is not in its plain form ({clean})"
    if clean in SYSTEM_FOLDERS:
        return "is a system folder"
    if any(clean == home.rstrip("/") or (clean.startswith(home) and clean.count("/") == home.count("/"))
           for home in HOMES):
        return "is a home folder"
    parents = sorted(folder for folder in SYSTEM_FOLDERS if folder != clean and folder.startswith(clean + "/"))
    if parents:
        return f"holds the system folder {parents[0]}"
    return ""


def is_manageable(path: str) -> bool:
    return why_unmanageable(path) == ""


def kept_inside_trees(folders: list[dict[str, object]]) -> list[tuple[str, str]]:
    """(kept, tree) for each folder whose content teardown keeps (remove: empty) that lies inside a folder teardown
    removes whole (remove: tree): the tree would take it, and what the docs promise to keep, with it."""
    trees = [normalized(str(f.get("path") or "")) for f in folders if f.get("remove") == "tree"]
    kept = [normalized(str(f.get("path") or "")) for f in folders if f.get("remove") != "tree"]
    return sorted({(inner, outer) for inner in kept for outer in trees
                   if inner and outer and inner != outer and inner.startswith(outer.rstrip("/") + "/")})
