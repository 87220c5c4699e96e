"""roles/dask_autoscale/files/gpu_turns.py: clusters taking turns on a host's GPUs (dask_autoscale_share_gpus). The
turn files are real (a temporary folder instead of /run/dask-gpu-turns); systemd's answer about a unit's state is a
stand-in here (a dict), as no systemd runs under pytest: the sandbox suite `autoscale` runs the check as the worker
units' ExecCondition under real systemd."""
from __future__ import annotations

import json
import runpy
from pathlib import Path
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "roles" / "dask_autoscale" / "files" / "gpu_turns.py"


@pytest.fixture
def turns(tmp_path: Path) -> tuple[dict[str, Any], dict[str, str], Path]:
    module = runpy.run_path(str(SCRIPT))
    states: dict[str, str] = {}
    module["state"] = lambda unit: states.get(unit, "inactive")  # systemd's ActiveState, stood in
    module["main"].__globals__["state"] = module["state"]
    return module, states, tmp_path / "turns"


def test_one_cluster_at_a_time_takes_the_gpus_and_the_other_waits_until_they_are_released(
        turns: tuple[dict[str, Any], dict[str, str], Path], capsys: pytest.CaptureFixture[str]) -> None:
    module, states, folder = turns
    main = module["main"]
    keys = ["GPU-aaa", "GPU-bbb"]
    assert main(["held", "--unit", "dask-worker", *keys], folder=folder) == 0  # nothing taken since boot
    assert json.loads(capsys.readouterr().out) == {"held": False, "by": ""}
    assert main(["take", "--unit", "dask-worker", "--cluster", "dask", *keys], folder=folder) == 0
    states["dask-worker"] = "active"
    assert json.loads((folder / "GPU-bbb").read_text()) == {"unit": "dask-worker", "cluster": "dask"}
    # green shares one of the two GPUs: its start is skipped while dask's workers run, and says why.
    assert main(["take", "--unit", "dask-green-worker", "--cluster", "green", "GPU-bbb"], folder=folder) == 1
    assert ("dask-green-worker does not start: GPU-bbb is in use by cluster dask (unit dask-worker, active)"
            in capsys.readouterr().out)
    assert main(["held", "--unit", "dask-green-worker", "GPU-bbb"], folder=folder) == 1
    assert json.loads(capsys.readouterr().out)["held"] is True
    assert main(["take", "--unit", "dask-worker", "--cluster", "dask", *keys], folder=folder) == 0  # its own again
    for now in ("deactivating", "inactive"):  # stopping still holds them; stopped, they are free
        states["dask-worker"] = now
        expected = 1 if now == "deactivating" else 0
        assert main(["take", "--unit", "dask-green-worker", "--cluster", "green", "GPU-bbb"], folder=folder) == expected
    assert json.loads((folder / "GPU-bbb").read_text())["cluster"] == "green"
    states["dask-green-worker"] = "active"
    assert main(["take", "--unit", "dask-worker", "--cluster", "dask", *keys], folder=folder) == 1
    capsys.readouterr()
    # Release forgets only the releasing unit's turns, and only once it no longer runs.
    assert main(["release", "--unit", "dask-green-worker"], folder=folder) == 0
    assert json.loads((folder / "GPU-bbb").read_text())["cluster"] == "green"
    assert main(["release", "--unit", "dask-worker"], folder=folder) == 0
    assert capsys.readouterr().out.split() == ["released", "GPU-aaa"]
    assert sorted(path.name for path in folder.iterdir() if path.name != ".lock") == ["GPU-bbb"]


def test_keys_that_are_not_gpu_uuids_are_refused(turns: tuple[dict[str, Any], dict[str, str], Path]) -> None:
    module, _, folder = turns
    for argv in (["take", "--unit", "u", "--cluster", "c", "../etc"], ["take", "--unit", "u", "GPU-a"],
                 ["held", "--unit", "u"]):
        with pytest.raises(SystemExit) as refused:
            module["main"](argv, folder=folder)
        assert refused.value.code == 2


def test_workers_running_when_sharing_starts_take_their_turn_once_and_a_stopped_unit_takes_none(
        turns: tuple[dict[str, Any], dict[str, str], Path], capsys: pytest.CaptureFixture[str]) -> None:
    module, states, folder = turns
    main = module["main"]
    take = ["take", "--if-running", "--unit", "dask-worker", "--cluster", "dask", "cpu"]
    assert main(take, folder=folder) == 0  # not running: it takes its turn when it starts
    assert not (folder / "cpu").exists() and capsys.readouterr().out == ""
    states["dask-worker"] = "active"
    assert main(take, folder=folder) == 0
    assert capsys.readouterr().out.split() == ["took", "cpu"]
    assert json.loads((folder / "cpu").read_text()) == {"unit": "dask-worker", "cluster": "dask"}
    assert main(take, folder=folder) == 0  # a rerun: already its own, nothing written (site.yml: changed=0)
    assert capsys.readouterr().out == ""
    # Another cluster's start is skipped now, as against workers that started with the check.
    assert main(["take", "--unit", "dask-green-worker", "--cluster", "green", "cpu"], folder=folder) == 1
    capsys.readouterr()
    # Green's workers running on the same GPUs at once (never by the bundle: a unit started by hand, say) fail the run.
    states["dask-green-worker"] = "active"
    assert main(["take", "--if-running", "--unit", "dask-green-worker", "--cluster", "green", "cpu"],
                folder=folder) == 1
    assert ("dask-green-worker runs while cpu is in use by cluster dask (unit dask-worker, active): two clusters' "
            "workers share these GPUs at once" in capsys.readouterr().out)
