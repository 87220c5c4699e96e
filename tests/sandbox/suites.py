#!/usr/bin/env python3
"""The sandbox's feature suites, one after another on the converged 3-host cluster (molecule's side effect): each
suite runs whatever happened to the one before, its time is measured, and a failing suite does not hide the others.
After a failure the cluster is converged back to the inventory's settings (site.yml), so the next suite starts from
where it would have. The run fails at the end if any suite failed.

    tests/sandbox/suites.py              every suite but those run by hand, in order
    tests/sandbox/suites.py NAME ...     these suites only (a developer's loop; the state they expect must be there;
                                         `upgrade` is run this way, last)

Writes MOLECULE_EPHEMERAL_DIRECTORY/artifacts/reports/suites.json and prints one `[suites]` line per suite.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import live  # noqa: E402 - the sandbox helpers beside this script

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Suite:
    """A suite: pytest over tests/sandbox/<name>, or a playbook. Each leaves the cluster with the inventory's settings
    (molecule/default/molecule.yml's, from the first converge), but one whose next suite takes over (HANDS_OVER)."""

    name: str
    playbook: str = ""
    what: str = ""
    # Run by hand only (named on the command line): too long for CI.
    by_hand: bool = False


SUITES = (
    # First: the cluster is as the idempotence step left it (a rerun with nothing changed is a fast one).
    Suite("fastrerun", what="a rerun of an unchanged cluster skips to the readiness check; an edited file runs all"),
    Suite("autoscale", what="an idle host goes, its data moved; waiting work brings it back; reruns keep the scale"),
    # Next: its change is left for the faults suite, next, whose interrupted converge goes back to the inventory's.
    Suite("rolling", what="a worker change rolls host by host under a workload"),
    Suite("faults", what="faults injected and recovered from; clients without the cluster's certificates refused"),
    Suite("registry", playbook="molecule/default/registry.yml",
          what="the images came through the cluster's registry, which takes the cluster's certificates only"),
    Suite("firewall", what="the firewall lets the cluster in and keeps an outsider out"),
    Suite("monitoring", what="every target scraped, dashboard queries answered, an alert fires and resolves"),
    Suite("browser",
          what="the dashboard's pages and a JupyterLab notebook that computes on the cluster, in headless Chromium"),
    Suite("benchmark", what="playbooks/benchmark.yml against the sandbox, report with every section"),
    Suite("clients", what="a client made from the cluster's lock connects with no version warning"),
    Suite("jobs", what="three jobs at once: output streamed, reports kept, failures fail the run"),
    Suite("retire", what="a retired host hands over its keys and leaves; added back, nothing restarts"),
    Suite("certs", what="certificates renewed from the same CA; the old bundle still answered"),
    Suite("clusters", what="a second cluster by name on the same hosts; torn down, the first answers"),
    # Before teardown: the transport suite then leaves the cluster in tls-ucx (HANDS_OVER), teardown removes that
    # cluster and deploys tls again (archive distribution); run without teardown after it, it goes back to tls itself.
    Suite("transport", what="tls-ucx; outsiders and certificate-less clients get nothing"),
    Suite("teardown", what="teardown leaves every host clean, keeps your data; site.yml deploys again"),
    Suite("upgrade", by_hand=True,
          what="a Dask version change refused, then done both ways with a workload running (docs/upgrades.md)"),
)


TAGGED = re.compile(r"(?<= )\[[a-z][a-z0-9_-]*\] ")  # after a space: not a test id's [param]


def report_lines(output: str) -> list[str]:
    """The output's lines, a `[tag] ...` line that pytest -s printed after a test's name on a line of its own."""
    lines: list[str] = []
    for line in output.splitlines():
        found = TAGGED.search(line)
        if found and found.start() > 0:
            lines += [line[:found.start()].rstrip(), line[found.start():]]
        else:
            lines.append(line)
    return lines


# The suites whose end state is proven by a rerun of site.yml (the fast rerun, as users run it) that finds every host
# as the last converge left it and changes nothing: those that change the cluster, and clients for the read-only
# suites from registry to clients, which it follows (issue 39). A suite the next one takes over from (HANDS_OVER) is
# left out, and so is fastrerun, whose last test drops every record on purpose (the next run is a whole one);
# teardown's rerun takes the settings of its redeploy.
END_STATE = {"faults": (), "clients": (), "jobs": (), "retire": (), "certs": (), "clusters": (),
             "teardown": ("-e", f"@{live.ARCHIVE_VARS}")}


# A suite whose next suite takes the cluster from whatever state it left may leave its own state instead of converging
# back (live.NEXT_TAKES_OVER): the rolling suite before faults (the interrupted converge goes back to the inventory's
# settings: one site.yml run saved), the transport suite before teardown (which replaces the cluster: two saved).
HANDS_OVER = {"autoscale": "rolling", "rolling": "faults", "transport": "teardown"}


def run_suite(suite: Suite, next_suite: str) -> subprocess.CompletedProcess[str]:
    if suite.playbook:
        return live.playbook(str(ROOT / suite.playbook), timeout=3600)
    env = {**os.environ, live.NEXT_TAKES_OVER: "1" if HANDS_OVER.get(suite.name) == next_suite else ""}
    # -rA: a PASSED/FAILED line per test at the end (with -s, a test's verdict can land after its output)
    return subprocess.run([sys.executable, "-m", "pytest", "-v", "-s", "-rA", "-p", "no:cacheprovider",
                           str(ROOT / "tests" / "sandbox" / suite.name)], cwd=ROOT, capture_output=True, text=True,
                          timeout=3600, check=False, env=env)


def end_state(name: str, args: tuple[str, ...]) -> str:
    """A rerun of site.yml after the suite: every host as the last converge left it (the fast rerun) and changed=0
    on every host; the problem, or "" (a `[end-state]` line either way)."""
    run = live.playbook(str(ROOT / "site.yml"), *args, timeout=900)
    said = live.said(run.stdout)
    changed = {host: count["changed"] for host, count in live.recap(run.stdout).items()}
    hosts = [live.SCHEDULER, *live.WORKERS]
    problem = ""
    if run.returncode:
        problem = f"site.yml failed (rc {run.returncode}): {run.stdout[-3000:]}"
    elif f"Every host ({len(hosts)}) {live.FAST}" not in said:
        reason = re.search(r"Every task runs: [^']*", said)
        problem = f"not every host as the last converge left it: {reason.group(0) if reason else said[-2000:]}"
    elif set(changed) < set(hosts) or any(changed.values()):
        problem = f"changed on a rerun: {changed}"
    print(f"[end-state] {name}: rerun of site.yml {' '.join(args)}: "
          f"{problem[:600] if problem else 'every host as left, changed=0 on every host'}", flush=True)
    return f"FAILED end state of {name}: {problem}" if problem else ""


def restore() -> bool:
    """Converge the cluster back to the inventory's settings after a failure, every task run (a failed suite may
    leave what the fast rerun does not look at); True when it worked."""
    run = live.playbook(str(ROOT / "site.yml"), "-e", "dask_fast_rerun=false", timeout=3600)
    print(run.stdout[-3000:] if run.returncode else "", flush=True)
    return run.returncode == 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help="suites to run (default: all, in order)")
    args = parser.parse_args()
    unknown = set(args.names) - {suite.name for suite in SUITES}
    if unknown:
        parser.error(f"unknown suites {', '.join(sorted(unknown))}; known: {', '.join(s.name for s in SUITES)}")
    chosen = [suite for suite in SUITES if suite.name in args.names or (not args.names and not suite.by_hand)]
    results: list[dict[str, object]] = []
    for index, suite in enumerate(chosen):
        print(f"[suites] {suite.name}: {suite.what} ...", flush=True)
        started = time.monotonic()
        live.one_off_file().unlink(missing_ok=True)
        next_name = chosen[index + 1].name if index + 1 < len(chosen) else ""
        run = run_suite(suite, next_name)
        if run.returncode == 0 and suite.name in END_STATE and HANDS_OVER.get(suite.name) != next_name:
            problem = end_state(suite.name, END_STATE[suite.name])
            if problem:
                run = subprocess.CompletedProcess(run.args, 1, run.stdout + "\n" + problem, run.stderr)
        seconds = round(time.monotonic() - started, 1)
        # For scripts/ci_times.py (CI's time table and the time guard against tests/sandbox/timings.json, which leaves
        # the suite's one-off image builds and exports out).
        print(f"[ci-time] suite:{suite.name} {seconds}", flush=True)
        if live.one_off_file().exists():
            spent = sum(float(line) for line in live.one_off_file().read_text().split())
            print(f"[ci-time] one-off:suite:{suite.name} {spent:.1f}", flush=True)
        lines = [line for line in report_lines(run.stdout)
                 if line.startswith(("[", "PASSED ", "FAILED ", "ERROR ", "ok:", "fatal"))]
        print("\n".join(lines[-100:]), flush=True)
        if run.returncode:
            print(run.stdout[-6000:] + run.stderr[-2000:], flush=True)
        results.append({"suite": suite.name, "passed": run.returncode == 0, "seconds": seconds})
        if run.returncode and index + 1 < len(chosen):
            results[-1]["restored"] = restore()
    width = max(len(str(row["suite"])) for row in results)
    for row in results:
        verdict = "passed" if row["passed"] else "FAILED"
        print(f"[suites] {str(row['suite']).ljust(width)}  {verdict}  {row['seconds']:>7.1f} s", flush=True)
    total = sum(float(str(row["seconds"])) for row in results)
    print(f"[suites] {len(results)} suites in {total:.0f} s, {sum(not row['passed'] for row in results)} failed")
    reports = live.ephemeral_dir() / "artifacts" / "reports"
    reports.mkdir(parents=True, exist_ok=True)
    (reports / "suites.json").write_text(json.dumps(results, indent=2) + "\n")
    return 0 if all(row["passed"] for row in results) else 1


if __name__ == "__main__":
    sys.exit(main())
