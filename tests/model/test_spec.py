"""The spec builder: one spec per container, rendered as docker flags and module arguments."""
from __future__ import annotations

import json
from types import ModuleType
from typing import Any

from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.features import identity
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.features import jobs as jobs_feature
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.features import notebook as notebook_feature
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.gpus import select

CLUSTER: dict[str, Any] = {
    "name": "c", "protocol": "tls", "client_protocol": "tls", "tls": True, "scheduler_address": "tls://10.0.0.1:8786",
    "scheduler_port": 8786,
    "worker_scheduler_address": "tls://10.0.0.1:8786", "scheduler_ucx_port": None, "transport": "tls",
    "dashboard_port": 8787, "dashboard_bind": "127.0.0.1", "expected_workers": 3, "expected_gpus": 2,
    "workers_per_host": {"g1": 2, "c1": 1}, "cpu_hosts": ["c1"], "uid": 10001, "gid": 10001,
    "images": {"scheduler": "dask-gpu-scheduler:t", "worker": "dask-gpu-worker:t"},
    "paths": {"config": "/etc/dask", "data": "/var/lib/dask", "container": {
        "tls": "/etc/dask/tls", "local": "/var/lib/dask", "reports": "/var/lib/dask-reports"}},
    "scheduler_urls": {"health": "http://127.0.0.1:8787/health", "counts": "http://127.0.0.1:8787/json/counts.json"},
    "polars": {"enabled": False, "shm_size": "1g"}, "workers_speak_ucx": False, **identity("dask")}
PROBED = [{"index": 0, "uuid": "GPU-0"}, {"index": 1, "uuid": "GPU-1"}, {"index": 2, "uuid": "GPU-2"}]


def gpu_host(wanted: list[str], probed: list[dict[str, Any]] = PROBED) -> dict[str, Any]:
    """A GPU host's model whose workers use `wanted` (dask_worker_gpus, resolved as the model resolves it)."""
    workers = select(wanted, {"gpus": probed}).gpus
    return {"name": "g1", "bind_address": "10.0.0.2", "worker_mode": "gpu", "worker_count": len(workers),
            "worker_nthreads": 1, "gpus": probed, "worker_gpus": workers, "worker_gpus_all": not wanted}


GPU_HOST = gpu_host(["0", "GPU-1"])
SETTINGS = {"dask_worker_http_port": 8790, "dask_worker_memory_limit": "auto", "dask_worker_death_timeout": 60,
            "dask_worker_device_memory_limit": "0.8", "dask_worker_gpu_request": "cdi", "dask_worker_stop_timeout": 30,
            "dask_scheduler_stop_timeout": 20, "dask_verify_timeout": 120, "dask_verify_bandwidth_mib": 0,
            "dask_bench_etl_rows": 12000000,
            "dask_worker_extra_args": ["--lifetime", "1h"], "dask_bench_polars_scale": 10}


def gpu_flags(args: list[str]) -> list[str]:
    """The GPU flags and their values among docker run arguments."""
    pairs = zip(args, args[1:], strict=False)
    return [arg for flag, value in pairs if flag in ("--gpus", "--device") for arg in (flag, value)]


def test_gpu_worker_spec_gets_its_selected_gpus_as_cdi_devices(builder: ModuleType) -> None:
    spec = builder.worker_spec(CLUSTER, GPU_HOST, SETTINGS)
    assert spec["argv"][:4] == ["dask", "cuda", "worker", "tls://10.0.0.1:8786"]
    assert spec["argv"][-2:] == ["--lifetime", "1h"]
    # The container holds only the selected GPUs (numbered from 0 inside): no CUDA_VISIBLE_DEVICES.
    assert spec["gpus"] == "0,GPU-1" and "CUDA_VISIBLE_DEVICES" not in spec["env"]
    args = builder.docker_run_args(spec)
    assert gpu_flags(args) == ["--device", "nvidia.com/gpu=0", "--device", "nvidia.com/gpu=GPU-1"]
    assert args[args.index("--user") + 1] == "10001:10001" and args[args.index("--cap-drop") + 1] == "ALL"
    assert "/etc/dask/tls:/etc/dask/tls:ro" in args and "memlock=-1" in args
    assert builder.container_args(spec)["device_requests"] == [
        {"driver": "cdi", "device_ids": ["nvidia.com/gpu=0", "nvidia.com/gpu=GPU-1"]}]


def test_cdi_without_a_selection_asks_for_every_gpu(builder: ModuleType) -> None:
    spec = builder.worker_spec(CLUSTER, gpu_host([]), SETTINGS)
    assert spec["gpus"] == "all" and "CUDA_VISIBLE_DEVICES" not in spec["env"]
    assert gpu_flags(builder.docker_run_args(spec)) == ["--device", "nvidia.com/gpu=all"]
    assert builder.container_args(spec)["device_requests"] == [{"driver": "cdi", "device_ids": ["nvidia.com/gpu=all"]}]


def test_gpus_request_uses_the_nvidia_runtime_with_device_ids_for_a_selection(builder: ModuleType) -> None:
    runtime = {**SETTINGS, "dask_worker_gpu_request": "gpus"}
    spec = builder.worker_spec(CLUSTER, gpu_host(["0", "2"]), runtime)
    assert spec["gpus"] == "0,2" and "CUDA_VISIBLE_DEVICES" not in spec["env"]
    # --gpus reads CSV: '"device=0,2"' (quotes inside the value) is docker's form for several devices.
    assert gpu_flags(builder.docker_run_args(spec)) == ["--gpus", '"device=0,2"']
    assert builder.container_args(spec)["device_requests"] == [
        {"driver": "nvidia", "device_ids": ["0", "2"], "capabilities": [["gpu"]]}]
    every = builder.worker_spec(CLUSTER, gpu_host([]), runtime)
    assert gpu_flags(builder.docker_run_args(every)) == ["--gpus", "all"]
    assert builder.container_args(every)["device_requests"] == [
        {"driver": "nvidia", "count": -1, "capabilities": [["gpu"]]}]


def test_a_mig_selection_keeps_cuda_visible_devices_as_uuids(builder: ModuleType) -> None:
    mig = "MIG-11111111-2222-3333-4444-555555555555"
    host = gpu_host([mig, "1"], [{"index": 0, "uuid": "GPU-aaaaaaaa-0000-0000-0000-000000000000", "mig": [mig]},
                                 {"index": 1, "uuid": "GPU-bbbbbbbb-0000-0000-0000-000000000000", "mig": []}])
    spec = builder.worker_spec(CLUSTER, host, SETTINGS)
    assert gpu_flags(builder.docker_run_args(spec)) == ["--device", f"nvidia.com/gpu={mig}",
                                                         "--device", "nvidia.com/gpu=1"]
    # dask-cuda counts whole GPUs through NVML: MIG instances are named by UUID, an index by its GPU's UUID.
    assert spec["env"]["CUDA_VISIBLE_DEVICES"] == f"{mig},GPU-bbbbbbbb-0000-0000-0000-000000000000"


def test_the_unit_renders_the_gpus_flag_so_systemd_keeps_its_quotes(builder: ModuleType) -> None:
    spec = builder.worker_spec(CLUSTER, GPU_HOST, {**SETTINGS, "dask_worker_gpu_request": "gpus"})
    value = gpu_flags(builder.docker_run_args(spec))[1]
    # unit.service.j2 writes each argument with to_json; systemd's C-style unquoting gives docker '"device=0,GPU-1"'.
    assert json.dumps(value) == '"\\"device=0,GPU-1\\""'


def test_cpu_worker_runs_one_dask_worker_without_gpu_flags(builder: ModuleType) -> None:
    spec = builder.worker_spec(CLUSTER, {**GPU_HOST, "worker_mode": "cpu", "worker_nthreads": 8},
                               {**SETTINGS, "dask_worker_gpus": []})
    assert spec["argv"][:2] == ["dask", "worker"] and "--nworkers" in spec["argv"]
    assert "--resources" not in spec["argv"] and "CUDA_VISIBLE_DEVICES" not in spec["env"]
    args = builder.docker_run_args(spec)
    assert not {"--gpus", "--device"} & set(args)
    # Only the open-files limit (Docker 29 lowers its default to 1024), none of the GPU workers' limits.
    assert [value for flag, value in zip(args, args[1:], strict=False) if flag == "--ulimit"] == ["nofile=1048576"]


def test_scheduler_spec_is_read_only_and_binds_one_address(builder: ModuleType) -> None:
    spec = builder.scheduler_spec(CLUSTER, {"bind_address": "10.0.0.1"}, SETTINGS)
    assert spec["argv"][:4] == ["dask", "scheduler", "--host", "10.0.0.1"]
    assert "--tls-key" in spec["argv"]
    assert spec["read_only"] and "--read-only" in builder.docker_run_args(spec)
    assert spec["env"]["DASK_HEALTH_URL"] == "http://127.0.0.1:8787/health"


def test_clients_expect_every_host_and_carry_tls(builder: ModuleType) -> None:
    verify = builder.client_spec(CLUSTER, GPU_HOST, SETTINGS, "verify", "v.json")
    assert "--expect-host=g1=2" in verify["argv"] and "--expect-host=c1=1" in verify["argv"]
    assert "--allow-cpu" in verify["argv"] and verify["gpus"] == ""
    assert verify["env"]["DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY"] == "/etc/dask/tls/host.key"
    # The bandwidth probe's size only where one is set (0: the backend's own, which the verification picks).
    assert "--bandwidth-mib" not in verify["argv"]
    small = builder.client_argv("verify", CLUSTER, {**SETTINGS, "dask_verify_bandwidth_mib": 32}, "v.json")
    assert small[small.index("--bandwidth-mib"):][:2] == ["--bandwidth-mib", "32"]
    bench = builder.container_args(builder.client_spec(CLUSTER, GPU_HOST, SETTINGS, "bench", "b", 12))
    assert "--ready-seconds" in bench["command"] and "devices" not in bench
    assert bench["command"][bench["command"].index("--etl-rows"):][:2] == ["--etl-rows", "12000000"]
    assert "--etl-files" not in bench["command"]  # the published partitioning decides
    few = builder.client_argv("bench", CLUSTER, {**SETTINGS, "dask_bench_etl_rows": 5}, "b")
    assert few[few.index("--etl-rows"):][:2] == ["--etl-rows", "5"]
    assert "--etl-rows" not in builder.client_argv("bench", CLUSTER, {**SETTINGS, "dask_bench_etl_rows": 0}, "b")
    # The benchmark gets the GPUs the host's workers use.
    assert bench["device_requests"] == [{"driver": "cdi", "device_ids": ["nvidia.com/gpu=0", "nvidia.com/gpu=GPU-1"]}]
    assert bench["cap_drop"] == ["ALL"] and bench["user"] == "10001:10001"


def test_no_tls_means_no_tls_files_anywhere(builder: ModuleType) -> None:
    plain = {**CLUSTER, "tls": False, "protocol": "tcp", "scheduler_address": "tcp://10.0.0.1:8786",
             "worker_scheduler_address": "tcp://10.0.0.1:8786", "transport": "tcp"}
    spec = builder.worker_spec(plain, GPU_HOST, SETTINGS)
    assert not any("tls" in arg for arg in spec["argv"]) and not any("tls" in v for v in spec["volumes"])
    assert builder.client_env(plain) == {"DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION": "False"}


def test_tls_ucx_scheduler_listens_on_both_and_workers_speak_ucx_without_tls_files(builder: ModuleType) -> None:
    mixed = {**CLUSTER, "protocol": "ucx", "transport": "tls-ucx", "worker_scheduler_address": "ucx://10.0.0.1:8788",
             "workers_speak_ucx": True,
             "scheduler_ucx_port": 8788}
    scheduler = builder.scheduler_spec(mixed, {"bind_address": "10.0.0.1"}, SETTINGS)
    argv = scheduler["argv"]
    assert argv[argv.index("--port") + 1] == "8786,8788" and argv[argv.index("--protocol") + 1] == "tls,ucx"
    assert "--tls-key" in argv and argv[argv.index("--preload") + 1] == "dask_gpu_verify.host_frames"
    assert scheduler["env"]["DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION"] == "True"
    worker = builder.worker_spec(mixed, GPU_HOST, SETTINGS)
    assert worker["argv"][3] == "ucx://10.0.0.1:8788"
    assert not any("tls" in arg for arg in worker["argv"]) and not any("tls" in v for v in worker["volumes"])
    assert "UCX_NET_DEVICES" not in worker["env"]  # unknown interface: UCX's default
    on_eth0 = builder.worker_spec(mixed, {**GPU_HOST, "ucx_net_devices": "eth0"}, SETTINGS)
    assert on_eth0["env"]["UCX_NET_DEVICES"] == "eth0"
    sched_eth0 = builder.scheduler_spec(mixed, {"bind_address": "10.0.0.1", "ucx_net_devices": "eth0"}, SETTINGS)
    assert sched_eth0["env"]["UCX_NET_DEVICES"] == "eth0"
    assert "UCX_NET_DEVICES" not in builder.worker_spec(CLUSTER, {**GPU_HOST, "ucx_net_devices": "eth0"},
                                                        SETTINGS)["env"]  # tls: no UCX
    verify = builder.client_spec(mixed, GPU_HOST, SETTINGS, "verify", "v.json")
    assert verify["argv"][verify["argv"].index("--scheduler") + 1] == "tls://10.0.0.1:8786"
    assert verify["env"]["DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION"] == "True"


def test_roll_steps_run_as_a_client_of_the_scheduler_image_with_its_tls(builder: ModuleType) -> None:
    spec = builder.roll_spec(CLUSTER, "retire", ["--host=10.0.0.2"], 300)
    assert spec["argv"] == ["dask-gpu-roll", "retire", "--scheduler", "tls://10.0.0.1:8786", "--timeout", "300",
                            "--host=10.0.0.2"]
    assert spec["image"] == "dask-gpu-scheduler:t" and spec["gpus"] == "" and spec["read_only"] is True
    assert spec["env"]["DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT"] == "/etc/dask/tls/host.crt"
    assert "/etc/dask/tls:/etc/dask/tls:ro" in spec["volumes"]


def test_cudf_spilling_turns_on_the_worker_flag_and_cuda_spill_for_the_scheduler_and_clients(
        builder: ModuleType) -> None:
    spilling = {**CLUSTER, "cudf_spill": True}
    worker = builder.worker_spec(spilling, GPU_HOST, SETTINGS)
    assert "--enable-cudf-spill" in worker["argv"]
    assert builder.scheduler_spec(spilling, {"bind_address": "10.0.0.1"}, SETTINGS)["env"]["CUDF_SPILL"] == "on"
    assert builder.client_spec(spilling, GPU_HOST, SETTINGS, "verify", "v.json")["env"]["CUDF_SPILL"] == "on"
    # Off (the default): neither the flag nor the variable.
    assert "--enable-cudf-spill" not in builder.worker_spec(CLUSTER, GPU_HOST, SETTINGS)["argv"]
    assert "CUDF_SPILL" not in builder.scheduler_spec(CLUSTER, {"bind_address": "10.0.0.1"}, SETTINGS)["env"]
    # A CPU worker has no cuDF spill manager to turn on.
    cpu = builder.worker_spec(spilling, {**GPU_HOST, "worker_mode": "cpu", "worker_nthreads": 2}, SETTINGS)
    assert "--enable-cudf-spill" not in cpu["argv"]


def test_with_cudf_in_the_images_the_scheduler_and_the_clients_get_one_gpu(builder: ModuleType) -> None:
    """RAPIDS' advice: dask-cudf graphs hold cuDF objects that the scheduler unpickles and the client makes (a 1-GPU
    container proof failed both ways without a GPU: tests/gpu/results/containers-frames-h100)."""
    frames = {**CLUSTER, "images": {**CLUSTER["images"], "cudf": True}}
    scheduler = builder.scheduler_spec(frames, GPU_HOST, SETTINGS)
    assert (scheduler["gpus"], scheduler["gpu_request"]) == ("0", "cdi")
    cdi = [{"driver": "cdi", "device_ids": ["nvidia.com/gpu=0"]}]
    assert builder.container_args(scheduler)["device_requests"] == cdi
    verify = builder.client_spec(frames, gpu_host(["2"]), SETTINGS, "verify", "v.json")
    assert verify["gpus"] == "2"  # the host's first worker GPU
    notebook = notebook_feature.notebook_spec({**frames, "notebook": {"listen": "127.0.0.1", "port": 8888, "dir": "/n",
                                                             "container_dir": "/nb", "config_dir": "/c"}},
                                              "t", GPU_HOST, SETTINGS)
    assert notebook["gpus"] == "0"
    # A scheduler host without a GPU, or images without cuDF: no GPU.
    assert builder.scheduler_spec(frames, {"bind_address": "10.0.0.1", "gpu_count": 0}, SETTINGS)["gpus"] == ""
    assert builder.scheduler_spec(frames, {"bind_address": "10.0.0.1", "gpu_count": 2}, SETTINGS)["gpus"] == "0"
    assert builder.scheduler_spec(CLUSTER, GPU_HOST, SETTINGS)["gpus"] == ""
    assert builder.client_spec(CLUSTER, GPU_HOST, SETTINGS, "verify", "v.json")["gpus"] == ""
    # A job builds dask-cudf collections too: the host's first worker GPU with cuDF, none without.
    job = {"id": "etl-x", "name": "etl", "source": "/s", "folder": "", "entry": "main.py", "args": [], "timeout": 60,
           "env": {}, "requirements": ""}
    assert jobs_feature.job_spec(frames, SETTINGS, job, gpu_host(["2"]))["gpus"] == "2"
    assert jobs_feature.job_spec(CLUSTER, SETTINGS, job, gpu_host(["2"]))["gpus"] == ""


def test_a_gpu_less_scheduler_host_under_cudf_images_is_advised_not_refused() -> None:
    from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.model import advice

    scheduler = {"name": "s1", "scheduler": True, "gpu_count": 0, "worker_mode": ""}
    said = advice(scheduler, {"dask_image_profile": "full"})
    assert any("the scheduler host has no GPU, but dask_image_profile=full" in line for line in said), said
    assert not [line for line in advice({**scheduler, "gpu_count": 1}, {"dask_image_profile": "full"})
                if "scheduler host" in line]
    assert not [line for line in advice(scheduler, {"dask_image_profile": "lean"}) if "scheduler host" in line]


def test_the_polars_profile_gives_its_workers_shm_ucx_devices_and_its_clients_the_tables(builder: ModuleType) -> None:
    """features/polars.py: /dev/shm as the cluster says, UCX kept to the cluster's network for the engine's UCXX
    communicator, no RMM pool flag, and the benchmark's and jobs' containers see the workers' local directory
    read-only (Polars reads a file's schema where it plans); the benchmark gets its scale."""
    polars = {**CLUSTER, "polars": {"enabled": True, "shm_size": "16g"}, "workers_speak_ucx": True}
    host = {**GPU_HOST, "ucx_net_devices": "eth1"}
    worker = builder.worker_spec(polars, host, SETTINGS)
    assert worker["shm_size"] == "16g" and worker["env"]["UCX_NET_DEVICES"] == "eth1"
    assert not [arg for arg in worker["argv"] if arg.startswith("--rmm")]
    assert "--shm-size" in (args := builder.docker_run_args(worker)) and args[args.index("--shm-size") + 1] == "16g"
    tables = "/var/lib/dask/worker:/var/lib/dask:ro"
    bench = builder.client_spec(polars, GPU_HOST, SETTINGS, "bench", "b")
    assert tables in bench["volumes"] and bench["argv"][bench["argv"].index("--polars-scale") + 1] == "10"
    assert tables not in builder.client_spec(polars, GPU_HOST, SETTINGS, "verify", "v.json")["volumes"]
    job = {"id": "j-1", "name": "j", "timeout": 60, "entry": "main.py", "args": [], "env": {}}
    assert tables in jobs_feature.job_spec(polars, SETTINGS, job, GPU_HOST)["volumes"]
    # Other profiles: 1 GiB, no UCX devices on a TCP/TLS transport, no tables, no Polars benchmark.
    plain = builder.worker_spec(CLUSTER, host, SETTINGS)
    assert plain["shm_size"] == "1g" and "UCX_NET_DEVICES" not in plain["env"]
    assert "--polars-scale" not in builder.client_spec(CLUSTER, GPU_HOST, SETTINGS, "bench", "b")["argv"]
    assert tables not in jobs_feature.job_spec(CLUSTER, SETTINGS, job, GPU_HOST)["volumes"]


def test_jupyterlab_reads_the_partitioning_advice_from_a_file_not_its_environment(builder: ModuleType) -> None:
    """A retired or added host changes the advice's workers count: in JupyterLab's environment that would restart the
    container and every kernel in it, so it reads a Dask configuration file (DASK_ROOT_CONFIG, a read-only folder)
    that each new process takes; the one-task clients keep the environment."""
    advice = {"partition_bytes": 2 ** 30, "partitions_per_worker": 2, "workers": 8}
    cluster = {**CLUSTER, "dataframe": advice,
               "notebook": {"listen": "127.0.0.1", "port": 8888, "dir": "/n", "container_dir": "/nb",
                            "config_dir": "/etc/dask/notebook"}}
    notebook = notebook_feature.notebook_spec(cluster, "t", GPU_HOST, SETTINGS)
    assert not [key for key in notebook["env"] if key.startswith("DASK_DASK_GPU__")], notebook["env"]
    assert notebook["env"]["DASK_ROOT_CONFIG"] == notebook_feature.CONFIG_CONTAINER_DIR
    assert f"/etc/dask/notebook:{notebook_feature.CONFIG_CONTAINER_DIR}:ro" in notebook["volumes"]
    assert builder.dataframe_config(cluster) == {
        "dask-gpu": {"dataframe": {"partition-bytes": 2 ** 30, "partitions-per-worker": 2, "workers": 8}}}
    verify = builder.client_spec(cluster, GPU_HOST, SETTINGS, "verify", "v.json")
    assert verify["env"]["DASK_DASK_GPU__DATAFRAME__WORKERS"] == "8"
