"""What Ansible's main process loads once so that its forks inherit it (called by the stdout callback, which the main
process loads before any task).

Ansible forks a worker per host and task. A worker imports the filter plugins its task calls and reads the roles'
argument specs unless the main process already holds them, and then drops them when it exits: on the 2-core CI
machine type 0.5 s of controller CPU per worker for the imports and 0.1 s each for the specs and their parsed
`Allowed:` constraints, on every task that calls a filter (docs/fleets.md, "One load for all forks, one task for
all hosts' checks"). Loaded here once, every fork has them. Nothing here is required: a failure leaves the work to
the task, as before."""
from __future__ import annotations

import contextlib
import importlib
import os
import pkgutil
from collections.abc import Iterable

from ansible_collections.dask_gpu.bundle.plugins.plugin_utils import settings
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.options import SpecError, option_constraint

FILTERS = "ansible_collections.dask_gpu.bundle.plugins.filter"


def filters() -> list[str]:
    """Import every filter plugin of the collection; the names imported."""
    loaded = []
    for found in pkgutil.iter_modules(importlib.import_module(FILTERS).__path__):
        try:
            importlib.import_module(f"{FILTERS}.{found.name}")
        except Exception:  # noqa: BLE001, S112 - the task that calls the filter reports its error
            continue
        loaded.append(found.name)
    return loaded


def specs(roles_dirs: Iterable[str]) -> int:
    """Read the argument specs of every roles folder given (as the model reads them: realpath) and parse each
    option's constraint; the number of options."""
    count = 0
    for folder in roles_dirs:
        path = os.path.realpath(folder)
        if not os.path.isdir(path):
            continue
        for spec in settings.options(settings.role_specs(path)).values():
            try:
                option_constraint(spec)
            except SpecError:
                continue  # reported by the checks as a bug in the role's spec
            count += 1
    return count


def preload(roles_dirs: Iterable[str]) -> None:
    """The filters and the specs, each left to the tasks when it fails."""
    filters()
    with contextlib.suppress(Exception):  # the model reads the specs itself and reports what is wrong
        specs(roles_dirs)
