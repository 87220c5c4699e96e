"""Grep-level checks of the code's joints: no role, playbook or test reads another role's private (`ROLE__`)
variables, and derived facts come from the cluster model's public facts, not from other roles' internals."""
from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from jinja2 import Environment, nodes

ROOT = Path(__file__).resolve().parents[2]
ROLES = sorted(path.name for path in (ROOT / "roles").iterdir() if path.is_dir())
PRIVATE = re.compile(r"\b(" + "|".join(sorted(ROLES, key=len, reverse=True)) + r")__[a-z0-9_]+")
SOURCES = ("*.yml", "*.j2", "*.py", "*.sh")


def files() -> list[Path]:
    tracked = subprocess.run(["git", "ls-files", *SOURCES], cwd=ROOT, capture_output=True, text=True, check=True)
    return [ROOT / line for line in tracked.stdout.split() if (ROOT / line).exists()]


def test_private_variables_stay_inside_their_role() -> None:
    leaks = []
    for path in files():
        relative = path.relative_to(ROOT)
        owner = relative.parts[1] if relative.parts[0] == "roles" else None
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for match in PRIVATE.finditer(line):
                if match.group(1) != owner:
                    leaks.append(f"{relative}:{number}: {match.group(0)}")
    assert not leaks, "private variables read outside their role:\n" + "\n".join(leaks)


def test_roles_do_not_include_each_other_except_public_entry_points() -> None:
    """Cross-role entry points are the documented ones: each has its own argument spec entry, or, when it takes no
    options, a line `#   NAME: what it does` in the spec file's opening comment (an entry would cost a validation
    task per host and call that checks nothing)."""
    entry = re.compile(r"name: (\w+)\n\s+tasks_from: (\w+)")
    for path in files():
        for role, tasks in entry.findall(path.read_text()):
            specs = (ROOT / "roles" / role / "meta" / "argument_specs.yml").read_text()
            assert re.search(rf"^(  |#   ){tasks}: ", specs, re.M) or re.search(rf"^  {tasks}:$", specs, re.M), \
                f"{path.relative_to(ROOT)}: {role}/{tasks} is undocumented"


def test_the_spec_builder_makes_the_compose_command_lines() -> None:
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "compose-gen.py"), "--check"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def _spec_options() -> set[str]:
    names: set[str] = set()
    for path in (ROOT / "roles").glob("*/meta/argument_specs.yml"):
        names |= set(yaml.safe_load(path.read_text())["argument_specs"]["main"].get("options") or {})
    return names


def _jinja_sources(value: Any, key: str | None = None) -> Iterator[str]:
    """Every Jinja expression in a YAML document: templated strings, and the bare expressions of conditionals."""
    if isinstance(value, dict):
        for name, item in value.items():
            yield from _jinja_sources(item, str(name))
    elif isinstance(value, list):
        for item in value:
            yield from _jinja_sources(item, key)
    elif isinstance(value, str):
        if key in BARE_EXPRESSIONS and "{{" not in value:
            yield "{{ " + value + " }}"
        elif "{{" in value or "{%" in value:
            yield value


BARE_EXPRESSIONS = ("when", "that", "until", "changed_when", "failed_when")
# The GPU probe runs before the settings are typed (the model needs its result); its options are strings.
READ_BEFORE_THE_MODEL = {("roles/gpu_facts/tasks/probe.yml", "gpu_facts_nvidia_smi"),
                         ("roles/gpu_facts/tasks/probe.yml", "gpu_facts_nvml_readings")}


def test_every_reader_sees_typed_settings() -> None:
    """No task, template or playbook reads an option raw (a -e key=value string would stay a string there): every
    one reads dask_settings.NAME, which the model typed by its spec. Jinja's own parser finds the variables read."""
    options, env = _spec_options(), Environment(autoescape=True)  # parsed, never rendered
    alerts = Environment(autoescape=True, variable_start_string="[[", variable_end_string="]]")
    raw: list[str] = []
    for path in files():
        relative = str(path.relative_to(ROOT))
        if path.suffix == ".yml" and (relative.startswith(("roles/", "playbooks/")) or relative == "site.yml") \
                and "/meta/" not in relative and "/defaults/" not in relative:
            sources = list(_jinja_sources(yaml.safe_load(path.read_text())))
            parser = env
        elif path.suffix == ".j2" and relative.startswith(("roles/", "playbooks/")):
            sources, parser = [path.read_text()], alerts if "alerts" in path.name else env
        else:
            continue
        for source in sources:
            read = {node.name for node in parser.parse(source).find_all(nodes.Name)} & options
            raw += [f"{relative}: {name}" for name in sorted(read) if (relative, name) not in READ_BEFORE_THE_MODEL]
    assert not raw, "options read raw instead of through dask_settings:\n" + "\n".join(sorted(set(raw)))


def test_the_role_list_is_not_written_anywhere() -> None:
    """The model finds every role's argument spec itself (a new role needs no edit in the hub)."""
    text = (ROOT / "roles" / "dask" / "vars" / "main.yml").read_text()
    assert "role_specs" in text and not re.search(r"_role_names:\s*\[", text)


def test_the_core_names_no_feature() -> None:
    """The core of the model and checks reads no option of a feature's role: each feature's facts and checks live in
    its own module of plugin_utils/features/ (a new service touches its module and one registry line)."""
    utils = ROOT / "collections" / "ansible_collections" / "dask_gpu" / "bundle" / "plugins" / "plugin_utils"
    features = [path.stem for path in (utils / "features").glob("*.py") if path.stem != "__init__"]
    assert sorted(features) == ["autoscale", "firewall", "images", "jobs", "monitoring", "notebook", "polars",
                                "toolkit"]
    owned = re.compile(r"[\"'](dask_monitoring_|dask_images_|dask_firewall_|dask_job_|dask_notebook_|dask_autoscale_|"
                       r"nvidia_container_toolkit_)[a-z_]+[\"']")
    for core in ("model.py", "checks.py", "spec.py", "settings.py", "records.py"):
        # (a replaced variable's name, in the typo hints, is no option any more)
        reads = [match.group(0) for match in owned.finditer((utils / core).read_text())
                 if match.group(0).strip("\"'") in _spec_options()]
        assert not reads, f"{core} reads {reads}"


# What each gathered subset gives that the bundle reads (ansible_facts keys, without the ansible_ prefix).
SUBSET_FACTS = {"network": {"interfaces", "default_ipv4", "all_ipv4_addresses"}, "local": {"ansible_local"},
                "distribution": {"distribution", "distribution_release"}}


def test_facts_are_gathered_once_in_the_same_subset_and_cover_what_is_read() -> None:
    """check.yml and facts.yml gather the same subset (not the hardware's: its size costs every later task), and
    every fact the collection's code reads (facts.get("...")) or a role reads (ansible_facts[...]) is in it. The
    facts are not injected as variables (ansible.cfg), so nothing reads a top-level ansible_* fact."""
    subsets = {}
    for name in ("check.yml", "facts.yml"):
        for play in yaml.safe_load((ROOT / "playbooks" / name).read_text()):
            if "hosts" in play and play.get("gather_facts", True):
                subsets[name] = play.get("gather_subset")
    assert subsets["check.yml"] == subsets["facts.yml"], subsets
    assert "hardware" not in subsets["check.yml"] and "all" not in subsets["check.yml"]
    given = set().union(*(SUBSET_FACTS[subset] for subset in subsets["check.yml"] if subset in SUBSET_FACTS))
    code = "\n".join(path.read_text() for path in (ROOT / "collections").rglob("*.py"))
    read = set(re.findall(r"facts\.get\(\"([a-z_0-9]+)\"", code))
    tasks = "\n".join(path.read_text() for path in ROOT.glob("roles/*/*/*.yml"))
    read |= set(re.findall(r"ansible_facts\[['\"]([a-z_0-9]+)['\"]\]", tasks))
    read |= set(re.findall(r"ansible_facts\.get\(['\"]([a-z_0-9]+)['\"]", tasks))
    assert read and read <= given, f"read but not gathered: {sorted(read - given)}"
    assert re.search(r"^inject_facts_as_vars = false$", (ROOT / "ansible.cfg").read_text(), re.M)
    molecule = yaml.safe_load((ROOT / "molecule" / "default" / "molecule.yml").read_text())
    assert molecule["provisioner"]["config_options"]["defaults"]["inject_facts_as_vars"] is False
    readers = sorted({path for glob in FACT_READERS_GLOBS for path in ROOT.glob(glob)})
    assert len(readers) > 100, len(readers)
    top_level = [f"{path}: {found}" for path in readers for found in TOP_LEVEL_FACT.findall(path.read_text())]
    assert not top_level, top_level


def test_ssh_runs_without_compression_in_the_bundle_and_the_sandbox() -> None:
    """Ansible's default ssh_args compress (-C) on the controller: the image archive's copy is bound by it. The
    bundle's ansible.cfg drops it, and molecule's (which the sandbox's converge runs under) says the same."""
    found = re.search(r"^ssh_args = (.+)$", (ROOT / "ansible.cfg").read_text(), re.M)
    assert found and "-C" not in found.group(1).split() and "ControlPersist" in found.group(1), found
    molecule = yaml.safe_load((ROOT / "molecule" / "default" / "molecule.yml").read_text())
    assert molecule["provisioner"]["config_options"]["ssh_connection"]["ssh_args"] == found.group(1)


# Every fact name Ansible's setup gives (ansible_<name>, as injected variables), not the connection or magic variables
# that share the prefix (ansible_host, ansible_user, ansible_python_interpreter, ansible_play_hosts, ...).
TOP_LEVEL_FACT = re.compile(
    r"\bansible_(?:all_ipv[46]_addresses|apparmor|architecture|bios_\w+|board_\w+|chassis_\w+|cmdline|date_time"
    r"|default_ipv[46]|device_links|devices|distribution\w*|dns|domain|effective_\w+|env|fips|flags|form_factor|fqdn"
    r"|hostname|hostnqn|interfaces|is_chroot|kernel\w*|loadavg|locally_reachable_ips|lsb|lvm|machine\w*|mem\w+_mb"
    r"|memory_mb|mounts|nodename|os_family|pkg_mgr|proc_cmdline|processor\w*|product_\w+|python(?:_version)?"
    r"|real_\w+|selinux\w*|service_mgr|swap\w+_mb|system\w*|uptime_seconds|user_(?:dir|gecos|gid|id|shell|uid)"
    r"|userspace_\w+|virtualization_\w+|eth\d+|lo|docker0)\b")
# What runs under the bundle's ansible.cfg or molecule's (both inject_facts_as_vars = false).
FACT_READERS_GLOBS = ("roles/**/*.yml", "roles/*/templates/*.j2", "playbooks/**/*.yml", "playbooks/**/*.j2", "site.yml",
                      "molecule/**/*.yml", "tests/**/*.yml")
