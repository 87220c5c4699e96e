"""Invalid values generated from the roles' argument specs themselves: for each option, a value its spec forbids
(out of range, not in the choices, a bad format, or the wrong type), read from its `type`, `elements`, `choices`
and `Allowed:` item (grammar: options.py of the collection in collections/). Shared by tests/unit/test_validate.py
and tests/inventory/test_generated_invalid.py. A constraint kind this module does not know fails the tests, so
a new kind in the grammar comes with a generator here."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
ROLES = sorted(path.name for path in (ROOT / "roles").iterdir() if (path / "meta" / "argument_specs.yml").exists())

# A value of the right type that each fixed kind of the grammar rejects.
BAD_FOR_KIND = {
    "fraction (0, 1]": 1.5,
    "size or fraction (0, 1]": "1.5",
    "size, fraction (0, 1] or auto": "12 parsecs",
    "size or auto": "0.5",
    "IPv4 address": "300.1.2.3",
    "IPv4 address or CIDR": "10.0.0.0/33",
    "absolute path": "relative/dir",
    "managed folder": "/var",
    "command name or absolute path": "relative/nvidia-smi",
    "port range FIRST:LAST": "9100:9000",
    "GPU index, GPU-UUID or MIG-UUID": "MIG-1234",
    "URL (http/https)": "ftp://mirror.example.com/repo",
    "inventory host or localhost": "ghost-host-not-in-inventory",
}
# Candidates for `LABEL (REGEX)` constraints: the first the regex does not match is used.
PATTERN_CANDIDATES = ["Bad Value!", "bad\nvalue", "-", "x" * 300]
# A value of the wrong type for each type.
# (A string is a list to Ansible's argument specs, split at commas: the wrong type for a list is a mapping.)
WRONG_TYPE = {"int": "four", "bool": "maybe", "float": "many", "str": ["a", "list"], "path": {"a": "mapping"},
              "list": {"not": "a list"}, "dict": ["not", "a", "mapping"]}


def specs() -> dict[str, dict[str, dict[str, Any]]]:
    """{role: {option: spec}} of every role's main entry point."""
    loaded = {}
    for role in ROLES:
        text = (ROOT / "roles" / role / "meta" / "argument_specs.yml").read_text()
        loaded[role] = yaml.safe_load(text)["argument_specs"]["main"]["options"]
    return loaded


def allowed(spec: dict[str, Any]) -> str | None:
    items = spec.get("description")
    items = items if isinstance(items, list) else [items]
    found = [str(item)[len("Allowed:"):].strip() for item in items if str(item).startswith("Allowed:")]
    return found[0] if found else None


def _bad_scalar(constraint: str, element: str) -> Any:
    """A value of type `element` that the constraint (without ', or empty' and ' (list)') rejects."""
    if constraint in BAD_FOR_KIND:
        return BAD_FOR_KIND[constraint]
    match = re.fullmatch(r"integer (-?\d+)-(-?\d+)", constraint)
    if match:
        return int(match.group(2)) + 1
    match = re.fullmatch(r"integer >= (-?\d+)", constraint)
    if match:
        return int(match.group(1)) - 1
    if constraint in ("any", "true or false"):
        return WRONG_TYPE[element]
    label, sep, regex = constraint.partition(" (")
    if sep and regex.endswith(")"):
        for candidate in PATTERN_CANDIDATES:
            if not re.fullmatch(regex[:-1], candidate):
                return candidate
        raise AssertionError(f"no candidate violates {constraint!r}: add one to PATTERN_CANDIDATES")
    raise AssertionError(f"no generator for the constraint {constraint!r}: add one to tests/unit/invalid_values.py")


def invalid_value(spec: dict[str, Any]) -> tuple[Any, str]:
    """(an invalid value, why it is invalid) for one option: a constraint violation of the right type where
    the constraint allows one, else a value outside the choices, else a value of the wrong type."""
    kind = spec.get("type", "str")
    if spec.get("choices"):
        return "not-a-choice", "not one of the choices"
    constraint = allowed(spec)
    if constraint is None:
        raise AssertionError("option without an Allowed: item or choices")
    is_list = constraint.endswith(" (list)")
    constraint = constraint.removesuffix(" (list)").removesuffix(", or empty")
    element = spec.get("elements", "str") if kind == "list" else kind
    value = _bad_scalar(constraint, element)
    why = "wrong type" if value == WRONG_TYPE[element] else "violates Allowed: " + constraint
    return ([value] if is_list else value), why


def wrong_type(spec: dict[str, Any]) -> Any:
    """A value of the wrong type for the option."""
    return WRONG_TYPE[spec.get("type", "str")]


def generated() -> list[tuple[str, str, Any, str]]:
    """(role, option, invalid value, why) for every option of every role."""
    return [(role, name, *invalid_value(spec)) for role, options in specs().items() for name, spec in options.items()]
