"""The spec builder: one spec per container, rendered as docker flags and module arguments."""
from __future__ import annotations

from types import ModuleType
from typing import Any

CLUSTER: dict[str, Any] = {
    "name": "c", "protocol": "tls", "tls": True, "scheduler_address": "tls://10.0.0.1:8786", "scheduler_port": 8786,
    "worker_scheduler_address": "tls://10.0.0.1:8786", "scheduler_ucx_port": None, "transport": "tls",
    "dashboard_port": 8787, "dashboard_bind": "127.0.0.1", "expected_workers": 3, "expected_gpus": 2,
    "workers_per_host": {"g1": 2, "c1": 1}, "cpu_hosts": ["c1"], "uid": 10001, "gid": 10001,
    "images": {"scheduler": "dask-gpu-scheduler:t", "worker": "dask-gpu-worker:t"},
    "paths": {"config": "/etc/dask", "data": "/var/lib/dask", "container": {
        "tls": "/etc/dask/tls", "local": "/var/lib/dask", "reports": "/var/lib/dask-reports"}}}
GPU_HOST = {"name": "g1", "bind_address": "10.0.0.2", "worker_mode": "gpu", "worker_count": 2, "worker_nthreads": 1}
SETTINGS = {"dask_worker_http_port": 8790, "dask_worker_memory_limit": "auto", "dask_worker_death_timeout": 60,
            "dask_worker_device_memory_limit": "0.8", "dask_worker_gpu_request": "cdi", "dask_worker_stop_timeout": 30,
            "dask_worker_gpus": ["0", "GPU-1"], "dask_scheduler_stop_timeout": 20, "dask_verify_timeout": 120,
            "dask_worker_extra_args": ["--lifetime", "1h"]}


def test_gpu_worker_spec_pins_gpus_and_asks_for_them_through_cdi(builder: ModuleType) -> None:
    spec = builder.worker_spec(CLUSTER, GPU_HOST, SETTINGS)
    assert spec["argv"][:4] == ["dask", "cuda", "worker", "tls://10.0.0.1:8786"]
    assert spec["argv"][-2:] == ["--lifetime", "1h"]
    assert spec["env"]["CUDA_VISIBLE_DEVICES"] == "0,GPU-1"
    args = builder.docker_run_args(spec)
    assert "--device" in args and "nvidia.com/gpu=all" in args and "--gpus" not in args
    assert args[args.index("--user") + 1] == "10001:10001" and args[args.index("--cap-drop") + 1] == "ALL"
    assert "/etc/dask/tls:/etc/dask/tls:ro" in args and "memlock=-1" in args


def test_cpu_worker_runs_one_dask_worker_without_gpu_flags(builder: ModuleType) -> None:
    spec = builder.worker_spec(CLUSTER, {**GPU_HOST, "worker_mode": "cpu", "worker_nthreads": 8},
                               {**SETTINGS, "dask_worker_gpus": []})
    assert spec["argv"][:2] == ["dask", "worker"] and "--nworkers" in spec["argv"]
    assert "--resources" not in spec["argv"] and "CUDA_VISIBLE_DEVICES" not in spec["env"]
    assert not {"--gpus", "--device", "--ulimit"} & set(builder.docker_run_args(spec))


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
    bench = builder.container_args(builder.client_spec(CLUSTER, GPU_HOST, SETTINGS, "bench", "b", 12))
    assert bench["devices"] == ["nvidia.com/gpu=all"] and "--ready-seconds" in bench["command"]
    assert bench["cap_drop"] == ["ALL"] and bench["user"] == "10001:10001"


def test_no_tls_means_no_tls_files_anywhere(builder: ModuleType) -> None:
    plain = {**CLUSTER, "tls": False, "protocol": "tcp", "scheduler_address": "tcp://10.0.0.1:8786",
             "worker_scheduler_address": "tcp://10.0.0.1:8786", "transport": "tcp"}
    spec = builder.worker_spec(plain, GPU_HOST, SETTINGS)
    assert not any("tls" in arg for arg in spec["argv"]) and not any("tls" in v for v in spec["volumes"])
    assert builder.client_env(plain) == {"DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION": "False"}


def test_tls_ucx_scheduler_listens_on_both_and_workers_speak_ucx_without_tls_files(builder: ModuleType) -> None:
    mixed = {**CLUSTER, "protocol": "ucx", "transport": "tls-ucx", "worker_scheduler_address": "ucx://10.0.0.1:8788",
             "scheduler_ucx_port": 8788}
    scheduler = builder.scheduler_spec(mixed, {"bind_address": "10.0.0.1"}, SETTINGS)
    argv = scheduler["argv"]
    assert argv[argv.index("--port") + 1] == "8786,8788" and argv[argv.index("--protocol") + 1] == "tls,ucx"
    assert "--tls-key" in argv and argv[argv.index("--preload") + 1] == "dask_gpu_verify.host_frames"
    assert scheduler["env"]["DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION"] == "True"
    worker = builder.worker_spec(mixed, GPU_HOST, SETTINGS)
    assert worker["argv"][3] == "ucx://10.0.0.1:8788"
    assert not any("tls" in arg for arg in worker["argv"]) and not any("tls" in v for v in worker["volumes"])
    verify = builder.client_spec(mixed, GPU_HOST, SETTINGS, "verify", "v.json")
    assert verify["argv"][verify["argv"].index("--scheduler") + 1] == "tls://10.0.0.1:8786"
    assert verify["env"]["DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION"] == "True"
