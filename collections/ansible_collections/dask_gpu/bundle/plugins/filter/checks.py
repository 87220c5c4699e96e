"""Filters of the checks: every problem of one host, or of every host of a play at once (plugin_utils/checks.py), []
when there is none; every host's problems from the inventory alone (plugin_utils/inventory_check.py)."""
from __future__ import annotations

from typing import Any

from ansible_collections.dask_gpu.bundle.plugins.plugin_utils import checks, inventory_check


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"problems": checks.problems, "hosts_problems": checks.hosts_problems,
                "inventory_check": inventory_check.inventory_check}
