# Sourced by the GPU proof scripts: install wheels carried in .whl/ (the GPU machines cannot reach an index),
# unpack .ucx/ucx-site.tar.xz if carried (distributed-ucxx, UCX, RMM and nvtx, pruned to fit the transfer
# limit), and put this tree's verification client first on the path, so a stale carried wheel is never used.
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} PATH=/tmp/site/bin:$PATH
fi
if [ -f .ucx/ucx-site.tar.xz ]; then
  mkdir -p /tmp/ucx-site && tar -xJf .ucx/ucx-site.tar.xz -C /tmp/ucx-site
  export PYTHONPATH=/tmp/ucx-site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH="$PWD/images/verify/src${PYTHONPATH:+:$PYTHONPATH}"
# images/verify's console scripts (its pyproject's [project.scripts]), run from this tree's source
mkdir -p /tmp/verify-bin
for entry in dask-gpu-verify=cli dask-gpu-healthcheck=health dask-gpu-bench=bench; do
  printf '#!/bin/sh\nexec python3 -c "import sys; from dask_gpu_verify.%s import main; sys.exit(main())" "$@"\n' \
    "${entry#*=}" > "/tmp/verify-bin/${entry%%=*}"
  chmod 0755 "/tmp/verify-bin/${entry%%=*}"
done
# The units' scripts run `dask scheduler` and `dask cuda worker`: `dask` as `python3 -m dask`, the carried Dask
# whatever console script the install left (on a lent 4 x H200 `setsid dask` found none: "No such file").
printf '#!/bin/sh\nexec python3 -m dask "$@"\n' > /tmp/verify-bin/dask
chmod 0755 /tmp/verify-bin/dask
export PATH=/tmp/verify-bin:$PATH
export PYTHONUNBUFFERED=1
