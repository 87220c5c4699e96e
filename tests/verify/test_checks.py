"""The pure checks: each failure path yields a finding that names where it is."""
from __future__ import annotations

from typing import Any

import pytest
from dask_gpu_verify import checks

BASE = {"python": "3.11.2", "dask": "2026.7.1", "distributed": "2026.7.1", "dask-cuda": "26.10.0",
        "numpy": "2.4.6", "cupy": "cupy-cuda12x==14.2.0"}
HOSTS = {"tcp://10.0.0.2:4000": "gpu-a", "tcp://10.0.0.3:4000": "gpu-b"}


def test_identical_versions_pass() -> None:
    workers = {address: dict(BASE) for address in HOSTS}
    assert checks.version_mismatches(dict(BASE), dict(BASE), workers, HOSTS) == []


def test_client_without_cupy_passes() -> None:
    client = {**BASE, "cupy": None, "dask-cuda": None}
    workers = {address: dict(BASE) for address in HOSTS}
    assert checks.version_mismatches(client, dict(BASE), workers, HOSTS) == []


def test_worker_mismatch_names_host_and_worker() -> None:
    workers = {address: dict(BASE) for address in HOSTS}
    workers["tcp://10.0.0.3:4000"]["distributed"] = "2026.6.0"
    (finding,) = checks.version_mismatches(dict(BASE), dict(BASE), workers, HOSTS)
    assert finding.host == "gpu-b" and finding.worker == "tcp://10.0.0.3:4000"
    assert "distributed is 2026.6.0" in finding.message


def test_worker_missing_package_is_a_mismatch() -> None:
    workers = {address: dict(BASE) for address in HOSTS}
    workers["tcp://10.0.0.2:4000"]["cupy"] = None
    (finding,) = checks.version_mismatches(dict(BASE), dict(BASE), workers, HOSTS)
    assert "cupy is not installed here" in finding.message


def test_client_mismatch_is_reported() -> None:
    workers = {address: dict(BASE) for address in HOSTS}
    (finding,) = checks.version_mismatches({**BASE, "python": "3.12.3"}, dict(BASE), workers, HOSTS)
    assert finding.host == "client" and "python is 3.12.3 on the client" in finding.message


def test_client_python_patch_level_difference_passes() -> None:
    workers = {address: dict(BASE) for address in HOSTS}
    assert checks.version_mismatches({**BASE, "python": "3.11.7"}, dict(BASE), workers, HOSTS) == []
    (finding,) = checks.version_mismatches(dict(BASE), dict(BASE), {**workers, "tcp://10.0.0.3:4000":
                                                                    {**BASE, "python": "3.11.7"}}, HOSTS)
    assert finding.host == "gpu-b" and "python is 3.11.7 here" in finding.message  # servers: exact


def _gpu(uuid: str, cvd: str | None, count: int = 2) -> dict[str, object]:
    return {"uuid": uuid, "cuda_visible_devices": cvd, "device_count": count, "hostname": "h"}


def test_distinct_pinned_gpus_pass() -> None:
    gpus = {"w0": _gpu("GPU-a", "0,1"), "w1": _gpu("GPU-b", "1,0")}
    assert checks.gpu_placement(gpus, {"w0": "h", "w1": "h"}) == []


def test_two_workers_on_one_gpu_fail_with_uuid() -> None:
    gpus = {"w0": _gpu("GPU-a", "0,1"), "w1": _gpu("GPU-a", "0,1")}
    (finding,) = checks.gpu_placement(gpus, {"w0": "h", "w1": "h"})
    assert finding.gpu == "GPU-a" and finding.host == "h" and "same GPU as worker w0" in finding.message


def test_same_uuid_on_different_hosts_is_not_a_clash() -> None:
    gpus = {"w0": _gpu("GPU-a", "0", 1), "w1": _gpu("GPU-a", "0", 1)}
    assert checks.gpu_placement(gpus, {"w0": "h1", "w1": "h2"}) == []


def test_unpinned_worker_on_multi_gpu_host_fails() -> None:
    (finding,) = checks.gpu_placement({"w0": _gpu("GPU-a", None, 4)}, {"w0": "h"})
    assert "not pinned" in finding.message


@pytest.mark.parametrize(("worker_cores", "gpu_cores", "fails"), [
    (list(range(16, 32)), list(range(16)), True),  # the other socket's cores only
    (list(range(16)), list(range(16)), False), ([0, 1, 2, 3], list(range(16)), False),  # its own, or some of them
    (list(range(32)), list(range(16)), False),  # not pinned (dask-cuda could not set it): not on the wrong socket
    (list(range(16, 32)), None, False), ([], list(range(16)), False)])  # NVML or the worker could not say
def test_a_worker_on_none_of_its_gpus_cores_fails(worker_cores: list[int], gpu_cores: list[int] | None,
                                                  fails: bool) -> None:
    health: dict[str, dict[str, Any]] = {"w1": {"uuid": "GPU-b", "worker_cores": worker_cores, "cpu_cores": gpu_cores},
              "w0": {"uuid": "GPU-a", "worker_cores": list(range(16)), "cpu_cores": list(range(16))}}
    findings = checks.cpu_affinity(health, {"w0": "h", "w1": "h"})
    assert [(finding.worker, finding.gpu, finding.host) for finding in findings] == ([("w1", "GPU-b", "h")] if fails
                                                                                  else [])
    if fails:
        assert "runs on CPU cores 16-31, none of them its GPU's (0-15)" in findings[0].message


def test_missing_gpu_only_fails_when_required() -> None:
    gpus = {"w0": {"error": "no CUDA device visible", "device_count": 0}}
    assert checks.missing_gpus(gpus, {"w0": "h"}, gpu_required=False) == []
    (finding,) = checks.missing_gpus(gpus, {"w0": "h"}, gpu_required=True)
    assert finding.host == "h" and "no CUDA device visible" in finding.message


def test_worker_counts_match_ip_or_hostname() -> None:
    workers = {"tcp://10.0.0.2:1": {"host": "10.0.0.2", "hostname": "gpu-a"}}
    assert checks.worker_counts(workers, 1, {"gpu-a": 1}) == []
    assert checks.worker_counts(workers, 1, {"10.0.0.2": 1}) == []
    findings = checks.worker_counts(workers, 3, {"gpu-a": 2, "gpu-b": 1})
    assert [f.host for f in findings] == [None, "gpu-a", "gpu-b"]


def test_wrong_result_is_a_finding() -> None:
    assert checks.result_error(1e12, 1e12 * (1 + 1e-12), 1e-9) is None
    finding = checks.result_error(1e12, 1.1e12, 1e-9)
    assert finding is not None and "differs from the closed form" in finding.message


def test_worker_counts_match_worker_names_from_dask_cuda() -> None:
    workers = {"tls://10.0.0.2:1": {"host": "10.0.0.2", "hostname": "node", "name": "gpu-a-0"},
               "tls://10.0.0.2:2": {"host": "10.0.0.2", "hostname": "node", "name": "gpu-a-1"},
               "tls://10.0.0.3:1": {"host": "10.0.0.3", "hostname": "cpu", "name": "cpu-b"}}
    assert checks.worker_counts(workers, 3, {"gpu-a": 2, "cpu-b": 1}) == []
    (finding,) = checks.worker_counts(workers, 3, {"gpu-a": 3})
    assert finding.host == "gpu-a" and "found 2" in finding.message
