#!/usr/bin/env bash
# A job on a cluster of its own (docs/jobs.md, "Ephemeral"): deploy cluster NAME with site.yml, run the job with
# playbooks/job.yml, then tear the cluster down with playbooks/teardown.yml whatever happened (the job's reports,
# the images and the controller's artifacts stay). Every other argument goes to each ansible-playbook run.
#   scripts/job.sh --ephemeral NAME -i INVENTORY -e dask_job_script=PATH [ansible-playbook options...]
# Exit status: the job's run (or site.yml's, when the cluster did not come up); teardown's when only it failed.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
if [ "${1:-}" != --ephemeral ] || [ -z "${2:-}" ]; then
  echo "usage: $0 --ephemeral NAME -i INVENTORY -e dask_job_script=PATH [ansible-playbook options...]" >&2
  exit 2
fi
name="$2"; shift 2
# A bad name (or any other setting) is refused by site.yml's checks before any host changes.
playbook() { ansible-playbook "$root/$1" -e "dask_cluster_name=$name" "${@:2}"; }
started=$(date +%s)
# The checks first: a name that is an existing cluster's (or any bad input) stops here, and nothing is torn down.
echo "[job] cluster $name: checking (playbooks/check.yml)"
playbook playbooks/check.yml -e dask_job_ephemeral=true "$@" || { echo "[job] cluster $name: refused by the checks; nothing changed" >&2; exit 2; }
echo "[job] cluster $name: deploying (site.yml)"
playbook site.yml -e dask_job_ephemeral=true "$@"; status=$?
if [ "$status" -eq 0 ]; then
  echo "[job] cluster $name: up after $(( $(date +%s) - started )) s; running the job"
  playbook playbooks/job.yml "$@"; status=$?
else
  echo "[job] cluster $name: site.yml failed (exit $status); the job did not run"
fi
echo "[job] cluster $name: tearing down (playbooks/teardown.yml)"
playbook playbooks/teardown.yml "$@"; removed=$?
[ "$removed" -eq 0 ] || echo "[job] cluster $name: teardown FAILED (exit $removed); remove it with playbooks/teardown.yml -e dask_cluster_name=$name" >&2
echo "[job] cluster $name: done after $(( $(date +%s) - started )) s (job exit $status)"
[ "$status" -ne 0 ] && exit "$status"
exit "$removed"
