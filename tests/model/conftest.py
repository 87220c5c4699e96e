"""Load the cluster model and spec builder (Ansible filter plugins of role dask) as plain modules."""
from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

PLUGINS = Path(__file__).resolve().parents[2] / "roles" / "dask" / "filter_plugins"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, PLUGINS / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def model() -> ModuleType:
    return load("dask_model")


@pytest.fixture(scope="session")
def builder() -> ModuleType:
    return load("dask_spec")
