#!/usr/bin/env python3
"""The GPU proofs as data, on a lent GPU machine (issue 40): each proof is a name, the inventory settings its cluster
is rendered from, how it runs (the rendered scripts as processes, or the units' own docker lines as containers) and
its steps. Counts, ports and addresses come from the rendered model and specs (tests/gpu/harness.py); the carried
wheels are installed by tests/gpu/carried.py; the container side is tests/gpu/containers.py.

    python3 tests/gpu/proofs.py --out OUT [--budget 540] processes bench containers compare
    python3 tests/gpu/proofs.py --out OUT [--cpu] gpuhost [--steps host,site,verify,...]

processes   the units' scheduler and worker command lines as processes; dask-gpu-verify as verify.yml runs it, the
            gather probe and each worker's /metrics probe
bench       dask-gpu-bench as playbooks/benchmark.yml runs it (its spec), as a process: per-GPU baselines, the
            workloads, dask-cuda's benchmarks and the seeds-like data-frame ETL (cuDF's parts where carried)
containers  the units' own docker lines under Docker with CDI; the containers inspected, the images' healthcheck,
            the verify and bench clients as containers, the gather and /metrics probes. STAND-INs: the image
            (tests/gpu/standin-image.sh) and the CDI spec (tests/gpu/cdi-standin.sh for nvidia-ctk)
gpuhost     issue 65: a GPU host of our own (tests/gpu/gpuhost.py): the sandbox's host image with systemd, sshd and
            Docker, given the GPU; site.yml, verify.yml, benchmark.yml, a rerun, a rolling change, the autoscaler by
            GPU, monitoring and teardown.yml run against it by Ansible on the machine, each step timed. --steps picks
            some (host first, once a warm machine); --cpu rehearses it on a machine without a GPU
compare     issue 42: the same settings as processes and as containers at once on the same GPUs, workloads
            interleaved round by round (order swapped every round); then containers with another /dev/shm
            (dask_worker_shm_size) against the same processes. Ratios: processes' time / containers' time (>= 1:
            containers as fast)

Writes OUT/summary.md, OUT/runs.jsonl (one line per step), the reports it names and OUT/logs.tar.xz (logs, renders,
the stand-in's reports). Exit 1 when a step failed; a proof that would not fit the time left is skipped and says so.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import carried  # noqa: E402 - beside this script
import containers  # noqa: E402
import gpuhost  # noqa: E402
import harness  # noqa: E402
import units  # noqa: E402

WORK = Path("/var/tmp/gpu-proofs")
CDI = {"dask_worker_gpu_request": "cdi"}  # the only GPU request the lent machines can serve (gpu-docker.md)


def ports(block: int) -> dict[str, int]:
    """A port block of its own for each variant: no proof waits for another's sockets in TIME_WAIT."""
    base = 8700 + 20 * block
    return {"dask_scheduler_port": base, "dask_dashboard_port": base + 1, "dask_scheduler_ucx_port": base + 2,
            "dask_worker_http_port": base + 10}


@dataclass(frozen=True)
class Proof:
    name: str
    settings: dict[str, Any]
    runner: str  # processes | containers
    steps: tuple[str, ...]
    need_s: float  # about how long it takes once its cluster is rendered
    bench: bool = False  # render the benchmark client's spec too


PROOFS = {
    "processes": Proof("processes", {**CDI, **ports(0)}, "processes", ("verify", "gather", "metrics"), 60),
    "bench": Proof("bench", {**CDI, **ports(1)}, "processes", ("bench",), 150, bench=True),
    "containers": Proof("containers", {**CDI, **ports(2)}, "containers",
                        ("inspect", "healthcheck", "verify", "gather", "metrics", "bench"), 200, bench=True),
    # The inventory is gpuhost.inventory(): a user's, for an offline GPU server with the vendor's Docker and toolkit.
    "gpuhost": Proof("gpuhost", {}, "host", tuple(gpuhost.STEPS), 0),
}


@dataclass(frozen=True)
class Comparison:
    """Clusters of the same settings up at once, one as processes and one as containers; the workloads interleaved.
    Each entry of `against` is a containers variant measured against `base` in its own rounds."""

    base: dict[str, Any]
    against: dict[str, dict[str, Any]]
    workloads: dict[str, list[str]]  # name -> client argv ({address} filled in); dask-cuda's JSON gives the times
    rounds: int


COMPARE = Comparison(
    base={**CDI, **ports(3)},
    against={"containers": {**CDI, **ports(4)},
             # the one container difference an inventory setting changes: /dev/shm (auto is 1 GiB)
             "containers-shm-16g": {**CDI, **ports(5), "dask_worker_shm_size": "16g"}},
    # dask-cuda's own benchmark through the cluster: transpose_sum (tens of ms: the scheduler and comms), dot (seconds
    # of GPU work); FRAMES below where cuDF's parts are carried
    workloads={f"local_cupy {operation} 40000/10000": [
        "python3", "-m", "dask_cuda.benchmarks.local_cupy", "--scheduler-address", "{address}", "--operation",
        operation, "-s", "40000", "-c", "10000", "--runs", runs, "--disable-rmm"]
        for operation, runs in (("transpose_sum", "10"), ("dot", "3"))},
    rounds=4,
)
# With cuDF's parts carried: the stand-in image copies cuDF's distributions too (as the full profile's image has them),
# and the comparison adds data frames, dask-cuda's local_cudf_merge (Dask's tasks shuffle, the one dask_cudf keeps).
CUDF_ROOTS = ("?cudf-cu13 ?dask-cudf-cu13 ?pylibcudf-cu13 ?libcudf-cu13 ?rmm-cu13 ?librmm-cu13 ?libkvikio-cu13 "
              "?nvidia-libnvcomp-cu13 ?rapids-logger ?cuda-core ?cuda-pathfinder ?cachetools ?nvidia-cufile ?pandas "
              "?pyarrow")
FRAMES = {"local_cudf_merge 4 x 4 chunks of 25 M rows": [
    "env", "DASK_DATAFRAME__SHUFFLE__METHOD=tasks", "python3", "-m", "dask_cuda.benchmarks.local_cudf_merge",
    "--scheduler-address", "{address}", "-c", "25000000", "--base-chunks", "4", "--other-chunks", "4", "--runs", "3"]}


@dataclass
class Run:
    out: Path
    budget: float
    extra_roots: str
    started: float = field(default_factory=time.monotonic)
    rendered: dict[str, harness.Rendered] = field(default_factory=dict)
    rows: list[dict[str, Any]] = field(default_factory=list)
    docker: dict[str, str] = field(default_factory=dict)

    def left(self) -> float:
        return self.budget - (time.monotonic() - self.started)

    def record(self, row: dict[str, Any]) -> dict[str, Any]:
        row = {"at_s": round(time.monotonic() - self.started, 1), **row}
        self.rows.append(row)
        with (self.out / "runs.jsonl").open("a") as sink:
            sink.write(json.dumps(row) + "\n")
        print(json.dumps(row)[:400], flush=True)
        return row

    def logs(self, name: str) -> Path:
        return WORK / "logs" / name


@dataclass
class Step:
    """What a step sees: the proof, its rendered variant and its running cluster."""

    run: Run
    proof: Proof
    rendered: harness.Rendered

    @property
    def in_containers(self) -> bool:
        return self.proof.runner == "containers"

    def client(self, kind: str, timeout: float) -> subprocess.CompletedProcess[str]:
        """The client spec KIND (verify, bench) as its container, or its command line as a process."""
        log = self.run.logs(f"{self.proof.name}-{kind}.txt")
        if self.in_containers:
            return containers.run_client(self.rendered.spec(kind), log, timeout)
        return harness.run_client(self.rendered, list(self.rendered.spec(kind)["argv"]), log, timeout)

    def report(self, kind: str, flag: str, suffix: str = "") -> Path:
        """Where the client's report lands on this host: its path, through the spec's volumes for a container."""
        spec = self.rendered.spec(kind)
        path = units.option(spec["argv"], flag) + suffix
        if self.in_containers:
            for volume in spec["volumes"]:
                host, inside = volume.split(":")[:2]
                if path.startswith(inside + "/"):
                    return Path(host + path[len(inside):])
        return Path(path)

    def probe(self, name: str, argv: list[str]) -> dict[str, Any]:
        done = harness.run_client(self.rendered, [sys.executable, str(harness.ROOT / "tests" / "gpu" / name), *argv],
                                  self.run.logs(f"{self.proof.name}-{name}.txt"), 180)
        lines = [line for line in done.stdout.splitlines() if line.startswith(("PASS", "FAIL", "pass", "fail"))]
        return {"passed": done.returncode == 0, "lines": lines[:12] or (done.stdout + done.stderr)[-800:]}


def verify(step: Step) -> dict[str, Any]:
    report = step.report("verify", "--json")
    report.unlink(missing_ok=True)
    done = step.client("verify", 240)
    found = json.loads(report.read_text()) if report.exists() else {}
    if found:  # the report itself, for comparisons with another runner's (the gpuhost proof's verify.yml)
        shutil.copyfile(report, step.run.out / f"verify-{step.proof.name}.json")
    return {"passed": done.returncode == 0 and bool(found), "last_line": (done.stdout.strip().splitlines() or [""])[-1],
            "failures": found.get("failures"), "workers": len(found.get("workers") or ()),
            "workload": found.get("workload"),
            **({} if done.returncode == 0 else {"tail": (done.stdout + done.stderr)[-1500:]})}


def gather(step: Step) -> dict[str, Any]:
    without = ["--without-preload"] if step.rendered.spec("scheduler")["argv"].count("tls,ucx") else []
    return step.probe("gather_probe.py", [step.rendered.address, *without])


def metrics(step: Step) -> dict[str, Any]:
    first = units.option(step.rendered.spec("worker")["argv"], "--dashboard-address").rsplit(":", 1)[1]
    return step.probe("gpu_metrics_probe.py", [step.rendered.address, "--first-port", first])


def bench(step: Step) -> dict[str, Any]:
    base = step.report("bench", "--out")
    for suffix in (".json", ".md", ".html"):
        Path(f"{base}{suffix}").unlink(missing_ok=True)
    done = step.client("bench", max(60.0, min(400.0, step.run.left() - 30)))
    found_path = Path(f"{base}.json")
    if done.returncode or not found_path.exists():
        return {"passed": False, "tail": (done.stdout + done.stderr)[-1500:]}
    found = json.loads(found_path.read_text())
    shutil.copyfile(found_path, step.run.out / f"bench-{step.proof.name}.json")
    etl = found.get("etl") or {}
    return {"passed": True, "workloads": {row["workload"]: row["all"]["seconds"] for row in found.get("scaling", [])},
            "dask_cuda": {f"{row.get('benchmark')} {row.get('operation')}": row.get("seconds", row.get("skipped"))
                          for row in found.get("dask_cuda", [])},
            "noop_tasks_per_s": found.get("overhead", {}).get("tasks_per_s"),
            "etl": {key: etl.get(key) for key in ("rows", "backend", "skipped", "checks_equal") if key in etl},
            "etl_seconds": {side: (etl.get(side) or {}).get("seconds") for side in ("cluster", "cpu")}}


def inspect(step: Step) -> dict[str, Any]:
    """The containers as Docker runs them: user, capabilities, /dev/shm, CDI devices; the GPUs inside the worker."""
    found: dict[str, Any] = {}
    for kind in ("scheduler", "worker"):
        name = step.rendered.spec(kind)["name"]
        data = json.loads(containers.docker("inspect", name).stdout)[0]
        host = data["HostConfig"]
        found[name] = {"image": data["Config"]["Image"], "user": data["Config"]["User"], "cap_drop": host["CapDrop"],
                       "security_opt": host["SecurityOpt"], "read_only": host["ReadonlyRootfs"],
                       "shm_size": host["ShmSize"], "network": host["NetworkMode"],
                       "cdi": [r.get("DeviceIDs") for r in host.get("DeviceRequests") or []]}
    worker = step.rendered.spec("worker")["name"]
    gpus = containers.docker("exec", worker, "nvidia-smi", "-L", check=False).stdout.strip().splitlines()
    user = containers.docker("exec", worker, "id", "-u", check=False).stdout.strip()
    found["worker_gpus"], found["worker_uid"] = gpus, user
    found["passed"] = bool(gpus) and user == "10001" and all(found[n]["cap_drop"] == ["ALL"] for n in
                                                             (worker, step.rendered.spec("scheduler")["name"]))
    return found


def healthcheck(step: Step) -> dict[str, Any]:
    """The images' own healthcheck command inside each container (the scheduler's needs its health URL)."""
    found: dict[str, Any] = {}
    for kind in ("scheduler", "worker"):
        name = step.rendered.spec(kind)["name"]
        env = ["-e", f"DASK_HEALTH_URL={step.rendered.cluster['scheduler_urls']['health']}"] if kind == "scheduler" \
            else []
        found[name] = containers.docker("exec", *env, name, "dask-gpu-healthcheck", check=False).returncode == 0
    return {"passed": all(found.values()), **found}


STEPS: dict[str, Callable[[Step], dict[str, Any]]] = {
    "verify": verify, "gather": gather, "metrics": metrics, "bench": bench, "inspect": inspect,
    "healthcheck": healthcheck}


def runner(run: Run, kind: str, rendered: harness.Rendered) -> harness.Runner:
    """Processes, or Containers once Docker and the stand-in images (named as this variant names them) are there."""
    if kind == "processes":
        return harness.Processes()
    if not run.docker:
        run.docker = containers.start_docker(WORK)
        run.record({"run": "docker", **run.docker, "cdi": "STAND-IN: tests/gpu/cdi-standin.sh"})
    images = containers.standin_images(rendered, WORK / "standin", run.extra_roots)
    if not any(row["run"] == "standin-images" for row in run.rows):
        run.record({"run": "standin-images", "images": images, "what": "STAND-IN: tests/gpu/standin-image.sh"})
    return containers.Containers()


def start(run: Run, name: str, kind: str) -> harness.Cluster | None:
    try:
        cluster = harness.Cluster(run.rendered[name], WORK / "logs", runner=runner(run, kind, run.rendered[name]))
    except (RuntimeError, subprocess.SubprocessError, OSError) as error:
        run.record({"run": f"start-{name}", "passed": False, "error": str(error)[-1500:]})
        return None
    try:
        cluster.start()
    except (RuntimeError, subprocess.SubprocessError, OSError) as error:
        run.record({"run": f"start-{name}", "passed": False, "error": str(error)[-1500:]})
        cluster.stop()
        return None
    run.record({"run": f"start-{name}", "passed": True, "runner": kind, "workers": run.rendered[name].workers,
                "registered_s": cluster.registered_s, "ports_waited_s": cluster.ports_waited_s})
    return cluster


def prove(run: Run, proof: Proof, steps: list[str], cpu: bool) -> None:
    if proof.runner == "host":
        gpuhost.prove(gpuhost.Host(run.out, cpu, run.record, run.left), steps or list(proof.steps))
        return
    if run.left() < proof.need_s:
        run.record({"run": proof.name, "skipped": f"{run.left():.0f} s left, needs about {proof.need_s:.0f}"})
        return
    cluster = start(run, proof.name, proof.runner)
    if cluster is None:
        return
    try:
        for name in proof.steps:
            try:
                result = STEPS[name](Step(run, proof, run.rendered[proof.name]))
            except (RuntimeError, subprocess.SubprocessError, OSError, KeyError, ValueError) as error:
                result = {"passed": False, "error": repr(error)[-1500:]}
            run.record({"run": f"{proof.name}/{name}", **result})
    finally:
        cluster.stop()
        if isinstance(cluster.runner, containers.Containers):
            run.logs(f"{proof.name}-commands.txt").write_text("\n".join(cluster.runner.lines) + "\n")


def timed(run: Run, rendered: harness.Rendered, argv: list[str], tag: str) -> float | None:
    """One workload against a cluster: the median of dask-cuda's per-run wall clocks (its BASENAME.json)."""
    base = WORK / "compare" / tag
    base.parent.mkdir(parents=True, exist_ok=True)
    filled = [part.replace("{address}", rendered.address) for part in argv] + ["--output-basename", str(base)]
    done = harness.run_client(rendered, filled, run.logs(f"compare-{tag}.txt"), 120)
    path = Path(f"{base}.json")
    if done.returncode or not path.exists():
        run.record({"run": f"compare/{tag}", "passed": False, "tail": (done.stdout + done.stderr)[-800:]})
        return None
    clocks = list(json.loads(path.read_text())["wallclock"].values())
    path.unlink()
    return float(statistics.median(clocks))


def compare(run: Run, plan: Comparison) -> None:
    """Rounds: every workload on the processes and on the containers, in swapped order each round."""
    if run.left() < 120:
        run.record({"run": "compare", "skipped": f"{run.left():.0f} s left"})
        return
    base = start(run, "compare-processes", "processes")
    if base is None:
        return
    try:
        for variant in plan.against:
            if run.left() < 90:
                run.record({"run": f"compare/{variant}", "skipped": f"{run.left():.0f} s left"})
                continue
            other = start(run, f"compare-{variant}", "containers")
            if other is None:
                continue
            times: dict[str, dict[str, list[float]]] = {w: {"processes": [], variant: []} for w in plan.workloads}
            try:
                for round_ in range(plan.rounds):
                    if run.left() < 45:
                        break
                    order = [("processes", "compare-processes"), (variant, f"compare-{variant}")]
                    for side, name in order if round_ % 2 == 0 else order[::-1]:
                        for index, (workload, argv) in enumerate(plan.workloads.items()):
                            seconds = timed(run, run.rendered[name], argv, f"{variant}-{side}-{index}-{round_}")
                            if seconds is not None:
                                times[workload][side].append(seconds)
            finally:
                other.stop()
            for workload, sides in times.items():
                p, c = sides["processes"], sides[variant]
                ratio = statistics.median(p) / statistics.median(c) if p and c else None
                run.record({"run": f"compare/{variant}", "kind": "ratio", "workload": workload,
                            "processes_s": [round(x, 4) for x in p], "containers_s": [round(x, 4) for x in c],
                            "processes_over_containers": round(ratio, 3) if ratio else None,
                            "passed": bool(p and c)})
    finally:
        base.stop()


def summary(run: Run) -> str:
    lines = ["# GPU proofs (tests/gpu/proofs.py)", ""]
    for row in run.rows:
        if row["run"] in ("machine", "docker", "standin-images", "render", "carried"):
            shown = {k: v for k, v in row.items() if k not in ("at_s", "run")}
            lines.append(f"- {row['run']}: {json.dumps(shown)[:700]}")
    lines += ["", "| step | outcome | at s | details |", "| --- | --- | --- | --- |"]
    for row in run.rows:
        if row["run"] in ("machine", "docker", "standin-images", "render", "carried"):
            continue
        outcome = "skipped" if "skipped" in row else ("PASS" if row.get("passed") else "FAIL")
        details = {k: v for k, v in row.items() if k not in ("at_s", "run", "passed", "tail", "lines")}
        lines.append(f"| {row['run']} | {outcome} | {row['at_s']} | {json.dumps(details)[:400]} |")
    hosted = [row for row in run.rows if row["run"].startswith("gpuhost/")]
    if hosted:
        lines += ["", "The GPU host (tests/gpu/gpuhost.py), each step as a user runs it:", "",
                  "| step | command | wall s | result | figures |", "| --- | --- | --- | --- | --- |"]
        for row in hosted:
            figures = {k: row[k] for k in (*gpuhost.FIGURES, "skipped") if row.get(k) not in (None, "", [], {})}
            changed = {host: r["changed"] for host, r in (row.get("recap") or {}).items()}
            lines.append(f"| {row['run'].split('/')[1]} | `{row.get('command', '')}` | "
                         f"{row.get('wall_s', row.get('step_s', ''))} | "
                         f"{'skipped' if 'skipped' in row else 'PASS' if row.get('passed') else 'FAIL'} | "
                         f"{json.dumps({**({'changed': changed} if changed else {}), **figures})[:500]} |")
    ratios = [row for row in run.rows if row.get("kind") == "ratio"]
    if ratios:
        lines += ["", "Containers against processes, interleaved on the same GPU (processes' median / containers' "
                  "median; >= 0.97 is the target):"]
        lines += [f"- {row['run'].split('/')[1]}, {row['workload']}: {row['processes_over_containers']} "
                  f"(processes {row['processes_s']}, containers {row['containers_s']})" for row in ratios]
    return "\n".join(lines) + "\n"


def machine_settings() -> dict[str, Any]:
    """Inventory settings this machine needs, as its owner would set them: the containers' open-files limit within the
    machine's hard limit (20000 on the lent machines: runc cannot raise it to the default 1048576)."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    return {} if hard == resource.RLIM_INFINITY or hard >= 1048576 else {"dask_container_nofile": hard}


def machine(cpu: bool = False) -> dict[str, Any]:
    if cpu:
        return {"gpus": [], "cpus": os.cpu_count(), "python": sys.version.split()[0], "kernel": os.uname().release}
    query = subprocess.run(["nvidia-smi", "--query-gpu=index,name,uuid,memory.total,driver_version",
                            "--format=csv,noheader"], capture_output=True, text=True, check=True).stdout
    return {"gpus": query.strip().splitlines(), "cpus": os.cpu_count(), "python": sys.version.split()[0],
            "kernel": os.uname().release}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("proofs", nargs="+", choices=(*PROOFS, "compare"))
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--budget", type=float, default=540, help="seconds all of it may take (default 540)")
    parser.add_argument("--rounds", type=int, default=COMPARE.rounds, help="compare: rounds per containers variant")
    parser.add_argument("--against", default=",".join(COMPARE.against),
                        help=f"compare: the containers variants, comma-separated (default {','.join(COMPARE.against)})")
    parser.add_argument("--steps", default="", help=f"gpuhost: its steps, comma-separated (default all: "
                        f"{','.join(gpuhost.STEPS)})")
    parser.add_argument("--cpu", action="store_true", help="gpuhost: rehearse without a GPU (this machine's Docker and "
                        "Python environment, CPU workers)")
    parser.add_argument("--standin-extra-roots", default="",
                        help="distributions the stand-in image copies beyond the lean profile's (cuDF's, say)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(WORK, ignore_errors=True)
    (WORK / "logs").mkdir(parents=True)
    changes, account = ({}, "none: --cpu uses this Python environment") if args.cpu else carried.prepare(set())
    os.environ.update(changes)
    with_cudf = "rapids " in account
    run = Run(args.out, args.budget, args.standin_extra_roots or (CUDF_ROOTS if with_cudf else ""))
    run.record({"run": "carried", "account": account, "cudf": with_cudf})
    if shutil.which("ip") is None:  # no network facts: the model's address check is skipped, the renders the same
        os.environ["ANSIBLE_GATHERING"] = "explicit"
    # With cuDF: the full profile, whose scheduler container gets a GPU (it unpickles cuDF objects; without one cuDF
    # fails "Failed to dlopen libcuda.so.1" there, results/proofs-h200-cudf/).
    needs = {**machine_settings(), **({"dask_image_profile": "full"} if with_cudf else {})}
    run.record({"run": "machine", **machine(args.cpu), "settings": needs})
    # The compare's two clusters share the GPUs at once: the full profile's auto pool (0.8 of each GPU) would leave the
    # second too little to make its own, so both sides run without one (the same on either side: the ratio holds).
    shared = {"dask_worker_rmm_pool_size": ""} if with_cudf else {}
    against = {name: {**COMPARE.against[name], **shared} for name in args.against.split(",") if name}
    plan = Comparison({**COMPARE.base, **shared}, against, {**COMPARE.workloads, **(FRAMES if with_cudf else {})},
                      args.rounds)
    variants = {name: ({**PROOFS[name].settings, **needs}, PROOFS[name].bench) for name in args.proofs
                if name in PROOFS and PROOFS[name].runner != "host"}
    if "compare" in args.proofs:
        variants["compare-processes"] = ({**plan.base, **needs}, False)
        variants.update({f"compare-{name}": ({**settings, **needs}, False) for name, settings in plan.against.items()})
    try:
        with ThreadPoolExecutor(max(1, len(variants))) as pool:  # each ansible-playbook run takes seconds on its own
            futures = {name: pool.submit(harness.render, name, settings, WORK, with_bench)
                       for name, (settings, with_bench) in variants.items()}
            run.rendered = {name: future.result() for name, future in futures.items()}
        run.record({"run": "render", "variants": sorted(run.rendered),
                    "at_s_done": round(time.monotonic() - run.started, 1)})
        if variants:
            harness.install_tls(WORK)
        for name in args.proofs:
            if name == "compare":
                compare(run, plan)
            else:
                prove(run, PROOFS[name], [step for step in args.steps.split(",") if step], args.cpu)
    finally:
        if run.docker:
            run.record({"run": "docker-stop", "passed": True, "result": containers.stop_docker()})
        (args.out / "summary.md").write_text(summary(run))
        print(summary(run))
        with tarfile.open(args.out / "logs.tar.xz", "w:xz") as archive:
            for folder in ("logs", "rendered", "standin"):
                if (WORK / folder).exists():
                    archive.add(WORK / folder, arcname=folder)
            for folder in ("logs", "standin"):
                if (gpuhost.WORK / folder).exists():
                    archive.add(gpuhost.WORK / folder, arcname=f"gpuhost-{folder}")
    return 1 if any(row.get("passed") is False for row in run.rows) else 0


if __name__ == "__main__":
    sys.exit(main())
