#!/usr/bin/env python3
"""The summary of tests/gpu/gpu-proof-containers.sh, from the files it left in its work folder.

    container_summary.py WORK_DIR MACHINE EXIT_STATUS
"""
from __future__ import annotations

import csv
import json
import re
import sys
import time
from pathlib import Path

PRODUCTION = """\
How the STAND-IN image differs from the production image (images/Dockerfile):
  production: debian:bookworm-slim, Debian's python3 3.11 and tini, a venv at /opt/dask with every wheel pinned by
              images/pins/rapids-<release>-cuda<major>.txt (pip-installed in the builder stage), pip removed,
              __pycache__ removed, user/group dask 10001 made by useradd/groupadd.
  stand-in:   no Debian userland: the GPU machine's own files (Ubuntu 24.04): its python (version below) with its
              standard library and the shared libraries that ldd and a run of the GPU work show it loads; a venv
              at /opt/dask with the carried pinned wheels (dask, distributed, dask-cuda, rapids-dask-dependency,
              tornado, zict, tblib, partd, locket, nvtx, pyyaml, packaging; bokeh when carried) and, when carried
              as .ucx/, distributed-ucxx, ucxx, UCX and RMM at the pinned versions, this tree's images/verify,
              every other distribution copied from the machine's Python environment at the machine's version
              (CuPy, numpy, the NVIDIA CUDA 13 wheels, pandas, ...: the table below); /etc/passwd and /etc/group
              written by hand (dask 10001:10001, home /home/dask); /usr/bin/tini is Debian trixie's tini-static
              0.19 (production: bookworm's tini); no ca-certificates; no ld.so.cache.
              Image config (ENV, LABEL, USER, WORKDIR, ENTRYPOINT, HEALTHCHECK, EXPOSE, CMD) comes from
              images/Dockerfile's runtime/scheduler/worker stages, built by Docker's classic builder on the
              imported root filesystem, with their RUN and COPY left out; the imported base adds
              ENV NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 (the lent machines'
              rule: NVLink multicast stays off, also inside containers), so the units' lines stay unchanged.
              numba and numba-cuda (the lean profile's, for CuPy host frames) are the machine's versions;
              STANDIN_EXTRA_ROOTS adds distributions beyond the lean set.
  GPU access: the CDI spec is a STAND-IN for `nvidia-ctk cdi generate` (tests/gpu/cdi-standin.sh): device nodes,
              the driver's libraries mounted read-only at /usr/lib/x86_64-linux-gnu and nvidia-smi at /usr/bin;
              no nvidia-cdi-hook (ldcache, symlinks) as the real toolkit adds.
"""


def read(path: Path) -> str:
    return path.read_text().strip() if path.exists() else "(missing)"


def collapse(text: str) -> str:
    """Repeated log lines (timestamps aside) once, with their count."""
    out: list[str] = []
    last, count = "", 0
    for line in text.splitlines() + [""]:
        key = re.sub(r"^\d{4}-\d\d-\d\d [\d:,]+ - ", "", line)
        if key == last and line:
            count += 1
            continue
        if count > 1:
            out.append(f"  (the line above {count} times)")
        out.append(line)
        last, count = key, 1
    return "\n".join(out).rstrip()


def load(path: Path):  # noqa: ANN201
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def inspect_rows(path: Path) -> list[str]:
    data = load(path)
    if not data:
        return ["  (no docker inspect)"]
    c = data[0]
    h = c["HostConfig"]
    cfg = c["Config"]
    rows = [
        f"  Image: {cfg.get('Image')}   Entrypoint: {cfg.get('Entrypoint')}",
        f"  Cmd: {' '.join(cfg.get('Cmd') or [])}",
        f"  User: {cfg.get('User')!r}   NetworkMode: {h.get('NetworkMode')}   CapDrop: {h.get('CapDrop')}"
        f"   CapAdd: {h.get('CapAdd')}   Privileged: {h.get('Privileged')}",
        f"  SecurityOpt: {h.get('SecurityOpt')}   ReadonlyRootfs: {h.get('ReadonlyRootfs')}   Tmpfs: {h.get('Tmpfs')}",
        f"  ShmSize: {h.get('ShmSize')}   Ulimits: {h.get('Ulimits')}",
        f"  Devices: {h.get('Devices')}   DeviceRequests (CDI): {h.get('DeviceRequests')}",
        f"  Binds: {h.get('Binds')}",
        f"  Env file values: {[e for e in cfg.get('Env', []) if e.startswith(('DASK_', 'CUPY_', 'CUDA_', 'NVIDIA_'))]}",
    ]
    return rows


def main(argv: list[str]) -> int:
    work, machine, rc = Path(argv[1]), argv[2], int(argv[3])
    lines: list[str] = []
    add = lines.append
    verify = load(work / "verify.json") or {}
    bench = load(work / "bench.json")
    gpus = list(csv.reader((work / "nvidia-smi-query.csv").read_text().splitlines())) if (
        work / "nvidia-smi-query.csv").exists() else []
    host_uuids = sorted(row[1].strip() for row in gpus if len(row) > 1)
    verify_ok = bool(verify.get("ok"))
    uuids = verify.get("gpus", [])
    distinct = len(set(uuids)) == len(uuids) and sorted(uuids) == host_uuids
    passed = rc == 0 and verify_ok and distinct
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    add(f"# tests/gpu/gpu-proof-containers.sh on {machine or '?'}, {when}: {'PASS' if passed else 'FAIL'} (exit {rc})")
    add("The bundle's scheduler and GPU worker units' own `docker run` lines (playbooks/render-commands.yml, "
        "dask_worker_gpu_request cdi) ran under Docker with CDI; the images are STAND-INs built on the machine and "
        "the CDI spec comes from a STAND-IN for nvidia-ctk (both described at the end).")
    add("")
    add("## Machine")
    add(read(work / "uname.txt").replace("\n", ", ") + "; " + read(work / "docker-version.txt").replace("\n", "; "))
    for row in gpus:
        add("  GPU " + ", ".join(cell.strip() for cell in row))
    add("")
    if (work / "render-note.txt").exists():
        add("render: " + read(work / "render-note.txt"))
    add("## Command lines run (read back from the rendered .service files and client specs)")
    add(read(work / "commands.txt"))
    add("")
    add("## Workers")
    add(read(work / "registration.txt"))
    add(f"verification: {'PASS' if verify_ok else 'FAIL'}; {verify.get('note', '')}")
    add(f"GPU UUIDs in the report: {uuids}; distinct and equal to the machine's GPUs: {distinct}")
    for address, info in sorted(verify.get("workers", {}).items(), key=lambda item: str(item[1].get("name"))):
        gpu, bw = info.get("gpu", {}), info.get("bandwidth", {})
        add(f"  {info.get('name', address)} {address}: {gpu.get('name')} {gpu.get('uuid')} "
            f"CUDA_VISIBLE_DEVICES={gpu.get('cuda_visible_devices')} sum {bw.get('sum_gbps', 0):.1f} GB/s, "
            f"copy {bw.get('copy_gbps', 0):.1f} GB/s")
    workload = verify.get("workload", {})
    if workload:
        add(f"workload: {json.dumps(workload, sort_keys=True)[:400]}")
    add(f"timings: {json.dumps(verify.get('timings', {}), sort_keys=True)}")
    if verify.get("failures"):
        add(f"failures: {json.dumps(verify['failures'])[:1500]}")
    versions = verify.get("versions", {})
    if versions:
        add(f"versions seen by verification: {json.dumps(versions, sort_keys=True)[:600]}")
    for text in read(work / "verify.txt").splitlines()[-3:]:
        add("  verify> " + text)
    add("")
    add("## Gather probe (tests/gpu/gather_probe.py from the host, through the client address)")
    add(collapse(read(work / "gather.txt")))
    add("")
    if (work / "gpu-metrics.txt").exists():
        add("## GPU series in the worker containers' /metrics (tests/gpu/gpu_metrics_probe.py from the host)")
        add(collapse(read(work / "gpu-metrics.txt")))
        add("")
    if bench:
        add("## Benchmark (dask-gpu-bench in a container, GPUs through CDI)")
        for address, base in sorted(bench.get("baselines", {}).items()):
            name = bench.get("workers", {}).get(address, {}).get("name", address)
            uuid = bench.get("workers", {}).get(address, {}).get("gpu", {}).get("uuid")
            add(f"  {name} {uuid}: copy {base['copy_gbps']:.0f} GB/s, fp64 sum {base['sum_gbps']:.0f} GB/s, "
                f"fp64 matmul {base['fp64_tflops']:.1f} TFLOP/s, fp32 matmul {base['fp32_tflops']:.1f} TFLOP/s")
        for row in bench.get("scaling", []):
            add(f"  {row['workload']} n={row['n']} chunk={row['chunk']}: one worker {row['one']['seconds']:.3f} s, "
                f"all {row['all']['workers']} workers {row['all']['seconds']:.3f} s "
                f"({row['all']['throughput']:.1f} {row['unit']}), efficiency {row['efficiency'] * 100:.0f} %")
        for row in bench.get("local_cupy", []):
            if "error" in row:
                add(f"  local_cupy {row['operation']}: ERROR {row['error']}")
            else:
                add(f"  local_cupy {row['operation']} -s {row['size']} -c {row['chunk']}: {row['seconds']:.3f} s")
        overhead = bench.get("overhead", {})
        if overhead:
            add(f"  scheduler: {overhead.get('tasks_per_s', 0):.0f} no-op tasks/s, round trip "
                f"{overhead.get('round_trip_ms', 0):.2f} ms")
        add("  " + read(work / "bench.txt").splitlines()[-1])
        add("")
    add("## Containers as Docker ran them (docker inspect)")
    for name in ("dask-worker", "dask-scheduler"):
        add(f"{name}: health {read(work / (name + '-health.txt'))}")
        lines.extend(inspect_rows(work / f"{name}-inspect.json"))
    add("")
    add("## Inside the worker container")
    add("id: " + read(work / "worker-id.txt"))
    add("nvidia-smi -L:\n" + "\n".join("  " + x for x in read(work / "worker-nvidia-smi-L.txt").splitlines()))
    proc = read(work / "dask-worker-proc.txt").splitlines()
    add("process 1 (tini) and limits:\n" + "\n".join("  " + x for x in proc))
    add("## Inside the scheduler container")
    add("id: " + read(work / "scheduler-id.txt"))
    add("\n".join("  " + x for x in read(work / "dask-scheduler-proc.txt").splitlines()))
    add(read(work / "healthchecks.txt"))
    top = read(work / "worker-top.txt")
    apps = read(work / "compute-apps.csv")
    top_pids = {line.split()[0] for line in top.splitlines()[1:] if line.split()}
    app_pids = {line.split(",")[0].strip() for line in apps.splitlines() if line.strip() and line[0].isdigit()}
    add(f"GPU processes (host nvidia-smi): {apps.splitlines()}")
    add(f"  all of them are processes of the dask-worker container (docker top): "
        f"{bool(app_pids) and app_pids <= top_pids}")
    add("")
    add("## Stop (the units' ExecStop lines)")
    add(read(work / "stop.txt"))
    left = read(work / "left-running.txt")
    add(f"containers left: {left if left else 'none'}")
    add("")
    add("## STAND-INs")
    add(PRODUCTION)
    closure = load(work / "standin" / "standin-closure.json") or {}
    add(f"distributions copied from the machine's environment: {', '.join(closure.get('copied_from_machine', []))}")
    add(f"requirements nowhere to be found: {closure.get('missing')}; version conflicts: {closure.get('conflicts')}")
    files = load(work / "standin" / "standin-files.json") or {}
    outside = len(files.get("system_files_outside_roots", []))
    add(f"root filesystem: {files.get('files')} files, {(files.get('bytes') or 0) >> 20} MiB; system files outside "
        f"/opt/dask and the python: {outside}; files the traced GPU run loaded from outside the venv: "
        f"{files.get('traced_outside_roots')}; ldd 'not found': {files.get('ldd_not_found')}")
    trace = load(work / "standin" / "standin-trace.json") or {}
    add(f"CuPy's CUDA root in the stand-in venv: {trace.get('cuda_path')}; CuPy serialization through "
        f"distributed (traced run on the machine): {trace.get('cupy_serialization')}")
    extra = read(work / "standin-extra-roots.txt")
    add(f"added to the lean set in the stand-in: {extra or 'nothing'}")
    table = read(work / "standin" / "standin-versions.txt").splitlines()
    add("versions, stand-in against images/pins (the pins file covers the lean and full profiles):")
    add("  " + (table[0] if table else ""))
    absent = []
    for row in table[1:]:
        if row.endswith("not in stand-in"):
            absent.append(row.split()[0])
        elif not row.endswith(" same"):
            add("  " + row)
    same = sum(1 for row in table[1:] if row.endswith(" same"))
    add(f"  {same} distributions at the pinned version; pinned but not in the stand-in: {', '.join(absent)}")
    add("")
    add("## Steps")
    add(read(work / "steps.txt"))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
