# shellcheck shell=bash
# Sourced by the bash GPU proofs: the carried wheels installed and the environment set (this tree's verification client
# first, console scripts, no NVLink multicast) by tests/gpu/carried.py, the one place that does it (tests/gpu/README.md).
carried_exports=$(python3 tests/gpu/carried.py ${CARRIED_REQUIRE:+--require "$CARRIED_REQUIRE"}) || exit 3
eval "$carried_exports"
