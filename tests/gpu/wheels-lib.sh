# shellcheck shell=bash
# Sourced by the scripts that carry wheels to a lent GPU machine (carry-wheels.sh, carry-browser.sh): the wheels
# for CPython 3.12 on manylinux x86_64 (the GPU machines' Python), without dependencies, never from this host's
# own Python; pinned names take their version from a pins file.

# pinned_specs PINS NAME...: prints NAME==VERSION for each name, as PINS pins it; fails naming a name it lacks.
pinned_specs() {
  local pins=$1 name version
  shift
  for name in "$@"; do
    version=$(grep -i "^${name}==" "$pins" | cut -d= -f3)
    [ -n "$version" ] || { echo "no pin for $name in $pins" >&2; return 1; }
    echo "${name}==${version}"
  done
}

# download_wheels DEST SPEC...: one wheel per spec into DEST; fails unless DEST then holds exactly that many.
download_wheels() {
  local dest=$1 n count platforms=()
  shift
  for n in 17 24 27 28 31 34 35; do platforms+=(--platform "manylinux_2_${n}_x86_64"); done
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp --abi cp312 \
    --abi abi3 --abi none --platform manylinux2014_x86_64 "${platforms[@]}" --platform any -d "$dest" "$@" \
    2> >(grep -v 'is ignored: it is neither a file nor a directory' >&2)
  count=$(find "$dest" -type f -name '*.whl' | wc -l)
  [ "$count" -eq "$#" ] || { echo "expected $# wheels in $dest, found $count" >&2; return 1; }
}
