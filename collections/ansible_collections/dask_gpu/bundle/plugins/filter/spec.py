"""Filters of the spec builder (plugin_utils/spec.py): the core's container specs and their renderings (the features'
spec builders are in filter/features.py)."""
from __future__ import annotations

from typing import Any

from ansible_collections.dask_gpu.bundle.plugins.plugin_utils import spec


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"scheduler_spec": spec.scheduler_spec, "worker_spec": spec.worker_spec,
                "client_spec": spec.client_spec, "roll_spec": spec.roll_spec,
                "docker_run_args": spec.docker_run_args, "container_args": spec.container_args,
                "client_env": spec.client_env, "dataframe_config": spec.dataframe_config}
