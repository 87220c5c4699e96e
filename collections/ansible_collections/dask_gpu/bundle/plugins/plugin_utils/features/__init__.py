"""The feature registry: every role's part of the model and its checks (feature.py says what a feature is).
The core (model.py, checks.py) runs them in this order; a new service adds its module and one line here."""
from __future__ import annotations

from typing import Any

from ansible_collections.dask_gpu.bundle.plugins.plugin_utils import identity as core
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.feature import Feature
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.features import (
    autoscale,
    firewall,
    images,
    jobs,
    monitoring,
    notebook,
    polars,
    toolkit,
)

FEATURES: tuple[Feature, ...] = (images.FEATURE, monitoring.FEATURE, firewall.FEATURE, toolkit.FEATURE,
                               jobs.FEATURE, notebook.FEATURE, polars.FEATURE, autoscale.FEATURE)


def identity(name: str) -> dict[str, Any]:
    """The cluster's identity (identity.py) with every feature's units and containers, under the cluster's prefix."""
    ident = core.identity(name)
    for feature in FEATURES:
        for kind, pairs in (("units", feature.units), ("containers", feature.containers)):
            for key, suffix in pairs:
                if key in ident[kind]:
                    raise ValueError(f"feature {feature.name}: {kind} key {key} is taken")
                ident[kind][key] = f"{ident['prefix']}-{suffix}"
    return ident
