"""Every variable given in Ansible's key=value form (`-e name=value`, which makes a string) renders exactly what its
typed form renders: the units, env files, specs, Prometheus's files and the model's decisions (dask_settings,
dask_host, dask_cluster), for the golden multi-host inventory. The values are generated from the roles' argument
specs: every option whose type is not a string (bool, int, list, dict), each bool turned to the opposite of its
default so that "false" and "true" both reach every reader, ints at their default, lists and dicts at a valid value.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
# List values for the list options whose default is empty (valid for the golden inventory's hosts).
LIST_SAMPLES: dict[str, list[Any]] = {
    "dask_worker_gpus": ["1"], "dask_firewall_allowed_sources": ["10.9.0.0/16", "10.8.0.1"],
    "dask_worker_extra_args": ["--lifetime", "2h"], "dask_scheduler_extra_args": ["--idle-timeout", "3600"],
    "dask_monitoring_alertmanagers": ["10.9.0.5:9093", "10.9.0.6:9093"],
    "dask_images_extra_packages": ["six", "xgboost>=2"], "dask_job_args": ["2026-11", "full"]}
# Options that cannot be written as key=value at all (a list of mappings) are left out, and said so.
NOT_KEY_VALUE = ("dask_monitoring_extra_scrape_configs",)


def specs() -> dict[str, dict[str, Any]]:
    options: dict[str, dict[str, Any]] = {}
    for path in sorted((ROOT / "roles").glob("*/meta/argument_specs.yml")):
        main = yaml.safe_load(path.read_text())["argument_specs"].get("main") or {}
        options.update(main.get("options") or {})
    return options


def generated() -> dict[str, Any]:
    """{option: its typed value} for every option that is not a string."""
    values: dict[str, Any] = {}
    for name, spec in specs().items():
        kind = spec.get("type", "str")
        if kind in ("str", "path") or name in NOT_KEY_VALUE:
            continue
        if kind == "bool":
            values[name] = not spec.get("default", False)
        elif kind in ("int", "float"):
            values[name] = spec["default"]
        elif kind == "list":
            values[name] = spec.get("default") or LIST_SAMPLES[name]
        elif kind == "dict":
            values[name] = spec.get("default") or {"log-level": "warn"}
        else:
            raise AssertionError(f"{name}: type {kind} has no generator here")
    return values


def key_value(value: Any) -> str:
    """The string Ansible's key=value form would carry for a typed value."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(str(item) for item in value)
    if isinstance(value, dict):
        return json.dumps(value, separators=(",", ":"))  # key=value splits at spaces
    return str(value)


def render(out: Path, controller: Path, extra: list[str]) -> dict[str, str]:
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    result = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(HERE / "multi-host.yml"),
                             str(ROOT / "playbooks" / "render-commands.yml"), "-e", f"render_dir={out}",
                             "-e", f"dask_controller_dir={controller}", "-e", "render_model=true", *extra],
                            capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    return {path.name: path.read_text() for path in sorted(out.glob("*.*"))}


def test_key_value_strings_render_what_typed_values_render(tmp_path: Path) -> None:
    values = generated()
    typed_file = tmp_path / "typed.json"
    typed_file.write_text(json.dumps(values))
    controller = tmp_path / "artifacts"
    # The full profile: dask_worker_cudf_spill (turned on here) needs cuDF in the images.
    full = ["-e", "dask_image_profile=full"]
    typed = render(tmp_path / "typed", controller, ["-e", f"@{typed_file}", *full])
    strings = render(tmp_path / "strings", controller,
                     [arg for name, value in values.items() for arg in ("-e", f"{name}={key_value(value)}")] + full)
    kinds: dict[str, int] = {}
    for name in values:
        kind = specs()[name].get("type")
        kinds[kind] = kinds.get(kind, 0) + 1
    print(f"{len(values)} variables in key=value form ({', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))}); "
          f"{len(typed)} rendered files compared; left out (no key=value form): {', '.join(NOT_KEY_VALUE)}")
    assert sorted(strings) == sorted(typed)
    assert any(name.endswith("-model.json") for name in typed)
    assert any(name.endswith("prometheus.yml") for name in typed)
    for name, text in typed.items():
        assert strings[name] == text, f"{name} differs between the key=value and the typed form"
    settings = json.loads(typed["sched01-model.json"])["settings"]
    for name, value in values.items():
        assert settings[name] == value, f"{name}: the model read {settings[name]!r}, the typed form is {value!r}"
