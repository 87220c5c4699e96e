"""The cluster model: derived facts from settings, groups and host facts."""
from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import yaml
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils import settings as typing
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.features import images
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.gpus import select
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.transport import facets

ROOT = Path(__file__).resolve().parents[2]
GROUPS = {"dask_scheduler": ["s1"], "dask_cuda_workers": ["g1", "g2"], "dask_cpu_workers": ["c1"]}
TWO_GPUS = {"count": 2, "driver_version": "580.1", "gpus": [{"index": 0}, {"index": 1}]}


def specs() -> dict[str, dict[str, Any]]:
    out = {}
    for path in sorted((ROOT / "roles").glob("*/meta/argument_specs.yml")):
        out[path.parts[-3]] = yaml.safe_load(path.read_text())["argument_specs"]["main"]["options"]
    return out


def settings(model: ModuleType, **values: Any) -> dict[str, Any]:
    base = {"dask_rapids_release": "26.10", "dask_cuda_major": "12", "dask_image_profile": "lean",
            "dask_base_image": "debian:bookworm-slim", "dask_repo_dir": "/repo", "dask_controller_dir": "/ctl"}
    return typing.typed_settings({**base, **values}, specs(), ["s1", "g1", "g2", "c1"])


def test_settings_take_the_inventory_value_else_the_spec_default(model: ModuleType) -> None:
    resolved = settings(model, dask_scheduler_port=9786)
    assert resolved["dask_scheduler_port"] == 9786
    assert resolved["dask_dashboard_port"] == 8787
    assert resolved["dask_worker_nthreads"] == 0


def test_role_defaults_equal_their_spec_defaults() -> None:
    """The model resolves from the specs; a role's defaults/main.yml must say the same."""
    for role, options in specs().items():
        defaults = ROOT / "roles" / role / "defaults" / "main.yml"
        for name, value in (yaml.safe_load(defaults.read_text()) or {}).items() if defaults.exists() else []:
            if isinstance(value, str) and "{{" in value:
                continue  # computed defaults (the .env lookups) have no static spec default
            assert options[name].get("default") == value, f"{role}: {name} default {value!r} != spec"


def test_worker_mode_count_and_threads_per_host(model: ModuleType) -> None:
    facts = {"default_ipv4": {"address": "10.0.0.5"}}
    gpu = model.host_model("g1", settings(model), facts, TWO_GPUS, GROUPS)
    shape = (gpu["worker_mode"], gpu["worker_count"], gpu["worker_nthreads"], gpu["needs_toolkit"])
    assert shape == ("gpu", 2, 1, True)
    picked = model.host_model("g1", settings(model, dask_worker_gpus=["1"]), facts, TWO_GPUS, GROUPS)
    assert picked["worker_count"] == 1
    # A CPU worker's threads default to the host's CPUs, as the probe reads them (not the hardware facts).
    fallback = model.host_model("g2", settings(model), facts, {"count": 0, "vcpus": 16}, GROUPS)
    assert (fallback["worker_mode"], fallback["worker_count"], fallback["worker_nthreads"]) == ("cpu", 1, 16)
    assert model.host_model("g2", settings(model), {**facts, "processor_vcpus": 8}, {"count": 0},
                            GROUPS)["worker_nthreads"] == 1
    scheduler = model.host_model("s1", settings(model), facts, {"count": 0}, GROUPS)
    assert (scheduler["scheduler"], scheduler["worker"], scheduler["worker_count"]) == (True, False, 0)
    # A scheduler host with a GPU gets the toolkit when the images may carry cuDF (its container gets the GPU then):
    # the full profile, or your own images (the probe tells later); not with lean.
    for values, wanted in (({}, False), ({"dask_image_profile": "full"}, True),
                           ({"dask_images_worker_image": "team/w:1", "dask_images_scheduler_image": "team/s:1"}, True)):
        gpu_scheduler = model.host_model("s1", settings(model, **values), facts, TWO_GPUS, GROUPS)
        assert gpu_scheduler["needs_toolkit"] is wanted, values


def test_bind_address_prefers_address_then_interface_then_default_route(model: ModuleType) -> None:
    facts = {"default_ipv4": {"address": "10.0.0.5"}, "ib0": {"ipv4": {"address": "192.168.9.5"}},
             "en_p1": {"ipv4": {"address": "172.16.0.5"}}}
    assert model.bind_address({}, facts) == "10.0.0.5"
    assert model.bind_address({"dask_cluster_interface": "ib0"}, facts) == "192.168.9.5"
    assert model.bind_address({"dask_cluster_interface": "en-p1"}, facts) == "172.16.0.5"
    pinned = {"dask_cluster_interface": "ib0", "dask_cluster_address": "10.9.9.9"}
    assert model.bind_address(pinned, facts) == "10.9.9.9"
    assert model.bind_address({"dask_cluster_interface": "eth7"}, facts) == ""


def test_cluster_counts_every_worker_and_expects_unreachable_hosts(model: ModuleType) -> None:
    facts = {"default_ipv4": {"address": "10.0.0.5"}}
    resolved = settings(model)
    hosts = {name: model.host_model(name, resolved, facts, TWO_GPUS if name.startswith("g") else {"count": 0},
                                    GROUPS) for name in ("s1", "g1", "c1")}  # g2 was unreachable
    cluster = model.cluster_model(resolved, hosts, GROUPS, "abc123def456")
    assert cluster["workers_per_host"] == {"g1": 2, "g2": 1, "c1": 1}
    assert cluster["expected_workers"] == 4
    assert cluster["expected_gpus"] == 2
    assert cluster["gpu_hosts"] == ["g1"] and cluster["cpu_hosts"] == ["g2", "c1"]
    assert cluster["scheduler_address"] == "tls://10.0.0.5:8786"
    assert cluster["images"]["worker"] == "dask-gpu-worker:26.10-cuda12-lean-abc123def456"
    registry = model.cluster_model(settings(model, dask_images_distribution="registry",
                                            dask_images_registry="reg:5000"), hosts, GROUPS, "abc123def456")
    assert registry["images"]["scheduler"].startswith("reg:5000/dask-gpu-scheduler:")
    assert registry["images"]["registry"] is None and registry["images"]["distribution"] == "registry"


def test_cluster_registry_runs_on_the_scheduler_host_and_the_build_host_pushes_when_it_is_a_cluster_host(
        model: ModuleType) -> None:
    hosts = {"s1": {"bind_address": "10.0.0.5"}, "g1": {"bind_address": "10.0.0.6"}, "c1": {"bind_address": "10.0.0.7"}}
    ours = model.cluster_model(settings(model, dask_images_distribution="cluster-registry"), hosts, GROUPS, "abc")
    assert ours["images"]["registry"] == {"host": "s1", "address": "10.0.0.5:5000", "port": 5000, "push_host": "s1"}
    assert ours["images"]["worker"] == "10.0.0.5:5000/dask-gpu-worker:26.10-cuda12-lean-abc"
    assert ours["images"]["repositories"]["scheduler"] == "10.0.0.5:5000/dask-gpu-scheduler"
    elsewhere = model.cluster_model(settings(model, dask_images_distribution="cluster-registry",
                                             dask_images_registry_host="c1", dask_images_registry_port=5443,
                                             dask_images_build_host="g1"), hosts, GROUPS, "abc")
    # The build host g1 is a cluster host: it pushes its own images, the controller sends none.
    assert elsewhere["images"]["registry"] == {"host": "c1", "address": "10.0.0.7:5443", "port": 5443,
                                               "push_host": "g1"}


def test_transport_sets_client_and_worker_protocols() -> None:
    names = ("tls", "tls-ucx", "ucx", "tcp")
    pairs = {name: (facets(name)["client_protocol"], facets(name)["protocol"]) for name in names}
    assert pairs == {"tls": ("tls", "tls"), "tls-ucx": ("tls", "ucx"), "ucx": ("ucx", "ucx"), "tcp": ("tcp", "tcp")}
    # What the firewall reads: clients talk to the workers directly with tls and ucx, the scheduler only otherwise.
    assert [name for name in names if facets(name)["clients_reach_workers"]] == ["tls", "ucx"]
    assert facets("tls-ucx")["scheduler_second_listener"] and not facets("tls")["scheduler_second_listener"]


def test_tls_ucx_gives_clients_tls_and_workers_the_ucx_listener(model: ModuleType) -> None:
    hosts = {"s1": {"bind_address": "10.0.0.5"}, "g1": {"worker_mode": "gpu", "worker_count": 2}}
    cluster = model.cluster_model(settings(model, dask_transport="tls-ucx"), hosts, GROUPS, "abc123def456")
    assert cluster["tls"] is True and cluster["protocol"] == "ucx"
    assert cluster["scheduler_address"] == "tls://10.0.0.5:8786"
    assert cluster["worker_scheduler_address"] == "ucx://10.0.0.5:8788"
    plain = model.cluster_model(settings(model), hosts, GROUPS, "abc123def456")
    assert plain["worker_scheduler_address"] == plain["scheduler_address"] == "tls://10.0.0.5:8786"
    assert plain["scheduler_ucx_port"] is None


def topology(count: int, link: str, nvlinked: tuple[tuple[int, int], ...] = ()) -> dict[str, Any]:
    """A gpu_topology fact: every pair `link`, the pairs in `nvlinked` NV4."""
    links = {f"{a}-{b}": ("NV4" if (a, b) in nvlinked else link) for a in range(count) for b in range(a + 1, count)}
    pairs = [[int(x) for x in pair.split("-")] for pair, kind in links.items() if kind.startswith("NV")]
    return {"gpus": list(range(count)), "links": links, "nvlink_pairs": pairs,
            "all_pairs_nvlink": bool(links) and len(pairs) == len(links),
            "matrix": {f"GPU{a}": {f"GPU{b}": links[f"{min(a, b)}-{max(a, b)}"] for b in range(count) if b != a}
                       for a in range(count)}}


def gpu_host(count: int, topo: dict[str, Any] | None, wanted: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    """A GPU host's model with `count` GPUs, its workers on `wanted` (dask_worker_gpus; all when None)."""
    gpus = [{"index": i, "uuid": f"GPU-{i}", "mig": [f"MIG-{i}a", f"MIG-{i}b"]} for i in range(count)]
    workers = select(wanted or [], {"gpus": gpus}).gpus
    return {"name": "g1", "worker_mode": "gpu", "worker_count": len(workers), "gpus": gpus, "worker_gpus": workers,
            "topology": topo or {}, **extra}


def test_host_model_carries_the_topology_and_whether_its_worker_gpus_are_nvlinked(model: ModuleType) -> None:
    facts = {"default_ipv4": {"address": "10.0.0.5"}}
    linked = {**TWO_GPUS, "topology": topology(2, "NV18")}
    host = model.host_model("g1", settings(model), facts, linked, GROUPS)
    assert host["nvlink"] is True and host["topology"]["links"] == {"0-1": "NV18"}
    pcie = model.host_model("g1", settings(model), facts, {**TWO_GPUS, "topology": topology(2, "PIX")}, GROUPS)
    assert pcie["nvlink"] is False
    unknown = model.host_model("g1", settings(model), facts, TWO_GPUS, GROUPS)  # an older probe: no topology
    assert (unknown["nvlink"], unknown["topology"]) == (False, {})
    one = model.host_model("g1", settings(model, dask_worker_gpus=["1"]), facts, linked, GROUPS)
    assert one["nvlink"] is False  # one worker GPU: nothing to link
    four = {"count": 4, "gpus": [{"index": i} for i in range(4)], "topology": topology(4, "SYS", ((0, 1), (2, 3)))}
    assert model.host_model("g1", settings(model, dask_worker_gpus=["2", "3"]), facts, four, GROUPS)["nvlink"]
    assert not model.host_model("g1", settings(model), facts, four, GROUPS)["nvlink"]
    cpu = model.host_model("c1", settings(model), facts, linked, GROUPS)
    assert cpu["nvlink"] is False


def test_multi_gpu_hosts_on_tcp_are_advised_to_use_ucx(model: ModuleType) -> None:
    four = {"name": "g1", "worker_mode": "gpu", "worker_count": 4}
    assert "dask_transport: tls-ucx" in model.advice(four, {"dask_transport": "tls"})[0]
    assert model.advice(four, {"dask_transport": "tls-ucx"}) == []
    assert model.advice(four, {"dask_transport": "ucx"}) == []
    assert model.advice({**four, "worker_count": 1}, {"dask_transport": "tls"}) == []
    assert model.advice({**four, "worker_mode": "cpu"}, {"dask_transport": "tcp"}) == []


def test_advice_names_the_nvlink_of_the_worker_gpus(model: ModuleType) -> None:
    [text] = model.advice(gpu_host(4, topology(4, "NV18")), {"dask_transport": "tls"})
    assert text.startswith("host g1: 4 GPU workers talk over TCP (dask_transport=tls); ")
    assert "GPUs 0-3 are connected by NVLink (NV18)" in text
    assert "10-100 times slower than over UCX on 4 x H200" in text
    assert "Set dask_transport: tls-ucx to move data over NVLink" in text
    [two] = model.advice(gpu_host(2, topology(2, "NV18")), {"dask_transport": "tcp"})
    assert "(dask_transport=tcp); GPUs 0 and 1 are connected by NVLink (NV18)" in two


def test_advice_for_pcie_only_gpus_keeps_the_variable_without_nvlink(model: ModuleType) -> None:
    [text] = model.advice(gpu_host(4, topology(4, "SYS")), {"dask_transport": "tls"})
    assert "GPUs 0-3 have no NVLink (PCIe only)" in text and "Python's socket and TLS layers" in text
    assert "UCX gains less here" in text and "10-100 times" in text
    assert "Set dask_transport: tls-ucx" in text
    assert "NVLink (NV" not in text and "over NVLink" not in text


def test_advice_counts_partly_nvlinked_and_selected_gpus(model: ModuleType) -> None:
    partial = topology(4, "SYS", ((0, 1), (2, 3)))
    [text] = model.advice(gpu_host(4, partial), {"dask_transport": "tls"})
    assert "NVLink (NV4) connects 2 of the 6 pairs of GPUs 0-3, the others are PCIe only" in text
    pair = gpu_host(4, partial, ["GPU-2", "3"])  # two workers, on GPUs 2 and 3 (by UUID and index)
    [text] = model.advice(pair, {"dask_transport": "tls"})
    assert "GPUs 2 and 3 are connected by NVLink (NV4)" in text
    [text] = model.advice(gpu_host(4, partial, ["0", "2"]), {"dask_transport": "tls"})
    assert "GPUs 0 and 2 have no NVLink (PCIe only)" in text


def test_advice_without_a_topology_says_it_is_unknown(model: ModuleType) -> None:
    [text] = model.advice(gpu_host(2, None), {"dask_transport": "tls"})
    assert "NVLink topology is unknown (nvidia-smi topo -m gave none)" in text
    assert "10-100 times" in text and "Set dask_transport: tls-ucx" in text
    [mig] = model.advice(gpu_host(1, topology(1, "X"), ["MIG-0a", "MIG-0b"]), {})
    assert "unknown" not in mig and "Set dask_transport: tls-ucx" in mig


def test_ucx_keeps_to_the_cluster_interface(model: ModuleType) -> None:
    """UCX_NET_DEVICES: the interface of the bind address (not docker0), the setting when given, none on lo."""
    facts = {"interfaces": ["lo", "docker0", "eth0"], "default_ipv4": {"address": "10.0.0.5"},
             "eth0": {"device": "eth0", "ipv4": {"address": "10.0.0.5"}},
             "docker0": {"device": "docker0", "ipv4": {"address": "172.17.0.1"}},
             "lo": {"device": "lo", "ipv4": {"address": "127.0.0.1"}}}
    assert model.host_model("s1", settings(model), facts, {}, GROUPS)["ucx_net_devices"] == "eth0"
    ib = settings(model, dask_ucx_net_devices="mlx5_0:1,eth0")
    assert model.host_model("s1", ib, facts, {}, GROUPS)["ucx_net_devices"] == "mlx5_0:1,eth0"
    local = settings(model, dask_cluster_address="127.0.0.1")
    assert model.host_model("s1", local, facts, {}, GROUPS)["ucx_net_devices"] == ""


def monitored(model: ModuleType, groups: dict[str, list[str]], **values: Any) -> dict[str, Any]:
    """The monitoring part of a cluster model: s1 10.0.0.1, g1 10.0.0.2 (2 GPUs), g2 10.0.0.3, c1 10.0.0.4."""
    resolved = settings(model, dask_monitoring_enabled=True, **values)
    addresses = {"s1": "10.0.0.1", "g1": "10.0.0.2", "g2": "10.0.0.3", "c1": "10.0.0.4"}
    hosts = {name: model.host_model(name, resolved, {"default_ipv4": {"address": address}},
                                    TWO_GPUS if name.startswith("g") else {"count": 0}, groups)
             for name, address in addresses.items()}
    return dict(model.cluster_model(resolved, hosts, groups, "abc")["monitoring"])


def test_monitoring_targets_come_from_the_inventory_one_per_worker_on_fixed_ports(model: ModuleType) -> None:
    monitoring = monitored(model, GROUPS)
    assert (monitoring["enabled"], monitoring["host"], monitoring["scheduler_target"]) == (True, "s1", "127.0.0.1:8787")
    workers = [(config["targets"][0], config["labels"]) for config in monitoring["jobs"]["dask-workers"]]
    assert workers == [
        ("10.0.0.2:8790", {"host": "g1", "worker": "0", "mode": "gpu"}),
        ("10.0.0.2:8791", {"host": "g1", "worker": "1", "mode": "gpu"}),
        ("10.0.0.3:8790", {"host": "g2", "worker": "0", "mode": "gpu"}),
        ("10.0.0.3:8791", {"host": "g2", "worker": "1", "mode": "gpu"}),
        ("10.0.0.4:8790", {"host": "c1", "worker": "0", "mode": "cpu"})]
    nodes = [config["targets"][0] for config in monitoring["jobs"]["node"]]
    assert nodes == ["10.0.0.1:9100", "10.0.0.2:9100", "10.0.0.3:9100", "10.0.0.4:9100"]
    assert "dcgm" not in monitoring["jobs"]
    # Adding a host adds its targets; dcgm-exporter targets only on GPU hosts, only when asked.
    grown = monitored(model, {**GROUPS, "dask_cpu_workers": ["c1", "c2"]}, dask_monitoring_dcgm_exporter_port=9400)
    assert [config["labels"]["host"] for config in grown["jobs"]["dcgm"]] == ["g1", "g2"]
    # c2 has no model (unreachable when the facts were gathered): no address to scrape until a run reaches it.
    assert len(grown["jobs"]["dask-workers"]) == 5


def test_workers_serve_http_on_loopback_unless_monitoring_scrapes_them(model: ModuleType) -> None:
    facts = {"default_ipv4": {"address": "10.0.0.2"}}
    quiet = model.host_model("g1", settings(model), facts, TWO_GPUS, GROUPS)
    watched = model.host_model("g1", settings(model, dask_monitoring_enabled=True), facts, TWO_GPUS, GROUPS)
    assert (quiet["http_bind"], quiet["http_ports"]) == ("127.0.0.1", [8790, 8791])
    assert (watched["http_bind"], watched["http_ports"]) == ("10.0.0.2", [8790, 8791])


def test_monitoring_elsewhere_reaches_the_scheduler_only_on_a_bound_dashboard(model: ModuleType) -> None:
    elsewhere = {**GROUPS, "dask_monitoring": ["c1"]}
    assert monitored(model, elsewhere)["host"] == "c1"
    assert monitored(model, elsewhere)["scheduler_target"] == ""
    assert "dask-scheduler" not in monitored(model, elsewhere)["jobs"]
    assert monitored(model, elsewhere, dask_dashboard_bind="0.0.0.0")["scheduler_target"] == "10.0.0.1:8787"


def test_a_retired_host_leaves_every_list_of_the_cluster(model: ModuleType) -> None:
    facts = {"default_ipv4": {"address": "10.0.0.9"}}
    base = settings(model, dask_monitoring_enabled=True)
    hosts = {name: model.host_model(name, settings(model, dask_monitoring_enabled=True, dask_host_state="retired")
                                    if name == "g2" else base, facts, TWO_GPUS if name.startswith("g") else
                                    {"count": 0}, GROUPS) for name in ("s1", "g1", "g2", "c1")}
    assert hosts["g2"]["retired"] and not hosts["g1"]["retired"]
    cluster = model.cluster_model(base, hosts, GROUPS, "abc")
    assert cluster["retired_hosts"] == ["g2"]
    assert "g2" not in cluster["hosts"] and "g2" not in cluster["worker_hosts"]
    assert "g2" not in cluster["workers_per_host"] and cluster["expected_workers"] == 3  # g1's two GPUs and c1
    labelled = [config["labels"]["host"] for job in cluster["monitoring"]["jobs"].values() for config in job]
    assert labelled and "g2" not in labelled


def test_archive_distribution_is_advised_against_from_three_hosts(model: ModuleType) -> None:
    hosts = {"s1": {"bind_address": "10.0.0.5"}, "g1": {"bind_address": "10.0.0.6"}, "c1": {"bind_address": "10.0.0.7"}}
    archive = model.cluster_model(settings(model), hosts, GROUPS, "abc")
    assert len(archive["hosts"]) >= images.REGISTRY_ADVISED_FROM
    assert "dask_images_distribution: cluster-registry" in model.cluster_advice(archive)[0]
    ours = model.cluster_model(settings(model, dask_images_distribution="cluster-registry"), hosts, GROUPS, "abc")
    assert model.cluster_advice(ours) == []
    small = {"groups": {}, "hosts": {"s1": "10.0.0.5", "g1": "10.0.0.6"}, "images": {"distribution": "archive"}}
    assert model.cluster_advice(small) == []


def test_auto_distribution_takes_the_cluster_registry_from_eight_hosts_with_tls(model: ModuleType) -> None:
    def fleet(count: int, **values: Any) -> dict[str, Any]:
        names = [f"c{index}" for index in range(1, count)]
        groups = {"all": ["s1", *names], "dask_scheduler": ["s1"], "dask_cpu_workers": names}
        hosts = {host: {"bind_address": f"10.0.1.{index + 1}"} for index, host in enumerate(groups["all"])}
        return dict(model.cluster_model(settings(model, **values), hosts, groups, "abc")["images"])

    assert images.AUTO_REGISTRY_FROM == 8
    seven, eight = fleet(7), fleet(8)
    assert (seven["distribution"], seven["distribution_setting"], seven["registry"]) == ("archive", "auto", None)
    assert (eight["distribution"], eight["distribution_setting"]) == ("cluster-registry", "auto")
    assert eight["registry"]["host"] == "s1" and eight["worker"].startswith("10.0.1.1:5000/dask-gpu-worker:")
    # The registry takes the hosts' TLS certificates: without TLS, auto stays with the archive.
    assert fleet(20, dask_transport="tcp", dask_tls_disabled_ack=True)["distribution"] == "archive"
    assert fleet(20, dask_images_distribution="archive")["distribution"] == "archive"


def test_the_turn_check_is_a_drop_in_of_the_clusters_own_worker_unit(model: ModuleType) -> None:
    facts = {"default_ipv4": {"address": "10.0.0.5"}}
    for name, unit in (("dask", "dask-worker"), ("green", "dask-green-worker")):
        resolved = settings(model, dask_cluster_name=name)
        hosts = {host: model.host_model(host, resolved, facts, {"count": 0}, GROUPS) for host in ("s1", "c1")}
        files = model.cluster_model(resolved, hosts, GROUPS, "abc")["autoscale"]
        assert files["turns_dropin"] == f"/etc/systemd/system/{unit}.service.d/dask-turns.conf"
        assert files["turns_script"].endswith("/gpu_turns.py")
