"""The feature registry: every role's part of the model and its checks (feature.py says what a feature is).
The core (model.py, checks.py) runs them in this order; a new service adds its module and one line here."""
from __future__ import annotations

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
