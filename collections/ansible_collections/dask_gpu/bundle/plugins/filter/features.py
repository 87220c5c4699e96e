"""Filters the features declare (Feature.filters: each feature's spec builder and helpers), from the registry: a
feature adds its own without editing a filter plugin."""
from __future__ import annotations

from typing import Any

from ansible_collections.dask_gpu.bundle.plugins.plugin_utils import features


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return features.filters()
