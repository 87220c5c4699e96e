#!/usr/bin/env bash
# Static checks, no skip lists: yamllint, ansible-lint (production profile), ruff, mypy.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=.venv/bin
$bin/yamllint --strict .
if compgen -G "roles/*" >/dev/null || [ -f site.yml ]; then $bin/ansible-lint --profile production; fi
$bin/ruff check images/verify scripts tests roles/*/filter_plugins roles/gpu_facts/files
$bin/mypy --ignore-missing-imports --strict --allow-untyped-calls images/verify/src
$bin/mypy --ignore-missing-imports --strict roles/dask/filter_plugins scripts/compose-gen.py
$bin/mypy --ignore-missing-imports --strict roles/gpu_facts/filter_plugins roles/gpu_facts/files/gpu_facts.py
$bin/mypy --ignore-missing-imports --strict tests/monitoring
