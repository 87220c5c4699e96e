"""Clusters by name: each cluster's record on a host (what it claims, the folders it made), the checks that refuse a
second cluster taking what the first holds (a GPU of a replayed 2 x H200 host, a port, a folder, a name, a
one-per-host service), a deployment by an earlier release, an upgrade that changes the Dask versions, and the module
that keeps the record and removes only the folders it made (run for real through Ansible on this machine)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils import checks, model, records
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils import settings as typing

ROOT = Path(__file__).resolve().parents[2]
H200 = {"count": 2, "driver_version": "580.159.04", "driver_major": 580, "gpus": [
    {"index": 0, "uuid": "GPU-8ee11e14-577c-123d-6055-3792f1f36de5", "name": "NVIDIA H200", "memory_mib": 143771},
    {"index": 1, "uuid": "GPU-a5a3d0c8-e07b-3948-f39d-210d64cd64d1", "name": "NVIDIA H200", "memory_mib": 143771}]}
GROUPS = {"all": ["s1", "g1"], "dask_scheduler": ["s1"], "dask_cuda_workers": ["g1"], "dask_cpu_workers": [],
          "dask_workers": ["g1"], "dask_cluster": ["s1", "g1"]}
FACTS = {"default_ipv4": {"address": "10.0.0.6"}, "all_ipv4_addresses": ["10.0.0.6"]}


def specs() -> dict[str, Any]:
    return typing.role_specs(str(ROOT / "roles"))


def raw(**values: Any) -> dict[str, Any]:
    base = {"dask_rapids_release": "26.10", "dask_cuda_major": "13", "dask_image_profile": "lean",
            "dask_base_image": "debian:bookworm-slim", "dask_repo_dir": str(ROOT), "dask_controller_dir": "/ctl"}
    return typing.resolve({**base, **values}, specs())


def claims_of(host: str, facts: dict[str, Any], **values: Any) -> dict[str, Any]:
    settings = typing.typed(raw(**values), specs(), GROUPS["all"]).settings
    return dict(model.host_model(host, settings, facts, H200 if host == "g1" else {}, GROUPS)["record"]["claims"])


def problems(host: str, facts: dict[str, Any], **values: Any) -> list[str]:
    return checks.problems({"host": host, "settings": raw(**values), "specs": specs(), "groups": GROUPS,
                            "facts": facts, "gpus": H200 if host == "g1" else {}, "set": sorted(values),
                            "pins": ["rapids-26.10-cuda13.txt"], "inventory_checks": True})


def with_record(claims: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """Host facts holding another cluster's record (as the next run gathers it, ansible_local.dask_cluster_NAME)."""
    key = "dask_cluster_" + claims["name"].replace("-", "_")
    return {**FACTS, "ansible_local": {key: {**claims, **extra}}}


def test_each_name_gives_its_own_units_folders_table_and_record() -> None:
    blue = claims_of("g1", FACTS, dask_cluster_name="blue")
    default = claims_of("g1", FACTS)
    assert default["units"] == ["dask-autoscale-agent", "dask-autoscaler", "dask-firewall", "dask-notebook",
                                "dask-scheduler", "dask-worker"]
    assert (default["config"], default["data"], default["firewall_table"]) == ("/etc/dask", "/var/lib/dask",
                                                                              "dask_firewall")
    assert blue["units"] == ["dask-blue-autoscale-agent", "dask-blue-autoscaler", "dask-blue-firewall",
                             "dask-blue-notebook", "dask-blue-scheduler", "dask-blue-worker"]
    assert (blue["config"], blue["data"], blue["firewall_table"]) == ("/etc/dask-blue", "/var/lib/dask-blue",
                                                                      "dask_blue_firewall")
    assert records.path("blue") == "/etc/ansible/facts.d/dask_cluster_blue.fact"


def test_a_second_cluster_on_other_gpus_and_ports_is_accepted() -> None:
    first = claims_of("g1", FACTS, dask_worker_gpus=["0"])
    assert [gpu["uuid"] for gpu in first["gpus"]] == ["GPU-8ee11e14-577c-123d-6055-3792f1f36de5"]
    facts = with_record(first)
    assert problems("g1", facts, dask_cluster_name="blue", dask_worker_gpus=["1"], dask_worker_http_port=8890) == []


def test_a_second_cluster_that_claims_a_held_gpu_or_port_is_refused_naming_both() -> None:
    facts = with_record(claims_of("g1", FACTS, dask_worker_gpus=["0"]))
    found = problems("g1", facts, dask_cluster_name="blue", dask_worker_http_port=8890,
                     dask_worker_gpus=["GPU-8ee11e14-577c-123d-6055-3792f1f36de5"])
    assert len(found) == 1, found
    assert "GPU GPU-8ee11e14-577c-123d-6055-3792f1f36de5 is claimed by cluster blue" in found[0]
    assert "held by cluster dask" in found[0]
    found = problems("g1", facts, dask_cluster_name="blue", dask_worker_gpus=["1"])
    assert len(found) == 1 and "dask_worker_http_port (8790) of cluster blue is also dask_worker_http_port (8790) " \
        "of cluster dask" in found[0], found


def test_two_clusters_that_both_share_their_gpus_may_claim_the_same_ones_and_take_turns() -> None:
    """dask_autoscale_share_gpus on both clusters lets the second claim the GPUs the first holds; on one only, it is
    refused as before. The host's worker unit takes its turn on each of its GPUs (gpu_turns.py's keys)."""
    share = {"dask_autoscale_enabled": True, "dask_autoscale_share_gpus": True}
    first = claims_of("g1", FACTS, **share)
    assert first["share_gpus"] is True
    facts = with_record(first)
    ports = {"dask_scheduler_port": 9786, "dask_dashboard_port": 9787, "dask_worker_http_port": 8890,
             "dask_autoscale_port": 9785, "dask_autoscale_metrics_port": 9784, "dask_notebook_port": 9888,
             "dask_monitoring_enabled": False}
    assert problems("g1", facts, dask_cluster_name="blue", **ports, **share) == []
    refused = problems("g1", facts, dask_cluster_name="blue", **ports, dask_autoscale_enabled=True)
    assert len(refused) == 2 and all("(dask_autoscale_share_gpus on both" in line for line in refused), refused
    settings = typing.typed(raw(**share), specs(), GROUPS["all"]).settings
    host = model.host_model("g1", settings, FACTS, H200, GROUPS)
    assert host["turns"] == [gpu["uuid"] for gpu in H200["gpus"]]
    assert host["autoscale_before"] == {"share_gpus": False}  # its first run
    assert "turns" not in model.host_model("s1", settings, FACTS, {}, GROUPS)
    # The next run reads what this one recorded: turning sharing off gives up the turns only where it was on.
    off = typing.typed(raw(dask_autoscale_enabled=True), specs(), GROUPS["all"]).settings
    again = model.host_model("g1", off, with_record(first), H200, GROUPS)
    assert again["autoscale_before"]["share_gpus"] is True and "turns" not in again
    # ... and its record says so (a record is merged key by key: the mark must be written false, not left out).
    assert again["record"]["claims"]["share_gpus"] is False
    stopped = with_record({**first, "share_gpus": False})
    assert len(problems("g1", stopped, dask_cluster_name="blue", **ports, **share)) == 2
    # A whole GPU and a MIG instance of it are never shared, even by two sharing clusters.
    whole = {"name": "dask", "share_gpus": True, "gpus": [{"uuid": "GPU-a", "mig": None}]}
    mig = {"name": "blue", "share_gpus": True, "gpus": [{"uuid": "GPU-a", "mig": "MIG-1"}]}
    assert "each with the whole GPU or the same MIG instance" in records.collisions(mig, {"dask": whole})[0]
    assert records.collisions({**mig, "gpus": whole["gpus"]}, {"dask": whole}) == []


def test_a_mig_instance_collides_with_its_whole_gpu() -> None:
    whole = [{"uuid": "GPU-a", "mig": None}]
    mig = {"name": "blue", "gpus": [{"uuid": "GPU-a", "mig": "MIG-1"}]}
    assert "GPU MIG-1 is claimed" in records.collisions(mig, {"dask": {"gpus": whole}})[0]
    assert records.collisions(mig, {"dask": {"gpus": [{"uuid": "GPU-a", "mig": "MIG-2"}]}}) == []


@pytest.mark.parametrize(("held", "wanted"), [("a-b", "a_b"), ("a_b", "a-b"), ("x-1-y", "x_1-y")])
def test_names_that_normalise_to_another_clusters_record_are_refused(held: str, wanted: str) -> None:
    """The record's and the firewall table's names replace '-' with '_': two names that differ only there would share
    them, and the second cluster would take the first's record (and tear down its folders). Compared after that
    normalisation, on every host that holds the first; a name of its own passes."""
    facts = with_record(claims_of("g1", FACTS, dask_cluster_name=held))
    for host in ("s1", "g1"):
        refused = problems(host, facts, dask_cluster_name=wanted, dask_scheduler_port=9786, dask_dashboard_port=9787)
        assert any(f"dask_cluster_name={wanted} gives the names dask_cluster_{held.replace('-', '_')}" in p
                   and f"which cluster {held} uses" in p for p in refused), (host, refused)
    own = problems("g1", facts, dask_cluster_name=held + "z", dask_scheduler_port=9786, dask_dashboard_port=9787)
    assert not any("which cluster" in p for p in own), own


def test_folders_names_services_and_the_firewall_of_another_cluster_are_refused() -> None:
    held = claims_of("s1", FACTS, dask_images_distribution="cluster-registry", dask_firewall_enabled=True,
                     dask_monitoring_enabled=True)
    facts = with_record(held)
    nested = problems("s1", facts, dask_cluster_name="blue", dask_scheduler_port=9786, dask_dashboard_port=9787,
                      dask_data_dir="/var/lib/dask/blue", dask_firewall_enabled=True)
    assert any("dask_data_dir (/var/lib/dask/blue) of cluster blue overlaps the data folder" in p for p in nested)
    shared = problems("s1", facts, dask_cluster_name="blue", dask_scheduler_port=9786, dask_dashboard_port=9787,
                      dask_images_distribution="cluster-registry", dask_images_registry_port=5001,
                      dask_monitoring_enabled=True, dask_monitoring_port=9091)
    text = "\n".join(shared)
    assert "docker-registry runs on this host for cluster dask" in text
    assert "prometheus runs on this host for cluster dask" in text
    assert "cluster dask has the host firewall on here and cluster blue has it off" in text
    assert "prometheus-node-exporter" not in text  # the same node exporter port serves both clusters


def test_an_earlier_release_is_adopted_by_the_default_name_and_refused_for_another() -> None:
    legacy = {**FACTS, "ansible_local": {"gpus": {"count": 0}, "docker_engine": {"server_version": "20.10.24"}}}
    settings = typing.typed(raw(), specs(), GROUPS["all"]).settings
    assert records.adoptable(settings, legacy) == ["/etc/dask", "/var/lib/dask", "/etc/dask/tls",
                                                   "/var/lib/dask/worker", "/var/lib/dask/reports"]
    assert problems("s1", legacy) == []
    refused = problems("s1", legacy, dask_cluster_name="blue")
    assert len(refused) == 1 and "earlier release" in refused[0] and "teardown.yml -e dask_cluster_name=dask" in \
        refused[0]


def test_a_host_is_known_to_hold_the_cluster_only_where_its_record_or_an_earlier_release_was() -> None:
    """model.recorded_before gates site.yml's removals of a feature that is off or moved (JupyterLab's unit on the
    other hosts, the autoscaler's units): a host the cluster never ran on skips them; one with this cluster's record,
    or an earlier release's deployment, runs them. Another cluster's record is not this one's."""
    settings = typing.typed(raw(), specs(), GROUPS["all"]).settings
    first = claims_of("g1", FACTS)
    legacy = {**FACTS, "ansible_local": {"gpus": {"count": 0}, "docker_engine": {"server_version": "20.10.24"}}}
    found = {label: model.host_model("g1", settings, facts, H200, GROUPS)["recorded_before"] for label, facts in
             {"fresh": FACTS, "recorded": with_record(first), "legacy": legacy,
              "another cluster's": with_record(claims_of("g1", FACTS, dask_cluster_name="blue"))}.items()}
    assert found == {"fresh": False, "recorded": True, "legacy": True, "another cluster's": False}, found


def test_a_version_change_is_refused_unless_everything_may_restart_at_once() -> None:
    ran = {"deployed": {"versions": {"dask": "2026.5.0", "distributed": "2026.5.0", "dask-cuda": "26.06.0"}}}
    facts = {**FACTS, "ansible_local": {"dask_cluster_dask": {"name": "dask", **ran}}}
    settings = typing.typed(raw(), specs(), GROUPS["all"]).settings
    hosts = {name: model.host_model(name, settings, facts, {}, GROUPS) for name in ("s1", "g1")}
    change = model.cluster_model(settings, hosts, GROUPS, "abc")["images"]["version_change"]
    assert change["hosts"] == ["g1", "s1"] and change["from"]["dask"] == "2026.5.0"
    assert change["to"]["dask"] != "2026.5.0" and change["restart_all"] is False
    found = problems("s1", facts)
    # (a unit test's checker sees its own host; in a run the cluster model names every host that changes)
    assert len(found) == 1 and found[0].startswith("inventory: hosts s1 run dask 2026.5.0") and \
        "would mix versions" in found[0] and "dask_upgrade_restart_all_ack" in found[0]
    assert problems("s1", facts, dask_upgrade_restart_all_ack=True) == []
    same = {**FACTS, "ansible_local": {"dask_cluster_dask": {"name": "dask", "deployed": {
        "versions": change["to"]}}}}
    assert problems("s1", same) == []


@pytest.mark.parametrize("path", ["/", "/etc", "/var/lib", "/home/alice", "/usr/../etc"])
def test_system_and_home_folders_are_never_managed(path: str) -> None:
    found = problems("s1", FACTS, dask_data_dir=path)
    assert len(found) == 1 and "dask_data_dir" in found[0] and "system or home folder" in found[0], found


def run_module(tmp_path: Path, **args: Any) -> dict[str, Any]:
    """cluster_record run by Ansible on this machine, as a task of site.yml runs it on a host."""
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json", ANSIBLE_LOAD_CALLBACK_PLUGINS="1")
    playbook = tmp_path / "record.yml"
    playbook.write_text(yaml.safe_dump([{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"name": "record", "dask_gpu.bundle.cluster_record": args, "register": "result"}]}]))
    result = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c", "local",
                             "-e", f"ansible_python_interpreter={sys.executable}", str(playbook)],
                            capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    report = json.loads(result.stdout)
    return dict(report["plays"][0]["tasks"][0]["hosts"]["localhost"])


def test_the_record_keeps_the_folders_it_made_and_teardown_removes_only_those(tmp_path: Path) -> None:
    user_data = tmp_path / "data"   # a user's data disk, with their file, given as dask_data_dir
    user_data.mkdir()
    (user_data / "results.parquet").write_text("the user's data")
    record = tmp_path / "facts.d" / "dask_cluster_dask.fact"
    config = tmp_path / "etc-dask"
    folders = [{"path": str(config), "owner": os.getuid(), "group": os.getgid(), "mode": "0755", "remove": "tree"},
               {"path": str(user_data), "owner": os.getuid(), "group": os.getgid(), "mode": "0755",
                "remove": "empty"},
               {"path": str(user_data / "worker"), "owner": os.getuid(), "group": os.getgid(), "mode": "0750",
                "remove": "tree"}]
    made = run_module(tmp_path, path=str(record), claims={"name": "dask", "ports": {"x": [1, 1]}}, folders=folders)
    bundle_made = {str(config), str(user_data / "worker")}
    assert made["changed"] and set(made["created"]) == bundle_made
    written = json.loads(record.read_text())
    assert {entry["path"] for entry in written["folders"]} == bundle_made  # the user's folder is not recorded
    assert run_module(tmp_path, path=str(record), claims={"name": "dask", "ports": {"x": [1, 1]}},
                      folders=folders)["changed"] is False
    (config / "dask-worker.env").write_text("secret")
    (user_data / "worker" / "spill").mkdir()
    gone = run_module(tmp_path, path=str(record), state="absent")
    assert set(gone["removed"]) == bundle_made
    assert not config.exists() and not record.exists()
    assert (user_data / "results.parquet").read_text() == "the user's data"


def test_the_record_refuses_a_system_folder(tmp_path: Path) -> None:
    refused = run_module(tmp_path, path=str(tmp_path / "r.fact"), folders=[
        {"path": "/var/lib", "owner": 0, "group": 0, "mode": "0755", "remove": "tree"}])
    assert refused.get("failed") and "/var/lib is a system folder" in refused["msg"]


def test_a_notebook_port_that_clashes_is_refused_on_its_host_and_against_another_cluster() -> None:
    found = problems("s1", FACTS, dask_notebook_enabled=True, dask_notebook_port=8786)
    assert any("dask_notebook_port (8786)" in line and "dask_scheduler_port (8786)" in line for line in found), found
    theirs = claims_of("s1", FACTS, dask_notebook_enabled=True)
    found = problems("s1", with_record(theirs), dask_cluster_name="blue", dask_notebook_enabled=True,
                     dask_scheduler_port=9786, dask_dashboard_port=9787)
    assert any("dask_notebook_port (8888) of cluster blue is also dask_notebook_port (8888) of cluster dask" in line
               for line in found), found
    assert problems("s1", with_record(theirs), dask_cluster_name="blue", dask_notebook_enabled=True,
                    dask_scheduler_port=9786, dask_dashboard_port=9787, dask_notebook_port=9888) == []


def ca_pem(common_name: str) -> str:
    """A self-signed CA certificate with that common name, as the controller folder's tls/ca.crt holds one."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now)
            .not_valid_after(now + datetime.timedelta(days=1)).sign(key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM).decode()


@pytest.mark.parametrize(("found", "cluster", "refused"), [
    ("dask Dask CA", "blue", "holds the CA of cluster dask"),  # docs/clusters.md's way on an inventory that sets it
    ("blue Dask CA", "dask", "holds the CA of cluster blue"),
    ("team CA", "blue", "holds the CA of cluster team CA"),  # a CA the bundle did not name
    ("blue Dask CA", "blue", ""),  # its own folder: every rerun
    ("", "blue", ""),  # a first run: no CA yet
])
def test_a_controller_folder_holding_another_clusters_ca_is_refused_naming_both(found: str, cluster: str,
                                                                              refused: str) -> None:
    values = {"dask_cluster_name": cluster}
    found_problems = checks.problems({"host": "s1", "settings": raw(**values), "specs": specs(), "groups": GROUPS,
                                      "facts": FACTS, "gpus": {}, "set": sorted(values),
                                      "pins": ["rapids-26.10-cuda13.txt"], "inventory_checks": True,
                                      "controller_ca": ca_pem(found) if found else ""})
    mine = [problem for problem in found_problems if "dask_controller_dir" in problem]
    if not refused:
        assert mine == [], mine
        return
    assert len(mine) == 1 and refused in mine[0] and f"cluster {cluster} needs a controller folder" in mine[0], mine
    assert mine[0].startswith("inventory: dask_controller_dir (/ctl) holds"), mine
