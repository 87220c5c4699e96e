# Sourced by the GPU proof scripts: install wheels carried in .whl/ (the GPU machines cannot reach an index)
# and put this tree's verification client first on the path, so a stale carried wheel of it is never used.
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} PATH=/tmp/site/bin:$PATH
fi
export PYTHONPATH="$PWD/images/verify/src${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
