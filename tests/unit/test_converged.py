"""site.yml's fast rerun: the filter converge_parts (what a converge depends on) and the module converged (recorded at
the end of a run, checked at the start of the next), run in-process on a temporary folder as Ansible runs them."""
from __future__ import annotations

import datetime
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.module_utils.testing import patch_module_args
from ansible_collections.dask_gpu.bundle.plugins.filter.converge import converge_parts
from ansible_collections.dask_gpu.bundle.plugins.modules import converged
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.features import managed
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


def parts(controller: Path, fast: bool = True, renew: bool = False, **host: object) -> dict[str, str]:
    model = {"name": "w1", "worker_count": 1, "deployed": {"versions": {"dask": "2026.10.0"}},
             "gpu_health": {"GPU-1": {"temperature": 41}}, **host}
    settings = {"dask_worker_nthreads": 2, "dask_fast_rerun": fast, "dask_tls_renew": renew}
    return converge_parts({"w1": settings}, {"w1": model},
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
    # what the last run recorded of the autoscaler (read back from the record, which each run writes)
    assert first == parts(tmp_path, autoscale_before={"share_gpus": True})
    assert first == parts(tmp_path, fast=False)
    # a renewal is the run's own action: the run after it, without it, is as the renewal left the hosts
    assert first == parts(tmp_path, renew=True)
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
    """Checks that differ run in check mode here, which keeps the record (the next test: a check drops it)."""
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
    changed = run(capsys, path=str(record), parts={**given, "host w1": "h2"}, state="check", _ansible_check_mode=True)
    assert changed["intact"] is False and changed["reason"] == "w1's settings or groups changed since the last " \
                                                               "converge"
    joined = run(capsys, path=str(record), parts={**given, "host w2": "h3"}, state="check", _ansible_check_mode=True)
    assert joined["reason"] == "w2 joined the cluster since the last converge"
    due = run(capsys, path=str(record), parts={**given, "renewal_due": "w1.crt expires 2026-12-01"}, state="check",
              _ansible_check_mode=True)
    assert due["reason"] == "a certificate is due for renewal (w1.crt expires 2026-12-01)"
    (config / "worker.env").write_text("DASK_WORKER_NTHREADS=3\n")
    edited = run(capsys, path=str(record), parts=given, state="check", _ansible_check_mode=True)
    assert edited["reason"] == f"{config / 'worker.env'} was changed or removed since the last converge"
    (config / "worker.env").write_text("DASK_WORKER_NTHREADS=2\n")
    (config / "extra.env").write_text("X=1\n")
    added = run(capsys, path=str(record), parts=given, state="check", _ansible_check_mode=True)
    assert added["reason"] == f"{config / 'extra.env'} was added since the last converge"


def test_a_check_that_differs_drops_the_record_but_not_in_check_mode(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """A run whose parts differ removes the record at its check, before anything changes: if it then fails half-way,
    a later run back at the recorded settings finds no record (not a fast rerun over half-made changes)."""
    record = tmp_path / "converged.json"
    given = {"code": "c1", "host w1": "h1"}
    run(capsys, path=str(record), parts=given, state="record")
    other = {**given, "host w1": "h2"}
    checked = run(capsys, path=str(record), parts=other, state="check", _ansible_check_mode=True)
    assert checked == {"changed": True, "intact": False, "reason": "w1's settings or groups changed since the last "
                                                                   "converge"} and record.is_file()
    assert run(capsys, path=str(record), parts=given, state="check")["intact"] is True and record.is_file()
    assert run(capsys, path=str(record), parts=other, state="check")["changed"] is True and not record.is_file()
    assert run(capsys, path=str(record), parts=given, state="check") == {
        "changed": False, "intact": False, "reason": "no converge was recorded"}
    record.write_text("{not json")
    assert run(capsys, path=str(record), parts=given, state="check")["changed"] is True and not record.is_file()


def test_a_package_removed_or_changed_by_hand_is_found(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The record keeps the versions of the listed packages that are installed (this machine's own dpkg-query); one
    missing or at another version since makes the host differ."""
    record = tmp_path / "converged.json"
    given = {"code": "c1"}
    run(capsys, path=str(record), parts=given, packages=["dpkg", "no-such-package-dask"], state="record")
    packages = json.loads(record.read_text())["packages"]
    assert list(packages) == ["dpkg"] and re.match(r"^\d", packages["dpkg"]), packages
    assert run(capsys, path=str(record), parts=given, state="check")["intact"] is True
    written = json.loads(record.read_text())
    record.write_text(json.dumps({**written, "packages": {"dpkg": "0.0-old"}}))
    assert run(capsys, path=str(record), parts=given, state="check")["reason"] == \
        "package dpkg was removed or changed version since the last converge"
    record.write_text(json.dumps({**written, "packages": {**packages, "no-such-package-dask": "1.0"}}))
    assert run(capsys, path=str(record), parts=given, state="check")["reason"] == \
        "package no-such-package-dask was removed or changed version since the last converge"


def test_the_controller_address_is_read_from_the_nearest_process_with_ssh_client() -> None:
    """Under become the module's environment has no SSH_CLIENT; the login shell above it has. Real processes: a shell
    with SSH_CLIENT starts a Python with an emptied environment (as sudo's reset), which walks up to the shell."""
    code = ("from ansible_collections.dask_gpu.bundle.plugins.modules.converged import controller_address; "
            "import os; assert 'SSH_CLIENT' not in os.environ; print(repr(controller_address()))")
    pythonpath = os.pathsep.join(sys.path)
    found = subprocess.run(["sh", "-c", f'env -i PYTHONPATH="$PP" {sys.executable} -c "{code}"; true'],
                           env={**os.environ, "SSH_CLIENT": "10.20.30.40 51234 22", "PP": pythonpath},
                           capture_output=True, text=True, check=True, timeout=60)
    assert found.stdout.strip() == "'10.20.30.40'", found.stderr
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("SSH_")}, "PYTHONPATH": pythonpath}
    none = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True,
                          timeout=60)
    above = _ancestors_env()  # a test run over SSH: the walk goes on up to this process's own SSH_CLIENT
    expected = above[0].split("=", 1)[1].split(" ")[0] if above else ""
    assert none.stdout.strip() == repr(expected), none.stderr


def _ancestors_env() -> list[str]:
    """The SSH_CLIENT entries of this process and its ancestors, nearest first (a test run over SSH has one)."""
    found, pid = [], os.getpid()
    while pid > 1:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        found += [entry.decode(errors="replace") for entry in environ if entry.startswith(b"SSH_CLIENT=")]
        pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    return found


def _process(proc: Path, pid: int, parent: int, environ: bytes | None) -> None:
    folder = proc / str(pid)
    folder.mkdir(parents=True)
    (folder / "stat").write_text(f"{pid} (some (odd) name) S {parent} 1 1 0 -1\n")
    if environ is None:
        (folder / "environ").mkdir()  # reads fail, as sudo's do for a root without CAP_SYS_PTRACE
    else:
        (folder / "environ").write_bytes(environ)


def test_the_controller_walk_passes_over_an_unreadable_ancestor_and_fails_closed(tmp_path: Path) -> None:
    """A /proc laid out in a folder: the module's process, sudo (its environment unreadable), the login shell with
    SSH_CLIENT; a tree whose stat cannot be read gives None (the check's difference), none with SSH gives ''."""
    proc = tmp_path / "proc"
    _process(proc, 300, 200, b"PATH=/usr/bin\0HOME=/root\0")
    _process(proc, 200, 100, None)
    _process(proc, 100, 1, b"USER=ops\0SSH_CLIENT=192.0.2.7 50000 22\0")
    assert converged.controller_address(300, str(proc)) == "192.0.2.7"
    (proc / "100" / "environ").write_bytes(b"USER=ops\0")
    assert converged.controller_address(300, str(proc)) == ""
    (proc / "200" / "stat").unlink()
    assert converged.controller_address(300, str(proc)) is None


def test_an_unreadable_record_is_dropped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    record = tmp_path / "converged.json"
    for text in ("[1]", "{}", "{not json"):
        record.write_text(text)
        assert run(capsys, path=str(record), parts={"code": "c"}, state="check") == {
            "changed": True, "intact": False, "reason": "the record of the last converge could not be read"}, text
        assert not record.exists()


def test_units_are_recorded_with_their_state_and_a_disabled_or_stopped_one_is_found(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The units' part, against a stand-in for systemctl (a script printing `systemctl show`'s blocks from a JSON file,
    one per name in order, a blank line between; the sandbox's fastrerun suite runs the real one): a unit enabled or
    active is recorded with its unit-file state, one neither is not; stopped, disabled or masked since, it differs."""
    states = tmp_path / "states.json"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "systemctl").write_text(f"""#!{sys.executable}
import json, sys
states = json.load(open({str(states)!r}))
names = sys.argv[sys.argv.index("--") + 1:]
blocks = [states.get(n, ["inactive", ""]) for n in names]
print("\\n\\n".join(f"ActiveState={{a}}\\nUnitFileState={{u}}" for a, u in blocks))
""")
    (bin_dir / "systemctl").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    states.write_text(json.dumps({"dask-worker": ["active", "enabled"], "dask-firewall": ["active", "enabled"],
                                  "docker": ["active", "enabled"], "dask-notebook": ["inactive", ""],
                                  "prometheus": ["failed", "enabled"]}))
    record = tmp_path / "converged.json"
    given = {"code": "c1"}
    names = ["dask-worker", "dask-firewall", "dask-notebook", "docker", "prometheus"]
    run(capsys, path=str(record), parts=given, units=names, state="record")
    assert json.loads(record.read_text())["units"] == {"dask-worker": "enabled", "dask-firewall": "enabled",
                                                        "docker": "enabled", "prometheus": "enabled"}
    check = {"path": str(record), "parts": given, "state": "check", "_ansible_check_mode": True}
    assert run(capsys, **check)["reason"] == "unit prometheus is not active"  # down at the record: still expected
    def found(**changed: list[str]) -> str:
        states.write_text(json.dumps({**dict.fromkeys(names, ["active", "enabled"]), **changed}))
        return str(run(capsys, **check)["reason"])
    assert found() == ""
    assert found(**{"dask-worker": ["reloading", "enabled"]}) == ""
    assert found(**{"dask-worker": ["inactive", "enabled"]}) == "unit dask-worker is not active"
    assert found(**{"dask-worker": ["active", "disabled"]}) == \
        "unit dask-worker is disabled, not enabled as the last converge left it"
    assert found(**{"docker": ["active", "masked"]}) == \
        "unit docker is masked, not enabled as the last converge left it"


def test_a_record_of_the_controller_compares_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """With the firewall on, the controller's address is recorded (here none: no SSH above this test, unless the run
    itself is over SSH) and another one makes the host differ."""
    record = tmp_path / "converged.json"
    run(capsys, path=str(record), parts={"code": "c1"}, controller=True, state="record")
    written = json.loads(record.read_text())
    assert "controller" in written
    assert run(capsys, path=str(record), parts={"code": "c1"}, state="check")["intact"] is True
    record.write_text(json.dumps({**written, "controller": "192.0.2.9"}))
    assert run(capsys, path=str(record), parts={"code": "c1"}, state="check")["reason"] == (
        f"the controller's address ({written['controller'] or 'none'}) is not the one the firewall lets in "
        "(192.0.2.9)")


def _tasks(node: object) -> list[dict[str, Any]]:
    """Every task of a task file, blocks opened."""
    found: list[dict[str, Any]] = []
    for task in node if isinstance(node, list) else []:
        if isinstance(task, dict):
            found.append(task)
            for nested in ("block", "rescue", "always"):
                found += _tasks(task.get(nested))
    return found


def _installed_by_roles() -> set[str]:
    """The package names every role's apt task installs (not the purges), each templated name resolved where the
    role or its callers set it: the settings' defaults (roles/*/defaults), the role's own vars and defaults, or the
    vars a task passes (an include's)."""
    roles = ROOT / "roles"
    defaults: dict[str, Any] = {}
    for path in roles.glob("*/defaults/main.yml"):
        defaults.update(yaml.safe_load(path.read_text()) or {})
    passed: dict[str, list[Any]] = {}
    tasks = {path: _tasks(yaml.safe_load(path.read_text())) for path in roles.glob("*/tasks/*.yml")}
    for found in tasks.values():
        for task in found:
            for key, value in (task.get("vars") or {}).items():
                passed.setdefault(key, []).append(value)

    def resolve(value: Any, role: Path, depth: int = 0) -> list[str]:
        if isinstance(value, list):
            return [name for item in value for name in resolve(item, role, depth)]
        text = str(value)
        named = re.match(r"^\{\{\s*([a-z_][a-z0-9_.]*)", text)
        if not named:
            return [text]
        name = named.group(1).removeprefix("dask_settings.")
        own: dict[str, Any] = {}
        for part in ("defaults", "vars"):
            if (role / part / "main.yml").is_file():
                own.update(yaml.safe_load((role / part / "main.yml").read_text()) or {})
        values = [own[name]] if name in own else [defaults[name]] if name in defaults else passed.get(name, [])
        assert values and depth < 4, f"{text} in {role.name} resolves to nothing"
        return [package for item in values for package in resolve(item, role, depth + 1)]

    packages: set[str] = set()
    for path, found in tasks.items():
        for task in found:
            apt = task.get("ansible.builtin.apt")
            # (not the package entry point's own task: its callers name the packages)
            if isinstance(apt, dict) and apt.get("state", "present") == "present" \
                    and "dask_package_name" not in str(apt.get("name", "dask_package_name")):
                packages.update(resolve(apt["name"], path.parents[1]))
            for key, value in (task.get("vars") or {}).items():
                if key == "dask_package_name":
                    packages.update(resolve(value, path.parents[1]))
    return {re.sub(r"=.*$", "", name) for name in packages}


def test_the_record_knows_every_package_the_roles_install() -> None:
    """The record's package list (roles/dask_record/vars/main.yml: Docker's from the settings, the core's by name,
    the features' from the registry: features.managed) holds every package a role's apt task installs, as the roles
    name them."""
    role_vars = yaml.safe_load((ROOT / "roles" / "dask_record" / "vars" / "main.yml").read_text())
    listed = next(text for text in role_vars.values() if isinstance(text, str) and "managed.packages" in text)
    named = set(re.findall(r"'([a-z0-9][a-z0-9.+-]+)'", listed)) | set(managed()["packages"])
    named |= {name for key in re.findall(r"dask_settings\.([a-z_]+)", listed) for name in
              yaml.safe_load((ROOT / "roles" / "docker_engine" / "defaults" / "main.yml").read_text())[key]}
    installed = _installed_by_roles()
    assert {"nftables", "prometheus", "docker.io", "nvidia-container-toolkit"} <= installed, installed
    assert installed <= named, installed - named


def test_the_record_looks_at_every_unit_a_role_enables_and_starts() -> None:
    """Every unit a role's systemd_service task enables and starts by name (a loop's items expanded) is one the record
    looks at: in roles/dask_record/vars/main.yml's list, a service of the cluster model (features/*.py), which the
    list takes from the host's claims, or a host unit a feature declares (Feature.host_units, the model's
    managed.units). A unit enabled but not started (nvidia-cdi-refresh.service, started by its path unit) is left out,
    as one down between runs would make every run a whole one."""
    role_vars = yaml.safe_load((ROOT / "roles" / "dask_record" / "vars" / "main.yml").read_text())
    listed = next(text for text in role_vars.values() if isinstance(text, str) and "'docker'" in text)
    looked_at = set(re.findall(r"'([a-z0-9][a-z0-9.@-]+)'", listed))
    features = ROOT / "collections" / "ansible_collections" / "dask_gpu" / "bundle" / "plugins" / "plugin_utils"
    services = {name for path in (features / "features").glob("*.py")
                for name in re.findall(r'services(?:\[|=\{)"([a-z0-9-]+)"', path.read_text())}
    assert "dask_cluster.managed.units" in listed, listed
    looked_at |= set(managed()["units"])
    started: set[str] = set()
    for path in (ROOT / "roles").glob("*/tasks/*.yml"):
        for task in _tasks(yaml.safe_load(path.read_text())):
            unit = task.get("ansible.builtin.systemd_service")
            if not isinstance(unit, dict) or unit.get("enabled") is not True:
                continue
            # a loop's items carry their own name and state (the task's are "{{ item.name }}", "{{ item.state ... }}")
            items = task.get("loop") if str(unit.get("name")).startswith("{{ item") else [unit]
            for item in items if isinstance(items, list) else []:
                name, state = str(item.get("name")), str(item.get("state", ""))
                if "{{" not in name and state and state != "stopped":
                    started.add(name)
    assert {"docker", "nvidia-persistenced", "nvidia-cdi-refresh.path", "docker-registry"} <= started, started
    assert started <= looked_at | services, started - looked_at - services


def test_run_options_tells_a_run_started_at_a_task(tmp_path: Path) -> None:
    """lookup dask_gpu.bundle.run_options: --start-at-task and --step, which no variable carries (a real
    ansible-playbook run on localhost)."""
    playbook = tmp_path / "options.yml"
    playbook.write_text("""
- name: Options
  hosts: localhost
  gather_facts: false
  tasks:
    - name: First
      ansible.builtin.debug:
        msg: first
    - name: Second
      ansible.builtin.debug:
        msg: "options={{ query('dask_gpu.bundle.run_options', 'start_at_task', 'step') | to_json }}"
""")
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
           "ANSIBLE_COLLECTIONS_PATH": str(ROOT / "collections")}
    base = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c", "local",
            "-e", f"ansible_python_interpreter={sys.executable}", str(playbook)]
    whole = subprocess.run(base, cwd=tmp_path, capture_output=True, text=True, env=env, timeout=120, check=False)
    started = subprocess.run([*base, "--start-at-task", "Second"], cwd=tmp_path, capture_output=True, text=True,
                             env=env, timeout=120, check=False)
    assert whole.returncode == 0 and 'options=[null, false]' in whole.stdout, whole.stdout + whole.stderr
    assert started.returncode == 0 and 'options=["Second", false]' in started.stdout, started.stdout + started.stderr


def test_no_record_is_not_intact(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = run(capsys, path=str(tmp_path / "converged.json"), parts={"code": "c"}, state="check")
    assert result == {"changed": False, "intact": False, "reason": "no converge was recorded"}


def test_the_record_knows_every_tag_of_site_yml() -> None:
    """roles/dask_record/vars/main.yml's list of site.yml's tags (a run skipping one is not a whole converge), the
    core's there and the features' (features.managed), holds the same tags as site.yml's plays, each once."""
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
    listed = next(text for text in role_vars.values() if isinstance(text, str) and "managed.tags" in text)
    recorded = re.findall(r"'([a-z][a-z0-9_-]*)'", listed) + managed()["tags"]
    assert sorted(recorded) == sorted(tags), (sorted(recorded), sorted(tags))


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
