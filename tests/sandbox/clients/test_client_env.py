"""A client made from the cluster's lock (scripts/client-env.sh over the client bundle site.yml wrote): it connects
over TLS with `Client()` and no argument (env.sh), `get_versions(check=True)` passes, and no version-mismatch
warning is raised (warnings are errors in the client process). The user's own package of the sandbox inventory
(dask_images_extra_packages: tabulate) is in the lock and imports on every worker. A client from the lock of the
user's own image: tests/sandbox/clusters (cluster blue)."""
from __future__ import annotations

from pathlib import Path

import live


def test_a_client_made_from_the_lock_matches_the_cluster(tmp_path: Path) -> None:
    bundle = live.ephemeral_dir() / "artifacts" / "client"
    lock = (bundle / "requirements.lock").read_text()
    assert "\ndistributed==" in lock and "\ndask-cuda==" in lock, lock[:500]
    run, made, seconds = live.lock_client("artifacts", tmp_path / "venv")
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    assert "sum 6" in run.stdout and "Mismatch" not in run.stderr, run.stderr[-2000:]
    lines = dict(line.split(" ", 1) for line in run.stdout.splitlines())
    assert lines["client"] == lines["scheduler"], run.stdout
    print(f"[clients] lock-made client in {seconds:.0f} s ({made}); {run.stdout.strip()}")


def test_the_users_own_package_is_in_the_lock_and_on_every_worker() -> None:
    lock = (live.ephemeral_dir() / "artifacts" / "client" / "requirements.lock").read_text()
    pinned = [line for line in lock.splitlines() if line.startswith("tabulate==")]
    assert pinned, lock[:500]
    with live.connect(timeout=60) as client:
        found = client.run(lambda: __import__("tabulate").__version__)
    assert found and set(found.values()) == {pinned[0].split("==")[1]}, found
    print(f"[clients] dask_images_extra_packages: {pinned[0]} in the lock, imported on {len(found)} workers")


def test_the_bundle_publishes_how_to_partition_for_this_cluster() -> None:
    """The client bundle's dask.yaml and env.sh carry the cluster's partitioning (dask-gpu.dataframe.*): the sandbox
    has no GPU worker, so 256 MiB partitions, at least one per worker, and its workers."""
    import yaml

    bundle = live.ephemeral_dir() / "artifacts" / "client"
    published = yaml.safe_load((bundle / "dask.yaml").read_text())["dask-gpu"]["dataframe"]
    with live.connect(timeout=60) as client:
        workers = len(client.scheduler_info(n_workers=-1)["workers"])
    assert published == {"partition-bytes": 256 * 2 ** 20, "partitions-per-worker": 1, "workers": workers}, published
    exported = {line.split("=", 1)[0].removeprefix("export "): line.split("=", 1)[1]
                for line in (bundle / "env.sh").read_text().splitlines() if line.startswith("export DASK_DASK_GPU")}
    assert exported == {"DASK_DASK_GPU__DATAFRAME__PARTITION_BYTES": str(256 * 2 ** 20),
                        "DASK_DASK_GPU__DATAFRAME__PARTITIONS_PER_WORKER": "1",
                        "DASK_DASK_GPU__DATAFRAME__WORKERS": str(workers)}, exported
    print(f"[clients] published partitioning: {published}")
