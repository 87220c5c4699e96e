# shellcheck shell=bash
# Sourced by the GPU proofs that need RAPIDS from the carried parts (gpu-proof-scaling.sh, gpu-proof-polars.sh): as
# python-env.sh, and every part of tests/gpu/carry-wheels.sh must be on the machine (tests/gpu/README.md, "Carries").
CARRIED_REQUIRE=rapids
# shellcheck source=tests/gpu/python-env.sh
. tests/gpu/python-env.sh
