# shellcheck shell=bash
# Sourced by the scripts that carry wheels to a lent GPU machine (carry-wheels.sh, carry-compose.sh, carry-browser.sh):
# the wheels for CPython 3.12 on manylinux x86_64 (the GPU machines' Python), without dependencies, never from this
# host's own Python; pinned names take their version from a pins file. Carries are reproducible (issues 63, 65): the
# same inputs make the same bytes (reproducible_tar), a tracked checksum file is rewritten only when its content changes
# (write_if_changed), and the carry folders are ignored through info/exclude (exclude_folders).

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

# exclude_folders NAME...: a `/NAME/` line in this checkout's info/exclude for each folder NAME of the repository root
# (run from the root), appended only when it is not there yet, so a carry is never committed by accident.
exclude_folders() {
  local exclude name
  exclude=$(git rev-parse --git-path info/exclude 2>/dev/null) || {
    echo "not a git checkout: $* left out of info/exclude" >&2
    return 0
  }
  mkdir -p "$(dirname "$exclude")"
  # a last line without its newline would swallow the first appended name
  if [ -s "$exclude" ] && [ -n "$(tail -c1 "$exclude")" ]; then echo >>"$exclude"; fi
  for name in "$@"; do
    name=${name#./} name=${name%/}
    grep -qxF "/${name}/" "$exclude" 2>/dev/null || echo "/${name}/" >>"$exclude"
  done
}

# exclude_carry_folders: exclude_folders for every carry folder of the repository root (tests/gpu/README.md,
# "Carries"), whichever script makes it.
exclude_carry_folders() {
  exclude_folders .whl .dockerbin .gpuparts .gpucerts .gpusnap
}

# reproducible_tar DIR MEMBER...: an uncompressed tar of DIR's MEMBERs on stdout, the same bytes for the same files
# whenever and by whomever they were made: members sorted by name, mtime 0, owner 0:0 by number, modes normalised
# (u+rw, no group or other write, read and directory/executable search for all), pax headers without atime, ctime or
# the process id in their names (GNU tar, 1.28 or later for --sort).
reproducible_tar() {
  local dir=$1
  shift
  LC_ALL=C tar -C "$dir" --sort=name --format=posix \
    --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
    --mtime=@0 --owner=0 --group=0 --numeric-owner --mode=u+rw,go-w,a+rX -cf - "$@"
}

# write_if_changed FILE: stdin into FILE, only when that changes FILE's content (a tracked file then stays unmodified
# in `git status` when a rerun makes the same bytes); says which.
write_if_changed() {
  local file=$1 new
  new=$(mktemp "${file}.XXXXXX")
  cat >"$new"
  if [ -f "$file" ] && cmp -s "$new" "$file"; then
    rm -f "$new"
    echo "$file: unchanged"
  else
    chmod 644 "$new"
    mv "$new" "$file"
    echo "$file: written"
  fi
}
