"""One spec builder for every Dask container: scheduler, workers and the clients (verification, benchmark).

A spec is a plain dict: name, description, image, argv, env, the container's user, network, capabilities,
volumes, limits and GPU request. From a spec the same module renders `docker run` flags (the systemd units),
community.docker.docker_container arguments (the client containers) and compose service commands
(scripts/compose-gen.py), so a command line is written in one place. Inputs are the public facts of the
cluster model (model.py): dask_cluster, dask_host and dask_settings. Names come from the cluster's identity
(dask_cluster.containers: dask-scheduler for the default name, dask-NAME-scheduler otherwise).

GPUs (docs/gpu-request.md): a spec's `gpus` is "" (none), "all" (every GPU of the host) or the devices of the host's
resolved dask_host.worker_gpus joined by commas ("0,2"); `gpu_request` is how they reach the container: "gpus"
(docker --gpus, NVIDIA's runtime) or "cdi" (CDI devices nvidia.com/gpu=NAME). A selection is made by the
container's devices, not by CUDA_VISIBLE_DEVICES: the container sees only those GPUs, numbered from 0.
"""
from __future__ import annotations

import json
from typing import Any

from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.gpus import CDI_KIND
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.identity import COMPONENT_LABEL

HOST_TLS = "{config}/tls"
GPU_ULIMITS = {"memlock": "-1", "stack": "67108864"}


def gpu_devices(gpus: str) -> list[str]:
    """The GPUs a spec's `gpus` names one by one; [] for "all" (and for "", no GPU)."""
    return [] if gpus in ("", "all") else [device for device in gpus.split(",") if device]


def cdi_devices(gpus: str) -> list[str]:
    """CDI device names for a spec's `gpus`: nvidia.com/gpu=all, or one name per selected GPU."""
    return [f"{CDI_KIND}={device}" for device in gpu_devices(gpus) or ["all"]]


def gpu_request_args(gpus: str, request: str) -> list[str]:
    """The `docker run` flags that hand the GPUs to the container (none for "")."""
    if not gpus:
        return []
    if request == "cdi":
        return [arg for name in cdi_devices(gpus) for arg in ("--device", name)]
    devices = gpu_devices(gpus)
    # --gpus reads its value as CSV: a list of devices must be quoted inside the value.
    return ["--gpus", f'"device={",".join(devices)}"' if devices else "all"]


def gpu_device_requests(gpus: str, request: str) -> list[dict[str, Any]]:
    """The Docker API's DeviceRequests for a spec's GPUs (docker_container's device_requests; compose's
    deploy.resources.reservations.devices), as the docker CLI makes them from --gpus and --device."""
    if not gpus:
        return []
    if request == "cdi":
        return [{"driver": "cdi", "device_ids": cdi_devices(gpus)}]
    devices = gpu_devices(gpus)
    selected: dict[str, Any] = {"device_ids": devices} if devices else {"count": -1}
    return [{"driver": "nvidia", **selected, "capabilities": [["gpu"]]}]


def _gpu_selection(host: dict[str, Any]) -> tuple[str, dict[str, str]]:
    """(the spec's `gpus`, its environment) for the host's resolved worker GPUs (dask_host.worker_gpus).

    The container holds only the selected GPUs, so dask-cuda needs no CUDA_VISIBLE_DEVICES; except for MIG
    instances, which dask-cuda cannot count from NVML: there the selection is named by UUIDs (unchanged inside the
    container), an index by its GPU's UUID.
    """
    if host.get("worker_gpus_all", True):
        return "all", {}
    devices = [str(gpu["device"]) for gpu in host.get("worker_gpus") or []]
    if not any(device.startswith("MIG-") for device in devices):
        return ",".join(devices) or "all", {}
    named = [str(gpu["device"]) if str(gpu["device"]).startswith(("MIG-", "GPU-")) else str(gpu.get("uuid"))
             for gpu in host.get("worker_gpus") or []]
    return ",".join(devices), {"CUDA_VISIBLE_DEVICES": ",".join(named)}


def frames_gpu(cluster: dict[str, Any], host: dict[str, Any] | None) -> str:
    """The GPU a scheduler or client container gets when the images carry cuDF, or "" (none). RAPIDS' advice
    (docs/images.md, "Data frames"): the scheduler unpickles the graphs, and dask-cudf graphs hold cuDF objects (the
    collections' meta, small frames) that a process without a GPU cannot rebuild; a client makes them. It is the
    host's first GPU: its first worker's, when it runs GPU workers, else GPU 0 of a host that has one."""
    if not cluster["images"].get("cudf") or not host:
        return ""
    gpus = host.get("worker_gpus") or []
    if gpus:
        return str(gpus[0].get("index", 0))
    return "0" if int(host.get("gpu_count") or 0) > 0 else ""


def with_frames_gpu(spec: dict[str, Any], cluster: dict[str, Any], host: dict[str, Any] | None,
                    settings: dict[str, Any] | None) -> dict[str, Any]:
    """The spec with the host's frames GPU (frames_gpu), when the images carry cuDF and settings are given."""
    gpu = frames_gpu(cluster, host)
    if gpu and settings:
        spec.update(gpus=gpu, gpu_request=settings["dask_worker_gpu_request"])
    return spec


def _tls_dir(cluster: dict[str, Any]) -> str:
    return str(cluster["paths"]["container"]["tls"])


def tls_files(cluster: dict[str, Any]) -> dict[str, str]:
    tls = _tls_dir(cluster)
    return {"ca": f"{tls}/ca.crt", "cert": f"{tls}/host.crt", "key": f"{tls}/host.key"}


def spill_env(cluster: dict[str, Any]) -> dict[str, str]:
    """cuDF spilling on the workers (dask_worker_cudf_spill): the scheduler and every client read their frames, and
    cuDF needs its spill manager for that ("cannot create SpillableBufferOwner without a global spill manager")."""
    return {"CUDF_SPILL": "on"} if cluster.get("cudf_spill") else {}


DATAFRAME_KEYS = ("partition_bytes", "partitions_per_worker", "workers")


def dataframe_env(cluster: dict[str, Any]) -> dict[str, str]:
    """The cluster's partitioning advice as Dask configuration (dask-gpu.dataframe.*), for the clients it runs for one
    task (verification, benchmark, jobs, rolling steps); the client bundle's dask.yaml and env.sh carry the same
    (roles/dask_tls), and JupyterLab a configuration file (dataframe_config)."""
    advice = cluster.get("dataframe") or {}
    return {f"DASK_DASK_GPU__DATAFRAME__{key.upper()}": str(advice[key]) for key in DATAFRAME_KEYS if key in advice}


def dataframe_config(cluster: dict[str, Any]) -> dict[str, Any]:
    """The same advice as a Dask configuration file's content: the client bundle's dask.yaml, and JupyterLab's file
    (a client that runs for days: its workers count follows the inventory, and a file read by each new Python process
    takes a new count without restarting the container, where an environment change would restart it and every
    kernel in it)."""
    advice = cluster.get("dataframe") or {}
    return {"dask-gpu": {"dataframe": {key.replace("_", "-"): advice[key] for key in DATAFRAME_KEYS
                                       if key in advice}}}


def client_env(cluster: dict[str, Any], advice: bool = True) -> dict[str, str]:
    """What a client needs in its environment to reach the cluster (TLS from the host's own material), and the
    partitioning advice unless it comes from a file (advice=False)."""
    env = {"DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION": str(bool(cluster["tls"])), **spill_env(cluster),
           **(dataframe_env(cluster) if advice else {})}
    if cluster["tls"]:
        files = tls_files(cluster)
        env.update({"DASK_DISTRIBUTED__COMM__TLS__CA_FILE": files["ca"],
                    "DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT": files["cert"],
                    "DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY": files["key"]})
    return env


def base(cluster: dict[str, Any], component: str, description: str, image: str, suffix: str = "") -> dict[str, Any]:
    """What every container spec starts from: named by the identity's `containers[component]` (and `-suffix`),
    labelled with its cluster and component."""
    name = cluster["containers"][component] + (f"-{suffix}" if suffix else "")
    volumes = ([HOST_TLS.format(config=cluster["paths"]["config"]) + ":" + _tls_dir(cluster) + ":ro"]
               if cluster["tls"] else [])
    return {"name": name, "description": description, "image": image, "argv": [], "env": {},
            "network": "host", "user": f"{cluster['uid']}:{cluster['gid']}", "cap_drop": ["ALL"],
            "security_opt": ["no-new-privileges"], "read_only": False, "tmpfs": [], "shm_size": "",
            "ulimits": {}, "volumes": volumes, "gpus": "", "gpu_request": "", "stop_timeout": 10,
            # A renewed host certificate restarts the unit (a Dask server loads it at its start); False for a
            # container whose own process holds no TLS connection and whose new processes read the renewed files
            # from the TLS folder's mount (JupyterLab: its kernels).
            "restart_on_certificate": True,
            "after": [], "wants": [], "wait_ports": [],
            "labels": {**cluster["labels"], COMPONENT_LABEL: component}}


def wait_ports(ports: list[tuple[str, int | None]]) -> list[str]:
    """The fixed ports a container's listeners bind, as roles/dask/files/wait_ports.py takes them (the unit's
    ExecStartPre waits until each can be bound the way its listener binds it: a ucx:// port also out of TIME_WAIT).
    0.0.0.0: a listener on any of the host's addresses holds the port; distributed-ucxx binds every address."""
    return [f"{protocol}://0.0.0.0:{int(port)}" for protocol, port in ports if port]


# Scheduler preload of dask_transport tls-ucx: the scheduler fetches results from UCX workers as host memory, so
# it can hand them to clients over TLS (docs/transport.md).
HOST_FRAMES_PRELOAD = "dask_gpu_verify.host_frames"
# CuPy's kernel cache inside a container whose home may not be writable (a tmpfs on /tmp, or the container's /tmp).
CUPY_CACHE = "/tmp/cupy"


def scheduler_argv(bind: str, port: int, dashboard: str, protocol: str, tls: dict[str, str] | None,
                   extra: list[str], ucx_port: int | None = None) -> list[str]:
    """`dask scheduler`: bound to one address, the dashboard where asked, TLS files when given; with ucx_port, a
    second listener speaks UCX to the workers (clients keep TLS on port)."""
    ports = f"{port},{ucx_port}" if ucx_port else str(port)
    argv = ["dask", "scheduler", "--host", bind, "--port", ports, "--dashboard-address", dashboard]
    if tls:
        argv += ["--protocol", "tls,ucx" if ucx_port else "tls",
                 "--tls-ca-file", tls["ca"], "--tls-cert", tls["cert"], "--tls-key", tls["key"]]
    else:
        argv += ["--protocol", protocol]
    if ucx_port:
        argv += ["--preload", HOST_FRAMES_PRELOAD]
    return argv + list(extra)


def scheduler_spec(cluster: dict[str, Any], host: dict[str, Any], settings: dict[str, Any]) -> dict[str, Any]:
    spec = base(cluster, "scheduler", f"Dask scheduler for cluster {cluster['name']}",
                cluster["images"]["scheduler"])
    bind = str(cluster["dashboard_bind"])
    spec.update(
        argv=scheduler_argv(host["bind_address"], cluster["scheduler_port"], f"{bind}:{cluster['dashboard_port']}",
                            cluster["protocol"], tls_files(cluster) if cluster["tls"] else None,
                            settings.get("dask_scheduler_extra_args") or [], cluster.get("scheduler_ucx_port")),
        # The root filesystem is read-only: CuPy, imported when graphs are unpickled, caches in /tmp.
        env={"DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION": str(bool(cluster["tls"])), "CUPY_CACHE_DIR": CUPY_CACHE,
             "DASK_HEALTH_URL": cluster["scheduler_urls"]["health"], **ucx_env(cluster, host), **spill_env(cluster)},
        read_only=True, tmpfs=["/tmp"], stop_timeout=int(settings["dask_scheduler_stop_timeout"]),
        ulimits=open_files(settings),
        wait_ports=wait_ports([(cluster["client_protocol"], cluster["scheduler_port"]),
                               ("ucx", cluster.get("scheduler_ucx_port")), ("http", cluster["dashboard_port"])]))
    return with_frames_gpu(spec, cluster, host, settings)


def open_files(settings: dict[str, Any]) -> dict[str, str]:
    """The open-files limit, set explicitly (Docker 29 lowers its default to 1,024: too few for a scheduler with
    hundreds of workers, or for UCX)."""
    return {"nofile": str(int(settings.get("dask_container_nofile") or 1048576))}


def ucx_env(cluster: dict[str, Any], host: dict[str, Any]) -> dict[str, str]:
    """UCX keeps to the cluster's network (UCX_NET_DEVICES): with every device it also tries docker0's
    172.17.0.1, which is every Docker host's own address. For the ucx transports and for the polars profile's UCXX
    communicator (features/polars.py)."""
    devices = host.get("ucx_net_devices") or ""
    return {"UCX_NET_DEVICES": str(devices)} if cluster.get("workers_speak_ucx") and devices else {}


# Worker preload of GPU workers: the worker's own GPU (NVML) in its /metrics, read at each scrape.
GPU_METRICS_PRELOAD = "dask_gpu_verify.gpu_metrics"


# Nanny preloads of GPU workers: worker N of a host serves HTTP (/metrics, /health) on dask_worker_http_port + N
# (dask-cuda hands every worker the same --dashboard-address; all but the first would get a random port), and is
# pinned to the CPU cores of its own GPU (dask-cuda's `dask cuda worker` pins worker i to GPU 2i mod n's).
WORKER_PORTS_PRELOAD = "dask_gpu_verify.worker_ports"
GPU_AFFINITY_PRELOAD = "dask_gpu_verify.gpu_affinity"
NANNY_PRELOADS = (WORKER_PORTS_PRELOAD, GPU_AFFINITY_PRELOAD)
NANNY_PRELOAD_ENV = json.dumps(list(NANNY_PRELOADS), separators=(",", ":"))  # DASK_DISTRIBUTED__NANNY__PRELOAD


def worker_argv(gpu: bool, scheduler: str, *, host: str | None, name: str | None, nthreads: int | None,
                memory_limit: str | None, local_dir: str, death_timeout: int, http_port: int,
                port_range: str = "", tls: dict[str, str] | None = None, device_memory_limit: str | None = None,
                rmm_pool_size: str = "", rmm_for_cupy: bool = False, extra: list[str] | None = None,
                http_bind: str = "127.0.0.1", cudf_spill: bool = False) -> list[str]:
    """`dask cuda worker` (one Dask worker per GPU) or a one-process `dask worker`; None leaves an option out.

    The workers' HTTP servers listen on http_bind; beyond loopback (monitoring) they serve /metrics and /health
    only (--no-dashboard: no Bokeh pages)."""
    argv = [scheduler]
    for flag, value in (("--host", host), ("--name", name), ("--nthreads", nthreads),
                        ("--memory-limit", memory_limit)):
        if value is not None:
            argv += [flag, str(value)]
    argv += ["--local-directory", local_dir, "--death-timeout", str(death_timeout),
             "--dashboard-address", f"{http_bind}:{http_port}"]
    if not http_bind.startswith("127."):
        argv.append("--no-dashboard")
    if port_range:
        argv += ["--worker-port", port_range]
    if tls:
        argv += ["--tls-ca-file", tls["ca"], "--tls-cert", tls["cert"], "--tls-key", tls["key"]]
    if gpu:
        if device_memory_limit is not None:
            argv += ["--device-memory-limit", str(device_memory_limit)]
        argv += ["--resources", "GPU=1", "--preload", GPU_METRICS_PRELOAD]
        if rmm_pool_size:
            argv += ["--rmm-pool-size", str(rmm_pool_size)]
        if rmm_for_cupy:
            argv += ["--set-rmm-allocator-for-libs", "cupy"]
        if cudf_spill:
            argv += ["--enable-cudf-spill"]
        argv = ["dask", "cuda", "worker"] + argv
    else:
        argv = ["dask", "worker"] + argv + ["--nworkers", "1"]
    return argv + list(extra or [])


# dask_autoscale_by: gpu (docs/autoscale.md): the worker container runs each of the host's workers as a process of its
# own (dask-gpu-worker-slots), started and stopped on its own as the autoscale agent's file of released workers says
# (mounted read-only); the container's health is that of the workers that run (the file of their /health URLs).
SLOTS_MOUNT = "/etc/dask-slots"
SLOTS_FILE = "released.json"
SLOTS_HEALTH = "/tmp/dask-slots-health"


def slots_argv(host: dict[str, Any], argv: list[str], stop_timeout: int) -> list[str]:
    """The worker command line, one process per worker (GPU) under dask-gpu-worker-slots, which stops them within the
    container's stop timeout."""
    return ["dask-gpu-worker-slots", "--name", str(host["name"]), "--workers", str(host["worker_count"]),
            "--control", f"{SLOTS_MOUNT}/{SLOTS_FILE}", "--health-file", SLOTS_HEALTH,
            "--stop-timeout", str(max(stop_timeout - 5, 1)), "--", *argv]


def worker_spec(cluster: dict[str, Any], host: dict[str, Any], settings: dict[str, Any]) -> dict[str, Any]:
    gpu = host["worker_mode"] == "gpu"
    spec = base(cluster, "worker", "Dask {}workers ({}) for cluster {}".format(
        "CUDA " if gpu else "", host["worker_count"], cluster["name"]), cluster["images"]["worker"])
    local = cluster["paths"]["container"]["local"]
    http_port = int(settings["dask_worker_http_port"])
    http_bind = str(host.get("http_bind") or "127.0.0.1")
    tls = cluster["protocol"] == "tls"
    spec["argv"] = worker_argv(
        gpu, cluster["worker_scheduler_address"], host=host["bind_address"], name=host["name"],
        nthreads=host["worker_nthreads"], memory_limit=str(settings["dask_worker_memory_limit"]), local_dir=local,
        death_timeout=int(settings["dask_worker_death_timeout"]), http_port=http_port,
        port_range=str(settings.get("dask_worker_port_range") or ""),
        tls=tls_files(cluster) if tls else None,
        device_memory_limit=str(settings["dask_worker_device_memory_limit"]),
        rmm_pool_size=str(host.get("rmm_pool_size") or ""), rmm_for_cupy=bool(host.get("rmm_for_cupy")),
        extra=settings.get("dask_worker_extra_args"),
        cudf_spill=bool(cluster.get("cudf_spill")),
        http_bind=http_bind)
    env = {"DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION": str(tls),
           "DASK_HEALTH_URL": f"http://{http_bind}:{http_port}/health", **ucx_env(cluster, host)}
    gpus, gpu_env = _gpu_selection(host) if gpu else ("", {})
    env.update(gpu_env)
    if gpu:
        env["DASK_DISTRIBUTED__NANNY__PRELOAD"] = NANNY_PRELOAD_ENV

    spec.update(env=env, shm_size=str(cluster["polars"]["shm_size"]),
                stop_timeout=int(settings["dask_worker_stop_timeout"]), ulimits=open_files(settings),
                wait_ports=wait_ports([("http", port) for port in host.get("http_ports") or []]))
    # Workers that speak UCX (tls-ucx) hold no TLS key: only the scheduler and clients use TLS.
    spec["volumes"] = [f"{cluster['paths']['data']}/worker:{local}"] + (spec["volumes"] if tls else [])
    scale = cluster.get("autoscale") or {}
    if scale.get("per_gpu"):
        spec["argv"] = slots_argv(host, spec["argv"], spec["stop_timeout"])
        spec["env"]["DASK_HEALTH_FILE"] = SLOTS_HEALTH
        spec["volumes"].append(f"{scale['slots_dir']}:{SLOTS_MOUNT}:ro")
    if gpu:
        spec.update(gpus=gpus, gpu_request=settings["dask_worker_gpu_request"],
                    ulimits={**GPU_ULIMITS, **open_files(settings)},
                    after=["nvidia-persistenced.service"], wants=["nvidia-persistenced.service"])
    return spec


def verify_argv(scheduler: str, expect_workers: int | str, json_path: str, *, allow_cpu: bool,
                timeout: int | None = None, expect_gpus: int | None = None,
                hosts: dict[str, int] | None = None, bandwidth_mib: int = 0) -> list[str]:
    """dask-gpu-verify: the workers (in all and per host) and GPUs it must find, and where its report goes; the
    bandwidth probe's size where one is given (0: the backend's own)."""
    argv = ["dask-gpu-verify", "--scheduler", scheduler, "--expect-workers", str(expect_workers)]
    if timeout is not None:
        argv += ["--timeout", str(timeout)]
    if expect_gpus is not None:
        argv += ["--expect-gpus", str(expect_gpus)]
    if bandwidth_mib:
        argv += ["--bandwidth-mib", str(bandwidth_mib)]
    argv += ["--json", json_path] + (["--allow-cpu"] if allow_cpu else [])
    return argv + [f"--expect-host={host}={count}" for host, count in (hosts or {}).items()]


def client_argv(kind: str, cluster: dict[str, Any], settings: dict[str, Any], out: str,
                ready_seconds: int | None = None) -> list[str]:
    """dask-gpu-verify or dask-gpu-bench against the cluster, expecting the inventory's workers on each host."""
    reports = cluster["paths"]["container"]["reports"]
    timeout = int(settings["dask_verify_timeout"])
    allow_cpu = bool(cluster["cpu_hosts"])
    if kind == "verify":
        return verify_argv(cluster["scheduler_address"], cluster["expected_workers"], f"{reports}/{out}",
                           allow_cpu=allow_cpu, timeout=timeout, expect_gpus=cluster["expected_gpus"],
                           hosts=cluster["workers_per_host"],
                           bandwidth_mib=int(settings["dask_verify_bandwidth_mib"]))
    if kind == "bench":
        ready = ["--ready-seconds", str(ready_seconds)] if ready_seconds is not None else []
        rows = int(settings["dask_bench_etl_rows"])
        ready += ["--etl-rows", str(rows)] if rows else []  # its files: the published partitioning
        scale = int(settings["dask_bench_polars_scale"]) if (cluster.get("polars") or {}).get("enabled") else 0
        ready += ["--polars-scale", str(scale)] if scale else []
        return (["dask-gpu-bench", "--scheduler", cluster["scheduler_address"],
                 "--expect-workers", str(cluster["expected_workers"]), "--timeout", str(timeout),
                 "--label", cluster["name"], "--out", f"{reports}/{out}"] + (["--allow-cpu"] if allow_cpu else [])
                + ready + [f"--expect-host={host}={count}" for host, count in cluster["workers_per_host"].items()])
    raise ValueError(f"unknown client kind {kind!r}: verify or bench")


def client_spec(cluster: dict[str, Any], host: dict[str, Any], settings: dict[str, Any], kind: str, out: str,
                ready_seconds: int | None = None) -> dict[str, Any]:
    """A client container on a worker host: the worker image, the host's TLS material, a report folder, and
    (for the benchmark on a GPU host) the host's GPUs, else a GPU when the images carry cuDF (frames_gpu)."""
    spec = base(cluster, kind, f"dask-gpu-{kind} for cluster {cluster['name']}",
                cluster["images"]["worker"])
    spec.update(argv=client_argv(kind, cluster, settings, out, ready_seconds), env=client_env(cluster))
    reports = f"{cluster['paths']['data']}/reports:{cluster['paths']['container']['reports']}"
    spec["volumes"] = spec["volumes"] + [reports] + (polars_tables(cluster) if kind == "bench" else [])
    if kind == "bench" and host["worker_mode"] == "gpu":
        gpus, gpu_env = _gpu_selection(host)
        spec.update(gpus=gpus, gpu_request=settings["dask_worker_gpu_request"], env={**spec["env"], **gpu_env})
        return spec
    return with_frames_gpu(spec, cluster, host, settings)



def polars_tables(cluster: dict[str, Any]) -> list[str]:
    """With the polars profile, a client on a worker host sees the workers' local directory read-only, at the path the
    workers see it: Polars reads a file's schema where the query is planned (the client), the engine's ranks read
    the data, so tables written there (the benchmark's, a job's) must be readable by both (docs/polars.md)."""
    if not (cluster.get("polars") or {}).get("enabled"):
        return []
    return [f"{cluster['paths']['data']}/worker:{cluster['paths']['container']['local']}:ro"]




def roll_spec(cluster: dict[str, Any], step: str, args: list[str], timeout: int) -> dict[str, Any]:
    """dask-gpu-roll (a rolling restart's or a host retirement's scheduler-side step) as a client container on the
    scheduler host: the scheduler image, the host's TLS material, no GPU."""
    argv = ["dask-gpu-roll", step, "--scheduler", cluster["scheduler_address"], "--timeout", str(timeout)]
    return tool_spec(cluster, "roll", f"dask-gpu-roll {step} for cluster {cluster['name']}", argv + list(args),
                     suffix=step)


def tool_spec(cluster: dict[str, Any], component: str, description: str, argv: list[str],
              suffix: str = "") -> dict[str, Any]:
    """One of the bundle's own tools (images/verify) as a client of the cluster on the scheduler host: the scheduler
    image, the host's TLS material, no GPU, a read-only root (CuPy, imported when graphs are unpickled, caches in a
    /tmp tmpfs)."""
    spec = base(cluster, component, description, cluster["images"]["scheduler"], suffix)
    spec.update(argv=argv, env={**client_env(cluster), "CUPY_CACHE_DIR": CUPY_CACHE}, read_only=True,
                tmpfs=["/tmp"])
    return spec


def docker_run_args(spec: dict[str, Any]) -> list[str]:
    """The `docker run` flags of a spec (its name, env file, image and command are the unit's)."""
    args = ["--network", spec["network"], "--user", spec["user"]]
    for cap in spec["cap_drop"]:
        args += ["--cap-drop", cap]
    for option in spec["security_opt"]:
        args += ["--security-opt", option]
    if spec["read_only"]:
        args.append("--read-only")
    for path in spec["tmpfs"]:
        args += ["--tmpfs", path]
    if spec["shm_size"]:
        args += ["--shm-size", spec["shm_size"]]
    for volume in spec["volumes"]:
        args += ["--volume", volume]
    args += gpu_request_args(spec["gpus"], spec["gpu_request"])
    for name, value in spec["ulimits"].items():
        args += ["--ulimit", f"{name}={value}"]
    for name, value in spec["labels"].items():
        args += ["--label", f"{name}={value}"]
    return args


def container_args(spec: dict[str, Any]) -> dict[str, Any]:
    """community.docker.docker_container arguments for a spec run to completion (the clients)."""
    args: dict[str, Any] = {
        "name": spec["name"], "image": spec["image"], "command": spec["argv"], "env": spec["env"],
        "network_mode": spec["network"], "user": spec["user"], "cap_drop": spec["cap_drop"],
        "security_opts": spec["security_opt"], "read_only": spec["read_only"], "volumes": spec["volumes"],
        # The bundle's own image, put there by site.yml; never fetched from elsewhere (the container gets TLS keys).
        "pull": "never", "labels": spec["labels"]}
    if spec["tmpfs"]:
        args["tmpfs"] = spec["tmpfs"]
    if spec["shm_size"]:
        args["shm_size"] = spec["shm_size"]
    if spec["ulimits"]:
        args["ulimits"] = [f"{name}:{value}:{value}" for name, value in spec["ulimits"].items()]
    # CDI devices too go in device_requests (driver cdi), as the docker CLI sends --device nvidia.com/gpu=...:
    # docker_container's `devices` takes host paths only.
    if spec["gpus"]:
        args["device_requests"] = gpu_device_requests(spec["gpus"], spec["gpu_request"])
    return args
