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
export PYTHONUNBUFFERED=1
