"""CI's small guard of the fleet path (the benchmark itself, tests/fleet/fleet.py, is run by hand): the inventory-only
check (playbooks/check-inventory.yml) passes a 1,000-host inventory without reaching a host, and names each bad
host and variable in a large one. No timing here: the figures are the benchmark's."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]


def fleet(count: int, **bad: dict[str, Any]) -> dict[str, Any]:
    """A scheduler and count-1 CPU worker hosts at addresses nobody answers (no host is reached)."""
    hosts: dict[str, dict[str, Any]] = {f"w{index:04d}": {"ansible_host": f"192.0.2.{index % 250 + 1}"}
                                         for index in range(1, count)}
    for host, values in bad.items():
        hosts[host].update(values)
    return {"all": {"vars": {"ansible_connection": "ssh", "ansible_user": "nobody"},
                    "children": {"dask_scheduler": {"hosts": {"s0000": {"ansible_host": "192.0.2.254"}}},
                                 "dask_cpu_workers": {"hosts": hosts}}}}


def check(tmp_path: Path, inventory: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "hosts.yml"
    path.write_text(yaml.safe_dump(inventory))
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    return subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(path),
                           str(ROOT / "playbooks" / "check-inventory.yml")], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=600, check=False)


def test_a_thousand_hosts_pass_without_a_connection(tmp_path: Path) -> None:
    result = check(tmp_path, fleet(1000))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "1000 hosts (999 worker hosts) pass the inventory checks" in result.stdout
    assert "unreachable=1" not in result.stdout


def test_bad_hosts_are_named_with_their_variables(tmp_path: Path) -> None:
    result = check(tmp_path, fleet(300, w0007={"dask_worker_nthreads": "many"},
                                   w0250={"dask_wroker_nthreads": 2},
                                   w0123={"dask_worker_port_range": "9000"}))
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert 'host w0007: dask_worker_nthreads ("many") is not an integer' in output
    assert "host w0250: unknown variable(s) dask_wroker_nthreads (did you mean dask_worker_nthreads?)" in output
    assert "host w0123" in output and "dask_worker_port_range" in output
