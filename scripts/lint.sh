#!/usr/bin/env bash
# Static checks, no skip lists: yamllint, ansible-lint (production profile), ruff, mypy, shellcheck.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=.venv/bin
$bin/yamllint --strict .
$bin/ansible-lint --profile production
$bin/ruff check images/verify scripts tests collections roles/*/filter_plugins roles/gpu_facts/files roles/dask/files roles/dask_autoscale/files roles/nvidia_container_toolkit/files examples
$bin/mypy --ignore-missing-imports --strict --allow-untyped-calls images/verify/src
MYPYPATH=collections $bin/mypy --ignore-missing-imports --strict --namespace-packages --explicit-package-bases \
  collections/ansible_collections/dask_gpu/bundle/plugins scripts/compose-gen.py
$bin/mypy --ignore-missing-imports --strict roles/gpu_facts/filter_plugins roles/gpu_facts/files/gpu_facts.py
$bin/mypy --ignore-missing-imports --strict tests/monitoring
$bin/mypy --ignore-missing-imports --strict roles/dask/files/wait_ports.py tests/gpu/harness.py tests/gpu/frames_scaling.py \
  tests/gpu/polars_scaling.py tests/gpu/carried.py tests/gpu/units.py tests/gpu/containers.py tests/gpu/proofs.py \
  tests/gpu/autoscale_release.py tests/gpu/per_gpu_containers.py roles/dask_autoscale/files/autoscale_agent.py \
  roles/dask_autoscale/files/gpu_turns.py roles/nvidia_container_toolkit/files/toolkit_probe.py tests/gpu/gpuhost.py
# Every bash script: the project's and the GPU proofs' (tests/gpu/README.md); -x follows the files they source.
$bin/shellcheck -x scripts/*.sh tests/gpu/*.sh
$bin/mypy --ignore-missing-imports --strict --allow-untyped-calls examples/jobs
$bin/mypy --ignore-missing-imports --strict --allow-untyped-calls tests/fleet
