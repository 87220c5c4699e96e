"""Filters of the cluster model (plugin_utils/settings.py, model.py): typed settings, host and cluster models."""
from __future__ import annotations

from typing import Any

from ansible_collections.dask_gpu.bundle.plugins.plugin_utils import extras, model, rolling, settings
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.feature import cluster_hosts, worker_hosts


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"role_specs": settings.role_specs, "resolve_settings": settings.resolve,
                "typed_settings": settings.typed_settings, "host_model": model.host_model,
                "cluster_model": model.cluster_model, "advice": model.advice, "hosts_advice": model.hosts_advice,
                "cluster_advice": model.cluster_advice,
                "cluster_hosts": cluster_hosts, "worker_hosts": worker_hosts, "roll_plan": rolling.plan,
                "roll_counts": rolling.counts,
                "image_packages": extras.package_lines}
