"""The cluster model and spec builder (collection dask_gpu.bundle, plugins/plugin_utils) as plain modules."""
from __future__ import annotations

from types import ModuleType

import pytest
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils import model as model_module
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils import spec as spec_module


@pytest.fixture(scope="session")
def model() -> ModuleType:
    return model_module


@pytest.fixture(scope="session")
def builder() -> ModuleType:
    return spec_module
