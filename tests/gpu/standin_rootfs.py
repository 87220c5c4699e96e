#!/usr/bin/env python3
"""Helpers of tests/gpu/standin-image.sh, which builds a STAND-IN for the production worker and scheduler images
on a lent GPU machine (no registry, no network, and the 2.2 GB image cannot travel).

    standin_rootfs.py closure SITE ROOTS...     (machine's python) copy into SITE every distribution that ROOTS
                                                need and SITE lacks, from the machine's Python environment
    standin_rootfs.py trace                     (the stand-in's python) exercise what the containers run, print
                                                JSON: CuPy's CUDA root and every file-backed mapping
    standin_rootfs.py files OUT TRACE.json PATHS...   canonical list of files for the root filesystem: PATHS
                                                (walked), the traced mappings, every ELF's ldd dependencies and
                                                every symlink's target; the driver's libraries are left out (CDI)
    standin_rootfs.py dockerfile DOCKERFILE BASE    the production Dockerfile's runtime, scheduler and worker
                                                stages without RUN/COPY, on top of BASE (the stand-in rootfs)
    standin_rootfs.py versions SITE PINS        each distribution in SITE against the pins file
    standin_rootfs.py install-project PROJECT SITE BIN PYTHON   a src-layout project without a build backend
                                                (images/verify): its packages, a dist-info, console scripts
"""
from __future__ import annotations

import importlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

DRIVER = re.compile(r"^(libcuda\.so|libnvidia-[a-z0-9-]+\.so|libcudadebugger\.so|nvidia-smi$)")
STDLIB_SKIP = {"site-packages", "dist-packages", "test", "idlelib", "tkinter", "turtledemo", "ensurepip",
               "lib2to3", "pydoc_data", "unittest/test"}


def canon_name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


# ---- closure -------------------------------------------------------------------------------------------
def closure(site: Path, roots: list[str]) -> int:
    import importlib.metadata as md

    from packaging.requirements import Requirement

    def index(paths: list[str]) -> dict[str, md.Distribution]:
        found: dict[str, md.Distribution] = {}
        for dist in md.distributions(path=paths):
            found.setdefault(canon_name(dist.metadata["Name"]), dist)
        return found

    # STANDIN_HOST_SITES (colon-separated) go first: the carried RAPIDS wheels' site, whose numpy the machine's
    # numba-cuda needs with cuDF (tests/gpu/carried.py).
    extra = [p for p in os.environ.get("STANDIN_HOST_SITES", "").split(":") if p and os.path.isdir(p)]
    host_paths = extra + [p for p in sys.path if p.endswith(("site-packages", "dist-packages")) and os.path.isdir(p)]
    target = index([str(site)])
    host = index(host_paths)
    queue = [(root.lstrip("?"), root.startswith("?"), "root") for root in roots]
    seen: set[str] = set()
    copied, missing, conflicts = [], [], []
    while queue:
        name, optional, why = queue.pop(0)
        key = canon_name(name)
        if key in seen:
            continue
        seen.add(key)
        dist = target.get(key)
        if dist is None:
            dist = host.get(key)
            if dist is None:
                if not optional:
                    missing.append(f"{name} (needed by {why})")
                continue
            copy_dist(dist, site)
            copied.append(f"{dist.metadata['Name']}=={dist.version}")
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker and not req.marker.evaluate({"extra": ""}):
                continue
            have = target.get(canon_name(req.name)) or host.get(canon_name(req.name))
            if have is not None and req.specifier and not req.specifier.contains(have.version, prereleases=True):
                conflicts.append(f"{dist.metadata['Name']} needs {req}, the stand-in has {have.version}")
            queue.append((req.name, False, dist.metadata["Name"]))
    print(json.dumps({"copied_from_machine": sorted(copied), "missing": missing, "conflicts": conflicts,
                      "host_paths": host_paths}, indent=1))
    return 0


def copy_dist(dist, site: Path) -> None:  # noqa: ANN001
    base = Path(dist.locate_file("")).resolve()
    files = dist.files
    if files is None:  # no RECORD: the top-level packages and the metadata folder
        names = (dist.read_text("top_level.txt") or "").split()
        files = [Path(n) for n in names] + [Path(dist._path.name)]  # type: ignore[attr-defined]
    for rel in files:
        src = base / rel
        try:
            if not os.path.abspath(src).startswith(str(base) + os.sep):
                continue  # console scripts and data outside site-packages
        except ValueError:
            continue
        dst = site / rel
        if src.is_dir() and not src.is_symlink():
            shutil.copytree(src, dst, symlinks=True, dirs_exist_ok=True)
        elif src.exists() or src.is_symlink():
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst, follow_symlinks=False)


# ---- trace ---------------------------------------------------------------------------------------------
def trace() -> int:
    os.environ.setdefault("CUPY_CACHE_DIR", "/tmp/standin-trace-cupy")
    import contextlib

    import cupy
    import dask  # noqa: F401
    import dask_cuda  # noqa: F401
    import dask_cuda.benchmarks.local_cupy  # noqa: F401
    import distributed  # noqa: F401
    import nvtx  # noqa: F401
    import pynvml
    from cupy import _environment
    from dask_gpu_verify import bench, cli, probes, workload  # noqa: F401

    for optional in ("bokeh", "distributed_ucxx", "ucxx", "rmm", "cudf", "dask_cudf"):  # in the stand-in when carried
        with contextlib.suppress(ImportError):
            importlib.import_module(optional)
    pynvml.nvmlInit()
    info = probes.gpu_info()
    bandwidth = probes.memory_bandwidth(64 << 20, 2, "cupy")
    probes.matmul_tflops(512, "float64", 1, "cupy")
    probes.matmul_tflops(512, "float32", 1, "cupy")
    float(cupy.random.random((1 << 20,)).sum())
    x = cupy.arange(1 << 16, dtype="f8").reshape(256, 256)
    float((x + x.T).sum())
    try:  # CuPy as host frames (TCP/TLS: worker to worker, worker to client) needs rmm or numba.cuda
        from distributed.protocol import deserialize, serialize

        header, frames = serialize(cupy.arange(10.0), serializers=("dask",))
        serialization = f"ok ({header.get('serializer')}): {float(deserialize(header, frames).sum())}"
    except Exception as error:  # noqa: BLE001 (reported, not raised)
        serialization = f"FAILED: {type(error).__name__}: {error}"
    maps = set()
    with open("/proc/self/maps") as handle:
        for line in handle:
            parts = line.split(None, 5)
            if len(parts) == 6 and parts[5].startswith("/"):
                maps.add(parts[5].strip().removesuffix(" (deleted)"))
    print(json.dumps({"cuda_path": _environment.get_cuda_path(), "gpu": info, "bandwidth": bandwidth,
                      "cupy_serialization": serialization,
                      "executable": sys.executable, "prefix": sys.prefix, "maps": sorted(maps)}, indent=1))
    return 0


# ---- files ---------------------------------------------------------------------------------------------
def canon(path: str) -> str:
    return os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))


def is_elf(path: str) -> bool:
    try:
        with open(path, "rb") as handle:
            return handle.read(4) == b"\x7fELF"
    except OSError:
        return False


def ldd(paths: list[str]) -> tuple[set[str], set[str]]:
    deps, unresolved = set(), set()
    for start in range(0, len(paths), 200):
        chunk = paths[start:start + 200]
        run = subprocess.run(["ldd", *chunk], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"},
                             check=False)
        current = ""
        for line in run.stdout.splitlines():
            if not line.startswith("\t"):
                current = line.rstrip(":")
                continue
            line = line.strip()
            if "=> not found" in line:
                unresolved.add(f"{line.split()[0]} (needed by {current})")
            elif "=>" in line:
                target = line.split("=>", 1)[1].strip().split(" (")[0]
                if target.startswith("/"):
                    deps.add(target)
            elif line.startswith("/"):
                deps.add(line.split(" (")[0])
    return deps, unresolved


def files(out: Path, trace_json: Path, roots: list[str]) -> int:
    traced = json.loads(trace_json.read_text())
    chosen: set[str] = set()
    notes: dict[str, list[str]] = {"driver_left_out": [], "outside_roots": [], "unresolved": []}
    root_prefixes = tuple(os.path.realpath(r) for r in roots)

    def add(path: str, depth: int = 0) -> None:
        path = canon(path)
        if path in chosen or depth > 20:
            return
        if DRIVER.match(os.path.basename(path)) or path.startswith(("/proc/", "/dev/", "/sys/", "/usr/local/nvidia/")):
            notes["driver_left_out"].append(path)
            return
        if not os.path.lexists(path):
            return
        chosen.add(path)
        if os.path.islink(path):
            add(os.path.join(os.path.dirname(path), os.readlink(path)), depth + 1)

    for root in roots:
        if os.path.isfile(root) or os.path.islink(root):
            add(root)
            continue
        for folder, dirs, names in os.walk(root):
            rel = os.path.relpath(folder, root)
            dirs[:] = [d for d in dirs if os.path.normpath(os.path.join(rel, d)) not in STDLIB_SKIP
                       or root.rstrip("/").endswith("site-packages")]
            for name in names:
                add(os.path.join(folder, name))
            for name in dirs:
                if os.path.islink(os.path.join(folder, name)):
                    add(os.path.join(folder, name))
    for mapped in traced["maps"]:
        if not canon(mapped).startswith(root_prefixes):
            notes["outside_roots"].append(mapped)
        add(mapped)
    for _ in range(3):  # dependencies of dependencies
        elves = sorted(p for p in chosen if not os.path.islink(p) and is_elf(p))
        deps, unresolved = ldd(elves)
        notes["unresolved"] = sorted(unresolved)
        before = len(chosen)
        for dep in deps:
            add(dep)
        if len(chosen) == before:
            break
    out.write_text("".join(p.lstrip("/") + "\n" for p in sorted(chosen)))
    outside = sorted(p for p in chosen if not p.startswith(root_prefixes))
    size = sum(os.lstat(p).st_size for p in chosen)
    print(json.dumps({"files": len(chosen), "bytes": size, "system_files_outside_roots": outside,
                      "traced_outside_roots": sorted(set(notes["outside_roots"])),
                      "driver_left_out": sorted(set(notes["driver_left_out"])),
                      "ldd_not_found": notes["unresolved"]}, indent=1))
    return 0


# ---- dockerfile ----------------------------------------------------------------------------------------
def dockerfile(path: Path, base: str) -> int:
    text = re.sub(r"\\\n", " ", path.read_text())
    stages: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        word = line.split()[0].upper()
        if word == "FROM":
            match = re.match(r"FROM\s+(\S+)\s+AS\s+(\S+)", line, re.IGNORECASE)
            stages.append((match.group(2) if match else "", []))
        elif stages:
            stages[-1][1].append(line)
    wanted = {name: lines for name, lines in stages if name in ("runtime", "scheduler", "worker")}
    out = [f"# STAND-IN build: images/Dockerfile's runtime/scheduler/worker stages without RUN and COPY, on {base}",
           f"FROM {base} AS runtime"]
    for name in ("runtime", "scheduler", "worker"):
        if name != "runtime":
            out.append(f"FROM runtime AS {name}")
        for line in wanted[name]:
            if line.split()[0].upper() in ("RUN", "COPY"):
                out.append("# dropped (done in the stand-in root filesystem): " + line[:100])
            else:
                out.append(line)
    print("\n".join(out))
    return 0


# ---- versions ------------------------------------------------------------------------------------------
def versions(site: Path, pins: Path) -> int:
    import importlib.metadata as md

    pinned = {}
    for line in pins.read_text().splitlines():
        if "==" in line and not line.startswith("#"):
            name, version = line.split("==", 1)
            pinned[canon_name(name)] = version.strip()
    have = {canon_name(d.metadata["Name"]): d.version for d in md.distributions(path=[str(site)])}
    rows = []
    for name in sorted(set(have) | set(pinned)):
        a, b = have.get(name, "-"), pinned.get(name, "-")
        if a == b:
            state = "same"
        elif a == "-":
            state = "not in stand-in"
        elif b == "-":
            state = "not pinned (stand-in only)"
        else:
            state = "DIFFERENT"
        rows.append((name, a, b, state))
    width = max(len(r[0]) for r in rows)
    print(f"{'distribution'.ljust(width)}  {'stand-in':<14}  {'pins':<14}  state")
    for row in rows:
        print(f"{row[0].ljust(width)}  {row[1]:<14}  {row[2]:<14}  {row[3]}")
    return 0


# ---- install-project -----------------------------------------------------------------------------------
def install_project(project: Path, site: Path, bin_dir: Path, python: str) -> int:
    import tomllib

    meta = tomllib.loads((project / "pyproject.toml").read_text())["project"]
    name, version = meta["name"], meta["version"]
    src = project / "src"
    for package in sorted(p for p in src.iterdir() if p.is_dir() and (p / "__init__.py").exists()):
        shutil.copytree(package, site / package.name, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "INSTALLER").write_text("tests/gpu/standin_rootfs.py\n")
    scripts = meta.get("scripts", {})
    (info / "entry_points.txt").write_text(
        "[console_scripts]\n" + "".join(f"{k} = {v}\n" for k, v in scripts.items()))
    (info / "RECORD").write_text("")
    for script, target in scripts.items():
        module, function = target.split(":")
        path = bin_dir / script
        path.write_text(f"#!{python}\nimport sys\nfrom {module} import {function}\n"
                        f"if __name__ == '__main__':\n    sys.exit({function}())\n")
        path.chmod(0o755)
    print(f" {name} {version}: {', '.join(scripts)}")
    return 0


def main(argv: list[str]) -> int:
    if len(argv) == 6 and argv[1] == "install-project":
        return install_project(Path(argv[2]), Path(argv[3]), Path(argv[4]), argv[5])
    if len(argv) >= 3 and argv[1] == "closure":
        return closure(Path(argv[2]), argv[3:])
    if len(argv) == 2 and argv[1] == "trace":
        return trace()
    if len(argv) >= 5 and argv[1] == "files":
        return files(Path(argv[2]), Path(argv[3]), argv[4:])
    if len(argv) == 4 and argv[1] == "dockerfile":
        return dockerfile(Path(argv[2]), argv[3])
    if len(argv) == 4 and argv[1] == "versions":
        return versions(Path(argv[2]), Path(argv[3]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
