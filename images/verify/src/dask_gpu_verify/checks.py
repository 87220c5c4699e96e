"""Pure checks over what the probes reported. Each returns the findings that fail."""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from .findings import Finding
from .gpu_affinity import ranges

Versions = Mapping[str, str | None]


def version_mismatches(client: Versions, scheduler: Versions,
                       workers: Mapping[str, Versions], hosts: Mapping[str, str]) -> list[Finding]:
    """Every package must have one version across the scheduler and workers, and the client must
    match wherever it has the package too (a controller without CuPy is fine). The client's Python
    must match to the minor version only: 3.11.7 against the image's 3.11.2 pickles alike (docs/client.md)."""
    findings: list[Finding] = []
    servers: dict[str, Versions] = {"scheduler": scheduler, **workers}
    packages = sorted({name for found in (client, scheduler, *workers.values()) for name in found})
    for package in packages:
        reference = scheduler.get(package)
        for who, found in servers.items():
            value = found.get(package)
            if value != reference:
                findings.append(Finding(
                    "versions", f"{package} is {value or 'not installed'} here but "
                    f"{reference or 'not installed'} on the scheduler",
                    host=hosts.get(who), worker=None if who == "scheduler" else who))
        client_value = client.get(package)
        if client_value is not None and _comparable(package, client_value) != _comparable(package, reference):
            findings.append(Finding("versions", f"{package} is {client_value} on the client but "
                                    f"{reference or 'not installed'} on the scheduler", host="client"))
    return findings


def gpu_placement(gpus: Mapping[str, Mapping[str, Any]], hosts: Mapping[str, str]) -> list[Finding]:
    """Each GPU worker computes on one GPU of its own: pinned through CUDA_VISIBLE_DEVICES when the
    host has several, and no two workers of a host on the same GPU UUID."""
    findings: list[Finding] = []
    by_host: dict[str, dict[str, str]] = defaultdict(dict)
    for worker, info in sorted(gpus.items()):
        host = hosts.get(worker)
        if "uuid" not in info:
            continue
        if info.get("device_count", 0) > 1 and not info.get("cuda_visible_devices"):
            findings.append(Finding("gpu-placement", f"sees {info['device_count']} GPUs and has no "
                                    "CUDA_VISIBLE_DEVICES: it is not pinned to one GPU",
                                    host=host, worker=worker, gpu=info["uuid"]))
        other = by_host[host or "?"].get(info["uuid"])
        if other is not None:
            findings.append(Finding("gpu-placement", f"computes on the same GPU as worker {other}",
                                    host=host, worker=worker, gpu=info["uuid"]))
        by_host[host or "?"][info["uuid"]] = worker
    return findings


def missing_gpus(gpus: Mapping[str, Mapping[str, Any]], hosts: Mapping[str, str],
                 gpu_required: bool) -> list[Finding]:
    """When GPUs are required, every worker must have a usable one."""
    if not gpu_required:
        return []
    return [Finding("gpu", f"no usable GPU: {info.get('error', 'unknown error')}", host=hosts.get(worker),
                    worker=worker)
            for worker, info in sorted(gpus.items()) if "uuid" not in info]


def gpu_health(health: Mapping[str, Mapping[str, Any]], hosts: Mapping[str, str]) -> list[Finding]:
    """A GPU worker whose GPU NVML judges unfit (uncorrectable ECC errors, a pending or failed row remap, a degraded
    PCIe link or NVLink, hardware clock slowdown, over its slowdown temperature): one finding per problem."""
    return [Finding("gpu-health", f"GPU {info.get('uuid')}: {problem}", host=hosts.get(worker), worker=worker)
            for worker, info in health.items() for problem in (info.get("health") or {}).get("problems", [])]


def cpu_affinity(health: Mapping[str, Mapping[str, Any]], hosts: Mapping[str, str]) -> list[Finding]:
    """A GPU worker pinned to CPU cores none of which NVML names for its GPU: on a host with GPUs on two sockets, a
    worker on the other socket (dask cuda worker's own choice without the bundle's preload, gpu_affinity.py)."""
    findings = []
    for worker, info in sorted(health.items()):
        own, cores = info.get("worker_cores") or [], info.get("cpu_cores") or []
        if own and cores and not set(own) & set(cores):
            findings.append(Finding("gpu-placement", f"runs on CPU cores {ranges(own)}, none of them its GPU's "
                                    f"({ranges(cores)}): every copy between the GPU and host memory crosses "
                                    "sockets", host=hosts.get(worker), worker=worker, gpu=info.get("uuid")))
    return findings


def worker_counts(workers: Mapping[str, Mapping[str, Any]], expected_total: int,
                  expected_per_host: Mapping[str, int]) -> list[Finding]:
    """Compare registered workers with what the inventory expects, naming hosts that fall short.

    `workers` maps a worker address to {"host": ip, "hostname": name, "name": worker name}; an expected
    host matches the IP, the hostname, or the worker name itself or as NAME-<n> (dask-cuda's naming)."""
    findings: list[Finding] = []
    if len(workers) < expected_total:
        findings.append(Finding("workers", f"{len(workers)} of {expected_total} expected workers registered"))
    for host, expected in sorted(expected_per_host.items()):
        found = sum(1 for info in workers.values() if _on_host(host, info))
        if found < expected:
            findings.append(Finding("workers", f"expected {expected} workers on this host, found {found}",
                                    host=host))
    return findings


def result_error(expected: float, got: float, tolerance: float) -> Finding | None:
    """The workload's answer must match the closed form to a relative tolerance."""
    error = abs(got - expected) / abs(expected) if expected else abs(got)
    if error > tolerance:
        return Finding("workload", f"result {got!r} differs from the closed form {expected!r} "
                       f"(relative error {error:.3g} > {tolerance:g})")
    return None


def _comparable(package: str, version: str | None) -> str | None:
    """What must agree between the client and the cluster: Python's major.minor, any other package exactly."""
    if package == "python" and version is not None:
        return ".".join(version.split(".")[:2])
    return version


def _on_host(host: str, info: Mapping[str, Any]) -> bool:
    name = str(info.get("name", ""))
    return host in (info.get("host"), info.get("hostname"), name) or name.rsplit("-", 1)[0] == host
