"""Every check of playbooks/check.yml in one place: `dask_problems(context)` returns the list of problems
(empty when the inventory, the variables and the host's facts are fine). The role `dask` asserts it is empty.

Context (one host): host, settings (every spec variable resolved for the host, of any type), set (names with a
role prefix set for the host), specs ({role: {option: spec}}), groups, facts (ansible_facts), gpus (the
gpu_facts probe), pins (file names in images/pins/), inventory_checks (true on exactly one host).

Every problem names its host (``host H: ...``), or ``inventory: ...`` for whole-inventory problems, and the
variable with its value. The function never raises: a value of the wrong type is a problem, not an exception.

Constraints come from the roles' meta/argument_specs.yml. Ansible's argument specs take no custom keys, so each
option's ``description`` is a list: its first item is the meaning, and one item is ``Allowed: CONSTRAINT``
(options with ``choices`` may leave it out; the choices are the constraint). The grammar::

    ALLOWED    := "Allowed: " CONSTRAINT [", or empty"] [" (list)"]
    CONSTRAINT := "any"                              no constraint beyond the option's type (free-form)
                | "true or false"                    a boolean (the type says it all)
                | "integer " LOW "-" HIGH            an integer in LOW..HIGH (inclusive)
                | "integer >= " LOW                  an integer of at least LOW
                | "size or fraction (0, 1]"          a size as dask parses it (64GB, 1.5TiB, 500MB, 512MiB,
                                                     bytes as a whole number) or a fraction 0 < f <= 1 (0.8)
                | "size, fraction (0, 1] or auto"    the same, or the word auto
                | "IPv4 address"                     dotted quad, 0-255 each
                | "IPv4 address or CIDR"             an address, or a network like 10.0.0.0/8
                | "absolute path"                    starts with /, no line breaks
                | "command name or absolute path"    a name looked up on PATH (no /), or an absolute path
                | "port range FIRST:LAST"            1 <= FIRST <= LAST <= 65535
                | "GPU index, GPU-UUID or MIG-UUID"  0, GPU-<uuid>, MIG-<uuid> or MIG-GPU-<uuid>/<gi>/<ci>
                | "URL (http/https)"                 http:// or https:// with a host, no spaces or quotes
                | "inventory host or localhost"      localhost or a host of the inventory
                | LABEL " (" REGEX ")"               the whole value matches the Python regex REGEX;
                                                     LABEL (no " (" in it) says what it is in words

``, or empty`` also allows the empty string; `` (list)`` applies the constraint to every entry of a list.
Examples: ``Allowed: integer 1-65535``, ``Allowed: IPv4 address or CIDR (list)``,
``Allowed: name safe in paths ([a-z0-9][a-z0-9_.-]*)``, ``Allowed: port range FIRST:LAST, or empty``.

Types (the spec's ``type``, str when absent): int takes integers and strings of digits (not booleans or
floats with a fraction); bool takes booleans and yes/no, true/false, on/off, y/n, t/f, 1/0 (any case);
str and path take strings and numbers (not booleans, null, lists or mappings); list takes a list, each
entry of the spec's ``elements`` type; dict takes a mapping; raw takes anything.
"""
from __future__ import annotations

import difflib
import ipaddress
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

ALLOWED_PREFIX = "Allowed:"
EMPTY_SUFFIX = ", or empty"
LIST_SUFFIX = " (list)"

WORKER_GROUPS = ("dask_cuda_workers", "dask_cpu_workers")
# The oldest NVIDIA driver each CUDA major of the images runs on.
DRIVER_NEEDED = {"12": 535, "13": 580}
# The oldest Docker with CDI devices (dask_worker_gpu_request: cdi).
DOCKER_CDI = 25

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



# Variables that were replaced: what to set instead (a did-you-mean of similar spelling would mislead).
RENAMED = {
    "dask_tls_enabled": "replaced by dask_transport: tls (default), tls-ucx, ucx or tcp",
    "dask_ucx_enabled": "replaced by dask_transport: tls-ucx (clients keep TLS) or ucx",
    "nvidia_container_toolkit_cdi": "replaced by dask_worker_gpu_request: cdi, which also turns CDI on in the toolkit",
}

def _is_loopback(address: Any) -> bool:
    try:
        return ipaddress.IPv4Address(str(address)).is_loopback
    except ValueError:
        return False

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
    "IPv4 address": ("an IPv4 address", is_ipv4),
    "IPv4 address or CIDR": ("an IPv4 address or CIDR", is_ipv4_or_cidr),
    "absolute path": ("an absolute path", lambda text: text.startswith("/") and not LINE_BREAK.search(text)),
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


def meaning(spec: Mapping[str, Any]) -> str:
    """An option's description without its 'Allowed:' item."""
    description = spec.get("description")
    items = description if isinstance(description, list) else [description]
    return " ".join(str(item) for item in items if item is not None and not str(item).startswith(ALLOWED_PREFIX))


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

TYPE_LABELS = {"int": "an integer", "bool": "a boolean (true/false, yes/no)", "str": "a string",
               "path": "a path (a string)", "list": "a list", "dict": "a mapping", "raw": "anything"}


def coerce(value: Any, kind: str) -> tuple[bool, Any]:
    """(True, the value as its type means it) or (False, None) for one value of a scalar or mapping type."""
    if kind == "int":
        number = as_int(value)
        return (number is not None, number)
    if kind == "bool":
        flag = as_bool(value)
        return (flag is not None, flag)
    if kind in ("str", "path"):
        text = as_str(value)
        return (text is not None, text)
    if kind == "dict":
        return (isinstance(value, Mapping), value)
    if kind == "raw":
        return (True, value)
    if kind == "list":
        return (isinstance(value, (list, tuple)), list(value) if isinstance(value, (list, tuple)) else None)
    raise SpecError(f"type {kind!r} is not one the checks know ({', '.join(TYPE_LABELS)})")


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


def coerce_settings(settings: Mapping[str, Any], specs: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The settings with every valid value converted to its spec's type ('no' -> False, '8786' -> 8786);
    values that do not convert are left as they are (dask_problems reports them)."""
    typed = dict(settings)
    for options in specs.values():
        for name, spec in (options or {}).items():
            if name in typed and isinstance(spec, Mapping):
                try:
                    problems, value = coerce_option(typed[name], spec)
                except SpecError:
                    continue
                if not problems:
                    typed[name] = value
    return typed


# ------------------------------------------------------------------------------------------- checks

class Checker:
    """The problems of one host's context."""

    def __init__(self, context: Mapping[str, Any]) -> None:
        self.host = str(context.get("host") or "?")
        self.settings = _mapping(context.get("settings"))
        self.specs = {str(role): _mapping(options) for role, options in _mapping(context.get("specs")).items()}
        self.set_names = [str(name) for name in _sequence(context.get("set"))]
        groups = _mapping(context.get("groups"))
        self.groups = {name: [str(host) for host in _sequence(groups.get(name))]
                       for name in ("all", "dask_scheduler", *WORKER_GROUPS, "dask_workers", "dask_cluster",
                                    "dask_monitoring")}
        self.facts = _mapping(context.get("facts"))
        self.gpus = _mapping(context.get("gpus"))
        self.pins = [str(name) for name in _sequence(context.get("pins"))]
        self.inventory_checks = as_bool(context.get("inventory_checks")) is True
        self.problems: list[str] = []
        self.typed: dict[str, Any] = {}  # valid values only, converted to their type

    def add(self, message: str) -> None:
        self.problems.append(f"host {self.host}: {message}")

    def inventory(self, message: str) -> None:
        if self.inventory_checks:
            self.problems.append(f"inventory: {message}")

    # -- host roles
    @property
    def is_cuda(self) -> bool:
        return self.host in self.groups["dask_cuda_workers"]

    @property
    def is_worker(self) -> bool:
        return any(self.host in self.groups[name] for name in WORKER_GROUPS)

    @property
    def is_scheduler(self) -> bool:
        return self.host in self.groups["dask_scheduler"]

    @property
    def monitoring_host(self) -> str:
        """Where Prometheus runs: the dask_monitoring group's host, else the scheduler host."""
        return (self.groups["dask_monitoring"] or self.groups["dask_scheduler"] or [""])[0]

    @property
    def gpu_count(self) -> int:
        return max(as_int(self.gpus.get("count")) or 0, 0)

    @property
    def gpu_mode(self) -> bool:
        return self.is_cuda and self.gpu_count > 0

    def get(self, name: str, default: Any = None) -> Any:
        """A setting's converted value; default when it is missing or invalid (then it is reported)."""
        return self.typed.get(name, default)

    # -- 1. every option: type, choices, Allowed
    def check_options(self) -> None:
        known = set()
        for role, options in self.specs.items():
            for name, spec in options.items():
                known.add(name)
                if not isinstance(spec, Mapping):
                    self.inventory(f"the argument spec of {name} (role {role}) is not a mapping")
                    continue
                try:
                    self.check_option(name, spec)
                except SpecError as error:
                    self.inventory(f"roles/{role}/meta/argument_specs.yml: option {name} {error}")
        unknown = sorted(set(self.set_names) - known)
        if unknown:
            hints = [f"{name} ({RENAMED[name]})" if name in RENAMED
                     else f"{name} (did you mean {close[0]}?)" if close else name
                     for name in unknown for close in [difflib.get_close_matches(name, sorted(known), n=1)]]
            self.add(f"unknown variable(s) {'; '.join(hints)}; known ones are listed in the README "
                     "(Inventory variables). Misspelt?")

    def check_option(self, name: str, spec: Mapping[str, Any]) -> None:
        constraint = option_constraint(spec)
        if name not in self.settings:
            if "default" not in spec:
                self.add(f"{name} is not set and has no default")
            return
        value = self.settings[name]
        type_problems, typed = coerce_option(value, spec)
        if type_problems:
            for problem in type_problems:
                self.add(f"{name} ({show(value)}) {problem}")
            return
        choices = spec.get("choices")
        if choices:
            kind = spec.get("type", "str")
            allowed = [coerce(choice, kind)[1] for choice in choices]
            if typed not in allowed:
                self.add(f"{name} ({show(value)}) must be one of {', '.join(str(choice) for choice in choices)}")
                return
        if constraint is not None:
            entries = typed if constraint.is_list else [typed]
            bad = [entry for entry in entries if not self.satisfies(entry, constraint)]
            for entry in bad:
                self.report_value(name, value, entry, constraint)
            if bad:
                return
        self.typed[name] = typed

    def satisfies(self, value: Any, constraint: Constraint) -> bool:
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
            return text in ["localhost", *self.groups["all"]]
        return FIXED[constraint.kind][1](text)

    def report_value(self, name: str, value: Any, entry: Any, constraint: Constraint) -> None:
        label = constraint.label + (", or empty" if constraint.empty else "")
        if constraint.is_list:
            self.add(f"{name} entry {show(entry)} is not {label}")
        elif constraint.kind == "inventory host or localhost":
            hosts = ", ".join(self.groups["all"])
            self.add(f"{name}={entry} is neither localhost nor a host in the inventory ({hosts})")
        elif constraint.kind == "port range FIRST:LAST":
            self.add(f"{name}={show(value)} must be FIRST:LAST within 1-65535 (FIRST <= LAST), or empty")
        else:
            self.add(f"{name} ({show(value)}) is not {label}")

    # -- 2. settings that must agree
    def check_rules(self) -> None:
        scheduler_port, dashboard_port = self.get("dask_scheduler_port"), self.get("dask_dashboard_port")
        if scheduler_port is not None and scheduler_port == dashboard_port:
            self.add(f"dask_scheduler_port ({scheduler_port}) and dask_dashboard_port ({dashboard_port}) must be "
                     "distinct ports in 1-65535")
        transport, ack = self.get("dask_transport"), self.get("dask_tls_disabled_ack")
        if transport in ("ucx", "tcp") and ack is not True:
            where = self.bind_address() or "the scheduler"
            self.add(f"dask_transport={transport} turns TLS off, so anyone who reaches {where}:"
                     f"{scheduler_port if scheduler_port is not None else '?'} can run code on every worker. "
                     "Use dask_transport: tls-ucx (clients keep mutual TLS, workers talk UCX), or set "
                     "dask_tls_disabled_ack=true to accept that.")
        if transport in ("ucx", "tls-ucx") and self.get("dask_firewall_enabled", False) is not True:
            self.add(f"dask_transport={transport} needs dask_firewall_enabled: true: UCX listeners have no "
                     f"authentication, and the firewall is what lets only the cluster's hosts reach "
                     f"{self.bind_address() or 'the cluster address'} (docs/transport.md)")
        if transport == "tls-ucx":
            ucx_port = self.get("dask_scheduler_ucx_port")
            if ucx_port is not None and ucx_port in (scheduler_port, dashboard_port):
                self.add(f"dask_scheduler_ucx_port ({ucx_port}) must differ from dask_scheduler_port ({scheduler_port})"
                         f" and dask_dashboard_port ({dashboard_port})")
        if self.get("dask_images_distribution") == "registry" and self.get("dask_images_registry") == "":
            self.add("dask_images_distribution=registry needs dask_images_registry (host:port[/path])")
        if self.get("dask_images_distribution") == "cluster-registry":
            self.check_cluster_registry()
        open_ports = self.get("dask_firewall_open_ports")
        if self.get("dask_firewall_enabled") is True and open_ports is not None:
            ucx_port = self.get("dask_scheduler_ucx_port") if transport == "tls-ucx" else None
            for name, port in (("dask_scheduler_port", scheduler_port), ("dask_scheduler_ucx_port", ucx_port)):
                if port is not None and port in open_ports:
                    self.add(f"dask_firewall_open_ports ({', '.join(str(p) for p in open_ports)}) must not hold "
                             f"{name} ({port}): that port would be open to everyone. List clients in "
                             "dask_firewall_allowed_sources instead.")
        if self.is_scheduler and self.get("dask_host_state") == "retired":
            self.add("dask_host_state=retired is for worker hosts; the scheduler host cannot leave its cluster (move "
                     "the scheduler to another host in dask_scheduler first, or tear the cluster down with "
                     "playbooks/teardown.yml)")
        self.check_acknowledgements()
        if self.is_worker:
            self.check_worker_ports()
        if self.get("dask_monitoring_enabled") is True:
            self.check_monitoring()

    def check_acknowledgements(self) -> None:
        for name in ("dask_container_uid", "dask_container_gid"):
            if self.get(name) == 0 and self.get("dask_container_root_ack") is not True:
                self.add(f"{name}=0 runs the Dask containers as root (code sent to the cluster runs as root, one "
                         "container escape from root on the host). Use the images' dask user (10001), or set "
                         "dask_container_root_ack: true to accept that.")
        bind = self.get("dask_dashboard_bind")
        if bind is not None and not ipaddress.IPv4Address(bind).is_loopback \
                and self.get("dask_dashboard_exposed_ack") is not True:
            self.add(f"dask_dashboard_bind={bind} exposes the dashboard, which has no authentication (anyone who "
                     "reaches it sees the cluster's tasks and logs), beyond this host. Keep 127.0.0.1 and use an SSH "
                     "tunnel, or set dask_dashboard_exposed_ack: true to accept that.")
        listen = self.get("dask_monitoring_listen_address")
        exposed = self.get("dask_monitoring_enabled") is True and listen is not None \
            and not ipaddress.IPv4Address(listen).is_loopback
        if exposed and self.get("dask_monitoring_exposed_ack") is not True:
            self.add(f"dask_monitoring_listen_address={listen} exposes Prometheus's UI and API, which have no "
                     "authentication, beyond this host. Keep 127.0.0.1 and use an SSH tunnel, or set "
                     "dask_monitoring_exposed_ack: true to accept that.")

    def check_monitoring(self) -> None:
        """Monitoring ports that collide with the cluster's, and a scheduler /metrics the monitoring host cannot
        reach."""
        where = self.monitoring_host
        bind = self.get("dask_dashboard_bind")
        if self.is_scheduler and where and where != self.host and bind is not None \
                and ipaddress.IPv4Address(bind).is_loopback:
            self.add(f"dask_monitoring_enabled with Prometheus on {where} (group dask_monitoring) cannot scrape the "
                     f"scheduler's /metrics: dask_dashboard_bind={bind} answers on this host only. Put the scheduler "
                     "host in dask_monitoring, or bind the dashboard to the cluster address (dask_dashboard_bind, "
                     "dask_dashboard_exposed_ack; the firewall keeps it to the cluster's hosts).")
        taken = {"dask_scheduler_port": self.get("dask_scheduler_port"),
                 "dask_dashboard_port": self.get("dask_dashboard_port")} if self.is_scheduler else {}
        if self.is_scheduler and self.get("dask_transport") == "tls-ucx":
            taken["dask_scheduler_ucx_port"] = self.get("dask_scheduler_ucx_port")
        first = self.get("dask_worker_http_port")
        worker_ports = range(first, first + self.worker_count()) if self.is_worker and first is not None else range(0)
        monitoring = {"dask_monitoring_node_exporter_port": self.get("dask_monitoring_node_exporter_port")}
        if self.host == where:
            monitoring["dask_monitoring_port"] = self.get("dask_monitoring_port")
        for name, port in monitoring.items():
            if not port:
                continue
            clashes = [f"{other} ({value})" for other, value in taken.items() if value == port]
            if port in worker_ports:
                clashes.append(f"the workers' HTTP ports ({worker_ports.start}-{worker_ports.stop - 1}, from "
                               "dask_worker_http_port)")
            if name == "dask_monitoring_port" and port == monitoring["dask_monitoring_node_exporter_port"]:
                clashes.append("dask_monitoring_node_exporter_port")
            if clashes:
                self.add(f"{name} ({port}) is also {', '.join(clashes)} on this host; pick a free port")

        ours = ("prometheus", "dask-scheduler", "dask-workers", "node", "dcgm")
        names: list[str] = []
        for index, entry in enumerate(_sequence(self.get("dask_monitoring_extra_scrape_configs"))):
            job = _mapping(entry).get("job_name")
            if not isinstance(job, str) or not job or job in ours or job in names:
                self.add(f"dask_monitoring_extra_scrape_configs[{index}] needs a job_name of its own (a string, not "
                         f"{', '.join(ours)} or another entry's); it has {show(job)}")
            names.append(str(job))

    @property
    def registry_host(self) -> str:
        """Where the cluster-registry runs: dask_images_registry_host, else the scheduler host."""
        return str(self.get("dask_images_registry_host") or (self.groups["dask_scheduler"] or [""])[0])

    def check_cluster_registry(self) -> None:
        """The bundle's registry needs the cluster's TLS, a live cluster host, and a port free on that host."""
        where = self.registry_host
        transport = self.get("dask_transport")
        if transport in ("ucx", "tcp"):
            self.add(f"dask_images_distribution=cluster-registry needs the cluster's TLS certificates (the registry "
                     f"takes clients with a certificate of the cluster's CA only); dask_transport={transport} has "
                     "none. Use dask_transport tls or tls-ucx, or dask_images_distribution archive or registry.")
        members = self.groups["dask_scheduler"] + [host for name in WORKER_GROUPS for host in self.groups[name]]
        if self.get("dask_images_registry_host") and where not in members:
            self.add(f"dask_images_registry_host={where} must be a host of the cluster (dask_scheduler, "
                     f"dask_cuda_workers or dask_cpu_workers): {', '.join(dict.fromkeys(members)) or 'none'}")
        if self.host != where:
            return
        if self.get("dask_host_state") == "retired":
            self.add(f"dask_images_registry_host={where} is retired (dask_host_state); the other hosts pull the "
                     "images from it. Run the registry on another host first.")
        port = self.get("dask_images_registry_port")
        taken = {"dask_scheduler_port": self.get("dask_scheduler_port"),
                 "dask_dashboard_port": self.get("dask_dashboard_port")} if self.is_scheduler else {}
        if self.is_scheduler and transport == "tls-ucx":
            taken["dask_scheduler_ucx_port"] = self.get("dask_scheduler_ucx_port")
        if self.get("dask_monitoring_enabled") is True:
            taken["dask_monitoring_node_exporter_port"] = self.get("dask_monitoring_node_exporter_port")
            if self.host == self.monitoring_host:
                taken["dask_monitoring_port"] = self.get("dask_monitoring_port")
        clashes = [f"{name} ({value})" for name, value in taken.items() if value is not None and value == port]
        first = self.get("dask_worker_http_port")
        if self.is_worker and first is not None and port is not None and first <= port < first + self.worker_count():
            clashes.append(f"one of the workers' HTTP ports ({first}-{first + self.worker_count() - 1}, from "
                           "dask_worker_http_port)")
        span = port_range(self.get("dask_worker_port_range") or "") if self.is_worker else None
        if span and port is not None and span[0] <= port <= span[1]:
            clashes.append(f"inside dask_worker_port_range ({span[0]}:{span[1]})")
        if clashes:
            self.add(f"dask_images_registry_port ({port}) is also {', '.join(clashes)} on {where}, which runs the "
                     "registry; pick a free port")

    def worker_count(self) -> int:
        if self.gpu_mode:
            return len(self.get("dask_worker_gpus") or []) or self.gpu_count
        return 1

    def check_worker_ports(self) -> None:
        http_port = self.get("dask_worker_http_port")
        ports = {"dask_scheduler_port": self.get("dask_scheduler_port"),
                 "dask_dashboard_port": self.get("dask_dashboard_port")}
        if self.get("dask_transport") == "tls-ucx":
            ports["dask_scheduler_ucx_port"] = self.get("dask_scheduler_ucx_port")
        if self.is_scheduler and http_port is not None:
            last = http_port + self.worker_count() - 1
            for name, port in ports.items():
                if port is not None and http_port <= port <= last:
                    span = f"{http_port}-{last}, one per worker" if last > http_port else str(http_port)
                    self.add(f"dask_worker_http_port ({span}) and {name} ({port}) must be distinct on a host "
                             "that runs both the scheduler and workers")
        if http_port is not None and http_port + self.worker_count() - 1 > 65535:
            self.add(f"dask_worker_http_port ({http_port}) leaves no room for {self.worker_count()} workers (one "
                     "port each) below 65536")
        text = self.get("dask_worker_port_range")
        ends = port_range(text) if text else None
        if ends is None:
            return
        first, last = ends
        count = self.worker_count()
        inside = [f"{name} ({port})" for name, port in
                  [("dask_scheduler_port", ports["dask_scheduler_port"]), ("dask_worker_http_port", http_port)]
                  + ([("dask_dashboard_port", ports["dask_dashboard_port"])] if self.is_scheduler else [])
                  if port is not None and first <= port <= last]
        if last - first + 1 < count or inside:
            self.add(f"dask_worker_port_range={show(text)} must be FIRST:LAST within 1-65535 with room for {count} "
                     f"workers, not overlapping dask_scheduler_port"
                     + (f" (it holds {', '.join(inside)})" if inside else f" (it has room for {last - first + 1})"))

    # -- 3. the inventory (once)
    def check_inventory(self) -> None:
        schedulers = self.groups["dask_scheduler"]
        if len(schedulers) != 1:
            self.inventory(f"group dask_scheduler must hold exactly one host; it holds {len(schedulers)} "
                           f"({', '.join(schedulers) or 'none'})")
        cuda, cpu = self.groups["dask_cuda_workers"], self.groups["dask_cpu_workers"]
        if not cuda and not cpu:
            self.inventory("groups dask_cuda_workers and dask_cpu_workers are both empty; a cluster needs a worker")
        both = [host for host in cuda if host in cpu]
        if both:
            self.inventory(f"{', '.join(both)} in both dask_cuda_workers and dask_cpu_workers; pick one")
        stray = [host for host in self.groups["dask_workers"] if host not in cuda and host not in cpu]
        if stray:
            self.inventory(f"{', '.join(stray)} in dask_workers but in neither dask_cuda_workers nor "
                           "dask_cpu_workers; put each worker host in one of those two")
        monitoring = self.groups["dask_monitoring"]
        members = set(self.groups["dask_scheduler"]) | set(cuda) | set(cpu)
        if len(monitoring) > 1 or any(host not in members for host in monitoring):
            self.inventory(f"group dask_monitoring ({', '.join(monitoring)}) must hold one host of the cluster "
                           "(the scheduler or a worker host), where Prometheus runs; leave it out for the scheduler "
                           "host")
        release, major = self.get("dask_rapids_release"), self.get("dask_cuda_major")
        if release is not None and major is not None:
            pins = f"rapids-{release}-cuda{major}.txt"
            if pins not in self.pins:
                self.inventory(f"dask_rapids_release={release} with dask_cuda_major={major}: no pins file "
                               f"images/pins/{pins}; RAPIDS publishes no wheel set for it here (make one with "
                               "scripts/pin-versions.py)")

    # -- 4. this host's facts
    def interfaces(self) -> list[str]:
        return [str(name) for name in _sequence(self.facts.get("interfaces"))]

    def interface_address(self, interface: str) -> str:
        found = _mapping(self.facts.get(interface.replace("-", "_")))
        return str(_mapping(found.get("ipv4")).get("address") or "")

    def host_addresses(self) -> list[str]:
        addresses = [str(address) for address in _sequence(self.facts.get("all_ipv4_addresses"))]
        for interface in self.interfaces():
            found = _mapping(self.facts.get(interface.replace("-", "_")))
            entries = [_mapping(found.get("ipv4"))] + [_mapping(entry) for entry in
                                                      _sequence(found.get("ipv4_secondaries"))]
            addresses += [str(entry["address"]) for entry in entries if entry.get("address")]
        return list(dict.fromkeys(addresses))

    def bind_address(self) -> str:
        if self.get("dask_cluster_address"):
            return str(self.get("dask_cluster_address"))
        interface = self.get("dask_cluster_interface")
        if interface:
            return self.interface_address(interface)
        if interface is None and self.settings.get("dask_cluster_interface"):
            return ""
        return str(_mapping(self.facts.get("default_ipv4")).get("address") or "")

    def check_addresses(self) -> None:
        if not self.facts:
            return
        address, interface = self.get("dask_cluster_address"), self.get("dask_cluster_interface")
        interfaces = ", ".join(self.interfaces()) or "none"
        if address:
            # A loopback address belongs to every host, also where Ansible saw no interfaces (no `ip` binary).
            if address not in self.host_addresses() and not _is_loopback(address):
                self.add(f"dask_cluster_address ({show(address)}) is not an IPv4 address of this host (its addresses: "
                         f"{', '.join(self.host_addresses()) or 'none'})")
        elif interface:
            if interface not in self.interfaces() and not self.facts.get(interface.replace("-", "_")):
                self.add(f"dask_cluster_interface ({show(interface)}) is not an interface of this host (interfaces: "
                         f"{interfaces})")
            elif not self.interface_address(interface):
                self.add(f"no IPv4 address to bind: dask_cluster_interface ({show(interface)}) has no IPv4 address "
                         f"(interfaces: {interfaces})")
        elif "dask_cluster_address" in self.typed and "dask_cluster_interface" in self.typed \
                and not self.bind_address():
            self.add(f"no IPv4 address to bind (dask_cluster_address={show(address)}, dask_cluster_interface="
                     f"{show(interface)}, and the default route has none; interfaces: {interfaces}). Set "
                     "dask_cluster_interface or dask_cluster_address.")
        bind = self.get("dask_dashboard_bind")
        if self.is_scheduler and bind is not None and not ipaddress.IPv4Address(bind).is_unspecified \
                and not ipaddress.IPv4Address(bind).is_loopback and bind not in self.host_addresses():
            self.add(f"dask_dashboard_bind ({show(bind)}) is not 127.0.0.1, 0.0.0.0 or an IPv4 address of this host "
                     f"(its addresses: {', '.join(self.host_addresses()) or 'none'})")

    def check_gpus(self) -> None:
        if self.is_cuda and not self.gpu_mode:
            if self.get("dask_worker_allow_cpu", False) is not True:
                reason = self.gpus.get("error") or "no GPU found"
                self.problems.append(
                    f"host {self.host} is in dask_cuda_workers but has no usable GPU ({reason}). Fix the driver, move "
                    "the host to dask_cpu_workers, or set dask_worker_allow_cpu: true for it.")
            return
        if not self.gpu_mode:
            return
        major, driver = self.get("dask_cuda_major"), as_int(self.gpus.get("driver_major"))
        needed = DRIVER_NEEDED.get(str(major)) if major is not None else None
        if needed is not None and (driver is None or driver < needed):
            self.add(f"NVIDIA driver {self.gpus.get('driver_version')} is too old for CUDA {major} images (needs >= "
                     f"{needed}); upgrade the driver or set dask_cuda_major: \"12\"")
        self.check_cdi()
        selected = self.selected_gpus()
        self.check_memory(selected)

    def check_cdi(self) -> None:
        """CDI devices need Docker >= 25. Docker's version is known from role docker_engine's local fact
        (ansible_local.docker_engine) once it has run on the host; the toolkit role checks again after installing."""
        if self.get("dask_worker_gpu_request") != "cdi":
            return
        docker = _mapping(_mapping(self.facts.get("ansible_local")).get("docker_engine"))
        version = str(docker.get("server_version") or "")
        major = as_int(version.split(".")[0]) if version else None
        # With docker_engine_source upstream this run installs Docker CE first (the toolkit role checks the
        # version again once Docker is installed), so an older recorded version is no reason to stop.
        if major is not None and major < DOCKER_CDI and self.get("docker_engine_source") != "upstream":
            self.add(f"dask_worker_gpu_request=cdi needs Docker >= {DOCKER_CDI} (CDI devices), but Docker on this host "
                     f"is {version} (ansible_local.docker_engine). Install a newer Docker (docker_engine_source: "
                     "upstream) or set dask_worker_gpu_request: gpus (NVIDIA's runtime) for this host.")

    def selected_gpus(self) -> list[Mapping[str, Any]]:
        """The GPUs the workers use (all when dask_worker_gpus is empty), after checking each entry."""
        gpus = [_mapping(gpu) for gpu in _sequence(self.gpus.get("gpus"))]
        wanted = self.get("dask_worker_gpus")
        if not wanted:
            return gpus
        owner: dict[str, Mapping[str, Any]] = {}
        for gpu in gpus:
            owner[str(gpu.get("index"))] = gpu
            owner[str(gpu.get("uuid"))] = gpu
            for mig in _sequence(gpu.get("mig")):
                owner[str(mig)] = gpu
        known = [key for key in owner if key not in ("None", "")]
        selected: list[Mapping[str, Any]] = []
        seen: dict[str, str] = {}
        for entry in wanted:
            found = owner.get(entry)
            if found is None:
                self.add(f"dask_worker_gpus entry {show(entry)} is not a GPU of this host (this host has "
                         f"{self.gpu_count} GPUs: {', '.join(known) or 'none'})")
                continue
            device = entry if entry.startswith("MIG-") else str(found.get("uuid"))
            if device in seen:
                twice = ("listed twice" if seen[device] == entry
                         else f"the same GPU as {show(seen[device])}, listed twice")
                self.add(f"dask_worker_gpus entry {show(entry)} is {twice} (one Dask worker per GPU)")
                continue
            seen[device] = entry
            selected.append(found)
        return selected

    def check_memory(self, selected: list[Mapping[str, Any]]) -> None:
        sizes = [(mib, gpu) for gpu in selected for mib in [as_int(gpu.get("memory_mib"))] if mib]
        if not sizes:
            return
        mib, smallest = min(sizes, key=lambda item: item[0])
        for name in ("dask_worker_device_memory_limit", "dask_worker_rmm_pool_size"):
            value = self.get(name)
            parsed = parse_size(value) if value else None
            if parsed and parsed[0] == "bytes" and parsed[1] > mib * 2 ** 20:
                self.add(f"{name} ({show(value)}) is larger than the memory of GPU {smallest.get('index')} "
                         f"({smallest.get('name')}, {mib} MiB), the smallest selected GPU; use a smaller size or a "
                         "fraction")

    def run(self) -> list[str]:
        self.check_options()
        self.check_rules()
        self.check_inventory()
        self.check_addresses()
        if self.is_worker:
            self.check_gpus()
        return self.problems


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _sequence(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else []


def dask_problems(context: Any) -> list[str]:
    """Every problem of one host (see the module docstring); [] when there is none."""
    context = _mapping(context)
    try:
        return Checker(context).run()
    except Exception as error:  # noqa: BLE001 - never raise: a failing check is itself a problem
        return [f"host {context.get('host', '?')}: the checks could not finish ({type(error).__name__}: {error}); "
                "this is a bug in roles/dask/filter_plugins/dask_validate.py"]


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"dask_problems": dask_problems, "dask_coerce_settings": coerce_settings}
