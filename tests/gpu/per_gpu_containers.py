#!/usr/bin/env python3
"""Issue 41, per-GPU worker units: does UCX still move data between two GPUs through CUDA IPC (`cuda_ipc`, over
NVLink) when each GPU's Dask worker runs in a container of its own? Measured on a lent 2-GPU machine.

Every variant: the scheduler in a container as the bundle runs it (`dask scheduler --protocol ucx`, user 10001,
read-only, private namespaces), worker containers run the way the bundle runs its worker (`--network host`, user
10001:10001, `--cap-drop ALL`, `no-new-privileges`, the GPU ulimits within the machine's hard limits, CDI `--device
nvidia.com/gpu=all` so every GPU's device node is there), each `dask cuda worker --protocol ucx` with the
CUDA_VISIBLE_DEVICES below, `UCX_PROTO_INFO=y` and the UCX environment the bundle gives a `ucx` worker on this host
(plugin_utils/spec.py ucx_env: only UCX_NET_DEVICES, and none on loopback, so UCX picks its transports itself).
A client on the host puts a CuPy array (default 2 GiB) on worker A and has worker B compute on it, so B fetches it
from A over UCX; repeated (default 5 times after a 256 MiB warm-up). Reported per variant: B's transfer time and
bandwidth (its `transfer_incoming_log`: the fetch, request to deserialised), the client's time for the dependent
task, the UCX protocols the workers' `UCX_PROTO_INFO` tables name for messages from CUDA memory (cuda_ipc, cuda_copy,
tcp...), each worker's namespaces and GPU, and errors from the container logs.

    1 private     Docker's default private IPC and PID namespaces, CVD 0 / 1
    2 ipc-host    --ipc=host, CVD 0 / 1
    3 ipc-pid-host  --ipc=host --pid=host, CVD 0 / 1
    4 holder      a holder container (--ipc=shareable, sleeping); workers --ipc=container:H --pid=container:H, CVD 0 / 1
    5 holder-rotated  as 4 with CVD 0,1 / 1,0: `dask cuda worker` starts one worker per CUDA_VISIBLE_DEVICES entry,
                  so each container holds two workers; measured between A's first (GPU 0) and B's first (GPU 1)
    5b holder-rotated-one  as 5 but one worker per container: `dask worker --nworkers 1 --preload
                  dask_cuda.initialize` (dask-cuda's CUDA context set-up) with CVD 0,1 / 1,0 (not `dask cuda worker`)
    6 one-container  the baseline, what the bundle runs today: ONE container, `dask cuda worker` over both GPUs
    7 pid-host    --pid=host alone (private IPC), CVD 0 / 1
    8 holder-pid  the holder's PID namespace alone (--pid=container:H, private IPC), CVD 0 / 1
    9 holder-pid-own-node  as 8, but each container gets only its own GPU's device node (CDI nvidia.com/gpu=0 / =1,
                  not =all), so each sees one GPU: CVD 0 / 0

STAND-INs (say so wherever a result is reported): the images (tests/gpu/standin-image.sh: the machine's Python
and CuPy plus the carried Dask wheels and `.ucx/ucx-site.tar.xz` (distributed-ucxx, ucxx, libucx 1.21, RMM), not
images/Dockerfile's build) and the CDI spec (tests/gpu/cdi-standin.sh in place of `nvidia-ctk cdi generate`).

Reproduce (tests/gpu/results/per-gpu-containers-h200x2/summary.md has the call): on the lent machine, in a tree with
`.dockerbin/docker-trixie.tar.xz`, `.whl/` (the Dask set) and `.ucx/ucx-site.tar.xz`,

    python3 tests/gpu/per_gpu_containers.py run --out OUT [--budget 540] [--variants 6,1,2,3,4,5,5b,7,8]
    python3 tests/gpu/per_gpu_containers.py run --dry-run            # the docker lines only, nothing started

and, without a GPU, a rehearsal of the orchestration against a running dockerd and an image with Dask and UCX:
`run --cpu --no-docker-start --no-carry --image IMAGE --gib 0.05` (NumPy instead of CuPy, `dask worker`, no CDI).
Writes OUT/summary.md, OUT/per-gpu-containers.json (rewritten after each variant) and OUT/logs.tar.xz (the raw logs).
Each variant is time-boxed (--variant-timeout); its containers and scheduler are removed before the next starts.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "collections"))
import carried  # noqa: E402 - beside this script
import containers  # noqa: E402
import harness  # noqa: E402
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils import spec  # noqa: E402 - the spec builder

WORK = Path("/var/tmp/per-gpu-containers")
LABEL = "io.dask-gpu.per-gpu-containers"
WORKER_IMAGE = "dask-gpu-worker:26.10-cuda13-lean"
SCHEDULER_IMAGE = "dask-gpu-scheduler:26.10-cuda13-lean"
USER = "10001:10001"
GIB = 1 << 30
WARMUP_BYTES = 256 << 20
# The bundle's GPU worker ulimits (the spec builder's), and open files as many as the machine allows (its hard limit,
# 20000 on the lent machines, is below the bundle's default: tests/gpu/README.md, dask_container_nofile).
ULIMITS = {**{name: int(value) for name, value in spec.GPU_ULIMITS.items()}, "nofile": -1}
RLIMITS = {"memlock": resource.RLIMIT_MEMLOCK, "stack": resource.RLIMIT_STACK, "nofile": resource.RLIMIT_NOFILE}
HOLDER = "{holder}"
ERROR_LINE = re.compile(r"UCX\s+(ERROR|WARN)|Traceback|\w+Error\b|Exception|\bfailed\b|cuIpc|not running as PID 1|"
                        r"Event loop was unresponsive", re.IGNORECASE)
NOT_ERRORS = ("unused environment variable", "UCX_WARN_UNUSED_ENV_VARS")
UCX_PREFIX = re.compile(r"^\[(?P<ts>\d+\.\d+)\]\s+\[(?P<host>[^:\]]+):\s*(?P<pid>\d+)\s*:\s*\d+\]\s+(?P<rest>.*)$")
PROTO_HEADER = re.compile(r"^\|\s*(?P<ctx>\S+)\s+(?P<loc>intra-node|inter-node)\s+cfg#(?P<cfg>\d+)\s*\|"
                          r"\s*(?P<op>.*?)\s*\|$")
PROTO_ROW = re.compile(r"^\|\s*(?P<range>[^|]*?)\s*\|\s*(?P<proto>[^|]*?)\s*\|\s*(?P<lanes>[^|]*?)\s*\|$")
TRANSPORT = re.compile(r"\b(cuda_ipc|cuda_copy|gdr_copy|tcp|posix|sysv|cma|xpmem|knem|rc_mlx5|rc_verbs|dc_mlx5|ud_mlx5|"
                       r"ud_verbs|self)\b")


@dataclass(frozen=True)
class Worker:
    """One worker container: its name suffix, CUDA_VISIBLE_DEVICES (None: unset, dask-cuda takes every GPU) and
    whether it runs `dask cuda worker` (else `dask worker --nworkers 1` with dask-cuda's initialize preload)."""

    suffix: str
    cvd: str | None
    dask_cuda: bool = True
    device: str = "all"  # the CDI device the container gets: every GPU's node, or one GPU's (its index)


@dataclass(frozen=True)
class Variant:
    key: str
    title: str
    namespaces: str
    flags: tuple[str, ...]
    workers: tuple[Worker, ...]
    holder: bool = False


ZERO_ONE = (Worker("a", "0"), Worker("b", "1"))
ROTATED = (Worker("a", "0,1"), Worker("b", "1,0"))
SHARED = (f"--ipc=container:{HOLDER}", f"--pid=container:{HOLDER}")
VARIANTS = {v.key: v for v in (
    Variant("1", "private namespaces", "private IPC, private PID (Docker default)", (), ZERO_ONE),
    Variant("2", "--ipc=host", "host IPC, private PID", ("--ipc=host",), ZERO_ONE),
    Variant("3", "--ipc=host --pid=host", "host IPC, host PID", ("--ipc=host", "--pid=host"), ZERO_ONE),
    Variant("4", "holder namespaces", "holder's IPC and PID (shared by both)", SHARED, ZERO_ONE, holder=True),
    Variant("5", "holder namespaces, rotated CVD", "holder's IPC and PID (shared by both)", SHARED, ROTATED,
            holder=True),
    Variant("5b", "holder namespaces, rotated CVD, one worker a container", "holder's IPC and PID (shared by both)",
            SHARED, (Worker("a", "0,1", dask_cuda=False), Worker("b", "1,0", dask_cuda=False)), holder=True),
    Variant("6", "one container (today's bundle)", "one container: private IPC and PID, shared by its workers", (),
            (Worker("ab", None),)),
    Variant("7", "--pid=host", "private IPC, host PID", ("--pid=host",), ZERO_ONE),
    Variant("8", "holder's PID namespace only", "private IPC, holder's PID (shared by both)",
            (f"--pid=container:{HOLDER}",), ZERO_ONE, holder=True),
    # Each container given only its own GPU's device node (CDI nvidia.com/gpu=N), so CUDA sees one device, index 0.
    Variant("9", "holder's PID namespace, own GPU's device node only", "private IPC, holder's PID (shared by both)",
            (f"--pid=container:{HOLDER}",), (Worker("a", "0", device="0"), Worker("b", "0", device="1")),
            holder=True),
)}
DEFAULT_ORDER = "6,1,2,3,4,5,5b,7,8,9"


@dataclass
class Settings:
    """What every variant shares."""

    image: str
    scheduler_image: str
    gpu: bool
    gpus: int
    nbytes: int
    reps: int
    ulimits: dict[str, str]
    logs: Path
    extra_env: dict[str, str] = field(default_factory=dict)


# ---- pieces that run inside the workers (sent by value: this file is __main__ in the probe) ---------------------
def identity(dask_worker: Any = None) -> dict[str, Any]:
    """The worker process: its name, CUDA_VISIBLE_DEVICES, namespaces, user, and its GPU as CUDA sees it."""
    found: dict[str, Any] = {"name": str(dask_worker.name), "cvd": os.environ.get("CUDA_VISIBLE_DEVICES"),
                             "pid": os.getpid(), "uid": os.getuid(),
                             "ns_ipc": os.readlink("/proc/self/ns/ipc"), "ns_pid": os.readlink("/proc/self/ns/pid"),
                             "in_docker": os.path.exists("/.dockerenv"),
                             "ucx_env": {k: v for k, v in os.environ.items() if k.startswith(("UCX_", "UCXPY"))}}
    try:
        import cupy
    except ImportError:
        return found
    try:
        count = cupy.cuda.runtime.getDeviceCount()
        found.update(visible=count, pci=cupy.cuda.Device(0).pci_bus_id,
                     peer_access={j: bool(cupy.cuda.runtime.deviceCanAccessPeer(0, j)) for j in range(1, count)})
    except Exception as error:  # noqa: BLE001 - reported, not raised
        found["cuda_error"] = repr(error)
    return found


def make(nbytes: int, value: int, gpu: bool) -> Any:
    """The array on worker A."""
    if gpu:
        import cupy
        array = cupy.full(nbytes, value, dtype=cupy.uint8)
        cupy.cuda.runtime.deviceSynchronize()
        return array
    import numpy
    return numpy.full(nbytes, value, dtype=numpy.uint8)


def consume(array: Any, gpu: bool) -> dict[str, Any]:
    """Worker B's task on A's array (B fetched it): its size, ends and where it lives."""
    found = {"nbytes": int(array.nbytes), "first": int(array[0]), "last": int(array[-1])}
    if gpu:
        import cupy
        found.update(device=int(array.device.id), pci=cupy.cuda.Device(array.device.id).pci_bus_id)
    return found


def incoming(key: str, dask_worker: Any = None) -> list[dict[str, Any]]:
    """Worker B's record of fetching KEY."""
    return [{"duration": entry["duration"], "total": entry["total"], "who": entry["who"], "start": entry["start"]}
            for entry in dask_worker.transfer_incoming_log if key in {str(k) for k in entry["keys"]}]


# ---- the probe (a child process of the driver, so a hang costs only its time box) -------------------------------
def transfer(client: Any, a: str, b: str, nbytes: int, value: int, gpu: bool, timeout: float) -> dict[str, Any]:
    from distributed import wait

    started = time.perf_counter()
    source = client.submit(make, nbytes, value, gpu, workers=[a], allow_other_workers=False, pure=False)
    wait(source, timeout=timeout)  # type: ignore[no-untyped-call]
    made = time.perf_counter()
    result = client.submit(consume, source, gpu, workers=[b], allow_other_workers=False, pure=False)
    got = result.result(timeout=timeout)
    done = time.perf_counter()
    log = client.run(incoming, str(source.key), workers=[b])[b]
    client.cancel([source, result])
    row: dict[str, Any] = {"nbytes": nbytes, "make_s": round(made - started, 4), "client_s": round(done - made, 4),
                           "client_gbps": round(nbytes / (done - made) / 1e9, 3),
                           "correct": got["nbytes"] == nbytes and got["first"] == got["last"] == value, "got": got}
    if log:
        row.update(worker_s=round(log[-1]["duration"], 5), worker_gbps=round(log[-1]["total"] / log[-1]["duration"]
                                                                             / 1e9, 3), source=log[-1]["who"])
    return row


def probe(args: argparse.Namespace) -> int:
    from distributed import Client

    deadline = time.monotonic() + args.timeout
    found: dict[str, Any] = {"a": args.a, "b": args.b, "reps": [], "notes": []}

    def save() -> None:
        Path(args.json).write_text(json.dumps(found, indent=1, default=str))

    save()
    with Client(args.scheduler, timeout=min(30, args.timeout)) as client:  # type: ignore[no-untyped-call]
        client.wait_for_workers(args.expect, timeout=max(5.0, deadline - time.monotonic() - 5))
        found["registered_s"] = round(args.timeout - (deadline - time.monotonic()), 1)
        ids = client.run(identity)
        while len(ids) < args.expect and time.monotonic() < deadline:
            time.sleep(0.5)
            ids = client.run(identity)
        found["workers"] = {info["name"]: {"address": address, **info} for address, info in ids.items()}
        save()
        a, b = found["workers"][args.a]["address"], found["workers"][args.b]["address"]
        if args.gpu and found["workers"][args.a].get("pci") == found["workers"][args.b].get("pci"):
            found["notes"].append("A and B are on the same GPU")
        left = deadline - time.monotonic()
        found["transfers_from"] = time.time()
        found["warmup"] = transfer(client, a, b, min(WARMUP_BYTES, args.nbytes), 7, args.gpu, left)
        save()
        for rep in range(args.reps):
            left = deadline - time.monotonic()
            warm = found["warmup"]
            last = max([r["make_s"] + r["client_s"] for r in found["reps"]]
                       or [(warm["make_s"] + warm["client_s"]) * args.nbytes / warm["nbytes"]])
            if left < 3 * last + 5:
                found["notes"].append(f"stopped after {rep} of {args.reps} repetitions: {left:.0f} s left")
                break
            found["reps"].append(transfer(client, a, b, args.nbytes, 11 + rep, args.gpu, left))
            save()
    save()
    return 0


# ---- the driver ---------------------------------------------------------------------------------------------------
def log(message: str) -> None:
    print(f"[per-gpu {time.strftime('%H:%M:%S')}] {message}", flush=True)


def machine_limits() -> dict[str, str]:
    """The bundle's ulimits, each within the machine's hard limit (runc cannot raise one past it: root on the lent
    machines has no CAP_SYS_RESOURCE, open files 20000)."""
    found = {}
    for name, wanted in ULIMITS.items():
        hard = resource.getrlimit(RLIMITS[name])[1]
        if hard == resource.RLIM_INFINITY:
            if name != "nofile" or wanted != -1:  # Docker takes no unlimited open files: its default then
                found[name] = str(wanted)
        else:
            found[name] = str(hard if wanted == -1 else min(wanted, hard))
    return found


def free_port(low: int = 20000, high: int = 32000) -> int:
    """A port for the scheduler outside the kernel's ephemeral range that a UCX listener could bind now (no listener,
    no TIME_WAIT: the bind test of roles/dask/files/wait_ports.py without SO_REUSEADDR)."""
    try:
        first, last = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        first, last = 32768, 60999
    candidates = [port for port in range(low, high) if not first <= port <= last]
    random.shuffle(candidates)
    for port in candidates[:200]:
        if harness.WAIT_PORTS["bindable"]("ucx", "0.0.0.0", port) and harness.WAIT_PORTS["bindable"]("ucx",
                                                                                                    "127.0.0.1", port):
            return port
    raise RuntimeError("no free port found")


def worker_command(worker: Worker, scheduler: str, name: str, count: int, gpu: bool) -> list[str]:
    """The container's command: `dask cuda worker` (one worker per CUDA_VISIBLE_DEVICES entry), or one `dask worker`
    with dask-cuda's CUDA context set-up; in a CPU rehearsal `dask worker` with as many workers."""
    common = [scheduler, "--host", "127.0.0.1", "--name", name, "--nthreads", "1", "--no-dashboard",
              "--local-directory", "/tmp/dask-worker", "--death-timeout", "60", "--protocol", "ucx"]
    if gpu and worker.dask_cuda:
        return ["dask", "cuda", "worker", *common, "--device-memory-limit", "0.8", "--resources", "GPU=1"]
    if gpu:
        return ["dask", "worker", *common, "--nworkers", "1", "--resources", "GPU=1", "--preload",
                "dask_cuda.initialize", "--create-cuda-context"]
    return ["dask", "worker", *common, "--nworkers", str(count)]


def worker_names(worker: Worker, name: str, gpus: int) -> list[str]:
    """The Dask names of a container's workers: dask-cuda (and `dask worker --nworkers N`) add -i for more than one."""
    if not worker.dask_cuda:
        return [name]
    count = len(worker.cvd.split(",")) if worker.cvd else gpus
    return [name] if count == 1 else [f"{name}-{i}" for i in range(count)]


def container_name(variant: Variant, suffix: str) -> str:
    return f"pgc-{variant.key}-{suffix}"


def run_args(variant: Variant, worker: Worker, scheduler: str, settings: Settings) -> list[str]:
    """`docker run` for a worker container: the bundle's worker flags (plugin_utils/spec.py docker_run_args)."""
    name = container_name(variant, worker.suffix)
    env = {"DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION": "False", "UCX_PROTO_INFO": "y", "CUPY_CACHE_DIR": "/tmp/cupy",
           **carried.NO_MULTICAST, **settings.extra_env}
    if worker.cvd is not None:
        env["CUDA_VISIBLE_DEVICES"] = worker.cvd
    if settings.gpu and not worker.dask_cuda:  # what dask-cuda's get_ucx_config gives its workers
        env["DASK_DISTRIBUTED_UCXX__CREATE_CUDA_CONTEXT"] = "True"
    argv = ["docker", "run", "--detach", "--name", name, "--label", f"{LABEL}={variant.key}", "--network", "host",
            "--user", USER, "--cap-drop", "ALL", "--security-opt", "no-new-privileges"]
    if settings.gpu:
        argv += ["--device", f"nvidia.com/gpu={worker.device}"]
    for limit, value in settings.ulimits.items():
        argv += ["--ulimit", f"{limit}={value}"]
    argv += [flag.replace(HOLDER, container_name(variant, "holder")) for flag in variant.flags]
    for key, value in env.items():
        argv += ["--env", f"{key}={value}"]
    count = len(worker_names(worker, name, settings.gpus))
    return argv + [settings.image, *worker_command(worker, scheduler, name, count, settings.gpu)]


def holder_args(variant: Variant, settings: Settings) -> list[str]:
    return ["docker", "run", "--detach", "--name", container_name(variant, "holder"), "--label",
            f"{LABEL}={variant.key}", "--ipc=shareable", "--network", "none", "--user", USER, "--cap-drop", "ALL",
            "--security-opt", "no-new-privileges", settings.image, "python3", "-c",
            "import signal; signal.pause()"]


def docker_run(argv: list[str], timeout: float) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode:
        raise RuntimeError(f"{' '.join(argv[:6])}... exit {done.returncode}: {(done.stdout + done.stderr)[-1500:]}")


def remove_containers() -> int:
    left = containers.docker("ps", "-aq", "--filter", f"label={LABEL}", check=False, timeout=30).stdout.split()
    if left:
        containers.docker("rm", "-f", *left, check=False, timeout=60)
    return len(left)


def running(names: list[str]) -> dict[str, str]:
    """Each container's state (running, exited (N), missing)."""
    found = {}
    for name in names:
        done = containers.docker("inspect", "-f", "{{.State.Status}} {{.State.ExitCode}}", name, check=False,
                                 timeout=20)
        found[name] = done.stdout.strip() if not done.returncode else "missing"
    return found


def scheduler_args(variant: Variant, port: int, settings: Settings) -> list[str]:
    """`docker run` for the scheduler as the bundle runs it (plugin_utils/spec.py scheduler_spec: read-only, a tmpfs
    on /tmp, user 10001, private namespaces, no GPU in the lean profile), speaking plain UCX on loopback."""
    argv = ["docker", "run", "--detach", "--name", container_name(variant, "scheduler"), "--label",
            f"{LABEL}={variant.key}", "--network", "host", "--user", USER, "--cap-drop", "ALL", "--security-opt",
            "no-new-privileges", "--read-only", "--tmpfs", "/tmp", "--ulimit", f"nofile={settings.ulimits['nofile']}"]
    env = {"DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION": "False", "CUPY_CACHE_DIR": "/tmp/cupy",
           **carried.NO_MULTICAST, **settings.extra_env}
    for key, value in env.items():
        argv += ["--env", f"{key}={value}"]
    return argv + [settings.scheduler_image, "dask", "scheduler", "--protocol", "ucx", "--host", "127.0.0.1", "--port",
                   str(port), "--no-dashboard"]


def wait_scheduler(name: str, timeout: float = 45) -> None:
    deadline = time.monotonic() + timeout
    while True:
        done = containers.docker("logs", name, check=False, timeout=20)
        if "Scheduler at:" in done.stdout + done.stderr:
            return
        state = running([name])[name]
        if not state.startswith("running") or time.monotonic() > deadline:
            raise RuntimeError(f"scheduler {name} {state}, not up: {(done.stdout + done.stderr)[-1500:]}")
        time.sleep(0.3)


def stop_process(process: subprocess.Popen[bytes] | None) -> None:
    if process is None or process.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, 8), (signal.SIGKILL, 5)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def gpu_processes() -> list[str]:
    done = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,process_name", "--format=csv,noheader"],
                          capture_output=True, text=True, check=False, timeout=30)
    return [line for line in done.stdout.splitlines() if line.strip()]


def wait_gpus_idle(seconds: float = 20) -> list[str]:
    deadline = time.monotonic() + seconds
    left = gpu_processes()
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left = gpu_processes()
    return left


def watch(process: subprocess.Popen[bytes], names: list[str], deadline: float) -> str:
    """Wait for the probe; '' when it ended, else why it was stopped (a container exited, the time box)."""
    while process.poll() is None:
        if time.monotonic() > deadline:
            return "time box reached"
        states = running(names)
        dead = {name: state for name, state in states.items() if not state.startswith("running")}
        if dead:
            time.sleep(1)  # the probe may still be writing what it saw
            return f"container not running: {dead}"
        time.sleep(1)
    return ""


def container_logs(names: list[str], folder: Path, key: str) -> dict[str, str]:
    found = {}
    for name in names:
        done = containers.docker("logs", name, check=False, timeout=60)
        text = done.stdout + done.stderr
        (folder / f"{key}-{name}.log").write_text(text)
        found[name] = text
    return found


def proto_blocks(text: str) -> list[dict[str, Any]]:
    """UCX_PROTO_INFO's tables in a log: one block per (context, locality, endpoint configuration, operation)."""
    blocks: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    for line in text.splitlines():
        prefix = UCX_PREFIX.match(line.strip())
        if not prefix:
            continue
        rest = prefix["rest"].strip()
        header = PROTO_HEADER.match(rest)
        if header:
            current = {"ts": float(prefix["ts"]), "pid": int(prefix["pid"]), "context": header["ctx"],
                       "locality": header["loc"], "cfg": int(header["cfg"]), "op": header["op"], "rows": []}
            blocks.append(current)
            continue
        row = PROTO_ROW.match(rest)
        if row and current is not None and current["pid"] == int(prefix["pid"]):
            current["rows"].append({"range": row["range"], "protocol": row["proto"], "lanes": row["lanes"]})
    return blocks


def size_of(text: str) -> float:
    """A size in UCX_PROTO_INFO's ranges: 16353, 8K, 4M (powers of 1024), inf."""
    text = text.strip()
    if text == "inf":
        return float("inf")
    found = re.fullmatch(r"(\d+)([KMGT]?)", text)
    if not found:
        return -1
    return float(int(found[1]) * 1024 ** " KMGT".index(found[2] or " "))


def covers(span: str, size: int) -> bool:
    low, dots, high = span.partition("..")
    return size_of(low) <= size <= size_of(high) if dots else size_of(low) == size


def data_path(blocks: list[dict[str, Any]], words: tuple[str, ...], pids: set[int], since: float,
              size: int) -> list[dict[str, Any]]:
    """The row for a message of SIZE bytes in the tables whose operation names every one of WORDS, printed after
    SINCE (the first transfer) by the processes PIDS: one entry per distinct (operation, protocol, lanes)."""
    chosen: dict[tuple[str, ...], dict[str, Any]] = {}
    for block in blocks:
        if not all(word in block["op"] for word in words) or (pids and block["pid"] not in pids):
            continue
        if block["ts"] < since:
            continue
        row = next((row for row in block["rows"] if covers(row["range"], size)), None)
        if row is None:
            continue
        key = (block["op"], row["protocol"], row["lanes"])
        entry = chosen.setdefault(key, {"locality": block["locality"], "op": block["op"], "range": row["range"],
                                        "protocol": row["protocol"], "lanes": row["lanes"], "cfgs": []})
        entry["cfgs"].append(block["cfg"])
    return list(chosen.values())


def transports(entries: list[dict[str, Any]]) -> list[str]:
    return sorted({name for entry in entries for name in TRANSPORT.findall(entry["lanes"] + " " + entry["protocol"])})


def error_lines(text: str, limit: int = 12) -> list[str]:
    """Distinct error and warning lines of a log (timestamps cut), UCX_PROTO_INFO's tables and unused-variable
    warnings left out."""
    seen: dict[str, None] = {}
    for line in text.splitlines():
        if not ERROR_LINE.search(line) or any(skip in line for skip in NOT_ERRORS):
            continue
        if line.lstrip().startswith("[") and "|" in line:
            continue
        normal = re.sub(r"^\[[^]]*\]\s*\[[^]]*\]\s*", "", line.strip())
        normal = re.sub(r"^\d{4}-\d\d-\d\d [\d:,]+ - ", "", normal)
        normal = re.sub(r"\d+\.\d+s\b", "N s", re.sub(r"\(\d+\)", "(N)", normal))  # one line per kind
        seen.setdefault(normal[:300], None)
    return list(seen)[:limit]


def run_probe(variant: Variant, settings: Settings, scheduler: str, a: str, b: str, expect: int, deadline: float,
              names: list[str]) -> tuple[dict[str, Any], str]:
    report = settings.logs / f"{variant.key}-probe.json"
    argv = [sys.executable, str(Path(__file__).resolve()), "probe", "--scheduler", scheduler, "--a", a, "--b", b,
            "--expect", str(expect), "--nbytes", str(settings.nbytes), "--reps", str(settings.reps), "--json",
            str(report), "--timeout", str(max(5.0, deadline - time.monotonic() - 3))]
    if settings.gpu:
        argv.append("--gpu")
    with (settings.logs / f"{variant.key}-probe.log").open("ab") as sink:
        process = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True)
        why = watch(process, names, deadline)
        if why:
            stop_process(process)
    found = json.loads(report.read_text()) if report.exists() else {}
    if not why and process.returncode:
        why = f"probe exit {process.returncode}: " + " | ".join(
            (settings.logs / f"{variant.key}-probe.log").read_text(errors="replace").strip().splitlines()[-3:])
    return found, why


# UCX_PROTO_INFO's tables that say how a large message from device memory moved (UCX's protocols v2), by role: the
# receiver's rendezvous fetch (with cuda_ipc it reads the sender's GPU memory itself), the sender's rendezvous data
# send (printed only when the receiver cannot read: the sender pushes the data, here staged through host memory over
# tcp), and the sender's tagged-send table (its estimate, made before the receiver answers: "(?)").
PATH_TABLES = {"fetch": ("B", ("rendezvous data fetch into",)), "send": ("A", ("rendezvous data send from",)),
               "estimate": ("A", ("tagged message by ucp_tag_send",))}


def summarize(gpu: bool, nbytes: int, found: dict[str, Any], texts: dict[str, str]) -> dict[str, Any]:
    """Medians, how the array's bytes moved (UCX_PROTO_INFO of A and B), the namespaces each worker saw."""
    reps = found.get("reps") or []
    workers = found.get("workers") or {}
    a, b = workers.get(found.get("a", ""), {}), workers.get(found.get("b", ""), {})
    memory = "cuda" if gpu else "host"
    since = float(found.get("transfers_from") or 0) - 1
    worker_gbps = [r["worker_gbps"] for r in reps if "worker_gbps" in r]
    result: dict[str, Any] = {
        "reps_done": len(reps),
        "median_worker_gbps": round(statistics.median(worker_gbps), 3) if worker_gbps else None,
        "median_client_gbps": round(statistics.median([r["client_gbps"] for r in reps]), 3) if reps else None,
        "all_correct": bool(reps) and all(r["correct"] for r in reps),
        "same_ipc_ns": (a.get("ns_ipc") == b.get("ns_ipc")) if a and b else None,
        "same_pid_ns": (a.get("ns_pid") == b.get("ns_pid")) if a and b else None}
    blocks, pids = {}, {}
    for role, info in (("A", a), ("B", b)):
        worker = str(found.get(role.lower(), ""))
        container = next((name for name in texts if container_of(name, worker)), "")
        blocks[role] = proto_blocks(texts.get(container, ""))
        pids[role] = {int(info["pid"])} if info.get("pid") is not None else set()
    paths = {}
    for table_name, (role, words) in PATH_TABLES.items():
        memory_words = (*words, f"from {memory}") if table_name != "fetch" else (*words, f"into {memory}")
        paths[table_name] = data_path(blocks[role], memory_words, pids[role], since, nbytes)
    result["data_path"] = paths
    result["transport"] = transports(paths["fetch"] + paths["send"])
    result["errors_in_logs"] = sorted({line for text in texts.values() for line in error_lines(text)})[:15]
    return result


def container_of(container: str, worker: str) -> bool:
    """Whether a Dask worker name belongs to a container name (pgc-4-a holds pgc-4-a or pgc-4-a-0)."""
    return worker == container or worker.startswith(container + "-")


def run_variant(variant: Variant, settings: Settings, box: float) -> dict[str, Any]:
    """One variant, inside BOX seconds; its containers and scheduler gone afterwards."""
    started = time.monotonic()
    deadline = started + box
    row: dict[str, Any] = {"variant": variant.key, "title": variant.title, "namespaces": variant.namespaces,
                           "cvd": " / ".join(w.cvd or "unset (dask-cuda: every GPU)" for w in variant.workers),
                           "time_box_s": round(box), "commands": []}
    names = [container_name(variant, w.suffix) for w in variant.workers]
    scheduler_name = container_name(variant, "scheduler")
    texts: dict[str, str] = {}
    try:
        port = free_port()
        waited, taken = harness.WAIT_PORTS["wait"]([("ucx", "0.0.0.0", port)], 20)
        if taken:
            raise RuntimeError(f"port {port} not free after {waited} s")
        scheduler = f"ucx://127.0.0.1:{port}"
        row["scheduler"] = scheduler
        log(f"variant {variant.key} ({variant.title}): scheduler {scheduler}")
        argv = scheduler_args(variant, port, settings)
        row["commands"].append(shlex.join(argv))
        docker_run(argv, 60)
        wait_scheduler(scheduler_name)
        if variant.holder:
            argv = holder_args(variant, settings)
            row["commands"].append(shlex.join(argv))
            docker_run(argv, 60)
        for worker in variant.workers:
            argv = run_args(variant, worker, scheduler, settings)
            row["commands"].append(shlex.join(argv))
            docker_run(argv, 60)
        log(f"variant {variant.key}: containers {', '.join(names)} started; probe")
        first = worker_names(variant.workers[0], names[0], settings.gpus)[0]
        second = (worker_names(variant.workers[1], names[1], settings.gpus)[0] if len(names) > 1
                  else worker_names(variant.workers[0], names[0], settings.gpus)[1])
        expect = sum(len(worker_names(w, n, settings.gpus)) for w, n in zip(variant.workers, names,
                                                                                          strict=True))
        row.update(a=first, b=second, expected_workers=expect)
        found, why = run_probe(variant, settings, scheduler, first, second, expect, deadline,
                               [scheduler_name, *names])
        row["probe"] = found
        if why:
            row["error"] = why
    except Exception as error:  # noqa: BLE001 - a variant's failure is its result
        row["error"] = f"{type(error).__name__}: {error}"
    finally:
        row["states"] = running([scheduler_name, *names])
        texts = container_logs(names, settings.logs, variant.key)
        row["scheduler_errors"] = error_lines("\n".join(container_logs([scheduler_name], settings.logs,
                                                                       variant.key).values()))
        row["removed"] = remove_containers()
        if settings.gpu:
            row["gpu_processes_left"] = wait_gpus_idle()
    row.update(summarize(settings.gpu, settings.nbytes, row.get("probe") or {}, texts))
    row["seconds"] = round(time.monotonic() - started, 1)
    log(f"variant {variant.key}: {row.get('reps_done')} reps, median {row.get('median_worker_gbps')} GB/s, "
        f"transport {row['transport']}{'; ' + row['error'] if 'error' in row else ''}")
    return row


def build_standin(report: Path) -> None:
    """The STAND-IN images (tests/gpu/standin-image.sh, as containers.standin_images runs it), unless already built."""
    if not containers.docker("image", "inspect", WORKER_IMAGE, SCHEDULER_IMAGE, check=False).returncode:
        return
    report.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["bash", str(containers.ROOT / "tests" / "gpu" / "standin-image.sh"), WORKER_IMAGE,
                           SCHEDULER_IMAGE, ".whl"], cwd=containers.ROOT, capture_output=True, text=True, timeout=300,
                          check=False, env={**os.environ, "OUT": str(report), "STANDIN_EXTRA_ROOTS": "",
                                            "STANDIN_HOST_SITES": ""})
    (report / "standin.log").write_text(done.stdout + done.stderr)
    if done.returncode:
        raise RuntimeError("stand-in images failed: " + (done.stdout + done.stderr)[-2000:])


def machine(gpu: bool) -> dict[str, Any]:
    found: dict[str, Any] = {"cpus": os.cpu_count(), "python": sys.version.split()[0], "kernel": os.uname().release}
    if gpu:
        for key, argv in (("gpus", ["nvidia-smi", "--query-gpu=index,name,uuid,pci.bus_id,memory.total,"
                                                  "driver_version", "--format=csv,noheader"]),
                          ("topo", ["nvidia-smi", "topo", "-m"])):
            done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60)
            found[key] = done.stdout.strip().splitlines()
    ucx_info = carried.UCX_SITE / "libucx" / "bin" / "ucx_info"
    if ucx_info.exists():
        env = {**os.environ, "LD_LIBRARY_PATH": str(carried.UCX_SITE / "libucx" / "lib")}
        for key, flag, pattern in (("ucx_version", "-v", "version"), ("ucx_transports", "-d", "Transport:")):
            done = subprocess.run([str(ucx_info), flag], capture_output=True, text=True, check=False, timeout=60,
                                  env=env)
            found[key] = sorted({line.strip() for line in done.stdout.splitlines() if pattern in line})
    return found


def described(entries: list[dict[str, Any]]) -> str:
    return "; ".join({f"{e['protocol']} on {e['lanes']}": None for e in entries}) or "none printed"


def table(rows: list[dict[str, Any]], memory: str) -> list[str]:
    """The variants as a Markdown table: how the array moved (UCX_PROTO_INFO), the medians, errors and warnings."""
    lines = ["| variant | namespaces | CUDA_VISIBLE_DEVICES (A / B) | same IPC ns / PID ns (seen) | transport | "
             f"B's rendezvous fetch of the {memory} array | A's rendezvous data send | median GB/s (B's fetch) | "
             "median GB/s (client) | reps | errors and warnings |", "| --- | --- | --- | --- | --- | --- | --- | --- | "
             "--- | --- | --- |"]
    for row in rows:
        if row.get("skipped"):
            lines.append(f"| {row['variant']} {row['title']} | {row['namespaces']} | {row['cvd']} | - | - | - | - | - "
                         f"| - | 0 | skipped: {row['skipped']} |")
            continue
        path = row.get("data_path") or {}
        send = described(path.get("send") or []).replace("none printed", "none (B read it)")
        seen = f"{yes(row.get('same_ipc_ns'))} / {yes(row.get('same_pid_ns'))}"
        errors = "; ".join(([row["error"]] if row.get("error") else []) + row.get("errors_in_logs", [])[:3])
        lines.append(f"| {row['variant']} {row['title']} | {row['namespaces']} | {row['cvd']} | {seen} | "
                     f"{', '.join(row.get('transport') or []) or '?'} | {described(path.get('fetch') or [])} | {send} "
                     f"| {row.get('median_worker_gbps')} | {row.get('median_client_gbps')} | {row.get('reps_done')} "
                     f"| {(errors or 'none').replace('|', '/')[:600]} |")
    return lines


def details(rows: list[dict[str, Any]]) -> list[str]:
    """Per variant: the two workers as they saw themselves, and the variant's times."""
    lines = ["| variant | worker A: name, CVD, GPU, GPUs seen, peer access | worker B: the same | registered after s | "
             "warm-up GB/s | B's fetch GB/s, each | variant s |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for row in rows:
        probe = row.get("probe") or {}
        seen = []
        for role in ("a", "b"):
            info = (probe.get("workers") or {}).get(str(probe.get(role)), {})
            seen.append(f"{probe.get(role)}: {info.get('cvd')}, {info.get('pci')}, {info.get('visible')}, "
                        f"{info.get('peer_access')}" if info else "-")
        warm = (probe.get("warmup") or {}).get("worker_gbps")
        each = ", ".join(str(r.get("worker_gbps")) for r in probe.get("reps") or [])
        lines.append(f"| {row['variant']} | {seen[0]} | {seen[1]} | {probe.get('registered_s')} | {warm} | {each} "
                     f"| {row.get('seconds')} |")
    return lines


def yes(value: bool | None) -> str:
    return "?" if value is None else ("yes" if value else "no")


def write(out: Path, report: dict[str, Any]) -> None:
    """OUT/per-gpu-containers.json (everything) and OUT/summary.md (the tables)."""
    (out / "per-gpu-containers.json").write_text(json.dumps(report, indent=1, default=str))
    found = report.get("machine", {})
    memory = "CUDA" if report["mode"] == "GPU" else "host"
    lines = [f"# Per-GPU worker containers and CUDA IPC (issue 41): {report['mode']}", "",
             f"STAND-INs: {report['standins']}", "",
             f"Machine: {json.dumps(found.get('gpus'))}; UCX {found.get('ucx_version')}",
             f"Array {report['nbytes'] / GIB:g} GiB, {report['reps']} repetitions after a warm-up; ulimits "
             f"{report['ulimits']}; image {report['image']}", "", *table(report["variants"], memory), "",
             *details(report["variants"]), "",
             f"Elapsed {report.get('elapsed_s')} s; {report.get('note', '')}",
             *([f"Note: {report['reanalyzed']}."] if report.get("reanalyzed") else [])]
    (out / "summary.md").write_text("\n".join(lines) + "\n")


def plan(args: argparse.Namespace) -> list[Variant]:
    keys = [key.strip() for key in args.variants.split(",") if key.strip()]
    unknown = [key for key in keys if key not in VARIANTS]
    if unknown:
        raise SystemExit(f"unknown variants {unknown}; known: {', '.join(VARIANTS)}")
    return [VARIANTS[key] for key in keys]


def dry_run(variants: list[Variant], settings: Settings) -> int:
    for variant in variants:
        print(f"# variant {variant.key}: {variant.title} ({variant.namespaces})")
        print(shlex.join(scheduler_args(variant, 0, settings)).replace("--port 0", "--port PORT"))
        if variant.holder:
            print(shlex.join(holder_args(variant, settings)))
        for worker in variant.workers:
            names = worker_names(worker, container_name(variant, worker.suffix), settings.gpus)
            print(shlex.join(run_args(variant, worker, "ucx://127.0.0.1:PORT", settings)), f"   # workers {names}")
    return 0


def main_run(args: argparse.Namespace) -> int:
    started = time.monotonic()
    variants = plan(args)
    settings = Settings(image=args.image or WORKER_IMAGE, scheduler_image=args.image or SCHEDULER_IMAGE,
                        gpu=not args.cpu, gpus=2, nbytes=int(args.gib * GIB),
                        reps=args.reps, ulimits=machine_limits(), logs=WORK / "logs")
    if args.dry_run:
        return dry_run(variants, settings)
    args.out.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(WORK, ignore_errors=True)
    settings.logs.mkdir(parents=True)
    report: dict[str, Any] = {
        "mode": "GPU" if settings.gpu else "CPU rehearsal (no GPU: NumPy, `dask worker`, no CDI)",
        "standins": "images tests/gpu/standin-image.sh; CDI spec tests/gpu/cdi-standin.sh (for nvidia-ctk)"
        if settings.gpu and not args.image else f"image {args.image} (given)",
        "image": settings.image, "nbytes": settings.nbytes, "reps": settings.reps, "ulimits": settings.ulimits,
        "variants": [], "argv": sys.argv}
    docker_started = False
    try:
        if not args.no_carry:
            changes, account = carried.prepare(set())
            os.environ.update(changes)
            report["carried"] = account
            log(account)
        os.environ.update(carried.NO_MULTICAST)
        report["machine"] = machine(settings.gpu)
        if settings.gpu:
            settings.gpus = len(report["machine"].get("gpus") or [])
            if settings.gpus < 2:
                raise RuntimeError(f"{settings.gpus} GPUs: the experiment needs two")
        if not args.no_docker_start:
            report["docker"] = containers.start_docker(WORK)
            docker_started = True
            log(f"dockerd: {report['docker']}")
        remove_containers()
        if not args.image:
            build_standin(WORK / "standin")
        report["image_info"] = containers.docker("image", "inspect", settings.image, "--format",
                                                 "{{.Size}} bytes, user {{.Config.User}}, entrypoint "
                                                 "{{.Config.Entrypoint}}", check=False).stdout.strip()
        log(f"image {settings.image}: {report['image_info']}")
        for variant in variants:
            left = args.budget - (time.monotonic() - started) - 20
            if left < min(args.variant_timeout, 35):
                report["variants"].append({"variant": variant.key, "title": variant.title,
                                           "namespaces": variant.namespaces, "cvd": "", "skipped":
                                           f"{left:.0f} s of the budget left"})
                continue
            report["variants"].append(run_variant(variant, settings, min(args.variant_timeout, left)))
            report["elapsed_s"] = round(time.monotonic() - started)
            write(args.out, report)
    except Exception as error:  # noqa: BLE001 - reported in the summary
        report["note"] = f"stopped: {type(error).__name__}: {error}"
        log(report["note"])
    finally:
        remove_containers() if shutil.which("docker") else None
        if docker_started:
            report["docker_stop"] = containers.stop_docker()
        report["elapsed_s"] = round(time.monotonic() - started)
        write(args.out, report)
        with tarfile.open(args.out / "logs.tar.xz", "w:xz") as archive:
            for folder in ("logs", "standin"):
                if (WORK / folder).exists():
                    archive.add(WORK / folder, arcname=folder)
            if (WORK / "dockerd.log").exists():
                archive.add(WORK / "dockerd.log", arcname="dockerd.log")
        print((args.out / "summary.md").read_text())
    return 0 if all(not row.get("error") and not row.get("skipped") for row in report["variants"]) else 1


def reanalyze(args: argparse.Namespace) -> int:
    """A run's analysis again from its JSON and raw logs (OUT/logs.tar.xz): after a fix of the analysis, the figures
    measured stay the run's own."""
    report = json.loads((args.source / "per-gpu-containers.json").read_text())
    with tempfile.TemporaryDirectory() as scratch:
        with tarfile.open(args.source / "logs.tar.xz") as archive:
            archive.extractall(scratch, filter="data")
        logs = Path(scratch) / "logs"
        for row in report["variants"]:
            if row.get("skipped"):
                continue
            names = [name for name in row.get("states", {}) if not name.endswith("-scheduler")]
            texts = {name: (logs / f"{row['variant']}-{name}.log").read_text(errors="replace") for name in names
                     if (logs / f"{row['variant']}-{name}.log").exists()}
            for stale in ("protocols", "transports_A", "transports_B", "data_path", "transport"):
                row.pop(stale, None)
            row.update(summarize(report["mode"] == "GPU", int(report["nbytes"]), row.get("probe") or {}, texts))
    report["reanalyzed"] = ("the analysis (UCX_PROTO_INFO tables, errors) recomputed from the run's raw logs by "
                            f"`{Path(__file__).name} reanalyze`; the measurements are the run's")
    args.out.mkdir(parents=True, exist_ok=True)
    write(args.out, report)
    print((args.out / "summary.md").read_text())
    return 0


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = top.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="the experiment (the driver)")
    run.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp/per-gpu-containers")))
    run.add_argument("--budget", type=float, default=540, help="seconds all of it may take (default 540)")
    run.add_argument("--variant-timeout", type=float, default=70, help="time box of one variant (default 70 s)")
    run.add_argument("--variants", default=DEFAULT_ORDER, help=f"in this order (default {DEFAULT_ORDER})")
    run.add_argument("--gib", type=float, default=2.0, help="array size in GiB (default 2)")
    run.add_argument("--reps", type=int, default=5, help="measured transfers per variant (default 5)")
    run.add_argument("--image", default="", help="use this image instead of building the stand-in")
    run.add_argument("--cpu", action="store_true", help="rehearsal without a GPU: NumPy, `dask worker`, no CDI")
    run.add_argument("--no-docker-start", action="store_true", help="use the dockerd already running")
    run.add_argument("--no-carry", action="store_true", help="the environment already has Dask and UCX")
    run.add_argument("--dry-run", action="store_true", help="print the docker lines, start nothing")
    again = commands.add_parser("reanalyze", help="a run's analysis again, from its OUT (JSON and logs.tar.xz)")
    again.add_argument("source", type=Path, help="the run's OUT")
    again.add_argument("--out", type=Path, required=True)
    one = commands.add_parser("probe", help="(internal) the client of one variant")
    one.add_argument("--scheduler", required=True)
    one.add_argument("--a", required=True, help="worker name holding the array")
    one.add_argument("--b", required=True, help="worker name that fetches it")
    one.add_argument("--expect", type=int, required=True)
    one.add_argument("--nbytes", type=int, required=True)
    one.add_argument("--reps", type=int, required=True)
    one.add_argument("--json", required=True)
    one.add_argument("--timeout", type=float, required=True)
    one.add_argument("--gpu", action="store_true")
    return top


def main() -> int:
    args = parser().parse_args()
    return {"probe": probe, "reanalyze": reanalyze, "run": main_run}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
