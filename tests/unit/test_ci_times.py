"""Unit tests of scripts/ci_times.py: the CI log's time table (from its `[ci-time]` lines; a stage without one is
missing) and the time guard's decisions against recorded timings (normalized by the machine's median ratio)."""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


ci_times = load("ci_times", ROOT / "scripts" / "ci_times.py")

# Shaped like .ci/run's log of a run with the timing lines: run-tests.sh's steps, molecule's actions as the loop in
# run-tests.sh times them, the suites' lines as Ansible's debug task quotes them, lint and pytest's logs, the total.
NEW_LOG = """\
[ci] commit 92f8d91aa1b2c3d4e5f60718293a4b5c6d7e8f90, started 2026-11-28T02:30:28Z
[ci-time] apt 42
bash scripts/setup-venv.sh
[setup-venv] .venv ready
bash scripts/run-tests.sh
[ci-time] venv 25

== docker daemon and base images (02:31:35)
[setup-docker] starting dockerd (log: /var/log/dockerd.log)
[ci-time] docker 20
[base-images] debian:bookworm-slim imported (112M)
[ci-time] base-images 16

== images (02:32:11)
images (lean) built in 86 s; worker image 2557 MB
[ci-time] image:lean 86
images (full) built in 148 s; worker image 5357 MB
[ci-time] image:full 148

== browser for the tests (before anything runs beside the sandbox: one apt at a time) (02:36:05)
[ci-time] browser 13

== sandbox: molecule (create, converge with site.yml, idempotence, verify + testinfra, suites, destroy) (02:36:18)
INFO     [default > discovery] scenario test matrix: dependency, cleanup, destroy
INFO     [default > dependency] Executing
[ci-time] sandbox:setup 9
WARNING  [default > dependency] Executed: 2 missing (Remove from destroy_sequence to suppress)
INFO     [default > destroy] Executing
INFO     [default > destroy] Executed: Successful
[ci-time] molecule:destroy 6
INFO     [default > destroy] Executing
INFO     [default > destroy] Executed: Successful
[ci-time] molecule:destroy#2 5
[ci-time] molecule:create 11
[ci-time] molecule:prepare 5
[ci-time] molecule:converge 420
[ci-time] molecule:idempotence 80
[ci-time] molecule:verify 55
TASK [Suite output (all of it when a suite failed)] ****************************
ok: [localhost] => {
    "msg": [
        "[suites] fastrerun: a rerun of an unchanged cluster skips to the readiness check; an edited file runs all ...",
        "[ci-time] suite:fastrerun 150.2",
        "[suites] faults: faults injected and recovered from ...",
        "[ci-time] suite:faults 300.5",
        "[ci-time] suite:teardown 310.0",
        "[suites] fastrerun  passed    150.2 s",
        "[suites] faults     passed    300.5 s",
        "[suites] teardown   passed    310.0 s",
        "[suites] 3 suites in 761 s, 0 failed"
    ]
}
[ci-time] molecule:side_effect 770
[ci-time] molecule:verify#2 50
[ci-time] molecule:destroy#3 6
sandbox done in 1460 s
[ci-time] sandbox 1460

== lint and pytest (waited for) (03:00:38)
[ci-time] wait:lint-pytest 0

== lint (03:00:38)
lint done in 200 s
[ci-time] lint 200

== pytest (03:00:38)
pytest done in 500 s
[ci-time] pytest 500
[ci-time] total 1900
"""

def report(text: str):
    return ci_times.read_log(text.splitlines())


def test_new_log_every_stage_from_its_ci_time_line():
    read = report(NEW_LOG)
    seconds = {key: stage.seconds for key, stage in read.stages.items()}
    assert seconds["apt"] == 42 and seconds["venv"] == 25 and seconds["image:full"] == 148
    assert seconds["molecule:converge"] == 420 and seconds["molecule:verify#2"] == 50
    assert seconds["suite:faults"] == 300.5 and seconds["suite:teardown"] == 310.0
    assert {stage.source for stage in read.stages.values()} == {"ci-time"}
    assert read.stages["suite:fastrerun"].passed is True
    assert read.total is not None and read.total.seconds == 1900
    assert (read.commit, read.date) == ("92f8d91aa1b2c3d4e5f60718293a4b5c6d7e8f90", "2026-11-28")


def test_new_log_table_rows_total_and_target():
    text = ci_times.table(report(NEW_LOG))
    assert "| apt packages (.ci/run) | 42 | 0.8 % | ci-time |" in text
    assert "| · molecule converge | 420 | 7.8 % | ci-time |" in text
    assert "| · · suite faults | 300 | 5.6 % | ci-time |" in text  # under the side effect
    assert "| **total** | **1900** | **35.2 %** | ci-time |" in text
    assert "Total 1900 s of the 5400 s limit (35.2 %); target 2400 s: 500 s under." in text
    assert "missing" not in text
    rows = [line.split("|")[1].strip() for line in text.splitlines() if line.startswith("| ")]
    assert rows.index("· molecule side_effect") < rows.index("· · suite fastrerun") < rows.index(
        "· molecule verify #2") < rows.index("· molecule destroy #3") < rows.index("pytest (beside the sandbox)")
    # other = total minus the sequential top-level stages (lint and pytest ran beside the sandbox)
    assert "| other (total minus the top-level stages above) | 90 | | |" in text


def test_before_and_after_by_stage_with_the_change(tmp_path, capsys):
    before = tmp_path / "before.log"
    before.write_text(NEW_LOG.replace("suite:faults 300.5", "suite:faults 400.5").replace("total 1900", "total 2000"))
    after = tmp_path / "after.log"
    after.write_text(NEW_LOG)
    assert ci_times.main([str(after), "--before", str(before)]) == 0
    text = capsys.readouterr().out
    assert "| · · suite faults | 400 | 300 | -100 |" in text
    assert "| · molecule converge | 420 | 420 | +0 |" in text
    assert "| **total** | **2000** | **1900** | **-100** |" in text
    # a stage only one run has: shown with a dash
    after.write_text(NEW_LOG.replace("suite:faults 300.5", "suite:gone 300.5"))
    assert ci_times.main([str(after), "--before", str(before)]) == 0
    text = capsys.readouterr().out
    assert "| · · suite gone | - | 300 | - |" in text and "| · · suite faults | 400 | - | - |" in text


def test_a_failed_suite_and_a_stage_without_its_line():
    read = report(NEW_LOG.replace("[suites] faults     passed", "[suites] faults     FAILED")
                  .replace("[ci-time] molecule:idempotence 80\n", "").replace("[ci-time] image:full 148\n", ""))
    assert read.stages["suite:faults"].passed is False and read.stages["suite:fastrerun"].passed is True
    text = ci_times.table(read)
    assert "| · · suite faults (FAILED) | 300 |" in text
    assert "no `[ci-time] molecule:idempotence` line" in text
    assert "image:full" not in read.stages and "images (full) built in 148 s" in NEW_LOG  # never read from prose


def test_empty_log_reports_everything_missing():
    text = ci_times.table(report("nothing here\n"))
    assert "| **total** | missing |" in text and "| · · the feature suites | missing |" in text
    assert not any(char.isdigit() for row in text.splitlines()[2:-2] for char in row.split("|")[2])


RECORDED = {"molecule:converge": 400.0, "molecule:idempotence": 80.0, "suite:fastrerun": 150.0,
            "suite:faults": 300.0, "suite:teardown": 300.0, "suite:certs": 120.0, "suite:jobs": 100.0}


def test_uniformly_slow_machine_passes():
    measured = {key: seconds * 1.6 for key, seconds in RECORDED.items()}
    result = ci_times.check(RECORDED, measured)
    assert result.factor == pytest.approx(1.6) and not result.failed
    lines = ci_times.guard_report(result, "timings.json")
    assert lines[0].startswith("[ci-guard] machine factor 1.60") and lines[-1] == "[ci-guard] passed"
    assert not [line for line in lines if line.startswith("Error:")]


def test_one_suite_twice_as_slow_as_the_others_fails_naming_it():
    measured = {key: seconds * 1.2 for key, seconds in RECORDED.items()}
    measured["suite:faults"] = 300.0 * 1.2 * 2
    result = ci_times.check(RECORDED, measured)
    assert result.factor == pytest.approx(1.2) and result.failed
    assert [verdict.key for verdict in result.verdicts if verdict.failed] == ["suite:faults"]
    errors = [line for line in ci_times.guard_report(result, "timings.json") if line.startswith("Error:")]
    assert len(errors) == 1 and errors[0].startswith("Error: suite faults took 720 s against 300 s recorded")


def test_small_absolute_growth_passes_even_at_a_high_ratio():
    recorded = {**RECORDED, "suite:clients": 30.0}
    measured = {**recorded, "suite:clients": 85.0}  # 2.8x, but 55 s over what this machine should take
    result = ci_times.check(recorded, measured)
    assert result.factor == pytest.approx(1.0) and not result.failed
    measured["suite:clients"] = 95.0  # 65 s over: fails
    assert [verdict.key for verdict in ci_times.check(recorded, measured).verdicts if verdict.failed] == [
        "suite:clients"]


def test_unknown_suite_fails_and_a_recorded_one_gone_is_reported():
    measured = {**RECORDED, "suite:newone": 50.0}
    del measured["suite:jobs"]
    result = ci_times.check(RECORDED, measured)
    assert result.failed
    lines = ci_times.guard_report(result, "tests/sandbox/timings.json")
    assert ("Error: suite newone took 50 s and has no recorded time in tests/sandbox/timings.json: record it with "
            "scripts/ci_times.py LOG --record tests/sandbox/timings.json") in lines
    assert any("suite jobs is recorded" in line and not line.startswith("Error:") for line in lines)
    assert [verdict.key for verdict in result.verdicts if verdict.failed] == ["suite:newone"]


def test_nothing_to_compare_fails():
    result = ci_times.check({"suite:a": 10.0}, {"suite:b": 10.0})
    assert result.failed and result.factor is None
    assert ci_times.guard_report(result, "t.json")[0].startswith("Error: time guard: no stage")


def test_cli_record_then_check_json(tmp_path, capsys):
    log = tmp_path / "run.log"
    log.write_text(NEW_LOG)
    timings = tmp_path / "timings.json"
    assert ci_times.main([str(log), "--no-table", "--record", str(timings)]) == 0
    data = json.loads(timings.read_text())
    assert set(data["stages"]) == {"molecule:converge", "molecule:idempotence", "suite:fastrerun", "suite:faults",
                                   "suite:teardown"}
    assert data["stages"]["suite:faults"] == {"seconds": 300.5, "date": "2026-11-28",
                                              "commit": "92f8d91aa1b2c3d4e5f60718293a4b5c6d7e8f90", "log": "run.log",
                                              "measured": "ci-time"}
    assert ci_times.main([str(log), "--check", str(timings), "--json", str(tmp_path / "t.json")]) == 0
    out = capsys.readouterr().out
    assert "| **total** | **1900** |" in out and "[ci-guard] passed" in out
    assert json.loads((tmp_path / "t.json").read_text())["total_s"] == 1900
    log.write_text(NEW_LOG.replace("suite:faults 300.5", "suite:faults 900.5"))
    assert ci_times.main([str(log), "--no-table", "--check", str(timings)]) == 1
    assert "Error: suite faults took 900 s against 300 s recorded" in capsys.readouterr().out


def test_record_refuses_a_log_whose_suites_failed(tmp_path, capsys):
    log = tmp_path / "failed.log"
    log.write_text(NEW_LOG.replace("[suites] faults     passed", "[suites] faults     FAILED"))
    assert ci_times.main([str(log), "--no-table", "--record", str(tmp_path / "t.json"), "--commit", "abc1234",
                          "--date", "2026-11-28"]) == 2
    assert "suite:faults" in capsys.readouterr().err and not (tmp_path / "t.json").exists()


def test_check_without_a_readable_timings_file_is_an_error(tmp_path, capsys):
    log = tmp_path / "run.log"
    log.write_text(NEW_LOG)
    assert ci_times.main([str(log), "--no-table", "--check", str(tmp_path / "absent.json")]) == 2
    assert capsys.readouterr().out.startswith("Error: time guard: cannot read")


def test_one_off_image_builds_are_in_the_table_but_left_out_of_the_guard_and_the_record(tmp_path, capsys):
    """A suite that built and exported images (the machine's first run, or the run after images/ changed) shows its
    whole time in the table; the guard compares and records it without that one-off work (r29: the teardown suite,
    186 s of which 52 s built the CPU images on a fresh machine, failed the guard on a machine 0.69x the recorded)."""
    log = tmp_path / "run.log"
    log.write_text(NEW_LOG)
    timings = tmp_path / "timings.json"
    assert ci_times.main([str(log), "--no-table", "--record", str(timings)]) == 0
    slower = NEW_LOG.replace('"[ci-time] suite:teardown 310.0",',
                             '"[ci-time] suite:teardown 610.0",\n        "[ci-time] one-off:suite:teardown 300.0",')
    read = report(slower)
    assert read.one_off == {"suite:teardown": 300.0} and "one-off:suite:teardown" not in read.stages
    assert read.stages["suite:teardown"].seconds == 610.0 and ci_times.guarded(read)["suite:teardown"] == 310.0
    assert "| · · suite teardown | 610 | 11.3 % | ci-time; 300 s of it one-off image builds and exports |" in (
        ci_times.table(read))
    log.write_text(slower)
    assert ci_times.main([str(log), "--no-table", "--check", str(timings)]) == 0
    out = capsys.readouterr().out
    assert "[ci-guard] suite teardown: 300 s of one-off image builds and exports left out" in out
    assert "[ci-guard] passed" in out
    log.write_text(slower.replace("one-off:suite:teardown 300.0", "one-off:suite:teardown 20.0"))
    assert ci_times.main([str(log), "--no-table", "--check", str(timings)]) == 1  # the rest grew: it still fails
    assert "Error: suite teardown took 590 s against 310 s recorded" in capsys.readouterr().out
    assert ci_times.main([str(tmp_path / "run.log"), "--no-table", "--record", str(timings)]) == 0
    assert json.loads(timings.read_text())["stages"]["suite:teardown"]["seconds"] == 590.0


CONVERGE_RECAP = """\
INFO     [default > converge] Executing
TASKS RECAP ********************************************************************
dask_images : Scheduler and worker images are built (skipped when the tag exists) -- 46.72s
dask_images : Images are pulled on hosts that need them, about 2.7 GB -- 39.06s
dask_images : Images are exported to the archive, about 2.7 GB --------- 22.34s
INFO     [default > converge] Executed: Successful
"""


def test_the_converges_one_off_work_comes_from_its_task_profile(tmp_path, capsys):
    """The converge runs under molecule, not through tests/sandbox/live.py: its one-off work (r29, a fresh machine:
    the lean images built in 46.7 s and exported in 22.3 s) is read from its task profile in the log; the pull is not
    one-off, and skipped tasks (under 2 s) do not count."""
    log = NEW_LOG.replace("[ci-time] molecule:converge 420", CONVERGE_RECAP + "[ci-time] molecule:converge 420")
    read = report(log)
    assert read.one_off == {"molecule:converge": pytest.approx(69.06)}
    assert ci_times.guarded(read)["molecule:converge"] == pytest.approx(420 - 69.06)
    skipped = log.replace("-- 46.72s", "-- 0.70s").replace("--------- 22.34s", "--------- 0.60s")
    assert report(skipped).one_off == {}
    # One playbook run's output (tests/sandbox/live.py asks for its one-off seconds this way).
    run = tmp_path / "site.log"
    run.write_text(CONVERGE_RECAP)
    assert ci_times.main([str(run), "--one-off"]) == 0
    assert capsys.readouterr().out == "69.1\n"
