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

# The bundle's code a converge runs (under the repository); images/ is in the image tag.
CODE = ("site.yml", "playbooks", "roles", "collections/ansible_collections/dask_gpu")
# Settings that change how a run goes, not what it deploys.
RUN_ONLY = ("dask_fast_rerun",)
# A host model's keys read from facts that a run writes or that change on their own (readings), not inputs.
VOLATILE = ("deployed", "other_clusters", "legacy", "gpu_health", "record")


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


def _renewal_due(tls: Path, renew_days: int) -> str:
    """'' or the first certificate on the controller that expires within renew_days (site.yml renews it)."""
    from cryptography import x509  # the controller's, as module cluster_pki uses

    limit = datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=renew_days)
    for path in sorted(tls.glob("*.crt")):
        cert = x509.load_pem_x509_certificate(path.read_bytes())
        if cert.not_valid_after_utc <= limit:
            return f"{path.name} expires {cert.not_valid_after_utc:%Y-%m-%d}"
    return ""


def converge_parts(settings: Mapping[str, Mapping[str, Any]], hosts: Mapping[str, Mapping[str, Any]],
                   groups: Mapping[str, list[str]], image_tag: str, repo: str, controller: str,
                   renew_days: int) -> dict[str, str]:
    """name -> hash (or a reason, for renewal_due) of everything a converge of these hosts depends on."""
    root, artifacts = Path(repo), Path(controller)
    parts = {"code": _tree(root, CODE), "image_tag": image_tag,
             "controller_files": _tree(artifacts, tuple(name for name in ("tls", "client")
                                                        if (artifacts / name).is_dir())),
             "renewal_due": _renewal_due(artifacts / "tls", renew_days) if (artifacts / "tls").is_dir() else ""}
    for name in sorted(hosts):
        model = {key: value for key, value in hosts[name].items() if key not in VOLATILE}
        given = {key: value for key, value in (settings.get(name) or {}).items() if key not in RUN_ONLY}
        parts[f"host {name}"] = _hash({"settings": given, "groups": sorted(groups.get(name) or [])})
        parts[f"model {name}"] = _hash(model)
    return parts


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"converge_parts": converge_parts}
