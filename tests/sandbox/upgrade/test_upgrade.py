"""An upgrade that changes the Dask versions, both ways, on the sandbox with a workload running (run by hand after
the other suites: `tests/sandbox/suites.py upgrade`; it builds and distributes a second release's images, which CI's
time does not allow). RAPIDS 26.10 and 26.08 differ in dask-cuda (26.10.0, 26.8.0).

1. Without the acknowledgement the change is refused before anything changes.
2. Restart everything at once (dask_upgrade_restart_all_ack) to 26.08: how long the run takes, how long clients
   cannot compute, and what the running work loses.
3. Blue/green back to 26.10: cluster `green` deployed beside `dask` on other ports while dask computes, a client on
   green computes, dask torn down; dask's work never stops.
"""
from __future__ import annotations

import json
import threading
import time
from typing import Any

import live
from distributed import Client
from distributed.security import Security
from packaging.version import Version

OLD = "26.08"


class Probe:
    """Submits a small task every half second (a new client after a failure) and keeps when it could not."""

    def __init__(self, address: str | None = None, security: Any = None) -> None:
        self.address, self.security = address, security
        self.failures: list[float] = []
        self.successes: list[float] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def client(self) -> Client:
        if self.address:
            return Client(self.address, security=self.security, timeout=10)
        return live.connect(timeout=10)

    def run(self) -> None:
        client = None
        while not self.stop.is_set():
            try:
                client = client or self.client()
                assert client.submit(sum, [1, 2], pure=False).result(timeout=10) == 3
                self.successes.append(time.time())
            except Exception:  # noqa: BLE001 - an outage is what is measured
                self.failures.append(time.time())
                if client is not None:
                    client.close()
                client = None
            time.sleep(0.5)
        if client is not None:
            client.close()

    def outage(self) -> float:
        """Seconds from the first failed submission to the first success after the last failure."""
        if not self.failures:
            return 0.0
        after = [t for t in self.successes if t > self.failures[-1]]
        return round((after[0] if after else time.time()) - self.failures[0], 1)

    def __enter__(self) -> Probe:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=60)


def recorded_versions(host: str, name: str = "dask") -> dict[str, str]:
    record = json.loads(live.on_host(host, "cat", f"/etc/ansible/facts.d/dask_cluster_{name}.fact").stdout)
    return dict(record.get("deployed", {}).get("versions", {}))


def test_a_version_change_without_the_acknowledgement_is_refused_before_anything_changes() -> None:
    before = recorded_versions(live.SCHEDULER)
    run = live.playbook("playbooks/check.yml", "-e", f"dask_rapids_release={OLD}")
    output = " ".join((run.stdout + " " + run.stderr).split())  # molecule's ansible.cfg sends failures to stderr
    assert run.returncode != 0 and "would mix versions" in output and "dask-cuda 26.8.0" in output, output[-2000:]
    assert recorded_versions(live.SCHEDULER) == before
    print("[upgrade] refused: " + output[output.index("inventory: hosts"):][:420])


def test_restart_everything_at_once() -> None:
    with live.connect(timeout=60) as client:
        held = client.submit(list, range(1000), pure=False)  # a result held in a worker's memory
        held.result(timeout=60)
        with Probe() as probe:
            started = time.monotonic()
            run = live.playbook("site.yml", "-e", f"dask_rapids_release={OLD}",
                                "-e", "dask_upgrade_restart_all_ack=true", timeout=3600)
            seconds = round(time.monotonic() - started, 1)
            assert run.returncode == 0, run.stdout[-4000:]
            live.wait_until(lambda: probe.successes and probe.successes[-1] > time.time() - 2, 120, "computing again")
        lost = "kept"
        try:
            held.result(timeout=10)
        except Exception as error:  # noqa: BLE001 - what the running work lost
            lost = f"lost ({type(error).__name__})"
    versions = {host: recorded_versions(host)["dask-cuda"] for host in (live.SCHEDULER, *live.WORKERS)}
    assert set(versions.values()) == {"26.8.0"}, versions
    steps = [line.strip() for line in run.stdout.splitlines() if "restart now, all at once" in line]
    assert steps, run.stdout[-3000:]
    live.record("upgrade", {"way": "restart everything at once (26.10 -> 26.08)", "site_yml_s": seconds,
                            "clients_could_not_compute_s": probe.outage(), "scattered_data": lost,
                            "dask_cuda_recorded": versions})


def test_blue_green_to_a_second_cluster_while_the_first_keeps_working() -> None:
    green_vars = live.ephemeral_dir() / "green-vars.json"
    controller = live.ephemeral_dir() / "artifacts-green"
    green_vars.write_text(json.dumps({
        "dask_cluster_name": "green", "dask_rapids_release": "26.10", "dask_scheduler_port": 9786,
        "dask_dashboard_port": 9787, "dask_worker_http_port": 9790, "dask_monitoring_enabled": False,
        "dask_notebook_port": 9888,
        "dask_images_distribution": "archive", "dask_controller_dir": str(controller)}))
    with Probe() as old:
        started = time.monotonic()
        run = live.playbook("site.yml", "-e", f"@{green_vars}", timeout=3600)
        deploy = round(time.monotonic() - started, 1)
        assert run.returncode == 0, run.stdout[-4000:]
        env = dict(line.removeprefix("export ").split("=", 1) for line in
                   (controller / "client" / "env.sh").read_text().splitlines() if line.startswith("export "))
        security = Security(tls_ca_file=env["DASK_DISTRIBUTED__COMM__TLS__CA_FILE"],
                            tls_client_cert=env["DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT"],
                            tls_client_key=env["DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY"], require_encryption=True)
        with Client(env["DASK_SCHEDULER_ADDRESS"], security=security, timeout=30) as green:
            green.wait_for_workers(len(live.WORKERS), timeout=120)
            assert green.submit(sum, [1, 2, 3], pure=False).result(timeout=60) == 6
            versions = green.run(lambda: __import__("dask_cuda").__version__)
        # dask_cuda.__version__ keeps the release's own spelling (26.10.00): compared as versions.
        assert {Version(v) for v in versions.values()} == {Version("26.10.0")}, versions
    assert old.outage() == 0.0, f"the old cluster stopped computing for {old.outage()} s"
    started = time.monotonic()
    gone = live.playbook("playbooks/teardown.yml", "-e", f"dask_rapids_release={OLD}",
                         timeout=1800)
    teardown = round(time.monotonic() - started, 1)
    assert gone.returncode == 0, gone.stdout[-4000:]
    with Probe(env["DASK_SCHEDULER_ADDRESS"], security) as new:
        time.sleep(5)
    assert new.outage() == 0.0 and new.successes
    live.record("upgrade", {"way": "blue/green (cluster green on 26.10 beside dask on 26.08)",
                            "green_site_yml_s": deploy,
                            "old_cluster_could_not_compute_s": 0.0, "old_teardown_s": teardown,
                            "green_dask_cuda": sorted(set(versions.values()))})
