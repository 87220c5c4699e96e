"""Your own packages (dask_images_extra_*): what the controller refuses before anything is built (a requirement or a
wheel asking for another version of a pinned package, a direct reference, a pip option, a file or folder that is
not there), and that the image tag follows them."""
from __future__ import annotations

import importlib.util
from pathlib import Path

from ansible_collections.dask_gpu.bundle.plugins.plugin_utils import extras

ROOT = Path(__file__).resolve().parents[2]
PINS = (ROOT / "images" / "pins" / "rapids-26.10-cuda12.txt").read_text()
DASK = extras.pinned(PINS)["dask"]


def problems(**settings: object) -> list[str]:
    return extras.problems(settings, PINS)


def test_unpinned_and_compatible_requirements_pass() -> None:
    assert problems(dask_images_extra_packages=["xgboost", "six>=1.16", f"dask=={DASK}", "dask[dataframe]"]) == []


def test_a_requirement_for_another_dask_is_refused_naming_the_pin() -> None:
    [problem] = problems(dask_images_extra_packages=["dask<2020"])
    assert "dask_images_extra_packages" in problem and "'dask<2020'" in problem and f"dask=={DASK}" in problem


def test_direct_references_and_malformed_lines_are_refused() -> None:
    found = problems(dask_images_extra_packages=["mypkg @ https://example.invalid/mypkg.whl", "not a requirement!"])
    assert len(found) == 2 and "direct reference" in found[0] and "not a pip requirement" in found[1]


def test_the_requirements_file_is_read_on_the_controller(tmp_path: Path) -> None:
    path = tmp_path / "requirements.txt"
    path.write_text("# ours\nsix  # for the workers\n\n--index-url https://example.invalid/simple\ndistributed==1.0\n")
    found = problems(dask_images_extra_requirements_file=str(path))
    assert len(found) == 2
    assert "line 4" in found[0] and "pip option" in found[0]
    assert "line 5" in found[1] and "distributed==" in found[1]
    assert extras.summary({"dask_images_extra_requirements_file": str(path)})["requirements"] == ["six",
                                                                                                "distributed==1.0"]
    assert "cannot be read" in problems(dask_images_extra_requirements_file=str(tmp_path / "nope.txt"))[0]


def test_wheels_folder_must_hold_wheels_of_unpinned_or_pinned_versions(tmp_path: Path) -> None:
    assert "not a folder" in problems(dask_images_extra_wheels_dir=str(tmp_path / "nope"))[0]
    assert "holds no wheel" in problems(dask_images_extra_wheels_dir=str(tmp_path))[0]
    (tmp_path / "ours-1.0-py3-none-any.whl").write_bytes(b"")
    assert problems(dask_images_extra_wheels_dir=str(tmp_path)) == []
    (tmp_path / "dask-2020.1.0-py3-none-any.whl").write_bytes(b"")
    [problem] = problems(dask_images_extra_wheels_dir=str(tmp_path))
    assert "dask-2020.1.0-py3-none-any.whl" in problem and f"dask=={DASK}" in problem
    assert extras.summary({"dask_images_extra_wheels_dir": str(tmp_path)})["wheels"] == [
        "dask-2020.1.0-py3-none-any.whl", "ours-1.0-py3-none-any.whl"]


def test_the_tag_follows_the_extras_and_stays_without_them(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("content_hash", ROOT / "roles" / "dask" / "files" / "content_hash.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    images, settings = ROOT / "images", ["26.10", "12", "lean", "debian:bookworm-slim"]
    plain = module.content_hash(images, settings)
    assert module.content_hash(images, settings, [], "", "") == plain
    assert module.content_hash(images, settings, ["six"]) != plain
    (tmp_path / "ours-1.0-py3-none-any.whl").write_bytes(b"one")
    first = module.content_hash(images, settings, [], "", str(tmp_path))
    (tmp_path / "ours-1.0-py3-none-any.whl").write_bytes(b"two")
    assert module.content_hash(images, settings, [], "", str(tmp_path)) not in (plain, first)
