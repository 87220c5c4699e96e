"""Feature `jobs` (role dask_job, docs/jobs.md): a user's script run on the cluster (playbooks/job.yml). Its check
guards scripts/job.sh --ephemeral, which deploys a cluster for one job and removes it afterwards: the name must not
be a cluster that already exists on a host, or the job's teardown would remove that cluster."""
from __future__ import annotations

from typing import Any

from ansible_collections.dask_gpu.bundle.plugins.plugin_utils import records
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.feature import CheckInput, Feature
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.spec import (
    base,
    client_env,
    polars_tables,
    with_frames_gpu,
)

# Where a job's folder is inside its container.
JOB_DIR = "/job"


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


def job_folder(cluster: dict[str, Any], job: dict[str, Any]) -> str:
    """The job's folder on its host (in the clients' reports folder, removed with the cluster)."""
    return f"{cluster['paths']['data']}/reports/jobs/{job['id']}"


def job_spec(cluster: dict[str, Any], settings: dict[str, Any], job: dict[str, Any],
             host: dict[str, Any] | None = None) -> dict[str, Any]:
    """A job (plugin_utils/jobs.py's plan) as a client container on a worker host, started detached: the worker
    image, the host's TLS material, the job's folder at /job (its script in /job/src, its own files in /job/work),
    a GPU of the host when the images carry cuDF (frames_gpu: a job that builds dask-cudf collections makes cuDF
    objects), else none. dask-gpu-job runs the script, keeps its output and report there and enforces the timeout."""
    spec = base(cluster, "job", f"job {job['name']} on cluster {cluster['name']}", cluster["images"]["worker"],
                suffix=str(job["id"]))
    argv = ["dask-gpu-job", "--scheduler", cluster["scheduler_address"], "--job-dir", JOB_DIR, "--name",
            job["name"], "--timeout", str(int(job["timeout"])), f"{JOB_DIR}/src/{job['entry']}"]
    spec.update(argv=argv + (["--", *job["args"]] if job["args"] else []),
                env={**job["env"], **client_env(cluster), "HOME": JOB_DIR + "/work"})
    spec["volumes"] = spec["volumes"] + [f"{job_folder(cluster, job)}:{JOB_DIR}"] + polars_tables(cluster)
    return with_frames_gpu(spec, cluster, host, settings)


FEATURE = Feature(name="jobs", role="dask_job", containers=(("job", "job"),), checks=checks,
                  filters=(("job_spec", job_spec), ("job_folder", job_folder)))
