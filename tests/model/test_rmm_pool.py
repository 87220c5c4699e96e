"""dask_worker_rmm_pool_size: auto follows the image profile (profiles.AUTO_POOL, measured in docs/performance.md);
a size, a fraction or empty is taken as given; the host model carries the result and the worker's command line
follows it."""
from __future__ import annotations

from types import ModuleType

from ansible_collections.dask_gpu.bundle.plugins.plugin_utils import profiles

OWN = "dask_images_worker_image"


def test_auto_is_a_pool_with_cupy_from_it_for_full_only() -> None:
    assert profiles.rmm_pool({"dask_image_profile": "full", "dask_worker_rmm_pool_size": "auto"}, OWN) == ("0.8", True)
    for profile in ("lean", "polars", "cpu"):
        assert profiles.rmm_pool({"dask_image_profile": profile, "dask_worker_rmm_pool_size": "auto"}, OWN) == \
            ("", False), profile
    own = {"dask_image_profile": "full", "dask_worker_rmm_pool_size": "auto", OWN: "registry.example/mine:1"}
    assert profiles.rmm_pool(own, OWN) == ("", False)


def test_a_given_value_is_kept_with_its_own_cupy_setting() -> None:
    assert profiles.rmm_pool({"dask_image_profile": "full", "dask_worker_rmm_pool_size": "0.5"}, OWN) == ("0.5", False)
    assert profiles.rmm_pool({"dask_image_profile": "full", "dask_worker_rmm_pool_size": ""}, OWN) == ("", False)
    assert profiles.rmm_pool({"dask_image_profile": "lean", "dask_worker_rmm_pool_size": "40GB",
                              "dask_worker_rmm_for_cupy": True}, OWN) == ("40GB", True)


def test_the_worker_command_line_follows_the_host_model(builder: ModuleType) -> None:
    from test_spec import CLUSTER, GPU_HOST, SETTINGS

    argv = builder.worker_spec(CLUSTER, {**GPU_HOST, "rmm_pool_size": "0.8", "rmm_for_cupy": True}, SETTINGS)["argv"]
    assert argv[argv.index("--rmm-pool-size") + 1] == "0.8"
    assert argv[argv.index("--set-rmm-allocator-for-libs") + 1] == "cupy"
    argv = builder.worker_spec(CLUSTER, {**GPU_HOST, "rmm_pool_size": "", "rmm_for_cupy": False}, SETTINGS)["argv"]
    assert "--rmm-pool-size" not in argv and "--set-rmm-allocator-for-libs" not in argv
