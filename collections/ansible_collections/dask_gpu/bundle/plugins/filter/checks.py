"""Filter of the checks (plugin_utils/checks.py): every problem of one host, [] when there is none."""
from __future__ import annotations

from typing import Any

from ansible_collections.dask_gpu.bundle.plugins.plugin_utils import checks


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"problems": checks.problems}
