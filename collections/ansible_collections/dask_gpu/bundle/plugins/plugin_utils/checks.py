"""Every check of playbooks/check.yml: `problems(context)` returns the list of problems of one host (empty when the
inventory, the variables and the host's facts are fine). The role `dask` asserts it is empty.

The checks read the model (model.py: the host's model and the cluster's), never derive a fact of their own: the
worker count, the bind address, the selected GPUs, the ports a host takes, the monitoring and registry hosts all come
from there. Each feature's own checks run from the registry (features/).

Context (one host): host, settings (resolved, as given: the checks type them and report what does not fit), set
(names with a role prefix set for the host), specs ({role: {option: spec}}), groups, facts (ansible_facts), gpus
(the gpu_facts probe), pins (file names in images/pins/), inventory_checks (true on exactly one host), host_model and
cluster (the model; built here from the rest when absent, as in unit tests).

Every problem names its host (``host H: ...``), or ``inventory: ...`` for whole-inventory problems, and the
variable with its value. The function never raises: a value of the wrong type is a problem, not an exception.
"""
from __future__ import annotations

import difflib
import ipaddress
from collections.abc import Mapping
from typing import Any

from ansible_collections.dask_gpu.bundle.plugins.module_utils.paths import kept_inside_trees
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils import model as cluster_model
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils import pki, records
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils import ports as port_plan
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils import settings as typing
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.feature import WORKER_GROUPS, CheckInput, group
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.features import FEATURES
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.gpus import known_names
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.identity import ca_cluster
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.options import (
    SpecError,
    as_bool,
    as_int,
    as_mapping,
    as_sequence,
    cluster_scoped,
    option_constraint,
    parse_size,
    port_range,
    show,
)
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.transport import facets

# The oldest NVIDIA driver each CUDA major of the images runs on.
DRIVER_NEEDED = {"12": 535, "13": 580}
# Variables that were replaced: what to set instead (a did-you-mean of similar spelling would mislead).
RENAMED = {
    "dask_tls_enabled": "replaced by dask_transport: tls (default), tls-ucx, ucx or tcp",
    "dask_ucx_enabled": "replaced by dask_transport: tls-ucx (clients keep TLS) or ucx",
    "nvidia_container_toolkit_cdi": "replaced by dask_worker_gpu_request: cdi, which also turns CDI on in the toolkit",
}
# Flags of `dask scheduler` / `dask cuda worker` the bundle sets itself (transport, TLS, the addresses and ports it
# binds, the local directory): an extra argument may not set them again without dask_extra_args_override_ack.
MANAGED_FLAGS = ("--host", "--port", "--protocol", "--interface", "--listen-address", "--contact-address",
                 "--dashboard-address", "--worker-port", "--nanny-port", "--local-directory", "--tls-ca-file",
                 "--tls-cert", "--tls-key", "--scheduler-file", "--name", "--nworkers", "--no-dashboard",
                 "--dashboard")
GROUP_NAMES = ("all", "dask_scheduler", *WORKER_GROUPS, "dask_workers", "dask_cluster", "dask_monitoring")


def _is_loopback(address: Any) -> bool:
    try:
        return ipaddress.IPv4Address(str(address)).is_loopback
    except ValueError:
        return False


# The smallest data-frame partition size accepted: below it a frame becomes millions of tasks.
PARTITION_FLOOR = 2 ** 20


class Checker:
    """The problems of one host's context."""

    def __init__(self, context: Mapping[str, Any]) -> None:
        self.host = str(context.get("host") or "?")
        self.raw = as_mapping(context.get("settings"))
        self.specs = {str(role): as_mapping(options) for role, options in as_mapping(context.get("specs")).items()}
        self.set_names = [str(name) for name in as_sequence(context.get("set"))]
        groups = as_mapping(context.get("groups"))
        self.groups = {name: [str(host) for host in as_sequence(groups.get(name))] for name in GROUP_NAMES}
        self.facts = as_mapping(context.get("facts"))
        self.gpus = as_mapping(context.get("gpus"))
        self.pins = [str(name) for name in as_sequence(context.get("pins"))]
        # The CA already in the controller folder (its PEM; "" when there is none yet).
        self.controller_ca = str(context.get("controller_ca") or "")
        # The scheduler host's typed settings, against which cluster-wide options are held (absent: no comparison).
        self.reference_host = str(context.get("reference_host") or "")
        self.reference = as_mapping(context.get("reference_settings"))
        self.inventory_checks = as_bool(context.get("inventory_checks")) is True
        # False in the inventory-only check (plugin_utils/inventory_check.py): no GPU was probed, so none is judged.
        self.facts_read = as_bool(context.get("facts_read", True)) is not False
        self.problems: list[str] = []
        result = typing.typed(self.raw, self.specs, self.groups["all"])
        self.refused = result.problems
        self.settings = result.settings
        self.model = as_mapping(context.get("host_model")) or cluster_model.host_model(
            self.host, self.settings, self.facts, self.gpus, self.groups)
        self.cluster = as_mapping(context.get("cluster")) or self._cluster_alone()

    def _cluster_alone(self) -> dict[str, Any]:
        """The cluster model as far as this host knows it (unit tests: one host's context)."""
        try:
            return cluster_model.cluster_model(self.settings, {self.host: self.model}, self.groups, "")
        except (KeyError, TypeError, ValueError):
            return {}

    def get(self, name: str, default: Any = None) -> Any:
        """A setting's typed value; `default` when it is missing or was refused (then it is reported)."""
        if name in self.refused:
            return default
        return self.settings.get(name, default)

    def add(self, message: str) -> None:
        self.problems.append(f"host {self.host}: {message}")

    def inventory(self, message: str) -> None:
        if self.inventory_checks:
            self.problems.append(f"inventory: {message}")

    @property
    def is_cuda(self) -> bool:
        return self.host in self.groups["dask_cuda_workers"]

    @property
    def is_worker(self) -> bool:
        return bool(self.model.get("worker"))

    @property
    def is_scheduler(self) -> bool:
        return bool(self.model.get("scheduler"))

    @property
    def gpu_mode(self) -> bool:
        return self.model.get("worker_mode") == "gpu"

    # -- 1. every option: its spec, type, choices, Allowed; unknown variables
    def check_options(self) -> None:
        known = set()
        for role, options in self.specs.items():
            for name, spec in options.items():
                known.add(name)
                if not isinstance(spec, Mapping):
                    self.inventory(f"the argument spec of {name} (role {role}) is not a mapping")
                    continue
                try:
                    option_constraint(spec)
                except SpecError as error:
                    self.inventory(f"roles/{role}/meta/argument_specs.yml: option {name} {error}")
                    continue
                for message in self.refused.get(name, []):
                    self.add(message)
        unknown = sorted(set(self.set_names) - known)
        if unknown:
            hints = [f"{name} ({RENAMED[name]})" if name in RENAMED
                     else f"{name} (did you mean {close[0]}?)" if close else name
                     for name in unknown for close in [difflib.get_close_matches(name, sorted(known), n=1)]]
            self.add(f"unknown variable(s) {'; '.join(hints)}; known ones are listed in "
                     "docs/variables.md. Misspelt?")

    def check_scope(self) -> None:
        """A cluster-wide option (Scope: cluster) is read from the scheduler host: another value on this host would
        be ignored, so it is refused."""
        if not self.reference or self.reference_host in ("", self.host):
            return
        for options in self.specs.values():
            for name, spec in options.items():
                if name in self.refused or not isinstance(spec, Mapping) or not cluster_scoped(spec):
                    continue
                mine, theirs = self.settings.get(name), self.reference.get(name)
                if mine != theirs:
                    self.add(f"{name} ({show(mine)}) differs from the cluster's ({show(theirs)}, as the scheduler "
                             f"host {self.reference_host} has it): a cluster-wide setting is read from the "
                             "scheduler host, so this host's value would be ignored. Set it for every host "
                             "(group_vars/all) or leave it out of this host's variables")

    # -- 2. settings that must agree
    def check_rules(self) -> None:
        transport, ack = self.get("dask_transport"), self.get("dask_tls_disabled_ack")
        scheduler_port = self.get("dask_scheduler_port")
        if facets(str(transport or "tls"))["tls_off"] and ack is not True:
            where = self.model.get("bind_address") or "the scheduler"
            self.add(f"dask_transport={transport} turns TLS off, so anyone who reaches {where}:"
                     f"{scheduler_port if scheduler_port is not None else '?'} can run code on every worker. "
                     "Use dask_transport: tls-ucx (clients keep mutual TLS, workers talk UCX), or set "
                     "dask_tls_disabled_ack=true to accept that.")
        if self.is_scheduler and self.get("dask_host_state") == "retired":
            self.add("dask_host_state=retired is for worker hosts; the scheduler host cannot leave its cluster (move "
                     "the scheduler to another host in dask_scheduler first, or tear the cluster down with "
                     "playbooks/teardown.yml)")
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
        size = self.get("dask_dataframe_partition_size")
        parsed = parse_size(size) if size and size != "auto" else None
        if parsed and parsed[0] == "bytes" and parsed[1] < PARTITION_FLOOR:
            self.add(f"dask_dataframe_partition_size ({show(size)}) is under 1 MiB: clients would cut a data frame "
                     "into a partition per few rows (a bare number is bytes). Use a size like 1GiB, a fraction like "
                     "0.01, or auto")
        self.check_extra_args()
        self.check_lifetimes()
        self.check_docker_daemon()

    def check_lifetimes(self) -> None:
        """Certificate lifetimes and the renewal window must both hold."""
        ca_days, cert_days = self.get("dask_tls_ca_valid_days"), self.get("dask_tls_cert_valid_days")
        renew = self.get("dask_tls_renew_days")
        if cert_days is not None and renew is not None and renew >= cert_days:
            self.add(f"dask_tls_renew_days ({renew}) is not below dask_tls_cert_valid_days ({cert_days}): every run "
                     "would renew every certificate and restart every service. Renew a few weeks before expiry "
                     "(default 30 of 825 days)")
        if ca_days is not None and cert_days is not None and cert_days > ca_days:
            self.add(f"dask_tls_cert_valid_days ({cert_days}) is above dask_tls_ca_valid_days ({ca_days}): "
                     "certificates would outlive the CA that signs them and stop verifying when it expires. Keep "
                     "certificates shorter than the CA (default 825 and 3650 days)")

    def check_docker_daemon(self) -> None:
        """Docker's own settings (merged into daemon.json) must not open the host to everyone."""
        config = self.get("docker_engine_daemon_config")
        if not isinstance(config, Mapping):
            return
        hosts = [str(host) for host in as_sequence(config.get("hosts"))]
        remote = [host for host in hosts if not host.startswith(("unix://", "fd://"))]
        if remote and config.get("tlsverify") is not True:
            self.add(f"docker_engine_daemon_config hosts ({', '.join(hosts)}) makes Docker's API listen on "
                     f"{', '.join(remote)} without tlsverify: whoever reaches it is root on this host. Keep Docker "
                     "on its socket (the bundle needs nothing more), or set tlsverify with tlscacert, tlscert and "
                     "tlskey")
        for registry in (str(item) for item in as_sequence(config.get("insecure-registries"))):
            try:
                everyone = ipaddress.ip_network(registry, strict=False).prefixlen == 0
            except ValueError:
                everyone = False
            if everyone:
                self.add(f"docker_engine_daemon_config insecure-registries holds {registry}: every registry would "
                         "be reached without TLS verification (anyone on the path can swap the images). Name the "
                         "registries that need it")

    def check_extra_args(self) -> None:
        """Each extra argument is one argument: an option name with a space in it ("--nthreads 4") is two."""
        for name in ("dask_scheduler_extra_args", "dask_worker_extra_args"):
            for arg in (str(item) for item in as_sequence(self.get(name))):
                option = arg.split("=", 1)[0]
                if option.startswith("-") and option.split() != [option]:
                    words = ", ".join(f"'{word}'" for word in arg.split())
                    self.add(f"{name} entry {arg!r} is one argument with a space in its option name; give each "
                             f"word an entry of its own ([{words}]) or write it --option=value")
        self.check_managed_args()

    def check_managed_args(self) -> None:
        """Extra arguments may not set again what the bundle manages (transport, TLS, addresses, ports, folders)."""
        if self.get("dask_extra_args_override_ack") is True:
            return
        for name, applies in (("dask_scheduler_extra_args", self.is_scheduler),
                              ("dask_worker_extra_args", self.is_worker)):
            if not applies:
                continue
            managed = [arg for arg in self.get(name) or [] for flag in MANAGED_FLAGS
                       if str(arg) == flag or str(arg).startswith(flag + "=")]
            if managed:
                self.add(f"{name} sets {', '.join(managed)}, which the bundle manages (transport, TLS, the addresses "
                         "and ports it binds, the local directory: the firewall, the checks and the record of the "
                         "ports rely on them). Use the bundle's variables, or set dask_extra_args_override_ack: true "
                         "to accept that they are overridden.")

    # -- 3. ports: every port this host takes (the model's, by setting) once
    def check_ports(self) -> None:
        taken = {name: list(span) for name, span in as_mapping(self.model.get("ports")).items()
                 if name not in self.refused}
        for first, second in port_plan.clashes(taken):
            self.add(f"{port_plan.describe(first, taken[first])} and {port_plan.describe(second, taken[second])} must "
                     "be distinct ports on this host (each takes its own); pick a free port")
        http_port, count = self.get("dask_worker_http_port"), int(self.model.get("worker_count") or 0)
        if self.is_worker and http_port is not None and http_port + count - 1 > 65535:
            self.add(f"dask_worker_http_port ({http_port}) leaves no room for {count} workers (one port each) below "
                     "65536")
        text = self.get("dask_worker_port_range")
        ends = port_range(text) if text and self.is_worker else None
        if ends and ends[1] - ends[0] + 1 < count:
            self.add(f"dask_worker_port_range={show(text)} must be FIRST:LAST within 1-65535 with room for {count} "
                     f"workers (it has room for {ends[1] - ends[0] + 1})")

    # -- 4. the inventory (once)
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
        self.check_controller_folder()
        retired = [str(host) for host in as_sequence(self.cluster.get("retired_hosts"))]
        if retired and not as_sequence(self.cluster.get("worker_hosts")):
            self.inventory(f"dask_host_state=retired on every worker host ({', '.join(retired)}): their workers' "
                           "data would have nowhere to go and the cluster no worker. Retire fewer hosts at once, "
                           "or tear the cluster down (playbooks/teardown.yml)")
        release, major = self.get("dask_rapids_release"), self.get("dask_cuda_major")
        if release is not None and major is not None:
            pins = f"rapids-{release}-cuda{major}.txt"
            if pins not in self.pins:
                self.inventory(f"dask_rapids_release={release} with dask_cuda_major={major}: no pins file "
                               f"images/pins/{pins}; RAPIDS publishes no wheel set for it here (make one with "
                               "scripts/pin-versions.py)")

    def check_folders(self) -> None:
        """No folder whose content teardown keeps lies inside one it removes whole (every folder setting, through the
        host's model)."""
        for kept, tree in kept_inside_trees(list(as_sequence(self.model.get("folders")))):
            self.add(f"the folder {kept} (its content is kept by teardown) lies inside {tree}, which teardown removes "
                     "whole: give the folder settings (dask_config_dir, dask_data_dir, dask_notebook_dir, "
                     "dask_images_work_dir) folders that do not hold each other")

    def check_controller_folder(self) -> None:
        """A controller folder is its CA's cluster's: another cluster would take its CA, certificates, notebook
        token and client bundle (and overwrite the bundle)."""
        found, own = pki.common_name(self.controller_ca), str(self.cluster.get("ca_name") or "")
        if found and own and found != own:
            folder = as_mapping(self.cluster.get("paths")).get("controller", "")
            self.inventory(f"dask_controller_dir ({folder}) holds the CA of cluster {ca_cluster(found)} "
                           f"({folder}/tls/ca.crt, {found!r}), its certificates, notebook token and client bundle; "
                           f"cluster {self.cluster.get('name')} needs a controller folder of its own: leave "
                           "dask_controller_dir unset for it (INVENTORY_DIR/artifacts/NAME) or give it another "
                           "folder")

    # -- 5. this host's facts
    def interfaces(self) -> list[str]:
        return [str(name) for name in as_sequence(self.facts.get("interfaces"))]

    def interface_address(self, interface: str) -> str:
        found = as_mapping(self.facts.get(interface.replace("-", "_")))
        return str(as_mapping(found.get("ipv4")).get("address") or "")

    def host_addresses(self) -> list[str]:
        addresses = [str(address) for address in as_sequence(self.facts.get("all_ipv4_addresses"))]
        for interface in self.interfaces():
            found = as_mapping(self.facts.get(interface.replace("-", "_")))
            entries = [as_mapping(found.get("ipv4"))] + [as_mapping(entry) for entry in
                                                      as_sequence(found.get("ipv4_secondaries"))]
            addresses += [str(entry["address"]) for entry in entries if entry.get("address")]
        return list(dict.fromkeys(addresses))

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
        elif "dask_cluster_address" not in self.refused and "dask_cluster_interface" not in self.refused \
                and not self.model.get("bind_address"):
            self.add(f"no IPv4 address to bind (dask_cluster_address={show(address)}, dask_cluster_interface="
                     f"{show(interface)}, and the default route has none; interfaces: {interfaces}). Set "
                     "dask_cluster_interface or dask_cluster_address.")
        # Several hosts given one address in dask_cluster_address: the scheduler, the workers and the firewall tell
        # hosts apart by it. Addresses found in the facts (an interface's, the default route's) are each machine's
        # own: two inventory names that found one there are one machine (as tests bind every host to lo).
        mine = str(self.model.get("bind_address") or "")
        sharing = sorted(str(host) for host, other in as_mapping(self.cluster.get("hosts")).items()
                         if str(host) != self.host and other == mine)
        if mine and sharing and address:
            self.add(f"dask_cluster_address ({show(mine)}) is also the cluster address of {', '.join(sharing)}: each "
                     "host needs an address of its own (the scheduler, the workers and the firewall tell hosts apart "
                     "by it). Set each host's dask_cluster_address to one of its own addresses, or leave it empty "
                     "for its default route's")
        bind = self.get("dask_dashboard_bind")
        if self.is_scheduler and bind is not None and not ipaddress.IPv4Address(bind).is_unspecified \
                and not ipaddress.IPv4Address(bind).is_loopback and bind not in self.host_addresses():
            self.add(f"dask_dashboard_bind ({show(bind)}) is not 127.0.0.1, 0.0.0.0 or an IPv4 address of this host "
                     f"(its addresses: {', '.join(self.host_addresses()) or 'none'})")

    def check_host_memory(self) -> None:
        """The workers' memory limits and /dev/shm (a tmpfs in the host's memory) fit the host (the probe's
        MemTotal)."""
        memory = as_int(self.gpus.get("memory_bytes"))
        count = int(self.model.get("worker_count") or 0)
        if not memory or not count:
            return
        have = f"{memory / 2 ** 30:.1f} GiB"
        limit = self.get("dask_worker_memory_limit")
        parsed = parse_size(limit) if limit and limit != "auto" else None
        if parsed and parsed[0] == "bytes" and parsed[1] * count > memory:
            self.add(f"dask_worker_memory_limit ({show(limit)}) for each of its {count} worker(s) is more than the "
                     f"host's memory ({have}): workers would be killed by the kernel, not paused by Dask. Use a "
                     "smaller size or auto (the host's memory shared by its workers)")
        shm = self.get("dask_worker_shm_size")
        parsed = parse_size(shm) if shm and shm != "auto" else None
        if parsed and parsed[0] == "bytes" and parsed[1] > memory:
            self.add(f"dask_worker_shm_size ({show(shm)}) is more than the host's memory ({have}): /dev/shm is "
                     "held in memory. Use a smaller size")

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
        if "dask_worker_gpus" not in self.refused:
            names = known_names(self.gpus)
            for entry in self.model.get("gpu_selection_unknown") or []:
                self.add(f"dask_worker_gpus entry {show(entry)} is not a GPU of this host (this host has "
                         f"{as_int(self.gpus.get('count')) or 0} GPUs: {', '.join(names) or 'none'})")
            for entry, first in self.model.get("gpu_selection_twice") or []:
                twice = "listed twice" if first == entry else f"the same GPU as {show(first)}, listed twice"
                self.add(f"dask_worker_gpus entry {show(entry)} is {twice} (one Dask worker per GPU)")
        self.check_memory()
        self.check_health()

    def check_health(self) -> None:
        """GPUs the health rules find unfit: refused with dask_worker_gpu_health fail; with exclude, a host left
        without any fit GPU cannot run its workers."""
        unfit = self.model.get("gpus_unfit") or []
        policy = self.get("dask_worker_gpu_health")
        described = "; ".join(f"GPU {gpu['index']} ({gpu['uuid']}): {', '.join(gpu['problems'])}" for gpu in unfit)
        if unfit and policy == "fail":
            self.add(f"unfit GPUs (dask_worker_gpu_health: fail): {described}. Fix or replace them, or set "
                     "dask_worker_gpu_health: exclude to run without them (docs/gpu-health.md)")
        elif unfit and policy == "exclude" and not self.model.get("worker_gpus"):
            self.add(f"every selected GPU of this host is unfit: {described}; no worker can run here. Fix them, move "
                     "the host to dask_cpu_workers, or set dask_worker_gpu_health: ignore (docs/gpu-health.md)")

    def check_memory(self) -> None:
        sizes = [(mib, gpu) for gpu in self.model.get("worker_gpus") or [] for mib in [as_int(gpu.get("memory_mib"))]
                 if mib]
        if not sizes:
            return
        mib, smallest = min(sizes, key=lambda item: item[0])
        for name in ("dask_worker_device_memory_limit", "dask_worker_rmm_pool_size", "dask_dataframe_partition_size"):
            value = self.get(name)
            parsed = parse_size(value) if value else None
            if parsed and parsed[0] == "bytes" and parsed[1] > mib * 2 ** 20:
                self.add(f"{name} ({show(value)}) is larger than the memory of GPU {smallest.get('index')} "
                         f"({smallest.get('name')}, {mib} MiB), the smallest selected GPU; use a smaller size or a "
                         "fraction")

    # -- 6. the other clusters on this host (their records), and a deployment by an earlier release
    def check_other_clusters(self) -> None:
        if self.model.get("retired"):
            return
        claims = (self.model.get("record") or {}).get("claims") or {}
        for message in records.collisions(claims, self.model.get("other_clusters") or {}):
            self.add(message)
        name = self.get("dask_cluster_name")
        holder = self.model.get("record_name")
        if name is not None and holder not in (None, name):
            self.add(records.normalised_collision(str(name), str(holder)))
        if self.model.get("legacy") and name is not None and name != "dask":
            self.add(f"an earlier release of the bundle deployed a cluster here under the names dask-scheduler, "
                     f"dask-worker, /etc/dask and /var/lib/dask (it kept no cluster record); with "
                     f"dask_cluster_name={name} this cluster's names are dask-{name}-*, so both would run. Tear the "
                     "old one down first (ansible-playbook playbooks/teardown.yml -e dask_cluster_name=dask; your "
                     "controller's artifacts stay), or keep dask_cluster_name: dask to adopt it (docs/clusters.md)")

    # -- 7. each feature's own checks
    def check_features(self) -> None:
        inp = CheckInput(host=self.host, get=self.get, model=self.model, cluster=self.cluster,
                         groups=self.groups, facts=self.facts)
        for feature in FEATURES:
            for message in feature.checks(inp) if feature.checks is not None else []:
                if message.startswith("inventory: "):
                    self.inventory(message[len("inventory: "):])
                else:
                    self.add(message)

    def run(self) -> list[str]:
        self.check_options()
        self.check_scope()
        self.check_rules()
        self.check_ports()
        self.check_folders()
        self.check_inventory()
        self.check_addresses()
        if (self.is_worker or self.is_cuda) and self.facts_read:
            self.check_gpus()
        if self.is_worker and self.facts_read:
            self.check_host_memory()
        self.check_other_clusters()
        self.check_features()
        return self.problems


def problems(context: Any) -> list[str]:
    """Every problem of one host (see the module docstring); [] when there is none."""
    context = as_mapping(context)
    try:
        return Checker(context).run()
    except Exception as error:  # noqa: BLE001 - never raise: a failing check is itself a problem
        return [f"host {context.get('host', '?')}: the checks could not finish ({type(error).__name__}: {error}); "
                "this is a bug in the dask_gpu.bundle collection (plugins/plugin_utils/checks.py)"]


def hosts_problems(hosts: list[str], hostvars: Mapping[str, Any], common: Mapping[str, Any]) -> list[str]:
    """Every problem of every host, in one controller task (the play's hosts, in order). `common`: specs, groups,
    cluster and pins (the same for all), and given and given_names ({host: the variables set for it, their names}, as
    the role read them); each host's facts, GPUs and model come from hostvars (ansible_facts, gpu_facts_found,
    dask_host). The first host also runs the inventory-wide checks. One task for all hosts passes the cluster model,
    which grows with the host count, once instead of once per host."""
    given, names = as_mapping(common.get("given")), as_mapping(common.get("given_names"))
    shared = {key: value for key, value in common.items() if key not in ("given", "given_names")}
    # The scheduler host (as the cluster model takes it; the first host where it is not in this play), whose values
    # of the cluster-wide options every host must have.
    schedulers = as_sequence(as_mapping(common.get("groups")).get("dask_scheduler"))
    reference = str(schedulers[0]) if schedulers and str(schedulers[0]) in hosts else (hosts[0] if hosts else "")
    if reference:
        all_hosts = [str(host) for host in as_sequence(as_mapping(common.get("groups")).get("all"))]
        shared["reference_host"] = reference
        shared["reference_settings"] = typing.typed(
            typing.resolve(as_mapping(given.get(reference)), as_mapping(common.get("specs"))),
            as_mapping(common.get("specs")), all_hosts).settings
    found: list[str] = []
    for index, host in enumerate(hosts):
        values = hostvars[host]
        found += problems({**shared, "host": host,
                           "settings": typing.resolve(as_mapping(given.get(host)), as_mapping(common.get("specs"))),
                           "set": as_sequence(names.get(host)), "facts": values.get("ansible_facts"),
                           "gpus": values.get("gpu_facts_found"), "host_model": values.get("dask_host"),
                           "inventory_checks": index == 0})
    return found


__all__ = ["Checker", "group", "hosts_problems", "problems"]
