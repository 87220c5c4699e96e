"""The feature registry: every role's part of the model and its checks (feature.py says what a feature is).
The core (model.py, checks.py) runs them in this order; a new service adds its module and one line here."""
from __future__ import annotations

from collections.abc import Callable, Mapping
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


TEARDOWN_STAGES = ("before", "units", "after")


def managed() -> dict[str, Any]:
    """What the features' roles manage on a host beside the core's (Docker's), in registry order, each once: the
    packages they may install, the paths they configure, the host units they enable, their site.yml tags (role
    dask_record: the record and the fast rerun read them from the cluster model's `managed`), and the roles whose
    teardown entry point role dask_teardown runs at each stage (`teardown`: before, units, after)."""
    out: dict[str, Any] = {"packages": [], "paths": [], "units": [], "tags": []}
    for feature in FEATURES:
        for key, values in (("packages", feature.packages), ("paths", feature.paths), ("units", feature.host_units),
                            ("tags", (feature.tag,) if feature.tag else ())):
            out[key] += [value for value in values if value not in out[key]]
    out["teardown"] = {stage: [feature.role for feature in FEATURES if feature.teardown == stage]
                       for stage in TEARDOWN_STAGES}
    return out


def image_requirements() -> list[tuple[str, str]]:
    """(switch, repository-relative requirements file) of each feature that builds packages into the images while
    its switch is on (extras.packages)."""
    return [(feature.switch, feature.requirements) for feature in FEATURES if feature.requirements]


def image_needs(cluster: Mapping[str, Any], settings: Mapping[str, Any]) -> dict[str, list[tuple[str, str]]]:
    """What the features that are on need in each image ({"scheduler"|"worker": [(module, what needs it)]}), in
    registry order (own_image.needs adds them to the core's)."""
    out: dict[str, list[tuple[str, str]]] = {"scheduler": [], "worker": []}
    for feature in FEATURES:
        if feature.image_needs is not None:
            for target, needed in feature.image_needs(cluster, settings).items():
                out[target] += needed
    return out


def filters() -> dict[str, Callable[..., Any]]:
    """Every feature's Jinja filters by name (the filter plugin `features` exposes them); a name declared twice is an
    error, as two plugins cannot both be dask_gpu.bundle.NAME."""
    out: dict[str, Callable[..., Any]] = {}
    for feature in FEATURES:
        for name, function in feature.filters:
            if name in out:
                raise ValueError(f"feature {feature.name}: filter {name} is taken")
            out[name] = function
    return out
