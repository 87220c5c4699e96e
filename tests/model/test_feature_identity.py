"""The units and containers a feature runs are declared by its module (Feature.units, Feature.containers), not
hand-listed in identity.py: features.identity joins them to the core's under the cluster's prefix. Every name the
roles and the spec builder read is declared, and no two features take one key."""
from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils import features
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.identity import identity as core_identity

ROOT = Path(__file__).resolve().parents[2]
PLUGINS = ROOT / "collections" / "ansible_collections" / "dask_gpu" / "bundle" / "plugins"


def read_names() -> set[tuple[str, str]]:
    """(units|containers, key) of every name the roles, playbooks and plugins read."""
    found: set[tuple[str, str]] = set()
    sources = [*ROOT.glob("roles/**/*.yml"), *ROOT.glob("roles/**/*.j2"), *ROOT.glob("playbooks/*.yml"),
               ROOT / "site.yml"]
    for path in sources:
        found |= set(re.findall(r"dask_cluster\.(units|containers)\.([a-z_]+)", path.read_text()))
    for path in PLUGINS.rglob("*.py"):
        found |= set(re.findall(r"cluster\[[\"'](units|containers)[\"']\]\[[\"']([a-z_]+)[\"']\]", path.read_text()))
    return found


def test_every_name_read_is_declared_by_the_core_or_a_feature() -> None:
    ident = features.identity("dask")
    read = read_names()
    assert read, "no reader found: the pattern is stale"
    assert sorted(f"{kind}.{key}" for kind, key in read if key not in ident[kind]) == []


def test_features_names_take_the_clusters_prefix_and_the_core_lists_none_of_them() -> None:
    core = core_identity("blue")
    blue = features.identity("blue")
    for feature in features.FEATURES:
        for kind, pairs in (("units", feature.units), ("containers", feature.containers)):
            for key, suffix in pairs:
                assert key not in core[kind], f"{feature.name}'s {kind} {key} is hand-listed in identity.py"
                assert blue[kind][key] == f"dask-blue-{suffix}"
    assert blue["units"]["autoscale_agent"] == "dask-blue-autoscale-agent"
    assert features.identity("dask")["units"]["notebook"] == "dask-notebook"


def test_two_features_cannot_take_one_key(monkeypatch: pytest.MonkeyPatch) -> None:
    twin = replace(features.FEATURES[0], name="twin", units=(("worker", "twin"),))
    monkeypatch.setattr(features, "FEATURES", (*features.FEATURES, twin))
    with pytest.raises(ValueError, match="feature twin: units key worker is taken"):
        features.identity("dask")


def test_the_docs_features_table_lists_every_feature_with_its_role_and_what_it_runs() -> None:
    rows = {}
    for line in (ROOT / "docs" / "model.md").read_text().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[0].startswith("`") and cells[1].startswith("`"):
            rows[cells[0].strip("`")] = (cells[1].strip("`"), cells[2])
    assert sorted(rows) == sorted(feature.name for feature in features.FEATURES)
    for feature in features.FEATURES:
        role, runs = rows[feature.name]
        assert role == feature.role, feature.name
        units, _, containers = runs.partition(";")
        named = {"units": units, "containers": containers}
        for kind, pairs in (("units", feature.units), ("containers", feature.containers)):
            listed = sorted(name.strip(" `") for name in named[kind].split(",") if name.strip(" `-"))
            assert listed == sorted(suffix for _, suffix in pairs), (feature.name, kind, runs)


def test_what_a_feature_manages_is_its_roles_and_reaches_the_record() -> None:
    """Each package, path and host unit a feature declares (the record keeps the packages' versions, fingerprints the
    paths and keeps whether the units are on) is one its role names (a templated name by its folder), its
    requirements file exists, and its site.yml tag is a play's tag there; features.managed, which the record reads
    from the cluster model, holds them all, each once."""
    site = (ROOT / "site.yml").read_text()
    for feature in features.FEATURES:
        text = "\n".join(path.read_text() for path in (ROOT / "roles" / feature.role).rglob("*") if path.is_file())
        for value in feature.packages + feature.paths + feature.host_units:
            assert value in text or f"{value.rsplit('/', 1)[0]}/{{{{" in text, (feature.name, value)
        assert not feature.requirements or (ROOT / feature.requirements).is_file(), feature.requirements
        assert not feature.requirements or feature.switch, feature.name
        assert not feature.tag or re.search(rf"tags: \[[^\]]*\b{feature.tag}\b", site), (feature.name, feature.tag)
    found = features.managed()
    for key, attribute in (("packages", "packages"), ("paths", "paths"), ("units", "host_units")):
        declared = [value for feature in features.FEATURES for value in getattr(feature, attribute)]
        assert sorted(found[key]) == sorted(set(declared)) and len(found[key]) == len(set(found[key])), key
    assert found["tags"] == [feature.tag for feature in features.FEATURES if feature.tag]


def test_teardown_runs_every_roles_teardown_once_the_features_from_the_registry() -> None:
    """Role dask_teardown names the core's teardown entry points and loops over the features' (the cluster model's
    managed.teardown, each at its feature's stage): every role with a tasks/teardown.yml is run once, either way."""
    text = (ROOT / "roles" / "dask_teardown" / "tasks" / "main.yml").read_text()
    named = re.findall(r"^\s+name: ([a-z_]+)\n\s+tasks_from: teardown", text, re.M)
    stages = features.managed()["teardown"]
    assert set(stages) == set(features.TEARDOWN_STAGES)
    for stage in features.TEARDOWN_STAGES:
        assert f"dask_cluster.managed.teardown.{stage} }}}}" in text, stage
    from_registry = [role for stage in features.TEARDOWN_STAGES for role in stages[stage]]
    with_entry = sorted(path.parents[1].name for path in (ROOT / "roles").glob("*/tasks/teardown.yml"))
    assert sorted(named + from_registry) == with_entry, (named, from_registry, with_entry)
    assert all(feature.teardown in ("", *features.TEARDOWN_STAGES) for feature in features.FEATURES)


def test_a_features_filters_come_from_the_registry() -> None:
    """A feature's spec builder and helpers (Feature.filters) reach the roles through the filter plugin `features`,
    which loops over the registry: no other filter plugin exposes one (nor a name taken by one), each is called by its
    own role, and every filter the roles and playbooks call is defined once."""
    from ansible_collections.dask_gpu.bundle.plugins.filter import features as feature_filters

    core: dict[str, str] = {}
    for path in sorted((PLUGINS / "filter").glob("*.py")):
        if path.stem == "features":
            continue
        module = __import__(f"ansible_collections.dask_gpu.bundle.plugins.filter.{path.stem}", fromlist=["x"])
        for name in module.FilterModule().filters():
            assert name not in core, (name, path.stem, core.get(name))
            core[name] = path.stem
    declared = feature_filters.FilterModule().filters()
    assert declared == features.filters() and declared, declared
    assert not set(core) & set(declared), set(core) & set(declared)
    sources = [*ROOT.glob("roles/**/*.yml"), *ROOT.glob("roles/**/*.j2"), *ROOT.glob("playbooks/*.yml"),
               ROOT / "site.yml"]
    called = {name for path in sources for name in re.findall(r"\|\s*dask_gpu\.bundle\.([a-z_]+)", path.read_text())}
    assert called <= set(core) | set(declared), called - set(core) - set(declared)
    for feature in features.FEATURES:
        text = "\n".join(path.read_text() for path in (ROOT / "roles" / feature.role).rglob("*.yml"))
        for name, _ in feature.filters:
            assert f"dask_gpu.bundle.{name}" in text, (feature.name, name)
