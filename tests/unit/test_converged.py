"""site.yml's fast rerun: the filter converge_parts (what a converge depends on) and the module converged (recorded at
the end of a run, checked at the start of the next), run in-process on a temporary folder as Ansible runs them."""
from __future__ import annotations

import datetime
import json
import re
from pathlib import Path

import pytest
import yaml
from ansible.module_utils.testing import patch_module_args
from ansible_collections.dask_gpu.bundle.plugins.filter.converge import converge_parts
from ansible_collections.dask_gpu.bundle.plugins.modules import converged
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

ROOT = Path(__file__).resolve().parents[2]


def run(capsys: pytest.CaptureFixture[str], **args: object) -> dict[str, object]:
    with patch_module_args(args), pytest.raises(SystemExit):
        converged.main()
    result = dict(json.loads(capsys.readouterr().out))
    result.pop("invocation", None)
    return result


def parts(controller: Path, fast: bool = True, **host: object) -> dict[str, str]:
    model = {"name": "w1", "worker_count": 1, "deployed": {"versions": {"dask": "2026.10.0"}},
             "gpu_health": {"GPU-1": {"temperature": 41}}, **host}
    return converge_parts({"w1": {"dask_worker_nthreads": 2, "dask_fast_rerun": fast}}, {"w1": model},
                          {"w1": ["dask_cpu_workers"]}, "26.10-cuda12-lean-abc", str(ROOT), str(controller), 30)


def certificate(path: Path, days: int) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "w1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=days))
            .sign(key, hashes.SHA256()))
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def test_parts_ignore_what_a_run_writes_and_follow_inputs_and_controller_files(tmp_path: Path) -> None:
    (tmp_path / "tls").mkdir()
    certificate(tmp_path / "tls" / "w1.crt", 400)
    first = parts(tmp_path)
    assert first == parts(tmp_path, deployed={"versions": {"dask": "2026.11.0"}}, gpu_health={"GPU-1": {"t": 80}})
    assert first == parts(tmp_path, fast=False)
    assert first["renewal_due"] == "" and set(first) == {"code", "image_tag", "controller_files", "renewal_due",
                                                         "host w1", "model w1", "inventory_groups"}
    assert parts(tmp_path, worker_count=2)["model w1"] != first["model w1"]
    (tmp_path / "client").mkdir()
    (tmp_path / "client" / "env.sh").write_text("export DASK_SCHEDULER_ADDRESS=tls://10.0.0.1:8786\n")
    assert parts(tmp_path)["controller_files"] != first["controller_files"]
    certificate(tmp_path / "tls" / "ca.crt", 10)  # not renewed for age
    certificate(tmp_path / "tls" / "gone.crt", 10)  # a host no longer in the cluster
    assert parts(tmp_path)["renewal_due"] == ""
    certificate(tmp_path / "tls" / "w1.crt", 10)
    assert parts(tmp_path)["renewal_due"].startswith("w1.crt expires ")
    unfit = [{"index": 0, "uuid": "GPU-1", "problems": ["temperature 91 C"]}]
    moved = [{"index": 0, "uuid": "GPU-1", "problems": ["temperature 93 C"]}]
    assert parts(tmp_path, gpus_unfit=unfit)["model w1"] == parts(tmp_path, gpus_unfit=moved)["model w1"]
    assert parts(tmp_path, gpus_unfit=unfit)["model w1"] != parts(tmp_path)["model w1"]


def test_groups_a_run_fills_compare_without_their_order_and_the_inventorys_with_it(tmp_path: Path) -> None:
    """group_by fills dask_workers in whichever order the hosts got there (the sandbox's CI run saw it change between
    two runs); the inventory's own groups keep their order (their first host is the scheduler or monitoring host)."""
    def groups(workers: list[str], scheduler: list[str]) -> str:
        return converge_parts({}, {}, {}, "tag", str(ROOT), str(tmp_path), 30,
                              {"dask_workers": workers, "dask_scheduler": scheduler}, ["dask_workers"])[
                                  "inventory_groups"]

    assert groups(["w1", "w2"], ["s1", "s2"]) == groups(["w2", "w1"], ["s1", "s2"])
    assert groups(["w1", "w2"], ["s1", "s2"]) != groups(["w1", "w2"], ["s2", "s1"])
    assert groups(["w1", "w2"], ["s1"]) != groups(["w1"], ["s1"])


def test_record_then_check_intact_until_a_file_unit_or_part_changes(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "etc-dask"
    config.mkdir()
    (config / "worker.env").write_text("DASK_WORKER_NTHREADS=2\n")
    record = config / "converged.json"
    given = {"code": "c1", "host w1": "h1", "renewal_due": ""}
    recorded = run(capsys, path=str(record), parts=given, paths=[str(config), str(tmp_path / "absent")],
                   units=[], state="record")
    assert recorded["changed"] is True and json.loads(record.read_text())["files"] == {
        str(config / "worker.env"): json.loads(record.read_text())["files"][str(config / "worker.env")]}
    assert oct(record.stat().st_mode & 0o777) == "0o600"
    again = run(capsys, path=str(record), parts=given, paths=[str(config), str(tmp_path / "absent")], units=[],
                state="record")
    assert again["changed"] is False
    assert run(capsys, path=str(record), parts=given, state="check") == {"changed": False, "intact": True,
                                                                          "reason": ""}
    changed = run(capsys, path=str(record), parts={**given, "host w1": "h2"}, state="check")
    assert changed["intact"] is False and changed["reason"] == "w1's settings or groups changed since the last " \
                                                               "converge"
    joined = run(capsys, path=str(record), parts={**given, "host w2": "h3"}, state="check")
    assert joined["reason"] == "w2 joined the cluster since the last converge"
    due = run(capsys, path=str(record), parts={**given, "renewal_due": "w1.crt expires 2026-12-01"}, state="check")
    assert due["reason"] == "a certificate is due for renewal (w1.crt expires 2026-12-01)"
    (config / "worker.env").write_text("DASK_WORKER_NTHREADS=3\n")
    edited = run(capsys, path=str(record), parts=given, state="check")
    assert edited["reason"] == f"{config / 'worker.env'} was changed or removed since the last converge"
    (config / "worker.env").write_text("DASK_WORKER_NTHREADS=2\n")
    (config / "extra.env").write_text("X=1\n")
    added = run(capsys, path=str(record), parts=given, state="check")
    assert added["reason"] == f"{config / 'extra.env'} was added since the last converge"


def test_no_record_is_not_intact(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = run(capsys, path=str(tmp_path / "converged.json"), parts={"code": "c"}, state="check")
    assert result == {"changed": False, "intact": False, "reason": "no converge was recorded"}


def test_the_record_knows_every_tag_of_site_yml() -> None:
    """roles/dask_record/vars/main.yml holds the list of site.yml's tags (a run skipping one is not a whole
    converge): the same tags as site.yml's plays."""
    tags: set[str] = set()

    def walk(node: object) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "tags":
                    tags.update(value if isinstance(value, list) else [value])
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(yaml.safe_load((ROOT / "site.yml").read_text()))
    role_vars = yaml.safe_load((ROOT / "roles" / "dask_record" / "vars" / "main.yml").read_text())
    assert sorted(tags) in [sorted(value) for value in role_vars.values() if isinstance(value, list)], role_vars


def test_the_record_knows_every_group_a_run_fills() -> None:
    """roles/dask_record/vars/main.yml lists the groups a run fills with group_by or add_host (compared without their
    order): the same as the group_by keys and add_host groups of the roles' tasks (names quoted in a templated list
    count), but for dask_unchanged, the fast rerun's own answer."""
    keys: set[str] = set()

    def walk(tasks: object) -> None:
        for task in tasks if isinstance(tasks, list) else []:
            if isinstance(task, dict):
                if "ansible.builtin.group_by" in task:
                    keys.add(task["ansible.builtin.group_by"]["key"])
                if "ansible.builtin.add_host" in task:
                    named = task["ansible.builtin.add_host"].get("groups", [])
                    keys.update(named if isinstance(named, list) else re.findall(r"(?<!groups)\['([a-z_]+)'\]", named))
                for nested in ("block", "rescue", "always"):
                    walk(task.get(nested))

    for path in (ROOT / "roles").glob("*/tasks/*.yml"):
        walk(yaml.safe_load(path.read_text()))
    keys -= {"dask_unchanged"}
    role_vars = yaml.safe_load((ROOT / "roles" / "dask_record" / "vars" / "main.yml").read_text())
    assert sorted(keys) in [sorted(value) for value in role_vars.values() if isinstance(value, list)], (keys, role_vars)
