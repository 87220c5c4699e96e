"""Malformed inventories and variables are rejected by playbooks/check.yml (site.yml's first play) before
anything on a host changes, with a message naming the variable and the host. The hosts are this machine
through a local connection; check.yml only reads (facts, the GPU probe) and asserts. The bad-input cases run in
batches, one check.yml for cases that do not meet (batch_plan): 30 runs for 69 cases."""
from __future__ import annotations

import ast
import atexit
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
LOCAL = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable, "ansible_become": False}


def inventory(groups: dict[str, dict[str, Any]], all_vars: dict[str, Any] | None = None) -> dict[str, Any]:
    children = {name: {"hosts": {host: hostvars for host, hostvars in hosts.items()}} for name, hosts in groups.items()}
    return {"all": {"vars": {**LOCAL, **(all_vars or {})}, "children": children}}


GOOD = {"dask_scheduler": {"s1": {}}, "dask_cpu_workers": {"c1": {}}}


# The local hosts' facts (check.yml's one gathering play: network, distribution, local) are gathered once per host
# name and then read from a fact cache by the file's other runs (issue 38: about 1.5 CPU seconds a run, and CI runs
# pytest beside the sandbox). Every host here is this machine; check.yml's gathering itself runs in each host name's
# first run.
FACT_CACHE = Path(tempfile.mkdtemp(prefix="dask-check-facts-"))
atexit.register(shutil.rmtree, FACT_CACHE, ignore_errors=True)


def check_env() -> dict[str, str]:
    return dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
                ANSIBLE_GATHERING="smart", ANSIBLE_CACHE_PLUGIN="jsonfile",
                ANSIBLE_CACHE_PLUGIN_CONNECTION=str(FACT_CACHE), ANSIBLE_CACHE_PLUGIN_TIMEOUT="0")


def run_check(tmp_path: Path, inv: dict[str, Any], *args: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "hosts.yml"
    path.write_text(yaml.safe_dump(inv))
    env = check_env()
    return subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(path),
                           str(ROOT / "playbooks" / "check.yml"), *args], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=300)


def test_a_good_inventory_passes_and_changes_nothing(tmp_path: Path) -> None:
    result = run_check(tmp_path, inventory(GOOD))
    assert result.returncode == 0, result.stdout[-3000:]
    assert re.search(r"s1\s+: ok=\d+\s+changed=0", result.stdout)


def with_var(group: str, host: str, **variables: Any) -> dict[str, dict[str, Any]]:
    groups = {name: {h: dict(v) for h, v in hosts.items()} for name, hosts in GOOD.items()}
    groups[group][host].update(variables)
    return groups


CASES: list[tuple[str, dict[str, Any], dict[str, Any] | None, list[str]]] = [
    ("no scheduler", {"dask_cpu_workers": {"c1": {}}}, None,
     ["group dask_scheduler must hold exactly one host; it holds 0"]),
    ("two schedulers", {"dask_scheduler": {"s1": {}, "s2": {}}, "dask_cpu_workers": {"c1": {}}}, None,
     ["must hold exactly one host; it holds 2", "s1", "s2"]),
    ("empty worker groups", {"dask_scheduler": {"s1": {}}, "dask_cpu_workers": {}}, None,
     ["dask_cuda_workers and dask_cpu_workers are both empty"]),
    ("host in both worker groups", {"dask_scheduler": {"s1": {}}, "dask_cpu_workers": {"w1": {}},
                                    "dask_cuda_workers": {"w1": {}}}, None,
     ["w1 in both dask_cuda_workers and dask_cpu_workers"]),
    ("GPU worker without a GPU", {"dask_scheduler": {"s1": {}}, "dask_cuda_workers": {"g1": {}}}, None,
     ["host g1 is in dask_cuda_workers but has no usable GPU", "dask_worker_allow_cpu"]),
    ("invalid memory size", with_var("dask_cpu_workers", "c1", dask_worker_memory_limit="12 parsecs"), None,
     ["host c1", "dask_worker_memory_limit", "12 parsecs"]),
    ("fraction above one", with_var("dask_cpu_workers", "c1", dask_worker_device_memory_limit="1.5"), None,
     ["host c1", "dask_worker_device_memory_limit", "1.5"]),
    ("unknown CUDA major", GOOD, {"dask_cuda_major": "11"}, ["dask_cuda_major", "12, 13"]),
    ("release without wheels for the CUDA major", GOOD, {"dask_rapids_release": "25.02"},
     ["dask_rapids_release=25.02", "no pins file"]),
    ("TLS off with no consent", GOOD, {"dask_transport": "tcp"},
     ["dask_transport=tcp turns TLS off", "dask_tls_disabled_ack"]),
    ("scheduler and dashboard on one port", GOOD, {"dask_dashboard_port": 8786},
     ["dask_scheduler_port (8786) and dask_dashboard_port (8786) must be distinct"]),
    ("port out of range", GOOD, {"dask_scheduler_port": 70000}, ["dask_scheduler_port (70000)"]),
    ("non-integer thread count", with_var("dask_cpu_workers", "c1", dask_worker_nthreads="four"), None,
     ["dask_worker_nthreads", "four"]),
    ("no partition per worker", GOOD, {"dask_dataframe_partitions_per_worker": 0},
     ["dask_dataframe_partitions_per_worker", "1-1024"]),
    ("partition size that is no size", GOOD, {"dask_dataframe_partition_size": "big"},
     ["dask_dataframe_partition_size", "big"]),
    ("partition size of a few bytes", GOOD, {"dask_dataframe_partition_size": "64"},
     ["dask_dataframe_partition_size (\"64\") is under 1 MiB"]),
    ("malformed MIG UUID", with_var("dask_cpu_workers", "c1", dask_worker_gpus=["MIG-1234"]), None,
     ["host c1", "dask_worker_gpus entry \"MIG-1234\" is not a GPU index"]),
    ("build host outside the inventory", GOOD, {"dask_images_build_host": "ghost"},
     ["dask_images_build_host=ghost is neither localhost nor a host in the inventory"]),
    ("misspelt variable", with_var("dask_cpu_workers", "c1", dask_worker_rmm_pol_size="10GB"), None,
     ["host c1: unknown variable(s) dask_worker_rmm_pol_size"]),
    ("port range too small", with_var("dask_cpu_workers", "c1", dask_worker_port_range="9000"), None,
     ["host c1", "dask_worker_port_range=\"9000\""]),
    ("registry distribution without a registry", GOOD, {"dask_images_distribution": "registry"},
     ["dask_images_distribution=registry needs dask_images_registry"]),
    ("unknown image profile", GOOD, {"dask_image_profile": "huge"}, ["dask_image_profile", "lean, full, polars, cpu"]),
    ("cuDF spilling without cuDF", GOOD, {"dask_worker_cudf_spill": "true", "dask_image_profile": "lean"},
     ["host c1: dask_worker_cudf_spill=true needs cuDF in the images, which dask_image_profile=lean does not have"]),
    ("cpu profile with UCX", GOOD, {"dask_image_profile": "cpu", "dask_transport": "tls-ucx"},
     ["dask_transport=tls-ucx needs UCX (distributed-ucxx), which dask_image_profile=cpu does not have"]),
    ("extra package that would change Dask", GOOD, {"dask_images_extra_packages": "xgboost,dask<2020"},
     ["s1: dask_images_extra_packages: 'dask<2020' conflicts with the release's pin dask=="]),
    ("extra wheels folder that is not there", GOOD, {"dask_images_extra_wheels_dir": "/nonexistent/wheels"},
     ["dask_images_extra_wheels_dir=/nonexistent/wheels is not a folder on the controller"]),
    ("UCX everywhere with no consent", GOOD,
     {"dask_transport": "ucx", "dask_firewall_enabled": True},
     ["dask_transport=ucx turns TLS off", "dask_tls_disabled_ack"]),
    ("TLS for clients, UCX inside, without the firewall", GOOD,
     {"dask_transport": "tls-ucx"},
     ["dask_transport=tls-ucx needs dask_firewall_enabled: true"]),
    ("firewall source that is not an address", GOOD, {"dask_firewall_allowed_sources": ["10.0.0.0/33"]},
     ["dask_firewall_allowed_sources", "10.0.0.0/33"]),
    ("firewall opening the scheduler port to everyone", GOOD,
     {"dask_firewall_enabled": True, "dask_firewall_open_ports": [22, 8786]},
     ["dask_firewall_open_ports (22, 8786)", "dask_scheduler_port (8786)"]),
    ("own image reference that is malformed", GOOD, {"dask_images_worker_image": "Team Image:latest"},
     ["dask_images_worker_image", "Team Image:latest", "image reference"]),
    ("own scheduler image without a worker image", GOOD, {"dask_images_scheduler_image": "team/dask:1"},
     ["dask_images_scheduler_image is set without dask_images_worker_image"]),
    ("renewal window as long as the certificates' lifetime", GOOD, {"dask_tls_renew_days": "900"},
     ["dask_tls_renew_days (900) is not below dask_tls_cert_valid_days (825)"]),
    ("memory limit over the host's", with_var("dask_cpu_workers", "c1", dask_worker_memory_limit="100TB"), None,
     ["host c1: dask_worker_memory_limit", "worker(s) is more than the host"]),
    ("Docker's API on TCP without TLS", GOOD, {"docker_engine_daemon_config": {"hosts": ["tcp://0.0.0.0:2375"]}},
     ["docker_engine_daemon_config hosts (tcp://0.0.0.0:2375)", "without tlsverify"]),
    ("everyone as the firewall's allowed source", GOOD,
     {"dask_firewall_enabled": "true", "dask_firewall_allowed_sources": ["0.0.0.0/0"]},
     ["holds 0.0.0.0/0, which is everyone"]),
    ("two arguments in one", with_var("dask_cpu_workers", "c1", dask_worker_extra_args=["--nthreads 4"]), None,
     ["host c1: dask_worker_extra_args entry", "--nthreads 4", "is one argument with a space"]),
    ("cluster-wide setting given to one host", with_var("dask_cpu_workers", "c1", dask_scheduler_port="9999"), None,
     ["host c1: dask_scheduler_port (9999) differs from the cluster's (8786, as the scheduler host s1 has it)"]),
    ("two hosts claiming one address", {"dask_scheduler": {"s1": {"dask_cluster_address": "127.0.0.1"}},
                                        "dask_cpu_workers": {"c1": {"dask_cluster_address": "127.0.0.1"}}}, None,
     ["host c1: dask_cluster_address (\"127.0.0.1\") is also the cluster address of s1",
      "host s1: dask_cluster_address (\"127.0.0.1\") is also the cluster address of c1"]),
    ("every worker host retired", with_var("dask_cpu_workers", "c1", dask_host_state="retired"), None,
     ["dask_host_state=retired on every worker host (c1)"]),
    ("own image with packages for the bundle's build", GOOD,
     {"dask_images_worker_image": "team/dask:1", "dask_images_extra_packages": ["six"]},
     ["with dask_images_worker_image set, build your packages into your image"]),
    ("autoscale minimum above its maximum", GOOD,
     {"dask_autoscale_enabled": "true", "dask_autoscale_minimum": "2", "dask_autoscale_maximum": "1"},
     ["host s1: dask_autoscale_minimum=2 is above dask_autoscale_maximum=1"]),
    ("autoscale maximum above the inventory's workers", GOOD,
     {"dask_autoscale_enabled": True, "dask_autoscale_maximum": "5"},
     ["host s1: dask_autoscale_maximum=5 is above the 1 workers the inventory's worker hosts run"]),
    ("autoscale idle time of zero", GOOD, {"dask_autoscale_enabled": True, "dask_autoscale_idle": "0"},
     ["dask_autoscale_idle"]),
    ("autoscale cooldown below zero", GOOD, {"dask_autoscale_enabled": True, "dask_autoscale_cooldown": "-5"},
     ["dask_autoscale_cooldown"]),
    ("autoscale step of 0 %", GOOD, {"dask_autoscale_enabled": True, "dask_autoscale_step_down": "0"},
     ["dask_autoscale_step_down", "a fraction in (0, 1]"]),
    ("autoscale step above 100 %", GOOD, {"dask_autoscale_enabled": True, "dask_autoscale_step_down": 1.5},
     ["dask_autoscale_step_down", "a fraction in (0, 1]"]),
    ("GPUs shared without the autoscaler", GOOD,
     {"dask_autoscale_share_gpus": "true", "dask_autoscale_enabled": "false"},
     ["dask_autoscale_share_gpus needs dask_autoscale_enabled"]),
    ("autoscale by GPU while sharing GPUs", GOOD,
     {"dask_autoscale_enabled": "true", "dask_autoscale_by": "gpu", "dask_autoscale_share_gpus": "true"},
     ["host s1: dask_autoscale_by=gpu with dask_autoscale_share_gpus=true"]),
    ("autoscale by a unit it does not know", GOOD, {"dask_autoscale_enabled": True, "dask_autoscale_by": "rack"},
     ["dask_autoscale_by", "rack"]),
    ("autoscale without TLS", GOOD,
     {"dask_autoscale_enabled": True, "dask_transport": "tcp", "dask_tls_disabled_ack": True},
     ["dask_autoscale_enabled needs the cluster's TLS (dask_transport=tcp turns it off)"]),
    ("autoscale port on the scheduler's", GOOD, {"dask_autoscale_enabled": True, "dask_autoscale_port": 8786},
     ["dask_autoscale_port (8786)", "dask_scheduler_port (8786)"]),
    ("autoscale turned on for one host only", with_var("dask_cpu_workers", "c1", dask_autoscale_enabled="true"), None,
     ["host c1: dask_autoscale_enabled (true) differs from the cluster's (false, as the scheduler host s1 has it)"]),
]


Case = tuple[str, dict[str, Any], "dict[str, Any] | None", list[str]]
# Cases are checked in batches (issue 38: each check.yml run costs about 5 CPU seconds, and CI runs pytest beside
# the sandbox): cases with the same hosts and groups whose variables do not meet (a variable two cases share must
# have the same value in both) run in one check.yml, which reports every problem at once. Each case keeps its own
# test and asserts its messages among the failed check's problems, and that one of those names a variable of its
# own. A case whose messages come from another task (not the problem list) runs alone.
BATCH_SIZE = 8
# Alone: messages from another task than the problem list, or checks that others' values silence (the firewall's
# default, the cluster addresses, a GPU selection or an unfit GPU, which leave the host's GPU checks out).
ALONE = {"release without wheels for the CUDA major", "unknown CUDA major", "unknown image profile",
         "non-integer thread count", "port out of range", "no partition per worker", "GPU worker without a GPU",
         "TLS for clients, UCX inside, without the firewall", "two hosts claiming one address",
         "unfit GPU with dask_worker_gpu_health fail", "every selected GPU unfit", "GPU index the host does not have",
         "GPU UUID the host does not have", "GPU listed twice"}


def variables(case: Case) -> dict[tuple[str, str], Any]:
    """(host or 'all', name) -> value: what the case sets."""
    _, groups, all_vars, _ = case
    found = {("all", name): value for name, value in (all_vars or {}).items()}
    for hosts in groups.values():
        for host, hostvars in hosts.items():
            found.update({(host, name): value for name, value in hostvars.items()})
    return found


def shape(case: Case) -> tuple[tuple[str, tuple[str, ...]], ...]:
    return tuple(sorted((group, tuple(sorted(hosts))) for group, hosts in case[1].items()))


def agree(mine: dict[tuple[str, str], Any], theirs: dict[tuple[str, str], Any]) -> bool:
    """Two cases' variables can share one inventory: a name both set is set at the same place to the same value."""
    return not any(name == their_name and (place != their_place or value != their_value)
                   for (place, name), value in mine.items()
                   for (their_place, their_name), their_value in theirs.items())


def batch_plan(cases: list[Case]) -> list[list[Case]]:
    batches: list[list[Case]] = []
    for case in cases:
        mine = variables(case)
        for batch in batches:
            if case[0] in ALONE or batch[0][0] in ALONE or len(batch) >= BATCH_SIZE or shape(batch[0]) != shape(case):
                continue
            theirs = {key: value for other in batch for key, value in variables(other).items()}
            if agree(mine, theirs):
                batch.append(case)
                break
        else:
            batches.append([case])
    return batches


def merged(batch: list[Case]) -> dict[str, Any]:
    groups: dict[str, dict[str, dict[str, Any]]] = {}
    all_vars: dict[str, Any] = {}
    for _, case_groups, case_vars, _ in batch:
        for group, hosts in case_groups.items():
            for host, hostvars in hosts.items():
                groups.setdefault(group, {}).setdefault(host, {}).update(hostvars)
        all_vars.update(case_vars or {})
    return inventory(groups, all_vars)


def problems(output: str) -> list[str]:
    """The failed check's problem list (its one-line form, \"Task failed: Action failed: [...]\")."""
    found: list[str] = []
    for line in output.splitlines():
        if "Task failed: Action failed: [" in line:
            found += [" ".join(str(p).split()) for p in ast.literal_eval(line.split("Action failed: ", 1)[1])]
    return found


# One check.yml run per batch, kept for the batch's other cases (pytest-xdist's loadfile keeps a file on one worker).
_RUNS: dict[tuple[str, ...], tuple[int, str]] = {}


def checked(tmp_path: Path, case_id: str, cases: list[Case]) -> tuple[int, str, list[Case]]:
    for batch in batch_plan(cases):
        if any(case[0] == case_id for case in batch):
            key = tuple(case[0] for case in batch)
            if key not in _RUNS:
                result = run_check(tmp_path, merged(batch))
                _RUNS[key] = (result.returncode, result.stdout + result.stderr)
            return (*_RUNS[key], batch)
    raise KeyError(case_id)


def assert_refused(code: int, output: str, case: Case, batch: list[Case]) -> None:
    name, _, _, expected = case
    flat = re.sub(r"\s+", " ", output)
    assert code != 0, flat[-3000:]
    assert not re.search(r"changed=[1-9]", flat)
    if len(batch) == 1:
        for text in expected:
            assert re.sub(r"\s+", " ", text) in flat, f"{text!r} not in output:\n{flat[-3000:]}"
        return
    listed = problems(output)
    own = {key[1] for key in variables(case)} - {key[1] for other in batch if other is not case
                                                for key in variables(other)}
    for text in expected:
        matching = [p for p in listed if re.sub(r"\s+", " ", text) in p]
        assert matching, f"{name}: {text!r} not among the problems of its batch ({[c[0] for c in batch]}):\n{listed}"
    assert any(n in p for p in listed for n in own if any(re.sub(r"\s+", " ", t) in p for t in expected)), \
        f"{name}: no problem with its messages names one of its own variables {sorted(own)}:\n{listed}"


@pytest.mark.parametrize("case", CASES, ids=[case[0] for case in CASES])
def test_bad_input_is_rejected_with_a_clear_message(tmp_path: Path, case: Case) -> None:
    code, output, batch = checked(tmp_path, case[0], CASES)
    assert_refused(code, output, case, batch)


# GPU hosts: the probe queries a replay of a real 2 x H200 machine's nvidia-smi (tests/inventory/fixtures/).
SMI = str(Path(__file__).resolve().parent / "fixtures" / "nvidia-smi")
H200_UUID_1 = "GPU-a5a3d0c8-e07b-3948-f39d-210d64cd64d1"
SMI_QUERY = Path(__file__).resolve().parent / "fixtures" / "h200x2-nvidia-smi-query.csv"


def gpu_host(**variables: Any) -> dict[str, dict[str, Any]]:
    return {"dask_scheduler": {"s1": {}}, "dask_cuda_workers": {"g1": {"gpu_facts_nvidia_smi": SMI, **variables}}}


# The polars profile as docs/polars.md sets it (the firewall is rendered only: check.yml changes nothing).
POLARS = {"dask_cuda_major": "13", "dask_image_profile": "polars", "dask_firewall_enabled": True,
          "dask_polars_unencrypted_ack": True}


def test_the_polars_profile_passes_with_what_it_needs(tmp_path: Path) -> None:
    result = run_check(tmp_path, inventory(gpu_host(), POLARS))
    assert result.returncode == 0, result.stdout[-3000:]


def test_a_gpu_selection_by_index_and_uuid_passes(tmp_path: Path) -> None:
    result = run_check(tmp_path, inventory(gpu_host(dask_worker_gpus=["0", H200_UUID_1]), {"dask_cuda_major": "13"}))
    assert result.returncode == 0, result.stdout[-3000:]


def test_cdi_with_a_gpu_selection_passes(tmp_path: Path) -> None:
    result = run_check(tmp_path, inventory(gpu_host(dask_worker_gpus=["1"], dask_worker_gpu_request="cdi"),
                                           {"dask_cuda_major": "13"}))
    assert result.returncode == 0, result.stdout[-3000:]


def test_a_cdi_spec_you_provide_passes(tmp_path: Path) -> None:
    """A spec of the fixture's two GPUs (as nvidia-ctk cdi generate names them), read by the toolkit's probe."""
    uuids = [line.split(", ")[1] for line in SMI_QUERY.read_text().splitlines()]
    devices = [{"name": name, "containerEdits": {"deviceNodes": [{"path": f"/dev/nvidia{index}"}]}}
               for index, uuid in enumerate(uuids) for name in (str(index), uuid)]
    devices.append({"name": "all", "containerEdits": {"deviceNodes": [{"path": f"/dev/nvidia{index}"}
                                                                      for index in range(len(uuids))]}})
    spec = tmp_path / "site-gpus.yaml"
    spec.write_text(yaml.safe_dump({"cdiVersion": "0.5.0", "kind": "nvidia.com/gpu", "devices": devices}))
    result = run_check(tmp_path, inventory(gpu_host(dask_worker_gpus=["1"], dask_worker_gpu_request="cdi",
                                                    nvidia_container_toolkit_cdi_spec=str(spec)),
                                           {"dask_cuda_major": "13"}))
    assert result.returncode == 0, result.stdout[-3000:]


# NVML readings of the same two GPUs, GPU 1 with uncorrectable ECC errors and a row remap pending: a stand-in for a
# faulty GPU (gpu_facts_nvml_readings replays them instead of reading NVML).
UNFIT = str(Path(__file__).resolve().parent / "fixtures" / "h200x2-nvml-gpu1-unfit.json")


def test_an_unfit_gpu_is_left_out_and_named(tmp_path: Path) -> None:
    result = run_check(tmp_path, inventory(gpu_host(gpu_facts_nvml_readings=UNFIT), {"dask_cuda_major": "13"}))
    assert result.returncode == 0, result.stdout[-3000:]
    output = " ".join(result.stdout.split())
    assert f"host g1: GPU 1 ({H200_UUID_1}) is left out, unfit for work: 2 uncorrectable ECC errors since the " \
        "driver loaded, a remapped memory row waits for a GPU reset" in output, output[-3000:]


GPU_CASES: list[tuple[str, dict[str, Any], dict[str, Any] | None, list[str]]] = [
    ("unfit GPU with dask_worker_gpu_health fail", gpu_host(gpu_facts_nvml_readings=UNFIT,
                                                             dask_worker_gpu_health="fail"), None,
     ["host g1: unfit GPUs (dask_worker_gpu_health: fail)", f"GPU 1 ({H200_UUID_1}): 2 uncorrectable ECC errors"]),
    ("every selected GPU unfit", gpu_host(gpu_facts_nvml_readings=UNFIT, dask_worker_gpus=["1"]), None,
     ["host g1: every selected GPU of this host is unfit"]),
    ("GPU index the host does not have", gpu_host(dask_worker_gpus=["2"]), None,
     ["host g1: dask_worker_gpus entry \"2\" is not a GPU of this host", "has 2 GPUs"]),
    ("GPU UUID the host does not have", gpu_host(dask_worker_gpus=["GPU-00000000-0000-0000-0000-000000000000"]), None,
     ["host g1: dask_worker_gpus entry \"GPU-00000000-0000-0000-0000-000000000000\" is not a GPU of this host"]),
    ("GPU listed twice", gpu_host(dask_worker_gpus=["1", "1"]), None, ["\"1\"", "listed twice"]),
    ("RMM pool larger than the GPU", gpu_host(dask_worker_rmm_pool_size="500GB"), None,
     ["host g1", "dask_worker_rmm_pool_size (\"500GB\") is larger than the memory of GPU 0"]),
    ("data-frame partition larger than the GPU", gpu_host(dask_dataframe_partition_size="1TB"), None,
     ["host g1", "dask_dataframe_partition_size (\"1TB\") is larger than the memory of GPU 0"]),
    ("port range smaller than the GPU count", gpu_host(dask_worker_port_range="9000:9000"), None,
     ["host g1", "room for 2 workers"]),
    ("unknown GPU request", gpu_host(dask_worker_gpu_request="nvidia"), None,
     ["host g1", "dask_worker_gpu_request (\"nvidia\") must be one of gpus, cdi"]),
    ("the toolkit's old CDI switch", gpu_host(nvidia_container_toolkit_cdi=True), None,
     ["host g1: unknown variable(s) nvidia_container_toolkit_cdi (replaced by dask_worker_gpu_request: cdi"]),
    ("polars without its acknowledgement", gpu_host(), {**POLARS, "dask_polars_unencrypted_ack": False},
     ["host s1: dask_image_profile=polars starts rapidsmpf's UCXX communicator", "dask_polars_unencrypted_ack"]),
    ("polars without the firewall", gpu_host(), {**POLARS, "dask_firewall_enabled": "false"},
     ["host s1: dask_image_profile=polars needs dask_firewall_enabled: true"]),
    ("polars with an RMM pool", gpu_host(dask_worker_rmm_pool_size="0.5"), POLARS,
     ["host g1: dask_worker_rmm_pool_size (\"0.5\") with dask_image_profile=polars"]),
    ("polars with dask-cuda's UCX flags", gpu_host(dask_worker_extra_args=["--enable-nvlink"]), POLARS,
     ["host g1: dask_worker_extra_args (--enable-nvlink) with dask_image_profile=polars"]),
    ("polars with a small /dev/shm", gpu_host(dask_worker_shm_size="1GiB"), POLARS,
     ["host g1: dask_worker_shm_size (\"1GiB\") is under 2 GiB (1 GiB for each of the 2 GPU workers of this host)"]),
    ("/dev/shm of a few bytes", gpu_host(dask_worker_shm_size="64"), None,
     ["host g1: dask_worker_shm_size (\"64\") is under 1 MiB"]),
    ("/dev/shm that is no size", gpu_host(dask_worker_shm_size="0.5"), None, ["dask_worker_shm_size", "0.5"]),
    # (A dask_cuda_workers host without a GPU and with dask_worker_allow_cpu runs the cpu profile: the sandbox's
    # dask-w1 after the teardown suite's redeploy, molecule/default/vars/archive.yml.)
    ("cpu profile for a GPU worker host", gpu_host(), {"dask_image_profile": "cpu"},
     ["host g1: is in dask_cuda_workers and has 2 GPU(s), but dask_image_profile=cpu has no dask-cuda"]),
    ("polars on CPU workers", {"dask_scheduler": {"s1": {}}, "dask_cuda_workers": {"g1": {"gpu_facts_nvidia_smi": SMI}},
                               "dask_cpu_workers": {"c1": {}}}, POLARS,
     ["host c1: runs CPU workers, but dask_image_profile=polars"]),
    # The toolkit's probe (roles/nvidia_container_toolkit/tasks/probe.yml) reads this machine: no CDI spec there.
    ("a CDI spec you provide that is not there",
     gpu_host(dask_worker_gpu_request="cdi", nvidia_container_toolkit_cdi_spec="/nonexistent/dask-gpu-test/gpus.yaml"),
     None, ["host g1: nvidia_container_toolkit_cdi_spec (\"/nonexistent/dask-gpu-test/gpus.yaml\") is not a file on "
            "this host"]),
    # (Where this machine has the toolkit, the host is not marked installed where it is not.)
    *([("a toolkit marked installed where it is not", gpu_host(nvidia_container_toolkit_source="installed"), None,
        ["host g1: nvidia_container_toolkit_source=installed, but this host has no nvidia-ctk",
         "marked installed where it is not"])] if shutil.which("nvidia-ctk") is None else []),
]


@pytest.mark.parametrize("case", GPU_CASES, ids=[case[0] for case in GPU_CASES])
def test_bad_gpu_input_is_rejected(tmp_path: Path, case: Case) -> None:
    code, output, batch = checked(tmp_path, case[0], GPU_CASES)
    assert_refused(code, output, case, batch)


@pytest.mark.parametrize("tags", [["--skip-tags", "always"], ["--tags", "images", "--skip-tags", "always"],
                                  ["--skip-tags", "docker,always"]],
                         ids=["skip always", "one tag, skip always", "skip a tag and always"])
def test_a_run_that_skips_the_checks_is_refused(tmp_path: Path, tags: list[str]) -> None:
    """check.yml, which site.yml runs first (run here instead of site.yml: a guard that failed would not leave this
    machine to site.yml's other plays)."""
    path = tmp_path / "hosts.yml"
    path.write_text(yaml.safe_dump(inventory(GOOD)))
    env = check_env()
    result = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(path),
                             str(ROOT / "playbooks" / "check.yml"), *tags], capture_output=True, text=True, cwd=ROOT,
                            env=env, timeout=300)
    output = re.sub(r"\s+", " ", result.stdout + result.stderr)
    assert result.returncode != 0 and "--skip-tags always would skip the checks" in output, output[-3000:]
    assert "PLAY [Inventory, variables and host facts are checked" not in output, output[-3000:]


@pytest.mark.parametrize(("limit", "left_out"), [("s1", "c1"), ("c1", "s1"), ("dask_cpu_workers", "s1")])
def test_a_run_limited_to_part_of_the_cluster_is_refused(tmp_path: Path, limit: str, left_out: str) -> None:
    """--limit that leaves a cluster host out: the model would lack it (the scheduler's address, the firewall's peers;
    the sandbox's `--limit dask-w2` wrote `elements = { , 10.231.7.12 }` into the firewall table before this check).
    Refused at the first play of the cluster's hosts, before the facts are gathered; a limit naming every host runs."""
    result = run_check(tmp_path, inventory(GOOD), "--limit", limit)
    output = re.sub(r"\s+", " ", result.stdout + result.stderr)
    assert result.returncode != 0 and f"--limit {limit} leaves out {left_out}: site.yml works out" in output, \
        output[-3000:]
    assert "PLAY [Inventory, variables and host facts are checked" not in output, output[-3000:]
    whole = run_check(tmp_path, inventory(GOOD), "--limit", "s1,c1")
    assert whole.returncode == 0, whole.stdout[-3000:]
