"""The scheduler and worker images as built by scripts/build-images.sh (run before the tests)."""
from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest
from dockerutil import ROOT, docker, image, inspect, settings, wait_health

LIST_PACKAGES = ("import importlib.metadata as m, json; "
                 "print(json.dumps(sorted(f'{d.metadata[\"Name\"]}=={d.version}' for d in m.distributions())))")


def packages(target: str) -> list[str]:
    out = docker("run", "--rm", "--entrypoint", "python", image(target), "-c", LIST_PACKAGES).stdout
    return list(json.loads(out))


@pytest.mark.parametrize("target", ["scheduler", "worker"])
def test_runs_as_non_root(target: str) -> None:
    assert inspect(image(target))["Config"]["User"] == "dask"
    uid = docker("run", "--rm", "--entrypoint", "id", image(target), "-u").stdout.strip()
    assert uid != "0"


def test_scheduler_and_worker_carry_identical_packages() -> None:
    scheduler, worker = packages("scheduler"), packages("worker")
    assert scheduler == worker
    pins = (ROOT / "images" / "pins" / f"rapids-{settings()['RAPIDS_RELEASE']}-cuda{settings()['CUDA_MAJOR']}.txt")
    pinned = {line.split("==")[0] for line in pins.read_text().splitlines() if "==" in line}
    installed = {entry.split("==")[0].lower().replace("_", "-"): entry for entry in worker}
    for name in ("dask", "distributed", "dask-cuda", "rapids-dask-dependency", "numpy"):
        assert name in pinned and installed[name] in pins.read_text(), name


@pytest.mark.parametrize("target", ["scheduler", "worker"])
def test_labels_carry_versions(target: str) -> None:
    labels = inspect(image(target))["Config"]["Labels"]
    s = settings()
    assert labels["io.rapids.release"] == s["RAPIDS_RELEASE"]
    assert labels["io.rapids.cuda-major"] == s["CUDA_MAJOR"]
    assert labels["io.rapids.profile"] == s["PROFILE"]
    assert labels["org.dask.dask.version"] == labels["org.dask.distributed.version"] != ""
    assert labels["io.rapids.dask-cuda.version"].startswith(s["RAPIDS_RELEASE"])


def test_no_package_caches_or_build_secrets_left_in_layers() -> None:
    script = ("set -e; test ! -e /root/.cache; test ! -e /home/dask/.cache; "
              "test -z \"$(ls -A /var/lib/apt/lists 2>/dev/null | grep -v lock || true)\"; "
              "test -z \"$(find /var/cache/apt -name '*.deb')\"; "
              "test ! -e /usr/local/share/ca-certificates/extra-ca.crt; test ! -e /opt/dask/bin/pip; "
              "test -z \"$(find /opt/dask -name __pycache__ | head -1)\"; echo clean")
    assert docker("run", "--rm", "--entrypoint", "sh", image("worker"), "-c", script).stdout.strip() == "clean"
    history = docker("history", "--no-trunc", "--format", "{{.CreatedBy}}", image("worker")).stdout
    assert "PIP_INDEX_URL" not in history


@pytest.fixture
def scheduler_container() -> Iterator[str]:
    name = f"dask-gpu-test-{uuid.uuid4().hex[:8]}"
    docker("run", "-d", "--name", name, image("scheduler"))
    try:
        yield name
    finally:
        docker("rm", "-f", name, check=False)


def test_scheduler_healthcheck_turns_healthy(scheduler_container: str) -> None:
    assert wait_health(scheduler_container) == "healthy"


def test_scheduler_default_command_binds_loopback_only(scheduler_container: str) -> None:
    assert wait_health(scheduler_container) == "healthy"
    listening = docker("exec", scheduler_container, "python", "-c",
                       "import psutil; print(sorted({f'{c.laddr.ip}:{c.laddr.port}' for c in "
                       "psutil.net_connections('inet') if c.status == 'LISTEN'}))").stdout
    assert "127.0.0.1:8786" in listening and "127.0.0.1:8787" in listening
    assert "0.0.0.0" not in listening and "::" not in listening.replace("::1", "")


def test_worker_image_has_tini_and_dask_cuda_cli() -> None:
    config = inspect(image("worker"))["Config"]
    assert config["Entrypoint"] == ["/usr/bin/tini", "--"]
    assert config["Cmd"][:3] == ["dask", "cuda", "worker"]
    out = docker("run", "--rm", image("worker"), "dask", "cuda", "worker", "--help").stdout
    assert "--rmm-pool-size" in out and "--death-timeout" in out


@pytest.mark.parametrize("target", ["scheduler", "worker"])
def test_data_frames_shuffle_by_tasks(target: str) -> None:
    """The image's /etc/dask config (images/dask-config/): p2p made a dask-cudf ETL 4.8 x slower on a GPU."""
    out = docker("run", "--rm", "--entrypoint", "python", image(target), "-c",
                 "import dask; print(dask.config.get('dataframe.shuffle.method'))").stdout.strip()
    assert out == "tasks"
