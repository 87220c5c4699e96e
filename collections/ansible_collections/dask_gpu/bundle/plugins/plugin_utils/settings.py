"""Settings: every variable of every role's argument spec, resolved for a host (the inventory's value, else the
spec's default), then typed by its spec (options.py) before anyone reads it. `-e name=value` gives Ansible a
string; after `typed` it is the bool, int, list or dict the spec declares, exactly as if it had been given typed.

A value that cannot become its type, or breaks its constraint, is reported (`Typed.problems`, by variable) and
replaced by its spec's default in `Typed.settings`, so the model can always be built; playbooks/check.yml fails
on the problems before any host changes.
"""
from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.options import (
    FIXED,
    Constraint,
    SpecError,
    as_int,
    as_str,
    coerce,
    coerce_option,
    option_constraint,
    show,
)

Specs = Mapping[str, Mapping[str, Any]]


# libyaml's safe loader when PyYAML has it (14 x faster here: the specs are read on every host of every task that
# needs them, which was about a third of check.yml's controller time per host).
def _load(text: str) -> Any:
    try:
        return yaml.load(text, Loader=yaml.CSafeLoader)
    except AttributeError:  # PyYAML without libyaml
        return yaml.safe_load(text)


_SPECS: dict[tuple[str, tuple[tuple[str, int], ...]], dict[str, Any]] = {}


def role_specs(roles_dir: str) -> dict[str, Any]:
    """{role: the options of its main entry point} for every role under roles_dir that has an argument spec: the
    variables the model resolves and the checks know (a new role is found without an edit). Read once per process
    while the files are unchanged (a task templates them several times); callers get their own copy."""
    paths = sorted(Path(roles_dir).glob("*/meta/argument_specs.yml"))
    key = (str(roles_dir), tuple((str(path), path.stat().st_mtime_ns) for path in paths))
    if key not in _SPECS:
        found: dict[str, Any] = {}
        for path in paths:
            entries = (_load(path.read_text()) or {}).get("argument_specs") or {}
            found[path.parent.parent.name] = (entries.get("main") or {}).get("options") or {}
        _SPECS.clear()
        _SPECS[key] = found
    return copy.deepcopy(_SPECS[key])


def options(specs: Specs) -> dict[str, Mapping[str, Any]]:
    """Every option of every role: name -> its spec."""
    return {name: spec for role_options in specs.values() for name, spec in (role_options or {}).items()}


def resolve(provided: Mapping[str, Any], specs: Specs) -> dict[str, Any]:
    """Every variable of every role's argument spec: the value set for the host, else the spec's default (raw)."""
    settings: dict[str, Any] = {}
    for name, spec in options(specs).items():
        if name in provided:
            settings[name] = provided[name]
        elif isinstance(spec, Mapping) and "default" in spec:
            settings[name] = spec["default"]
    return settings


@dataclass
class Typed:
    """Settings typed by their specs; the variables whose value was refused, with the messages."""

    settings: dict[str, Any] = field(default_factory=dict)
    problems: dict[str, list[str]] = field(default_factory=dict)


def satisfies(value: Any, constraint: Constraint, hosts: list[str]) -> bool:
    if constraint.kind == "integer":
        number = as_int(value)
        return number is not None and (constraint.low is None or number >= constraint.low) and (
            constraint.high is None or number <= constraint.high)
    if constraint.kind in ("any", "true or false"):
        return True
    text = as_str(value)
    if text is None:
        return False
    if constraint.empty and text == "":
        return True
    if constraint.kind == "pattern":
        return constraint.pattern is not None and constraint.pattern.fullmatch(text) is not None
    if constraint.kind == "inventory host or localhost":
        return text in ["localhost", *hosts]
    return FIXED[constraint.kind][1](text)


def _constraint_message(name: str, value: Any, entry: Any, constraint: Constraint, hosts: list[str]) -> str:
    label = constraint.label + (", or empty" if constraint.empty else "")
    if constraint.is_list:
        return f"{name} entry {show(entry)} is not {label}"
    if constraint.kind == "inventory host or localhost":
        return f"{name}={entry} is neither localhost nor a host in the inventory ({', '.join(hosts)})"
    if constraint.kind == "port range FIRST:LAST":
        return f"{name}={show(value)} must be FIRST:LAST within 1-65535 (FIRST <= LAST), or empty"
    return f"{name} ({show(value)}) is not {label}"


def check_value(name: str, value: Any, spec: Mapping[str, Any], hosts: list[str]) -> tuple[list[str], Any]:
    """(messages, the typed value) for one option's value: its type, its choices, its Allowed constraint.
    SpecError when the spec itself is not in the grammar."""
    constraint = option_constraint(spec)
    type_problems, typed_value = coerce_option(value, spec)
    if type_problems:
        return [f"{name} ({show(value)}) {problem}" for problem in type_problems], None
    choices = spec.get("choices")
    if choices:
        allowed = [coerce(choice, spec.get("type", "str"))[1] for choice in choices]
        if typed_value not in allowed:
            return [f"{name} ({show(value)}) must be one of {', '.join(str(choice) for choice in choices)}"], None
    if constraint is not None:
        entries = typed_value if constraint.is_list else [typed_value]
        bad = [entry for entry in entries if not satisfies(entry, constraint, hosts)]
        if bad:
            return [_constraint_message(name, value, entry, constraint, hosts) for entry in bad], None
    return [], typed_value


def typed(raw: Mapping[str, Any], specs: Specs, hosts: list[str] | None = None) -> Typed:
    """The settings typed by their specs. A refused value is replaced by its spec's default (typed), or kept as given
    when it has none."""
    result = Typed()
    inventory = list(hosts or [])
    for name, spec in options(specs).items():
        if not isinstance(spec, Mapping):
            continue
        if name not in raw:
            if "default" not in spec:
                result.problems[name] = [f"{name} is not set and has no default"]
            continue
        try:
            messages, value = check_value(name, raw[name], spec, inventory)
        except SpecError:
            messages, value = [], raw[name]  # reported by the checks as a bug in the role's spec
        if messages:
            result.problems[name] = messages
            # The default stands in for the model; an option without one keeps the value as given.
            result.settings[name] = coerce_option(spec["default"], spec)[1] if "default" in spec else raw[name]
        else:
            result.settings[name] = value
    return result


def typed_settings(provided: Mapping[str, Any], specs: Specs, hosts: list[str] | None = None) -> dict[str, Any]:
    """What the model and every reader use: resolved, then typed (refused values replaced by their defaults)."""
    return typed(resolve(provided, specs), specs, hosts).settings
