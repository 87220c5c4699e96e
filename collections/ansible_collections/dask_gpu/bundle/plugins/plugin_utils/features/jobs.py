"""Feature `jobs` (role dask_job, docs/jobs.md): a user's script run on the cluster (playbooks/job.yml). Its check
guards scripts/job.sh --ephemeral, which deploys a cluster for one job and removes it afterwards: the name must not
be a cluster that already exists on a host, or the job's teardown would remove that cluster."""
from __future__ import annotations

from ansible_collections.dask_gpu.bundle.plugins.plugin_utils import records
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.feature import CheckInput, Feature


def checks(inp: CheckInput) -> list[str]:
    if inp.get("dask_job_ephemeral") is not True:
        return []
    name = str(inp.get("dask_cluster_name") or "")
    if records.mine(inp.facts, name) or (name == "dask" and records.legacy(inp.facts)):
        return [f"dask_job_ephemeral: cluster {name} already exists on this host (its record "
                f"{records.path(name)}); an ephemeral job deploys a cluster of its own and removes it afterwards, "
                "so it must not take an existing cluster's name. Choose another (scripts/job.sh --ephemeral NAME), "
                "or run the job on this cluster with playbooks/job.yml"]
    return []


FEATURE = Feature(name="jobs", role="dask_job", containers=(("job", "job"),), checks=checks)
