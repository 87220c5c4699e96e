"""Filters of jobs (plugin_utils/jobs.py): the job a run starts, and what stops it before any host changes."""
from __future__ import annotations

from typing import Any

from ansible_collections.dask_gpu.bundle.plugins.plugin_utils import jobs


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"job_plan": jobs.plan, "job_problems": jobs.problems}
