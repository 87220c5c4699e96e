"""Option values and the grammar of the argument specs: how a value given in the inventory or on the command line
(`-e name=value` makes a string) becomes the type its spec declares, and whether it meets the spec's constraint.

Constraints come from the roles' meta/argument_specs.yml. Ansible's argument specs take no custom keys, so each
option's ``description`` is a list: its first item is the meaning, and one item is ``Allowed: CONSTRAINT``
(options with ``choices`` may leave it out; the choices are the constraint). The grammar::

    ALLOWED    := "Allowed: " CONSTRAINT [", or empty"] [" (list)"]
    SCOPE      := "Scope: cluster"                   a cluster-wide option (cluster_scoped below)
    CONSTRAINT := "any"                              no constraint beyond the option's type (free-form)
                | "true or false"                    a boolean (the type says it all)
                | "integer " LOW "-" HIGH            an integer in LOW..HIGH (inclusive)
                | "integer >= " LOW                  an integer of at least LOW
                | "fraction (0, 1]"                  a number 0 < f <= 1 (0.25)
                | "size or fraction (0, 1]"          a size as dask parses it (64GB, 1.5TiB, 500MB, 512MiB,
                                                     bytes as a whole number) or a fraction 0 < f <= 1 (0.8)
                | "size, fraction (0, 1] or auto"    the same, or the word auto
                | "IPv4 address"                     dotted quad, 0-255 each
                | "IPv4 address or CIDR"             an address, or a network like 10.0.0.0/8
                | "absolute path"                    starts with /, no line breaks
                | "managed folder"                   an absolute path the bundle may create and remove: not a
                                                     system or home folder, nor one of their parents (paths.py)
                | "command name or absolute path"    a name looked up on PATH (no /), or an absolute path
                | "port range FIRST:LAST"            1 <= FIRST <= LAST <= 65535
                | "GPU index, GPU-UUID or MIG-UUID"  0, GPU-<uuid>, MIG-<uuid> or MIG-GPU-<uuid>/<gi>/<ci>
                | "URL (http/https)"                 http:// or https:// with a host, no spaces or quotes
                | "inventory host or localhost"      localhost or a host of the inventory
                | LABEL " (" REGEX ")"               the whole value matches the Python regex REGEX;
                                                     LABEL (no " (" in it) says what it is in words

``, or empty`` also allows the empty string; `` (list)`` applies the constraint to every entry of a list.

Types (the spec's ``type``, str when absent), converted as Ansible's own argument-spec validation converts them:
int takes integers and strings of digits (not booleans or floats with a fraction); float takes numbers and
numeric strings; bool takes booleans and yes/no, true/false, on/off, y/n, t/f, 1/0 (any case); str and path take
strings and numbers (not booleans, null, lists or mappings); list takes a list, or a string split at commas (the
empty string is the empty list) or a number, each entry of the spec's ``elements`` type; dict takes a mapping or a
string holding JSON or key=value pairs; raw takes anything.
"""
from __future__ import annotations

import functools
import ipaddress
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from ansible_collections.dask_gpu.bundle.plugins.module_utils import paths

ALLOWED_PREFIX = "Allowed:"
# A description item marking a cluster-wide option: the cluster reads it from the scheduler host, and every host
# must agree with that value (the checks refuse one that differs, rather than ignore it).
SCOPE_CLUSTER = "Scope: cluster"
EMPTY_SUFFIX = ", or empty"
LIST_SUFFIX = " (list)"


# Sizes as dask.utils.parse_bytes reads them (spaces dropped, units in any case); a bare number with a
# decimal point is a fraction (dask-cuda: a number <= 1 is a fraction of the device's memory).
SIZE = re.compile(r"(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?P<unit>[A-Za-z]*)")
SIZE_UNITS = {"": 1, "b": 1}
for _index, _letter in enumerate("kmgtp", start=1):
    SIZE_UNITS.update({_letter: 1000 ** _index, _letter + "b": 1000 ** _index,
                       _letter + "i": 1024 ** _index, _letter + "ib": 1024 ** _index})
# A GPU index, a GPU UUID, or a MIG UUID (current form, or the older MIG-GPU-<uuid>/<gi>/<ci>).
UUID = r"[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}"
GPU_ID = re.compile(rf"[0-9]+|GPU-{UUID}|MIG-{UUID}|MIG-GPU-{UUID}/[0-9]+/[0-9]+")
PORT_RANGE = re.compile(r"([0-9]+):([0-9]+)")
INTEGER = re.compile(r"\s*[+-]?[0-9]+\s*")
LINE_BREAK = re.compile(r"[\r\n\x00]")
BOOL_WORDS = {"true": True, "yes": True, "on": True, "y": True, "t": True, "1": True,
              "false": False, "no": False, "off": False, "n": False, "f": False, "0": False}



class SpecError(ValueError):
    """An argument spec the grammar cannot read (a bug in a role, reported as a problem)."""


# ---------------------------------------------------------------------------------------------- values

def show(value: Any) -> str:
    """A value as the inventory would write it (JSON), for messages."""
    try:
        return json.dumps(value, default=str, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


def as_bool(value: Any) -> bool | None:
    """The boolean a value means, or None if it is not one."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        return BOOL_WORDS.get(value.strip().lower())
    return None


def as_mapping(value: Any) -> Mapping[str, Any]:
    """The value where it is a mapping, else an empty one (a fact or setting missing or of another type): the one
    place for this coercion."""
    return value if isinstance(value, Mapping) else {}


def as_sequence(value: Any) -> list[Any]:
    """A list of the value where it is a list or tuple, else an empty one (as_list converts as the specs do)."""
    return list(value) if isinstance(value, (list, tuple)) else []


def as_int(value: Any) -> int | None:
    """The integer a value means (integers, integral floats, strings of digits), or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    if isinstance(value, str) and INTEGER.fullmatch(value):
        return int(value)
    return None


def as_str(value: Any) -> str | None:
    """The string a value means (strings and numbers), or None."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (str, int, float)):
        return str(value)
    return None


def parse_size(text: str) -> tuple[str, float] | None:
    """('bytes', n) or ('fraction', f) for a size or fraction dask accepts, else None."""
    match = SIZE.fullmatch(text.replace(" ", ""))
    if not match:
        return None
    number, unit = match.group("number"), match.group("unit").lower()
    if unit not in SIZE_UNITS:
        return None
    if not unit and "." in number:
        fraction = float(number)
        return ("fraction", fraction) if 0 < fraction <= 1 else None
    return ("bytes", float(number) * SIZE_UNITS[unit])


def is_fraction(text: str) -> bool:
    """A number 0 < f <= 1."""
    try:
        value = float(text)
    except ValueError:
        return False
    return 0 < value <= 1


def is_ipv4(text: str) -> bool:
    try:
        ipaddress.IPv4Address(text)
    except ValueError:
        return False
    return True


def is_ipv4_or_cidr(text: str) -> bool:
    if "/" not in text:
        return is_ipv4(text)
    address, _, prefix = text.partition("/")
    if not is_ipv4(address) or not prefix.isdigit():
        return False
    try:
        ipaddress.IPv4Network(text, strict=False)
    except ValueError:
        return False
    return True


def is_url(text: str) -> bool:
    if re.search(r"[\s\"'\\]", text):
        return False
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - raises ValueError for a port out of range
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def port_range(text: str) -> tuple[int, int] | None:
    match = PORT_RANGE.fullmatch(text.strip())
    if not match:
        return None
    first, last = int(match.group(1)), int(match.group(2))
    return (first, last) if 1 <= first <= last <= 65535 else None


# ------------------------------------------------------------------------------------------- grammar

@dataclass(frozen=True)
class Constraint:
    """One option's `Allowed:` constraint, parsed."""

    text: str
    kind: str
    label: str
    low: int | None = None
    high: int | None = None
    pattern: re.Pattern[str] | None = None
    empty: bool = False
    is_list: bool = False


# kind: (label in messages, check of the value as a string (or an int for integer kinds))
FIXED: dict[str, tuple[str, Callable[[str], bool]]] = {
    "any": ("anything", lambda text: True),
    "true or false": ("true or false", lambda text: True),
    "size or fraction (0, 1]": (
        "a size (like 64GB, 1.5TiB, 500MB, or bytes) or a fraction in (0, 1] (like 0.8)",
        lambda text: parse_size(text) is not None),
    "size, fraction (0, 1] or auto": (
        "auto, a size (like 64GB, 1.5TiB, 500MB, or bytes) or a fraction in (0, 1] (like 0.9)",
        lambda text: text.strip() == "auto" or parse_size(text) is not None),
    "size or auto": ("auto or a size (like 16GiB, 512MiB, or bytes)",
                     lambda text: text.strip() == "auto" or (parse_size(text) or ("", 0))[0] == "bytes"),
    "fraction (0, 1]": ("a fraction in (0, 1] (like 0.25)", is_fraction),
    "IPv4 address": ("an IPv4 address", is_ipv4),
    "IPv4 address or CIDR": ("an IPv4 address or CIDR", is_ipv4_or_cidr),
    "absolute path": ("an absolute path", lambda text: text.startswith("/") and not LINE_BREAK.search(text)),
    "managed folder": ("an absolute path that is not a system or home folder nor a parent of one",
                       lambda text: not LINE_BREAK.search(text) and paths.is_manageable(text)),
    "command name or absolute path": (
        "a command name (no /) or an absolute path",
        lambda text: bool(text) and not LINE_BREAK.search(text) and not text.isspace()
        and ("/" not in text or text.startswith("/"))),
    "port range FIRST:LAST": ("a port range FIRST:LAST within 1-65535", lambda text: port_range(text) is not None),
    "GPU index, GPU-UUID or MIG-UUID": (
        "a GPU index, a GPU UUID (GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx) or a MIG UUID "
        "(MIG-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)", lambda text: GPU_ID.fullmatch(text) is not None),
    "URL (http/https)": ("an http:// or https:// URL", is_url),
    # Checked against the inventory in _check_value (needs the groups).
    "inventory host or localhost": ("localhost or a host in the inventory", lambda text: True),
}
INTEGER_RANGE = re.compile(r"integer (-?[0-9]+)-(-?[0-9]+)")
INTEGER_MIN = re.compile(r"integer >= (-?[0-9]+)")


def allowed_text(spec: Mapping[str, Any]) -> str | None:
    """The text after 'Allowed:' in an option's description, or None."""
    description = spec.get("description")
    items = description if isinstance(description, list) else [description]
    found = [str(item)[len(ALLOWED_PREFIX):].strip() for item in items
             if isinstance(item, str) and item.startswith(ALLOWED_PREFIX)]
    if len(found) > 1:
        raise SpecError("has more than one 'Allowed:' item")
    return found[0] if found else None


def cluster_scoped(spec: Mapping[str, Any]) -> bool:
    """Whether an option is cluster-wide (its description has the 'Scope: cluster' item)."""
    description = spec.get("description")
    return SCOPE_CLUSTER in (description if isinstance(description, list) else [description])


def meaning(spec: Mapping[str, Any]) -> str:
    """An option's description without its 'Allowed:' item."""
    description = spec.get("description")
    items = description if isinstance(description, list) else [description]
    return " ".join(str(item) for item in items if item is not None and not str(item).startswith(ALLOWED_PREFIX))


# Cached: typed_settings parses every option's constraint for every host; the text is all it depends on.
@functools.cache
def parse_constraint(text: str) -> Constraint:
    """Parse the text after 'Allowed:' (see the module docstring); SpecError if the grammar lacks it."""
    rest = text.strip()
    is_list = rest.endswith(LIST_SUFFIX)
    if is_list:
        rest = rest[: -len(LIST_SUFFIX)]
    empty = rest.endswith(EMPTY_SUFFIX)
    if empty:
        rest = rest[: -len(EMPTY_SUFFIX)]
    source = text.strip()
    if rest in FIXED:
        return Constraint(source, rest, FIXED[rest][0], empty=empty, is_list=is_list)
    match = INTEGER_RANGE.fullmatch(rest)
    if match:
        low, high = int(match.group(1)), int(match.group(2))
        if low > high:
            raise SpecError(f"empty integer range in {text!r}")
        return Constraint(source, "integer", f"an integer in {low}-{high}", low=low, high=high, empty=empty,
                          is_list=is_list)
    match = INTEGER_MIN.fullmatch(rest)
    if match:
        low = int(match.group(1))
        return Constraint(source, "integer", f"an integer >= {low}", low=low, empty=empty, is_list=is_list)
    label, sep, regex = rest.partition(" (")
    if sep and regex.endswith(")") and label:
        try:
            pattern = re.compile(regex[:-1])
        except re.error as error:
            raise SpecError(f"bad regex in {text!r}: {error}") from error
        article = "an" if label[0].lower() in "aeiou" else "a"
        return Constraint(source, "pattern", f"{article} {label} ({regex[:-1]})", pattern=pattern, empty=empty,
                          is_list=is_list)
    raise SpecError(f"'Allowed: {text}' is not in the grammar (roles/dask/filter_plugins/dask_validate.py)")


def option_constraint(spec: Mapping[str, Any]) -> Constraint | None:
    """The option's constraint (None when it has choices and no Allowed item); SpecError if it has neither."""
    text = allowed_text(spec)
    if text is None:
        if spec.get("choices"):
            return None
        raise SpecError("has neither an 'Allowed:' item in its description nor choices")
    constraint = parse_constraint(text)
    kind = spec.get("type", "str")
    if constraint.is_list != (kind == "list"):
        raise SpecError(f"'Allowed: {text}' {'needs' if kind == 'list' else 'cannot have'} ' (list)' for type {kind}")
    element = spec.get("elements", "str") if kind == "list" else kind
    if constraint.kind == "integer" and element != "int":
        raise SpecError(f"'Allowed: {text}' is for int options, not {element}")
    if constraint.kind == "true or false" and element != "bool":
        raise SpecError(f"'Allowed: {text}' is for bool options, not {element}")
    return constraint


# ------------------------------------------------------------------------------------------- types

TYPE_LABELS = {"int": "an integer", "bool": "a boolean (true/false, yes/no)", "float": "a number",
               "str": "a string",
               "path": "a path (a string)", "list": "a list", "dict": "a mapping", "raw": "anything"}


def as_float(value: Any) -> float | None:
    """The number a value means (numbers and numeric strings, not booleans), or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def as_list(value: Any) -> list[Any] | None:
    """A list as Ansible's argument specs convert one: a list, a string split at commas ('' is []), a number."""
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, str):
        return value.split(",") if value.strip() else []
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return [str(value)]
    return None


def as_dict(value: Any) -> dict[str, Any] | None:
    """A mapping, or a string holding one (JSON, or key=value pairs) as Ansible's check_type_dict reads it."""
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, str):
        from ansible.module_utils.common.validation import check_type_dict  # the controller's own Ansible

        try:
            parsed = check_type_dict(value.strip() or "{}")
        except TypeError:
            return None
        return dict(parsed) if isinstance(parsed, Mapping) else None
    return None


def coerce(value: Any, kind: str) -> tuple[bool, Any]:
    """(True, the value as its type means it) or (False, None) for one value of the spec type `kind`."""
    readers: dict[str, Callable[[Any], Any]] = {
        "int": as_int, "bool": as_bool, "float": as_float, "str": as_str, "path": as_str, "list": as_list,
        "dict": as_dict, "raw": lambda raw: raw}
    if kind not in readers:
        raise SpecError(f"type {kind!r} is not one the checks know ({', '.join(TYPE_LABELS)})")
    typed = readers[kind](value)
    return (typed is not None or (kind == "raw"), typed)


def coerce_option(value: Any, spec: Mapping[str, Any]) -> tuple[list[str], Any]:
    """(type problems, the typed value); the problems are fragments like 'is not an integer'."""
    kind = spec.get("type", "str")
    ok, typed = coerce(value, kind)
    if not ok:
        return ([f"is not {TYPE_LABELS.get(kind, kind)}"], None)
    if kind != "list":
        return ([], typed)
    element = spec.get("elements", "raw")
    problems, entries = [], []
    for entry in typed:
        ok, typed_entry = coerce(entry, element)
        if ok:
            entries.append(typed_entry)
        else:
            problems.append(f"entry {show(entry)} is not {TYPE_LABELS.get(element, element)}")
    return (problems, entries)
