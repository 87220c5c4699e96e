"""Feature polars (plugin_utils/features/polars.py): the workers' /dev/shm as Docker reads it, from
dask_worker_shm_size and the profile, and the profile's facts in the cluster model."""
from __future__ import annotations

from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.feature import ClusterInput
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.features import polars


def cluster(**settings: object) -> dict[str, object]:
    inp = ClusterInput(settings={"dask_image_profile": "full", **settings}, hosts={}, groups={}, image_hash="h",
                       scheduler="s", members=[])
    return polars.cluster(inp)["polars"]


def test_auto_is_1_gib_and_16_gib_with_the_polars_profile() -> None:
    assert cluster() == {"enabled": False, "shm_size": "1g"}
    assert cluster(dask_image_profile="polars") == {"enabled": True, "shm_size": "16g"}
    assert cluster(dask_image_profile="lean", dask_worker_shm_size="auto")["shm_size"] == "1g"


def test_a_size_is_given_to_docker_in_its_binary_units() -> None:
    assert cluster(dask_worker_shm_size="32GiB")["shm_size"] == "32g"
    assert cluster(dask_worker_shm_size="16g")["shm_size"] == str(16 * 10 ** 9)  # decimal: bytes, as written
    assert cluster(dask_worker_shm_size="512MiB")["shm_size"] == "512m"


def test_your_own_image_is_not_judged_by_the_profile() -> None:
    assert cluster(dask_image_profile="polars", dask_images_worker_image="registry.example/mine:1")["enabled"] is False
