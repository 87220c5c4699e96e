"""Unit tests of the checks (collection dask_gpu.bundle: plugin_utils/checks.py, the grammar in options.py, the typing
in settings.py): the grammar of the specs' `Allowed:` items, every option's constraint, generated invalid values, the
cross-variable rules, the acknowledgements, the inventory and host-fact checks, and that no input makes it raise."""
from __future__ import annotations

import copy
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
import yaml
from ansible_collections.dask_gpu.bundle.plugins.filter import checks as checks_filter
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils import checks, options
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils import settings as typing

ROOT = Path(__file__).resolve().parents[2]


def load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


validate = SimpleNamespace(**{**vars(options), **vars(checks)}, dask_problems=checks.problems)
generator = load("invalid_values", Path(__file__).resolve().parent / "invalid_values.py")
SPECS = generator.specs()
OPTIONS = [(role, name) for role, options in SPECS.items() for name in options]
ENV = dict(line.split("=", 1) for line in (ROOT / ".env").read_text().splitlines()
           if "=" in line and not line.startswith("#"))

H200 = [{"index": 0, "uuid": "GPU-8ee11e14-577c-123d-6055-3792f1f36de5", "name": "NVIDIA H200", "memory_mib": 143771,
         "compute_capability": "9.0", "mig": []},
        {"index": 1, "uuid": "GPU-a5a3d0c8-e07b-3948-f39d-210d64cd64d1", "name": "NVIDIA H200", "memory_mib": 143771,
         "compute_capability": "9.0", "mig": []}]
GPUS = {"nvidia_smi": True, "count": 2, "driver_version": "580.159.04", "driver_major": 580, "gpus": H200,
        "error": None}
NO_GPU = {"nvidia_smi": False, "count": 0, "driver_version": None, "driver_major": None, "gpus": [],
          "error": "nvidia-smi not found (no NVIDIA driver)"}
FACTS = {"default_ipv4": {"address": "10.0.0.5", "interface": "eth0"}, "all_ipv4_addresses": ["10.0.0.5", "10.1.0.5"],
         "interfaces": ["lo", "eth0", "br-data"], "lo": {"ipv4": {"address": "127.0.0.1"}},
         "eth0": {"ipv4": {"address": "10.0.0.5"}}, "br_data": {"ipv4": {"address": "10.1.0.5"}},
         "memtotal_mb": 64000}


def settings(**overrides: Any) -> dict[str, Any]:
    """Every option resolved: spec defaults, the .env image settings, and the overrides."""
    resolved = {name: copy.deepcopy(spec["default"]) for options in SPECS.values()
                for name, spec in options.items() if "default" in spec}
    resolved.update(dask_rapids_release=ENV["RAPIDS_RELEASE"], dask_cuda_major=ENV["CUDA_MAJOR"],
                    dask_image_profile=ENV["PROFILE"], dask_base_image=ENV["BASE_IMAGE"], dask_repo_dir=str(ROOT),
                    dask_controller_dir=str(ROOT / "inventory" / "example" / "artifacts" / "dask"))
    resolved.update(overrides)
    return resolved


def context(host: str = "c1", *, gpu: bool = False, groups: dict[str, list[str]] | None = None,
            inventory_checks: bool = True, **overrides: Any) -> dict[str, Any]:
    """A good cluster (s1 scheduler, c1 CPU worker, g1 GPU worker: 2 x H200) seen from one host."""
    base = {"all": ["s1", "c1", "g1"], "dask_scheduler": ["s1"], "dask_cuda_workers": ["g1"],
            "dask_cpu_workers": ["c1"], "dask_workers": ["g1", "c1"], "dask_cluster": ["s1", "c1", "g1"]}
    return {"host": host, "settings": settings(**overrides), "set": sorted(overrides),
            "specs": copy.deepcopy(SPECS), "groups": groups or base, "facts": copy.deepcopy(FACTS),
            "gpus": copy.deepcopy(GPUS if gpu or host == "g1" else NO_GPU),
            "pins": [path.name for path in (ROOT / "images" / "pins").glob("*.txt")],
            "inventory_checks": inventory_checks}


def problems(ctx: dict[str, Any]) -> list[str]:
    found = validate.dask_problems(ctx)
    assert isinstance(found, list) and all(isinstance(problem, str) for problem in found)
    assert not [problem for problem in found if "could not finish" in problem], found
    return found


def one(ctx: dict[str, Any], *fragments: str) -> str:
    """The one problem of a context; it holds every fragment."""
    found = problems(ctx)
    assert len(found) == 1, found
    for fragment in fragments:
        assert fragment in found[0], found[0]
    return found[0]


# ---------------------------------------------------------------------------------------------- the specs

@pytest.mark.parametrize(("role", "name"), OPTIONS, ids=[name for _, name in OPTIONS])
def test_every_option_has_a_constraint_in_the_grammar(role: str, name: str) -> None:
    spec = SPECS[role][name]
    description = spec["description"]
    assert isinstance(description, list) and description, f"{role}/{name}: description must be a list"
    assert not str(description[0]).startswith("Allowed:"), f"{role}/{name}: the first item is the meaning"
    allowed = [item for item in description if str(item).startswith("Allowed:")]
    assert len(allowed) == 1 or (not allowed and spec.get("choices")), \
        f"{role}/{name}: needs one 'Allowed: ...' item (or choices)"
    validate.option_constraint(spec)  # raises SpecError when the grammar does not know it


def test_entry_points_that_only_served_the_old_validate_tasks_are_gone() -> None:
    for role in SPECS:
        entries = yaml.safe_load((ROOT / "roles" / role / "meta" / "argument_specs.yml").read_text())["argument_specs"]
        assert "validate" not in entries, role
    for role in ("dask_worker", "dask_firewall", "dask_images"):
        assert not (ROOT / "roles" / role / "tasks" / "validate.yml").exists(), role


def test_the_acknowledgements_default_to_false() -> None:
    defaults = yaml.safe_load((ROOT / "roles" / "dask" / "defaults" / "main.yml").read_text())
    for name in ("dask_tls_disabled_ack", "dask_container_root_ack", "dask_dashboard_exposed_ack"):
        assert defaults[name] is False
        assert SPECS["dask"][name]["default"] is False and SPECS["dask"][name]["type"] == "bool"


@pytest.mark.parametrize(("text", "kind", "empty", "is_list"), [
    ("integer 1-65535", "integer", False, False), ("integer >= 0", "integer", False, False),
    ("size or fraction (0, 1]", "size or fraction (0, 1]", False, False),
    ("size, fraction (0, 1] or auto", "size, fraction (0, 1] or auto", False, False),
    ("IPv4 address, or empty", "IPv4 address", True, False),
    ("IPv4 address or CIDR (list)", "IPv4 address or CIDR", False, True),
    ("name safe in paths ([a-z0-9][a-z0-9_.-]*)", "pattern", False, False),
    ("absolute path", "absolute path", False, False),
    ("port range FIRST:LAST, or empty", "port range FIRST:LAST", True, False),
    ("GPU index, GPU-UUID or MIG-UUID (list)", "GPU index, GPU-UUID or MIG-UUID", False, True),
    ("URL (http/https), or empty", "URL (http/https)", True, False),
    ("any", "any", False, False), ("true or false", "true or false", False, False),
])
def test_the_grammar_reads_each_form(text: str, kind: str, empty: bool, is_list: bool) -> None:
    constraint = validate.parse_constraint(text)
    assert (constraint.kind, constraint.empty, constraint.is_list) == (kind, empty, is_list)


@pytest.mark.parametrize("text", ["integer 5-1", "between 1 and 5", "pattern ([unclosed)", "integer 1-", ""])
def test_the_grammar_rejects_what_it_does_not_know(text: str) -> None:
    with pytest.raises(validate.SpecError):
        validate.parse_constraint(text)


def test_a_spec_without_a_constraint_is_a_problem_not_an_exception() -> None:
    ctx = context()
    ctx["specs"]["dask"]["dask_new_option"] = {"type": "str", "default": "", "description": "no constraint"}
    ctx["specs"]["dask"]["dask_odd_option"] = {"type": "str", "default": "", "description": ["x", "Allowed: fuzzy"]}
    found = problems(ctx)
    assert any(p.startswith("inventory: roles/dask/meta/argument_specs.yml: option dask_new_option") for p in found)
    assert any("dask_odd_option" in p and "not in the grammar" in p for p in found)


# ---------------------------------------------------------------------------------------------- generated values

def test_a_good_cluster_has_no_problem_on_any_host() -> None:
    for host in ("s1", "c1", "g1"):
        assert problems(context(host)) == []


@pytest.mark.parametrize(("role", "name", "value", "why"), generator.generated(),
                         ids=[case[1] for case in generator.generated()])
@pytest.mark.parametrize("host", ["s1", "c1", "g1"])
def test_each_generated_invalid_value_is_reported_naming_its_variable(role: str, name: str, value: Any, why: str,
                                                                      host: str) -> None:
    found = problems(context(host, **{name: value}))
    shown = json.dumps(value[0] if isinstance(value, list) and why != "wrong type" else value)
    named = [problem for problem in found if problem.startswith(f"host {host}: {name}")]
    assert named, f"{name}={value!r} ({why}) not reported on {host}: {found}"
    assert any(shown in problem or str(value) in problem for problem in named), named


@pytest.mark.parametrize(("role", "name"), OPTIONS, ids=[name for _, name in OPTIONS])
def test_a_value_of_the_wrong_type_is_reported(role: str, name: str) -> None:
    value = generator.wrong_type(SPECS[role][name])
    found = problems(context("c1", **{name: value}))
    assert any(problem.startswith(f"host c1: {name} ") for problem in found), found


# ---------------------------------------------------------------------------------------------- types

@pytest.mark.parametrize(("value", "expected"), [(8786, 8786), ("8786", 8786), (" 9000 ", 9000), (8786.0, 8786),
                                                 (True, None), ("four", None), (8786.5, None), (None, None),
                                                 ([1], None), ("1e3", None)])
def test_integers(value: Any, expected: int | None) -> None:
    assert validate.as_int(value) == expected


@pytest.mark.parametrize(("value", "expected"), [(True, True), ("yes", True), ("True", True), ("on", True), (1, True),
                                                 (False, False), ("no", False), ("FALSE", False), (0, False),
                                                 ("maybe", None), (2, None), (None, None), ([], None)])
def test_booleans(value: Any, expected: bool | None) -> None:
    assert validate.as_bool(value) == expected


def test_numeric_strings_and_yes_no_strings_pass_and_are_converted() -> None:
    ctx = context("c1", dask_scheduler_port="8800", dask_tls_disabled_ack="yes", dask_worker_memory_limit=0.9,
                  dask_worker_gpus=[0], dask_firewall_open_ports=["22"])
    assert problems(ctx) == []
    typed = typing.typed(ctx["settings"], SPECS, ["s1", "c1", "g1"])
    assert typed.problems == {}
    assert typed.settings["dask_scheduler_port"] == 8800 and typed.settings["dask_tls_disabled_ack"] is True
    assert typed.settings["dask_worker_gpus"] == ["0"] and typed.settings["dask_firewall_open_ports"] == [22]
    refused = typing.typed({**ctx["settings"], "dask_tls_disabled_ack": "maybe"}, SPECS, [])
    # A refused value is reported and its default stands in for the model.
    assert refused.settings["dask_tls_disabled_ack"] is False
    assert refused.problems["dask_tls_disabled_ack"] == [
        'dask_tls_disabled_ack ("maybe") is not a boolean (true/false, yes/no)']


@pytest.mark.parametrize(("text", "expected"), [
    ("64GB", ("bytes", 64e9)), ("1.5TiB", ("bytes", 1.5 * 2 ** 40)), ("500MB", ("bytes", 500e6)),
    ("512MiB", ("bytes", 512 * 2 ** 20)), ("64 gb", ("bytes", 64e9)), ("1000000", ("bytes", 1e6)), ("0", ("bytes", 0)),
    ("0.8", ("fraction", 0.8)), (".5", ("fraction", 0.5)), ("1.0", ("fraction", 1.0)),
    ("1.5", None), ("0.0", None), ("12 parsecs", None), ("1e9", None), ("-1GB", None), ("", None), ("auto", None)])
def test_sizes_and_fractions_parse_as_dask_reads_them(text: str, expected: tuple[str, float] | None) -> None:
    assert validate.parse_size(text) == expected


def test_auto_is_a_memory_limit_but_not_a_device_memory_limit() -> None:
    assert problems(context("c1", dask_worker_memory_limit="auto")) == []
    one(context("c1", dask_worker_device_memory_limit="auto"), "dask_worker_device_memory_limit", "auto")


def test_empty_is_allowed_only_where_the_constraint_says_so() -> None:
    assert problems(context("c1", dask_worker_rmm_pool_size="", dask_cluster_address="")) == []
    one(context("c1", dask_worker_device_memory_limit=""), "dask_worker_device_memory_limit")
    one(context("c1", dask_repo_dir=""), "dask_repo_dir", "absolute path")


def test_a_missing_setting_without_a_default_is_a_problem() -> None:
    ctx = context("c1")
    del ctx["settings"]["dask_base_image"]
    one(ctx, "host c1: dask_base_image is not set")


def test_every_problem_is_reported_not_only_the_first() -> None:
    found = problems(context("c1", dask_scheduler_port=0, dask_worker_nthreads="four", dask_cluster_name="Bad/Name",
                             dask_worker_memory_limit="12 parsecs"))
    assert len(found) == 4, found


# ---------------------------------------------------------------------------------------------- rules

def test_unknown_variables_are_typos_with_a_hint() -> None:
    ctx = context("c1")
    ctx["set"] = ["dask_worker_rmm_pol_size", "dask_scheduler_port", "docker_engine_sauce"]
    message = one(ctx, "host c1: unknown variable(s) dask_worker_rmm_pol_size", "Misspelt?")
    assert "did you mean dask_worker_rmm_pool_size" in message and "docker_engine_sauce" in message


def test_scheduler_and_dashboard_ports_are_distinct() -> None:
    one(context("s1", dask_dashboard_port=8786),
        "dask_scheduler_port (8786) and dask_dashboard_port (8786) must be distinct")
    one(context("s1", dask_dashboard_port="8786"), "must be distinct")


def test_tls_off_needs_its_acknowledgement() -> None:
    one(context("s1", dask_transport="tcp"), "dask_transport=tcp turns TLS off", "dask_tls_disabled_ack",
        "10.0.0.5:8786", "tls-ucx")
    assert problems(context("s1", dask_transport="tcp", dask_tls_disabled_ack=True)) == []


@pytest.mark.parametrize("name", ["dask_container_uid", "dask_container_gid"])
def test_root_in_the_containers_needs_its_acknowledgement(name: str) -> None:
    one(context("c1", **{name: 0}), f"{name}=0", "root", "dask_container_root_ack")
    assert problems(context("c1", **{name: 0, "dask_container_root_ack": True})) == []


@pytest.mark.parametrize("bind", ["0.0.0.0", "10.0.0.5"])
def test_an_exposed_dashboard_needs_its_acknowledgement(bind: str) -> None:
    one(context("s1", dask_dashboard_bind=bind), f"dask_dashboard_bind={bind}", "no authentication",
        "dask_dashboard_exposed_ack")
    assert problems(context("s1", dask_dashboard_bind=bind, dask_dashboard_exposed_ack=True)) == []
    assert problems(context("s1", dask_dashboard_bind="127.0.0.1")) == []


def test_the_dashboard_binds_to_an_address_of_the_scheduler_host() -> None:
    one(context("s1", dask_dashboard_bind="10.9.9.9", dask_dashboard_exposed_ack=True),
        "dask_dashboard_bind (\"10.9.9.9\") is not 127.0.0.1, 0.0.0.0 or an IPv4 address of this host")


def test_ucx_transports_need_the_firewall_and_ucx_off_tls_its_acknowledgement() -> None:
    one(context("s1", dask_transport="ucx", dask_firewall_enabled=True),
        "dask_transport=ucx turns TLS off", "dask_tls_disabled_ack")
    one(context("s1", dask_transport="ucx", dask_tls_disabled_ack=True),
        "dask_transport=ucx needs dask_firewall_enabled: true")
    one(context("s1", dask_transport="tls-ucx", dask_firewall_enabled=True, dask_scheduler_ucx_port=8786),
        "dask_scheduler_port (8786) and dask_scheduler_ucx_port (8786) must be distinct ports on this host")
    # UCX and RMM are in both image profiles (images/requirements/lean.txt)
    for profile in ("lean", "full"):
        assert problems(context("s1", dask_transport="ucx", dask_tls_disabled_ack=True,
                                dask_firewall_enabled=True, dask_image_profile=profile)) == []
        assert problems(context("s1", dask_transport="tls-ucx", dask_firewall_enabled=True,
                                dask_image_profile=profile)) == []
        assert problems(context("g1", dask_worker_rmm_pool_size="0.5", dask_worker_rmm_for_cupy=True,
                                dask_image_profile=profile)) == []


def test_registry_distribution_needs_a_registry() -> None:
    one(context("s1", dask_images_distribution="registry"),
        "dask_images_distribution=registry needs dask_images_registry")
    assert problems(context("s1", dask_images_distribution="registry", dask_images_registry="10.0.0.5:5000")) == []
    assert problems(context("s1", dask_images_distribution="registry",
                            dask_images_registry="registry.example.com:5000/team/dask")) == []


def test_the_cluster_registry_needs_tls_a_cluster_host_and_a_free_port() -> None:
    assert problems(context("s1", dask_images_distribution="cluster-registry")) == []
    assert problems(context("c1", dask_images_distribution="cluster-registry", dask_images_registry_host="c1")) == []
    one(context("s1", dask_images_distribution="cluster-registry", dask_transport="tcp", dask_tls_disabled_ack=True),
        "dask_images_distribution=cluster-registry needs the cluster's TLS", "dask_transport=tcp")
    one(context("s1", dask_images_distribution="cluster-registry", dask_images_registry_host="localhost"),
        "dask_images_registry_host=localhost must be a host of the cluster")
    one(context("s1", dask_images_distribution="cluster-registry", dask_images_registry_port=8786),
        "dask_scheduler_port (8786) and dask_images_registry_port (8786) must be distinct ports on this host")
    one(context("c1", dask_images_distribution="cluster-registry", dask_images_registry_host="c1",
                dask_images_registry_port=8790), "dask_worker_http_port (8790) and dask_images_registry_port (8790)")
    one(context("c1", dask_images_distribution="cluster-registry", dask_images_registry_host="c1",
                dask_worker_port_range="4990:5010"),
        "dask_worker_port_range (4990-5010) and dask_images_registry_port (5000)")
    one(context("c1", dask_images_distribution="cluster-registry", dask_images_registry_host="c1",
                dask_host_state="retired"), "dask_images_registry_host=c1 is retired")
    # Another host does not check the registry host's ports.
    assert problems(context("c1", dask_images_distribution="cluster-registry", dask_images_registry_port=8786)) == []


def test_the_build_host_is_localhost_or_in_the_inventory() -> None:
    one(context("s1", dask_images_build_host="ghost"),
        "dask_images_build_host=ghost is neither localhost nor a host in the inventory")
    assert problems(context("s1", dask_images_build_host="g1")) == []


def test_firewall_sources_and_open_ports() -> None:
    one(context("s1", dask_firewall_allowed_sources=["10.0.0.0/8", "10.0.0.0/33"]), "dask_firewall_allowed_sources",
        "10.0.0.0/33")
    one(context("s1", dask_firewall_allowed_sources=["10.0.0.0/x"]), "10.0.0.0/x")
    one(context("s1", dask_firewall_enabled=True, dask_firewall_open_ports=[22, 8786]),
        "dask_firewall_open_ports (22, 8786)", "dask_scheduler_port (8786)")
    assert problems(context("s1", dask_firewall_open_ports=[22, 8786])) == []  # the firewall is off


def test_the_worker_port_range() -> None:
    one(context("c1", dask_worker_port_range="9000"), "host c1", "dask_worker_port_range=\"9000\"")
    one(context("c1", dask_worker_port_range="8780:8790"), "dask_worker_http_port (8790) and dask_worker_port_range "
        "(8780-8790) must be distinct ports")
    # On the scheduler host the range must also stay clear of the scheduler's ports.
    groups = {"all": ["s1"], "dask_scheduler": ["s1"], "dask_cuda_workers": [], "dask_cpu_workers": ["s1"],
              "dask_workers": ["s1"], "dask_cluster": ["s1"]}
    found = problems(context("s1", groups=groups, dask_worker_port_range="8780:8789"))
    assert len(found) == 2 and "dask_scheduler_port (8786) and dask_worker_port_range (8780-8789)" in found[0]
    assert "dask_dashboard_port (8787) and dask_worker_port_range (8780-8789)" in found[1]
    one(context("g1", dask_worker_port_range="9000:9000"), "host g1", "room for 2 workers")
    assert problems(context("g1", dask_worker_port_range="9000:9001")) == []
    assert problems(context("g1", dask_worker_port_range="9000:9000", dask_worker_gpus=["1"])) == []


def test_the_worker_http_port_on_the_scheduler_host() -> None:
    groups = {"all": ["s1"], "dask_scheduler": ["s1"], "dask_cuda_workers": [], "dask_cpu_workers": ["s1"],
              "dask_workers": ["s1"], "dask_cluster": ["s1"]}
    one(context("s1", groups=groups, dask_worker_http_port=8787), "dask_worker_http_port (8787)",
        "dask_dashboard_port (8787)")
    assert problems(context("c1", dask_worker_http_port=8787)) == []


# ---------------------------------------------------------------------------------------------- inventory

def groups_of(scheduler: list[str], cuda: list[str], cpu: list[str], workers: list[str] | None = None
              ) -> dict[str, list[str]]:
    everyone = list(dict.fromkeys(scheduler + cuda + cpu + (workers or [])))
    return {"all": everyone, "dask_scheduler": scheduler, "dask_cuda_workers": cuda, "dask_cpu_workers": cpu,
            "dask_workers": workers if workers is not None else cuda + cpu, "dask_cluster": everyone}


def test_inventory_problems_are_reported_once() -> None:
    groups = groups_of([], [], ["c1"])
    assert one(context("c1", groups=groups),
               "inventory: group dask_scheduler must hold exactly one host; it holds 0")
    assert problems(context("c1", groups=groups, inventory_checks=False)) == []


def test_inventory_groups() -> None:
    one(context("s1", groups=groups_of(["s1", "s2"], [], ["c1"])), "must hold exactly one host; it holds 2", "s1, s2")
    one(context("s1", groups=groups_of(["s1"], [], [])), "dask_cuda_workers and dask_cpu_workers are both empty")
    one(context("s1", groups=groups_of(["s1"], ["w1"], ["w1"])),
        "w1 in both dask_cuda_workers and dask_cpu_workers")
    one(context("s1", groups=groups_of(["s1"], [], ["c1"], ["c1", "x1"])),
        "inventory: x1 in dask_workers but in neither dask_cuda_workers nor dask_cpu_workers")


def test_pins_for_the_release_and_cuda_major() -> None:
    one(context("s1", dask_rapids_release="25.02"), "inventory: dask_rapids_release=25.02", "no pins file")
    assert problems(context("s1", dask_rapids_release="25.02", inventory_checks=False)) == []


# ---------------------------------------------------------------------------------------------- host facts

def test_the_cluster_address_is_an_address_of_the_host() -> None:
    assert problems(context("c1", dask_cluster_address="10.1.0.5")) == []
    assert problems(context("c1", dask_cluster_address="127.0.0.1")) == []  # loopback (single-host clusters)
    one(context("c1", dask_cluster_address="10.9.9.9"), "dask_cluster_address (\"10.9.9.9\") is not an IPv4 address "
        "of this host", "10.0.0.5")


def test_the_cluster_interface_exists_and_has_an_address() -> None:
    assert problems(context("c1", dask_cluster_interface="br-data")) == []
    one(context("c1", dask_cluster_interface="eth9"), "dask_cluster_interface (\"eth9\") is not an interface of this "
        "host", "lo, eth0, br-data")
    ctx = context("c1", dask_cluster_interface="eth0")
    ctx["facts"]["eth0"] = {"ipv4": {}}
    one(ctx, "no IPv4 address to bind", "eth0")


def test_no_default_route_and_nothing_set_is_no_address_to_bind() -> None:
    ctx = context("c1")
    ctx["facts"]["default_ipv4"] = {}
    one(ctx, "host c1: no IPv4 address to bind")


def test_a_gpu_worker_without_a_gpu_needs_allow_cpu() -> None:
    ctx = context("g1")
    ctx["gpus"] = copy.deepcopy(NO_GPU)
    one(ctx, "host g1 is in dask_cuda_workers but has no usable GPU", "no NVIDIA driver", "dask_worker_allow_cpu")
    ctx["settings"]["dask_worker_allow_cpu"] = True
    assert problems(ctx) == []


def test_the_driver_is_new_enough_for_the_cuda_major() -> None:
    ctx = context("g1", dask_cuda_major="13")
    ctx["gpus"].update(driver_version="570.86.15", driver_major=570)
    one(ctx, "NVIDIA driver 570.86.15 is too old for CUDA 13 images (needs >= 580)")
    ctx["settings"]["dask_cuda_major"] = "12"
    assert problems(ctx) == []
    ctx["gpus"].update(driver_version="530.30.02", driver_major=530)
    one(ctx, "(needs >= 535)")


def test_selected_gpus_exist_once_each() -> None:
    uuid = H200[1]["uuid"]
    assert problems(context("g1", dask_worker_gpus=["0", uuid])) == []
    one(context("g1", dask_worker_gpus=["2"]), "host g1: dask_worker_gpus entry \"2\" is not a GPU of this host",
        "has 2 GPUs")
    one(context("g1", dask_worker_gpus=["1", "1"]), "\"1\"", "listed twice")
    one(context("g1", dask_worker_gpus=["1", uuid]), f"\"{uuid}\" is the same GPU as \"1\"")
    one(context("g1", dask_worker_gpus=["MIG-1234"]), "dask_worker_gpus entry \"MIG-1234\" is not a GPU index")


def test_mig_devices_are_gpus_of_the_host() -> None:
    mig = "MIG-0f6a4c2d-1111-2222-3333-444455556666"
    ctx = context("g1", dask_worker_gpus=[mig, "MIG-0f6a4c2d-1111-2222-3333-444455557777"])
    ctx["gpus"]["gpus"][0]["mig"] = [mig]
    one(ctx, "MIG-0f6a4c2d-1111-2222-3333-444455557777", "is not a GPU of this host")


def test_device_sizes_fit_the_smallest_selected_gpu() -> None:
    ctx = context("g1", dask_worker_device_memory_limit="200GB", dask_worker_rmm_pool_size="100GB",
                  dask_image_profile="full")
    ctx["gpus"]["gpus"][1]["memory_mib"] = 81559
    found = problems(ctx)
    assert len(found) == 2 and all("GPU 1" in problem and "81559 MiB" in problem for problem in found), found
    ctx["settings"]["dask_worker_gpus"] = ["0"]
    one(ctx, "dask_worker_device_memory_limit (\"200GB\") is larger than the memory of GPU 0")
    assert problems(context("g1", dask_worker_device_memory_limit="120GiB", dask_worker_rmm_pool_size="0.9",
                            dask_image_profile="full")) == []
    assert problems(context("c1", dask_worker_device_memory_limit="200GB")) == []  # no GPU on a CPU worker
    one(context("g1", dask_dataframe_partition_size="200GiB"),
        "dask_dataframe_partition_size (\"200GiB\") is larger than the memory of GPU")
    assert problems(context("g1", dask_dataframe_partition_size="2GiB")) == []
    assert problems(context("g1", dask_dataframe_partition_size="0.05")) == []
    one(context("c1", dask_dataframe_partition_size="1"), "dask_dataframe_partition_size (\"1\") is under 1 MiB")
    one(context("c1", dask_dataframe_partition_size="512KiB"), "is under 1 MiB")
    assert problems(context("c1", dask_dataframe_partition_size="1MiB")) == []


def docker(ctx: dict[str, Any], version: Any) -> dict[str, Any]:
    """The context with Docker's version as role docker_engine records it (ansible_local.docker_engine)."""
    ctx["facts"]["ansible_local"] = {"docker_engine": {"server_version": version}}
    return ctx


def test_cdi_needs_docker_25_where_docker_engine_recorded_an_older_one() -> None:
    one(docker(context("g1", dask_worker_gpu_request="cdi"), "20.10.24+dfsg1"), "host g1",
        "dask_worker_gpu_request=cdi needs Docker >= 25", "is 20.10.24+dfsg1", "dask_worker_gpu_request: gpus")
    for fine in ("25.0.0", "26.1.5+dfsg1", "29.2.1"):
        assert problems(docker(context("g1", dask_worker_gpu_request="cdi"), fine)) == []
    # The same run moves the host to Docker CE (the advice of the message): the toolkit role checks after it.
    assert problems(docker(context("g1", dask_worker_gpu_request="cdi", docker_engine_source="upstream"),
                           "20.10.24+dfsg1")) == []
    # Unknown (Docker not installed yet: the toolkit role checks once it is), or not asked for: nothing to say.
    assert problems(context("g1", dask_worker_gpu_request="cdi")) == []
    assert problems(docker(context("g1", dask_worker_gpu_request="cdi"), None)) == []
    assert problems(docker(context("g1"), "20.10.24")) == []
    # A CPU worker, or a GPU worker host that fell back to the CPU, asks for no GPU.
    assert problems(docker(context("c1", dask_worker_gpu_request="cdi"), "20.10.24")) == []
    fallback = docker(context("g1", dask_worker_gpu_request="cdi", dask_worker_allow_cpu=True), "20.10.24")
    fallback["gpus"] = copy.deepcopy(NO_GPU)
    assert problems(fallback) == []


def test_gpu_request_is_gpus_or_cdi_and_the_old_toolkit_switch_is_gone() -> None:
    one(context("g1", dask_worker_gpu_request="nvidia"),
        "dask_worker_gpu_request (\"nvidia\") must be one of gpus, cdi")
    # The toolkit's CDI behaviour follows dask_worker_gpu_request: its own switch is no longer a variable.
    one(context("g1", nvidia_container_toolkit_cdi=True), "host g1: unknown variable(s) nvidia_container_toolkit_cdi")


# ---------------------------------------------------------------------------------------------- never raises

WEIRD = [None, object(), [], {}, [None], [[1]], {"a": object()}, float("inf"), float("nan"), "", " ", "\n", True,
         -1, 10 ** 30, b"bytes", "0" * 500, "é", {"nested": {"deep": [1, {"x": None}]}}]


@pytest.mark.parametrize(("role", "name"), OPTIONS, ids=[name for _, name in OPTIONS])
def test_no_value_makes_the_checks_raise(role: str, name: str) -> None:
    for host in ("s1", "c1", "g1"):
        for value in WEIRD:
            problems(context(host, **{name: value}))


@pytest.mark.parametrize("broken", [
    None, [], "context", {}, {"host": "h"}, {"host": "h", "settings": "x", "specs": [1], "groups": "g"},
    {"host": "h", "settings": {}, "specs": {"dask": {"dask_x": "not a mapping"}}, "inventory_checks": "yes"},
    {"host": "h", "specs": {"dask": None}, "groups": {"all": None, "dask_scheduler": "s1"}},
])
def test_a_broken_context_gives_problems_not_exceptions(broken: Any) -> None:
    problems(broken)


def test_broken_facts_and_gpu_probes_give_problems_not_exceptions() -> None:
    for gpus in [{"count": "two"}, {"count": 2, "gpus": [None, 5, {"memory_mib": "x", "index": None}]},
                 {"count": 1, "gpus": "GPU", "driver_major": "new"}, None, "nvidia"]:
        for facts in [None, {"interfaces": "eth0"}, {"default_ipv4": "10.0.0.5", "eth0": []},
                      {"all_ipv4_addresses": 5}]:
            for overrides in [{}, {"dask_worker_gpus": ["0", "GPU-x"]}, {"dask_cluster_interface": "eth0"},
                              {"dask_worker_device_memory_limit": "10GB"}, {"dask_cluster_address": "10.0.0.5"}]:
                ctx = context("g1", **overrides)
                ctx["gpus"], ctx["facts"] = gpus, facts
                problems(ctx)


def test_the_filter_is_registered() -> None:
    filters = checks_filter.FilterModule().filters()
    assert filters["problems"] is checks.problems


def test_loopback_is_an_address_of_every_host_also_without_interface_facts() -> None:
    """A GPU machine without iproute2 gives Ansible no interfaces; a one-host cluster on 127.0.0.1 still works."""
    bare = context("s1", dask_cluster_address="127.0.0.1")
    bare["facts"] = {"hostname": "s1", "default_ipv4": {}, "all_ipv4_addresses": [], "interfaces": []}
    assert problems(bare) == []
    bare["settings"]["dask_cluster_address"] = "10.9.9.9"
    one(bare, 'dask_cluster_address ("10.9.9.9") is not an IPv4 address of this host (its addresses: none)')


def test_a_replaced_variable_names_its_replacement() -> None:
    one(context("s1", dask_tls_enabled=False), "dask_tls_enabled (replaced by dask_transport")
    one(context("s1", dask_ucx_enabled=True), "dask_ucx_enabled (replaced by dask_transport: tls-ucx")


def test_the_ucx_port_cannot_be_opened_to_everyone() -> None:
    one(context("s1", dask_transport="tls-ucx", dask_firewall_enabled=True, dask_firewall_open_ports=[22, 8788]),
        "must not hold dask_scheduler_ucx_port (8788)")


# ---------------------------------------------------------------------------------------------- monitoring

def test_monitoring_runs_on_one_cluster_host() -> None:
    base = groups_of(["s1"], ["g1"], ["c1"])
    assert problems(context("s1", groups={**base, "dask_monitoring": ["s1"]}, dask_monitoring_enabled=True)) == []
    one(context("c1", groups={**base, "dask_monitoring": ["c1", "g1"]}), "inventory: group dask_monitoring (c1, g1)",
        "must hold one host of the cluster")
    one(context("c1", groups={**base, "dask_monitoring": ["m9"]}), "group dask_monitoring (m9)")


def test_monitoring_elsewhere_needs_the_schedulers_metrics_reachable() -> None:
    elsewhere = {**groups_of(["s1"], ["g1"], ["c1"]), "dask_monitoring": ["c1"]}
    one(context("s1", groups=elsewhere, dask_monitoring_enabled=True), "host s1: dask_monitoring_enabled with "
        "Prometheus on c1", "dask_dashboard_bind=127.0.0.1")
    assert problems(context("s1", groups=elsewhere, dask_monitoring_enabled=True, dask_dashboard_bind="10.0.0.5",
                            dask_dashboard_exposed_ack=True)) == []
    assert problems(context("s1", groups=elsewhere)) == []  # monitoring off: nothing to reach


def test_an_exposed_prometheus_needs_its_acknowledgement() -> None:
    one(context("s1", dask_monitoring_enabled=True, dask_monitoring_listen_address="10.0.0.5"),
        "dask_monitoring_listen_address=10.0.0.5", "dask_monitoring_exposed_ack")
    assert problems(context("s1", dask_monitoring_enabled=True, dask_monitoring_listen_address="10.0.0.5",
                            dask_monitoring_exposed_ack=True)) == []


def test_monitoring_ports_do_not_clash_with_the_clusters() -> None:
    one(context("s1", dask_monitoring_enabled=True, dask_monitoring_node_exporter_port=8786),
        "dask_scheduler_port (8786) and dask_monitoring_node_exporter_port (8786) must be distinct ports")
    one(context("g1", dask_monitoring_enabled=True, dask_monitoring_node_exporter_port=8791),
        "dask_worker_http_port (8790-8791) and dask_monitoring_node_exporter_port (8791) must be distinct ports")
    one(context("s1", dask_monitoring_enabled=True, dask_monitoring_port=9100), "dask_monitoring_port (9100)",
        "dask_monitoring_node_exporter_port")
    # Prometheus's port matters on the monitoring host only; with monitoring off nothing is checked.
    assert problems(context("g1", dask_monitoring_enabled=True, dask_monitoring_port=8791)) == []
    assert problems(context("g1", dask_monitoring_node_exporter_port=8791)) == []


def test_worker_http_ports_span_one_port_per_worker() -> None:
    groups = groups_of(["g1"], ["g1"], [])
    one(context("g1", groups=groups, dask_worker_http_port=8785), "dask_scheduler_port (8786) and "
        "dask_worker_http_port (8785-8786) must be distinct ports")
    one(context("g1", dask_worker_http_port=65535), "dask_worker_http_port (65535) leaves no room for 2 workers")


def test_extra_scrape_configs_need_a_job_name_of_their_own() -> None:
    assert problems(context("s1", dask_monitoring_enabled=True,
                            dask_monitoring_extra_scrape_configs=[{"job_name": "mine"}])) == []
    one(context("s1", dask_monitoring_enabled=True, dask_monitoring_extra_scrape_configs=[{"job_name": "node"}]),
        "dask_monitoring_extra_scrape_configs[0] needs a job_name of its own")
    one(context("s1", dask_monitoring_enabled=True, dask_monitoring_extra_scrape_configs=[{"static_configs": []}]),
        "dask_monitoring_extra_scrape_configs[0]", "it has")


def test_only_worker_hosts_can_be_retired() -> None:
    assert problems(context("c1", dask_host_state="retired")) == []
    one(context("s1", dask_host_state="retired"), "dask_host_state=retired is for worker hosts")
    one(context("c1", dask_host_state="gone"), "dask_host_state")


# ------------------------------------------------------------------------- every host in one controller task

def test_every_hosts_problems_in_one_task_are_each_hosts_own_in_play_order() -> None:
    """validate.yml's hosts_problems: the problems of each host as problems() finds them for that host alone, the
    inventory-wide checks on the first host only; what a host was given comes from `given`, its facts from hostvars."""
    bad = {"c1": {"dask_worker_nthreads": "lots"}, "g1": {"dask_worker_gpus": ["7"]}}
    alone = [context(host, inventory_checks=index == 0, **bad.get(host, {})) for index, host in enumerate(["c1", "g1"])]
    hostvars = {ctx["host"]: {"ansible_facts": ctx["facts"], "gpu_facts_found": ctx["gpus"]} for ctx in alone}
    common = {key: alone[0][key] for key in ("specs", "groups", "pins")}
    common["given"] = {ctx["host"]: ctx["settings"] for ctx in alone}
    common["given_names"] = {ctx["host"]: ctx["set"] for ctx in alone}
    together = checks_filter.FilterModule().filters()["hosts_problems"](["c1", "g1"], hostvars, common)
    each = [problem for ctx in alone for problem in problems(ctx)]
    assert together == each
    assert [p for p in together if p.startswith("host c1: dask_worker_nthreads")]
    assert [p for p in together if p.startswith("host g1: dask_worker_gpus")]
