"""What a converge depends on, as named hashes (site.yml's fast rerun; module converged records and compares them):
the bundle's code, each host's settings, groups and model, the image tag, the controller's certificates and client
bundle, and whether a certificate is due for renewal. Facts a run itself changes (the records of deployed versions and
other clusters, GPU readings) are left out, so a run that changed nothing leaves the same parts as the next computes."""
from __future__ import annotations

import datetime
import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

# The bundle's code a converge runs (under the repository), images/ included (roles read its dask-config and verify).
CODE = ("site.yml", "playbooks", "roles", "collections/ansible_collections/dask_gpu", "images")
# Settings that change how a run goes, not what it deploys: a renewal (dask_tls_renew) is done by the run that asks for
# it, whose record holds the renewed certificates (controller_files), so the next run without it is a fast one.
RUN_ONLY = ("dask_fast_rerun", "dask_tls_renew")
# A host model's keys read from facts that a run writes or that change on their own (readings), not inputs.
VOLATILE = ("deployed", "builds", "other_clusters", "legacy", "gpu_health", "record", "autoscale_before",
            "recorded_before")


def _hash(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _tree(root: Path, paths: tuple[str, ...]) -> str:
    digest = hashlib.sha256()
    for name in paths:
        top = root / name
        files = [top] if top.is_file() else sorted(p for p in top.rglob("*") if p.is_file()
                                                    and "__pycache__" not in p.parts)
        for path in files:
            digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def _renewal_due(controller: Path, hosts: list[str], renew_days: int) -> str:
    """'' or every certificate site.yml renews when due (the hosts' and the client's; not the CA's, which is not
    renewed for age) that expires within renew_days, with its date."""
    paths = [controller / "tls" / f"{name}.crt" for name in sorted(hosts)] + [controller / "client" / "client.crt"]
    found = [path for path in paths if path.is_file()]
    if not found:
        return ""  # nothing made yet (a first run; tests/gpu/fast_rerun_model.py on a machine without cryptography)
    from cryptography import x509  # the controller's, as module cluster_pki uses

    limit = datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=renew_days)
    due = []
    for path in found:
        cert = x509.load_pem_x509_certificate(path.read_bytes())
        if cert.not_valid_after_utc <= limit:
            due.append(f"{path.name} expires {cert.not_valid_after_utc:%Y-%m-%d}")
    return ", ".join(due)


def _stable(model: Mapping[str, Any]) -> dict[str, Any]:
    """A host model without what a run writes or what moves on its own: an unfit GPU by its index and UUID only
    (its problems name live readings), a health error as its presence."""
    kept = {key: value for key, value in model.items() if key not in VOLATILE}
    kept["gpus_unfit"] = [{"index": gpu.get("index"), "uuid": gpu.get("uuid")}
                          for gpu in model.get("gpus_unfit") or [] if isinstance(gpu, Mapping)]
    kept["gpu_health_error"] = bool(model.get("gpu_health_error"))
    return kept


def converge_parts(settings: Mapping[str, Mapping[str, Any]], hosts: Mapping[str, Mapping[str, Any]],
                   groups: Mapping[str, list[str]], image_tag: str, repo: str, controller: str,
                   renew_days: int, inventory_groups: Mapping[str, list[str]] | None = None,
                   run_groups: tuple[str, ...] | list[str] = ()) -> dict[str, str]:
    """name -> hash (or the certificates due, for renewal_due) of everything a converge of these hosts depends on;
    inventory_groups: the inventory's groups in order (which host is the scheduler, monitoring or notebook host);
    run_groups: those of them a run fills itself (add_host), in whichever order the hosts got there (their members are
    compared sorted)."""
    root, artifacts = Path(repo), Path(controller)
    ordered = {name: sorted(members) if name in run_groups else list(members)
               for name, members in (inventory_groups or {}).items()}
    parts = {"code": _tree(root, CODE), "image_tag": image_tag,
             "controller_files": _tree(artifacts, tuple(name for name in ("tls", "client")
                                                        if (artifacts / name).is_dir())),
             "renewal_due": _renewal_due(artifacts, list(hosts), renew_days),
             "inventory_groups": _hash(ordered)}
    for name in sorted(hosts):
        model = _stable(hosts[name])
        given = {key: value for key, value in (settings.get(name) or {}).items() if key not in RUN_ONLY}
        parts[f"host {name}"] = _hash({"settings": given, "groups": sorted(groups.get(name) or [])})
        parts[f"model {name}"] = _hash(model)
    return parts


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"converge_parts": converge_parts}
