#!/usr/bin/env bash
# Data frames on 1 and every GPU of a lent machine (issue 42): tests/gpu/frames_scaling.py PHASE through the rendered
# cluster (tests/gpu/harness.py). The carried wheels: tests/gpu/install-parts.sh; the TLS files in .gpucerts
# (tests/gpu/certs.yml).
#   PHASE=sweep|transports|change|pool|defaults|shipped OUT=/tmp/out BUDGET=520 tests/gpu/gpu-proof-scaling.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${OUT:?OUT}" phase="${PHASE:?PHASE}"
mkdir -p "$out"
# shellcheck source=tests/gpu/install-parts.sh
. tests/gpu/install-parts.sh
# ucxx only where the UCX set is carried (.gpuparts/ucx): the tcp and tls phases (defaults) do not need it.
python3 -c 'import importlib.util, cudf, dask_cudf, dask, distributed, dask_cuda, numpy, ansible, yaml, jinja2; ucxx = importlib.import_module("ucxx") if importlib.util.find_spec("ucxx") else None; print("cudf", cudf.__version__, "dask", dask.__version__, "dask-cuda", dask_cuda.__version__, "numpy", numpy.__version__, "ucxx", ucxx.__version__ if ucxx else "not carried", "ansible-core", ansible.__version__ if hasattr(ansible, "__version__") else "?")' | tee "$out/versions-$phase.txt"
{ nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader; nproc; free -g | sed -n 2p; } | tee "$out/device.txt"
[ "$phase" != sweep ] || nvidia-smi topo -m >"$out/topo.txt" 2>&1 || true
status=0
# shellcheck disable=SC2086  # SCALING_ARGS: options, split on purpose
python3 tests/gpu/frames_scaling.py --phase "$phase" --out "$out" --budget "${BUDGET:-520}" ${SCALING_ARGS:-} || status=$?
# Scheduler and worker logs of failed starts stay; the ETL data does not travel back.
du -sh "$out" | tail -1
exit "$status"
