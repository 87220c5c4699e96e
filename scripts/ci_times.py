#!/usr/bin/env python3
"""Where a CI run's time went, read from its log, and the guard against suites that grow.

    scripts/ci_times.py LOG                       a Markdown table: every stage's seconds, the total against the
                                                  90-minute limit and the 40-minute target
    scripts/ci_times.py LOG --json FILE           the same data as JSON too
    scripts/ci_times.py LOG --check TIMINGS       the guard: the converge, the idempotence step and each sandbox
                                                  suite against their recorded seconds (exit 1 when one grew)
    scripts/ci_times.py LOG --record TIMINGS      record this log's seconds as the new reference

The stages come from the `[ci-time] STAGE SECONDS` lines that .ci/run, scripts/run-tests.sh and
tests/sandbox/suites.py print (the `[suites]` summary says whether each suite passed). A stage without its line is
reported missing, never guessed.

The guard normalizes by the machine (one commit takes 45 minutes on one machine and 72 on another of the same
kind): each stage's ratio measured/recorded, their median is the machine factor, and a stage fails only when its
ratio is over RATIO_MARGIN x the factor AND it took more than SECONDS_MARGIN seconds over factor x recorded. A
suite's one-off work (`[ci-time] one-off:suite:NAME SECONDS`: image builds and archive exports that the build cache
and the kept archive save from the next run on; the converge's from its task profile in the log) is left out of
what the guard compares and records.
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

LIMIT_S = 5400  # CI's hard limit: a run past 90 minutes lands nothing
TARGET_S = 2400  # issue 38: every run within 40 minutes
RATIO_MARGIN = 1.5
SECONDS_MARGIN = 60.0
GUARDED_MOLECULE = ("molecule:converge", "molecule:idempotence")
RECORD_HINT = "scripts/ci_times.py LOG --record tests/sandbox/timings.json"
ONE_OFF = "one-off:"  # `[ci-time] one-off:suite:NAME SECONDS` (tests/sandbox/suites.py)
# One-off work: the image builds and archive exports (role dask_images) that Docker's build cache and the kept archive
# save from the next run on this machine (its first run, or the run after images/ changed), read from a playbook
# run's profile_tasks recap; only the tasks that did their work count (skipped, with the tag there and the archive
# kept, the two took 1.4 s together in r30).
ONE_OFF_TASKS = ("dask_images : Scheduler and worker images are built",
                 "dask_images : Images are exported to the archive")
ONE_OFF_MIN_S = 2.0
PROFILE_LINE = re.compile(r"(?P<task>dask_images : .*?) -{2,} (?P<seconds>[0-9.]+)s\s*$")

CI_TIME = re.compile(r"\[ci-time\] ([A-Za-z0-9:_#+.-]+) (\d+(?:\.\d+)?)\b")
SUITE_LINE = re.compile(r"\[suites\] (\S+)\s+(passed|FAILED)\s+(\d+(?:\.\d+)?) s\b")
CI_COMMIT = re.compile(r"^\[ci\] commit ([0-9a-f]{7,40}|unknown), started (\d{4}-\d\d-\d\d)")

LABELS = {
    "apt": "apt packages (.ci/run)",
    "venv": "virtualenv (make's set-up)",
    "docker": "Docker daemon",
    "base-images": "base images",
    "browser": "browser for the tests",
    "sandbox": "sandbox (scripts/sandbox.sh test, all of it)",
    "sandbox:setup": "sandbox set-up (venv, Docker, host image)",
    "wait:lint-pytest": "lint and pytest waited for after the sandbox",
    "lint": "lint (beside the sandbox)",
    "pytest": "pytest (beside the sandbox)",
    "image:*": "image builds",
    "suite:*": "the feature suites",
}
# Stages that should be in every complete log, in the table's order (a row says "missing" when one is not).
EXPECTED_TOP = ("apt", "venv", "docker", "base-images", "image:*", "browser", "sandbox")
# scripts/sandbox.sh test: `molecule destroy` (a clean slate), then `molecule test`: destroy, create, ..., destroy.
EXPECTED_MOLECULE = ("destroy", "destroy#2", "create", "prepare", "converge", "verify", "idempotence", "side_effect",
                     "verify#2", "destroy#3")
EXPECTED_AFTER = ("wait:lint-pytest", "lint", "pytest")


@dataclass
class Stage:
    key: str
    seconds: float | None
    source: str  # "ci-time" or "missing"
    passed: bool | None = None  # suites only

    @property
    def label(self) -> str:
        kind, _, name = self.key.partition(":")
        if self.key in LABELS:
            return LABELS[self.key]
        if kind == "image":
            return f"image build: {name}"
        if kind == "molecule":
            return f"molecule {name.replace('#', ' #')}"
        if kind == "suite":
            return f"suite {name}" + (" (FAILED)" if self.passed is False else "")
        return self.key


@dataclass
class Report:
    stages: dict[str, Stage] = field(default_factory=dict)
    total: Stage | None = None
    # Seconds of a stage's one-off work (`[ci-time] one-off:STAGE SECONDS`): image builds and archive exports that
    # Docker's build cache and the kept archive save from the next run on this machine (its first run, or the run
    # after images/ changed). Part of the stage's seconds in the table; the guard leaves them out.
    one_off: dict[str, float] = field(default_factory=dict)
    commit: str = ""
    date: str = ""

    def seconds(self, key: str) -> float | None:
        stage = self.stages.get(key)
        return stage.seconds if stage else None


# --- reading a log ---------------------------------------------------------------------------------------------


def explicit_times(lines: Iterable[str]) -> dict[str, float]:
    """The `[ci-time] STAGE SECONDS` lines (anywhere in a line: Ansible quotes the suites' ones); the last wins."""
    found: dict[str, float] = {}
    for line in lines:
        for match in CI_TIME.finditer(line):
            found[match.group(1)] = float(match.group(2))
    return found


def one_off_seconds(lines: Iterable[str]) -> float:
    """Seconds of the one-off tasks (ONE_OFF_TASKS) that did their work, from the task profiles in these lines."""
    found = (PROFILE_LINE.search(line) for line in lines)
    return sum(seconds for seconds in (float(m["seconds"]) for m in found if m and m["task"].startswith(ONE_OFF_TASKS))
               if seconds >= ONE_OFF_MIN_S)


def converge_lines(lines: Sequence[str]) -> list[str]:
    """The lines of molecule's converge (its output, task profile included), from its start to its end."""
    section: list[str] = []
    inside = False
    for line in lines:
        if "[default > converge] Executing" in line:
            inside, section = True, []
        elif inside and ("[default > converge] Executed" in line or "[ci-time] molecule:converge " in line):
            inside = False
        elif inside:
            section.append(line)
    return section


def suite_lines(lines: Iterable[str]) -> dict[str, tuple[float, bool]]:
    """The `[suites] NAME  passed|FAILED  SECONDS s` summary lines: name -> (seconds, passed)."""
    found: dict[str, tuple[float, bool]] = {}
    for line in lines:
        match = SUITE_LINE.search(line)
        if match:
            found[match.group(1)] = (float(match.group(3)), match.group(2) == "passed")
    return found


def read_log(lines: Sequence[str]) -> Report:
    """Every stage the log's `[ci-time]` lines show, each suite's verdict, the commit and day of the run."""
    report = Report()
    for key, seconds in explicit_times(lines).items():
        report.stages[key] = Stage(key, seconds, "ci-time")
    for name, (_, passed) in suite_lines(lines).items():
        if f"suite:{name}" in report.stages:
            report.stages[f"suite:{name}"].passed = passed
    report.total = report.stages.pop("total", None)
    for key in [key for key in report.stages if key.startswith(ONE_OFF)]:
        report.one_off[key.removeprefix(ONE_OFF)] = report.stages.pop(key).seconds or 0.0
    if "molecule:converge" in report.stages and (spent := one_off_seconds(converge_lines(lines))):
        report.one_off["molecule:converge"] = spent
    for line in lines:
        if match := CI_COMMIT.match(line):
            report.commit, report.date = match.group(1), match.group(2)
    return report


# --- the table -------------------------------------------------------------------------------------------------


def ordered(report: Report) -> list[tuple[int, Stage]]:
    """The table's rows as (depth, stage): set-up, images, sandbox (its actions, the suites under the side effect),
    lint and pytest; an expected stage the log lacks is a "missing" row, an unexpected one is listed at the end."""
    stages = report.stages
    rows: list[tuple[int, Stage]] = []
    listed: set[str] = set()

    def add(depth: int, key: str) -> None:
        rows.append((depth, stages.get(key) or Stage(key, None, "missing")))
        listed.add(key)

    for key in EXPECTED_TOP:
        if key == "image:*":
            images = [name for name in stages if name.startswith("image:")]
            for name in images or ["image:*"]:
                add(0, name)
        else:
            add(0, key)
    add(1, "sandbox:setup")
    actions = [f"molecule:{action}" for action in EXPECTED_MOLECULE]
    actions += [name for name in stages if name.startswith("molecule:") and name not in actions]
    suites = [name for name in stages if name.startswith("suite:")] or ["suite:*"]
    for action in actions:
        add(1, action)
        if action == "molecule:side_effect":
            for suite in suites:
                add(2, suite)
    for key in EXPECTED_AFTER:
        add(0, key)
    rows += [(0, stage) for key, stage in stages.items() if key not in listed]
    return rows


def percent(seconds: float, of: float) -> str:
    return f"{100 * seconds / of:.1f} %"


def table(report: Report) -> str:
    """The Markdown table: a row a stage (a sandbox stage marked `· `, a suite `· · `), then the total against the
    limit and the target."""
    out = ["| stage | seconds | of 90 min | how measured |", "| --- | ---: | ---: | --- |"]
    for depth, stage in ordered(report):
        label = "· " * depth + stage.label
        if stage.seconds is None:
            out.append(f"| {label} | missing | | no `[ci-time] {stage.key}` line |")
        else:
            spent = report.one_off.get(stage.key)
            how = stage.source + (f"; {spent:.0f} s of it one-off image builds and exports" if spent else "")
            out.append(f"| {label} | {stage.seconds:.0f} | {percent(stage.seconds, LIMIT_S)} | {how} |")
    top = [stage.seconds for depth, stage in ordered(report) if depth == 0 and stage.seconds is not None
           and stage.key not in ("lint", "pytest")]
    if report.total and report.total.seconds is not None:
        total = report.total.seconds
        out.append(f"| other (total minus the top-level stages above) | {total - sum(top):.0f} | | |")
        out.append(f"| **total** | **{total:.0f}** | **{percent(total, LIMIT_S)}** | {report.total.source} |")
        gap = total - TARGET_S
        out += ["", f"Total {total:.0f} s of the {LIMIT_S} s limit ({percent(total, LIMIT_S)}); target {TARGET_S} s: "
                + (f"{gap:.0f} s over." if gap > 0 else f"{-gap:.0f} s under.")]
    else:
        out += ["| **total** | missing | | no `[ci-time] total` or `[ci] exit` line |", "",
                f"Total missing; the stages found add up to {sum(top):.0f} s (limit {LIMIT_S} s, target {TARGET_S} s)."]
    return "\n".join(out)


def compare(before: Report, after: Report) -> str:
    """Before and after, a row a stage of either log (the later run's order, then stages only the earlier run had):
    seconds of each and the change; the totals last."""
    rows = ordered(after)
    keys = {stage.key for _, stage in rows}
    rows += [(depth, stage) for depth, stage in ordered(before) if stage.key not in keys]
    out = ["| stage | before s | after s | change s |", "| --- | ---: | ---: | ---: |"]

    def cell(value: float | None) -> str:
        return "-" if value is None else f"{value:.0f}"

    for depth, stage in rows:
        old, new = before.seconds(stage.key), after.seconds(stage.key)
        change = f"{new - old:+.0f}" if old is not None and new is not None else "-"
        out.append(f"| {'· ' * depth}{stage.label} | {cell(old)} | {cell(new)} | {change} |")
    old_total = before.total.seconds if before.total else None
    new_total = after.total.seconds if after.total else None
    change = f"{new_total - old_total:+.0f}" if old_total is not None and new_total is not None else "-"
    out.append(f"| **total** | **{cell(old_total)}** | **{cell(new_total)}** | **{change}** |")
    return "\n".join(out)


def as_json(report: Report) -> dict[str, object]:
    rows = [{**asdict(stage), "label": stage.label, "depth": depth} for depth, stage in ordered(report)]
    total = report.total.seconds if report.total else None
    return {"stages": rows, "total_s": total, "limit_s": LIMIT_S, "target_s": TARGET_S,
            "limit_share": total / LIMIT_S if total is not None else None, "commit": report.commit or None,
            "date": report.date or None}


# --- the guard -------------------------------------------------------------------------------------------------


def guarded(report: Report) -> dict[str, float]:
    """The stages the guard watches, as measured less their one-off work: the converge, the idempotence step and
    every suite."""
    return {key: stage.seconds - report.one_off.get(key, 0.0) for key, stage in report.stages.items()
            if stage.seconds is not None and (key in GUARDED_MOLECULE or key.startswith("suite:"))}


def describe(key: str) -> str:
    kind, _, name = key.partition(":")
    return f"{kind} {name}" if kind in ("suite", "molecule") else key


@dataclass
class Verdict:
    key: str
    recorded: float | None
    measured: float | None
    ratio: float | None = None
    failed: bool = False
    note: str = ""


@dataclass
class GuardResult:
    factor: float | None
    verdicts: list[Verdict]

    @property
    def failed(self) -> bool:
        return self.factor is None or any(verdict.failed for verdict in self.verdicts)


def check(recorded: dict[str, float], measured: dict[str, float], ratio_margin: float = RATIO_MARGIN,
          seconds_margin: float = SECONDS_MARGIN) -> GuardResult:
    """Each stage's ratio measured/recorded; the median is the machine factor; a stage fails when its ratio is over
    ratio_margin x factor and it took more than seconds_margin over factor x recorded. A stage measured but not
    recorded fails (record it); one recorded but not measured is reported only."""
    common = [key for key in measured if key in recorded]
    ratios = {key: measured[key] / max(recorded[key], 1.0) for key in common}
    factor = statistics.median(ratios.values()) if ratios else None
    verdicts: list[Verdict] = []
    for key in common:
        verdict = Verdict(key, recorded[key], measured[key], ratios[key])
        if factor is not None:
            expected = factor * recorded[key]
            if ratios[key] > ratio_margin * factor and measured[key] - expected > seconds_margin:
                verdict.failed = True
                verdict.note = (f"{ratios[key] / factor:.2f}x the machine factor and {measured[key] - expected:.0f} s "
                                f"over the {expected:.0f} s expected here")
        verdicts.append(verdict)
    for key in measured:
        if key not in recorded:
            verdicts.append(Verdict(key, None, measured[key], failed=True, note="not recorded"))
    for key in recorded:
        if key not in measured:
            verdicts.append(Verdict(key, recorded[key], None, note="recorded but not measured in this run"))
    return GuardResult(factor, verdicts)


def guard_report(result: GuardResult, timings: str, ratio_margin: float = RATIO_MARGIN,
                 seconds_margin: float = SECONDS_MARGIN) -> list[str]:
    """The guard's lines: the factor, every stage's ratio, and an `Error:` line per failure (CI's failure digest
    greps `Error:`)."""
    if result.factor is None:
        return [f"Error: time guard: no stage of this run is recorded in {timings}: nothing to compare "
                f"(record with {RECORD_HINT})"]
    compared = sum(verdict.ratio is not None for verdict in result.verdicts)
    out = [f"[ci-guard] machine factor {result.factor:.2f} (median of {compared} ratios measured/recorded); a stage "
           f"fails past {ratio_margin} x {result.factor:.2f} = {ratio_margin * result.factor:.2f} and more than "
           f"{seconds_margin:.0f} s over factor x recorded",
           f"[ci-guard] {'stage':<24} {'recorded':>9} {'measured':>9} {'ratio':>6} {'/factor':>8}  verdict"]
    for verdict in result.verdicts:
        recorded = f"{verdict.recorded:.0f}" if verdict.recorded is not None else "-"
        measured = f"{verdict.measured:.0f}" if verdict.measured is not None else "-"
        ratio = f"{verdict.ratio:.2f}" if verdict.ratio is not None else "-"
        relative = f"{verdict.ratio / result.factor:.2f}" if verdict.ratio is not None else "-"
        state = "FAILED" if verdict.failed else ("ok" if verdict.ratio is not None else "note")
        out.append(f"[ci-guard] {describe(verdict.key):<24} {recorded:>9} {measured:>9} {ratio:>6} {relative:>8}  "
                   f"{state}{': ' + verdict.note if verdict.note else ''}")
    for verdict in result.verdicts:
        if verdict.failed and verdict.recorded is None:
            out.append(f"Error: {describe(verdict.key)} took {verdict.measured:.0f} s and has no recorded time in "
                       f"{timings}: record it with {RECORD_HINT}")
        elif verdict.failed:
            out.append(f"Error: {describe(verdict.key)} took {verdict.measured:.0f} s against {verdict.recorded:.0f} s "
                       f"recorded (ratio {verdict.ratio:.2f}, {verdict.note}): find what made it slower, or "
                       f"re-record with {RECORD_HINT}")
        elif verdict.measured is None:
            out.append(f"[ci-guard] {describe(verdict.key)} is recorded in {timings} but did not run here: if it was "
                       "taken out, re-record")
    out.append("[ci-guard] " + ("FAILED" if result.failed else "passed"))
    return out


def load_timings(path: Path) -> dict[str, float]:
    data = json.loads(path.read_text())
    return {key: float(entry["seconds"]) for key, entry in data["stages"].items()}


def record(report: Report, path: Path, commit: str, date: str, log: str) -> list[str]:
    """Write the log's guarded stages to path as the new reference; what changed, one line each."""
    failed = [key for key, stage in report.stages.items() if stage.passed is False]
    if failed:
        raise ValueError(f"the log's suites failed ({', '.join(failed)}): record from a run where every one passed")
    measured = guarded(report)
    lacking = [key for key in GUARDED_MOLECULE if key not in measured]
    if lacking or not any(key.startswith("suite:") for key in measured):
        raise ValueError(f"the log lacks {', '.join(lacking) or 'the suites'}: record from a complete run")
    old = load_timings(path) if path.exists() else {}
    stages = {key: {"seconds": seconds, "date": date, "commit": commit, "log": log,
                    "measured": report.stages[key].source} for key, seconds in measured.items()}
    path.write_text(json.dumps({
        "about": "Recorded seconds of the sandbox's converge, idempotence and suites, for the time guard "
                 f"(scripts/ci_times.py --check); re-record with {RECORD_HINT}",
        "stages": stages}, indent=2) + "\n")
    changes = [f"{describe(key)}: {old[key]:.0f} -> {seconds:.0f} s" if key in old else
               f"{describe(key)}: {seconds:.0f} s (new)" for key, seconds in measured.items()]
    return changes + [f"{describe(key)}: dropped (not in the log)" for key in old if key not in measured]


# --- command line ----------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("log", type=Path, help="a CI log (.ci/run's, or the sandbox's output)")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the table's data as JSON")
    parser.add_argument("--check", type=Path, metavar="TIMINGS", help="the guard against these recorded timings")
    parser.add_argument("--record", type=Path, metavar="TIMINGS", help="write the log's timings as the reference")
    parser.add_argument("--commit", help="with --record: the commit measured (default: the log's `[ci] commit`)")
    parser.add_argument("--date", help="with --record: the day of the run, YYYY-MM-DD (default: the log's)")
    parser.add_argument("--no-table", action="store_true", help="print no table (with --check or --record)")
    parser.add_argument("--before", type=Path, metavar="LOG",
                        help="an earlier run's log: the table shows its seconds, this log's and the change")
    parser.add_argument("--one-off", action="store_true",
                        help="LOG is one playbook run's output: print the seconds of its one-off image builds and "
                             "exports (tests/sandbox/live.py), and nothing else")
    parser.add_argument("--ratio-margin", type=float, default=RATIO_MARGIN)
    parser.add_argument("--seconds-margin", type=float, default=SECONDS_MARGIN)
    args = parser.parse_args(argv)
    try:
        lines = args.log.read_text(errors="replace").splitlines()
    except OSError as error:
        print(f"Error: cannot read the log: {error}", file=sys.stderr)
        return 2
    if args.one_off:
        print(f"{one_off_seconds(lines):.1f}")
        return 0
    report = read_log(lines)
    if args.before:
        try:
            before = read_log(args.before.read_text(errors="replace").splitlines())
        except OSError as error:
            print(f"Error: cannot read the earlier log: {error}", file=sys.stderr)
            return 2
        print(compare(before, report))
    elif not args.no_table:
        print(table(report))
    if args.json:
        args.json.write_text(json.dumps(as_json(report), indent=2) + "\n")
    status = 0
    if args.record:
        commit, date = args.commit or report.commit, args.date or report.date
        if not commit or not date:
            parser.error("the log names no commit or date (no `[ci] commit` line): pass --commit and --date")
        try:
            print("\n".join(record(report, args.record, commit, date, args.log.name)))
        except ValueError as error:
            print(f"Error: not recorded: {error}", file=sys.stderr)
            return 2
    if args.check:
        try:
            recorded = load_timings(args.check)
        except (OSError, ValueError, KeyError, TypeError) as error:
            print(f"Error: time guard: cannot read {args.check}: {error!r}", flush=True)
            return 2
        for key, spent in report.one_off.items():
            print(f"[ci-guard] {describe(key)}: {spent:.0f} s of one-off image builds and exports left out")
        result = check(recorded, guarded(report), args.ratio_margin, args.seconds_margin)
        print("\n".join(guard_report(result, str(args.check), args.ratio_margin, args.seconds_margin)), flush=True)
        status = 1 if result.failed else 0
    return status


if __name__ == "__main__":
    sys.exit(main())
