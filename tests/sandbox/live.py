"""Helpers for tests that act on the running molecule sandbox from the controller: docker exec into the host
containers, a TLS client from the cluster's client bundle, waiting for workers, and ansible-playbook runs with
molecule's inventory. Used by tests/sandbox/faults and tests/sandbox/firewall (molecule's side effect)."""
from __future__ import annotations

import glob
import json
import os
import re
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from distributed import Client
from distributed.security import Security

ROOT = Path(__file__).resolve().parents[2]
SCHEDULER, WORKERS = "dask-sched", ("dask-w1", "dask-w2")
# The workers' threads: the sandbox inventory's, and the worker change the rolling suite rolls out and leaves for the
# faults suite, next, to converge back from (interrupted): one site.yml run for both.
THREADS, CHANGED_THREADS = 2, 3
# Set by tests/sandbox/suites.py when the next suite takes the cluster from whatever state this one leaves (the
# rolling suite's change: the faults suite; the transport suite's tls-ucx: the teardown suite), so this one need not
# converge back.
NEXT_TAKES_OVER = "DASK_SANDBOX_NEXT_TAKES_OVER"


def next_takes_over() -> bool:
    return os.environ.get(NEXT_TAKES_OVER) == "1"
NETWORK = "dask-sandbox"
OUTSIDER_IP = "10.231.7.50"  # a container on the sandbox network outside every allow list


def address(host: str) -> str:
    """A sandbox host's address on the sandbox network."""
    out = subprocess.run(["docker", "inspect", "-f", "{{json .NetworkSettings.Networks}}", host],
                         capture_output=True, text=True, check=True).stdout
    return str(json.loads(out)[NETWORK]["IPAddress"])


def controller_address(host: str) -> str:
    """This machine's address as a sandbox host sees it (the source of its connections there, SSH's included): what
    the firewall lets in as the controller."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect((address(host), 9))  # UDP: no packet is sent, the kernel only picks the route and source
        return str(probe.getsockname()[0])


def ephemeral_dir() -> Path:
    """Molecule's folder for this scenario (inventory, artifacts), from its environment or the newest one."""
    if os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY"):
        return Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"])
    found = sorted(glob.glob(os.path.expanduser("~/.ansible/tmp/molecule.*.default")), key=os.path.getmtime)
    if not found:
        raise RuntimeError("no molecule sandbox found: run `make up` first")
    return Path(found[-1])


def bundle(artifacts: str = "artifacts") -> dict[str, str]:
    """The DASK_* variables of a cluster's client bundle (<artifacts>/client/env.sh; dask's by default)."""
    text = (ephemeral_dir() / artifacts / "client" / "env.sh").read_text()
    pairs = (line.removeprefix("export ").split("=", 1) for line in text.splitlines() if line.startswith("export "))
    return dict(pairs)


def security(artifacts: str = "artifacts", **override: Any) -> Security:
    env = bundle(artifacts)
    args: dict[str, Any] = {"tls_ca_file": env["DASK_DISTRIBUTED__COMM__TLS__CA_FILE"],
                            "tls_client_cert": env["DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT"],
                            "tls_client_key": env["DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY"],
                            "require_encryption": True}
    args.update(override)
    return Security(**args)


def scheduler_address(artifacts: str = "artifacts") -> str:
    return bundle(artifacts)["DASK_SCHEDULER_ADDRESS"]


def connect(timeout: float = 30, artifacts: str = "artifacts") -> Client:
    """A client of dask (or of the cluster whose controller folder is molecule's `artifacts` folder)."""
    return Client(scheduler_address(artifacts), security=security(artifacts), timeout=timeout)


def on_host(host: str, *argv: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run a command inside a sandbox host container."""
    return subprocess.run(["docker", "exec", host, *argv], capture_output=True, text=True, check=check,
                          timeout=timeout)


NOTEBOOK = "dask-notebook"  # JupyterLab's container, on the scheduler host (the sandbox's inventory turns it on)


def started_at(host: str, container: str) -> str:
    """When a container on a sandbox host last started (docker inspect's State.StartedAt)."""
    return on_host(host, "docker", "inspect", "-f", "{{.State.StartedAt}}", container).stdout.strip()


def in_a_new_process_of(host: str, container: str, code: str, timeout: float = 180) -> str:
    """Run Python code in a new process as the container on the host starts one (a new kernel of JupyterLab, say):
    a container of its image with its user, environment, mounts and network, read from docker inspect (docker exec
    into the sandbox hosts' nested containers fails on setns). Its standard output."""
    inspect = json.loads(on_host(host, "docker", "inspect", container).stdout)[0]
    config = inspect["Config"]
    argv = ["docker", "run", "--rm", "--network", inspect["HostConfig"]["NetworkMode"], "--user", config["User"]]
    for item in config["Env"]:
        argv += ["-e", item]
    for mount in inspect["Mounts"]:
        argv += ["-v", f"{mount['Source']}:{mount['Destination']}:{'rw' if mount['RW'] else 'ro'}"]
    return on_host(host, *argv, config["Image"], "python", "-c", code, timeout=timeout).stdout


def workers(client: Client) -> dict[str, dict[str, Any]]:
    """Registered workers by address, each with its name, threads and host."""
    return {addr: {"name": str(info.get("name")), "nthreads": info.get("nthreads"),
                   "host": info.get("host")}
            for addr, info in client.scheduler_info(n_workers=-1)["workers"].items()}


def by_host(client: Client) -> dict[str, list[dict[str, Any]]]:
    """Registered workers grouped by sandbox host (worker names start with the host's inventory name)."""
    out: dict[str, list[dict[str, Any]]] = {host: [] for host in WORKERS}
    for addr, info in workers(client).items():
        for host in WORKERS:
            if info["name"].startswith(host):
                out[host].append({"address": addr, **info})
    return out


def wait_until(predicate: Any, timeout: float, what: str, interval: float = 0.5) -> float:
    """Poll `predicate()` until it is true; return the seconds it took, or raise naming `what`."""
    start = time.monotonic()
    last: Exception | None = None
    while time.monotonic() - start < timeout:
        try:
            if predicate():
                return time.monotonic() - start
        except (OSError, TimeoutError) as exc:  # the scheduler may be restarting
            last = exc
        time.sleep(interval)
    raise AssertionError(f"{what}: not within {timeout:.0f} s (last error: {last!r})")


def unit_property(host: str, unit: str, prop: str) -> str:
    return on_host(host, "systemctl", "show", "-P", prop, unit).stdout.strip()


PROMETHEUS = "http://127.0.0.1:9090"  # on the scheduler host (monitoring listens on loopback there)


def prometheus(path: str, **params: str) -> Any:
    """GET Prometheus's HTTP API on the scheduler host; the `data` part."""
    script = ("import json, sys, urllib.parse, urllib.request\n"
              "url = sys.argv[1] + '?' + urllib.parse.urlencode(json.loads(sys.argv[2]))\n"
              "print(urllib.request.urlopen(url, timeout=10).read().decode())")
    out = on_host(SCHEDULER, "python3", "-c", script, f"{PROMETHEUS}{path}", json.dumps(params)).stdout
    body = json.loads(out)
    assert body["status"] == "success", body
    return body["data"]


def prometheus_scalar(expr: str) -> float | None:
    result = prometheus("/api/v1/query", query=expr)["result"]
    return float(result[0]["value"][1]) if result else None


PROFILE_LINE = re.compile(r"^(?P<task>\S.*?) -{2,} (?P<seconds>[0-9.]+)s$")


def slowest_tasks(output: str, count: int = 4) -> list[tuple[str, float]]:
    """The slowest tasks of a run from the recap of Ansible's profile_tasks callback."""
    rows = [(m["task"], float(m["seconds"])) for m in map(PROFILE_LINE.match, output.splitlines()) if m]
    return sorted(rows, key=lambda row: row[1], reverse=True)[:count]


# A run's one-off work: the image builds and archive exports that the build cache and the kept archive save from the
# next run on this machine (scripts/ci_times.py --one-off reads them from the run's task profile). playbook() adds their
# seconds to one_off_file(); tests/sandbox/suites.py reports each suite's as `[ci-time] one-off:suite:NAME`, which the
# time guard leaves out.
def one_off_file() -> Path:
    return ephemeral_dir() / "artifacts" / "reports" / "one-off.txt"


# The fast rerun's message when every host is as the last converge left it (role dask_record).
FAST = "is as the last converge left it: nothing to change"
# The settings of the teardown suite's redeploy (archive distribution, the CPU profile), also the last verify's.
ARCHIVE_VARS = ROOT / "molecule" / "default" / "vars" / "archive.yml"


def said(output: str) -> str:
    """A run's output with its line wrapping and quoting undone (the YAML callback wraps long messages and doubles
    the apostrophes of a single-quoted one)."""
    return " ".join(output.split()).replace("''", "'")


def recap(output: str) -> dict[str, dict[str, int]]:
    """host -> {ok, changed} from a run's PLAY RECAP."""
    return {host: {"ok": int(ok), "changed": int(changed)}
            for host, ok, changed in re.findall(r"^(\S+)\s+: ok=(\d+)\s+changed=(\d+)", output, re.M)}


def playbook(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """ansible-playbook with molecule's inventory, from the repository root; prints a `[playbook]` line with the
    run's time and its slowest tasks (where CI's time goes)."""
    inventory = ephemeral_dir() / "inventory"
    env = {**os.environ, "ANSIBLE_CALLBACKS_ENABLED": "ansible.posix.profile_tasks", "ANSIBLE_PIPELINING": "true"}
    started = time.monotonic()
    run = subprocess.run(["ansible-playbook", "-i", str(inventory), *args], cwd=ROOT, capture_output=True,
                         text=True, timeout=timeout, check=False, env=env)
    name = " ".join(Path(arg).name if arg.endswith(".yml") else arg for arg in args)[:160]
    slow = "; ".join(f"{task[:70]} {seconds:.1f} s" for task, seconds in slowest_tasks(run.stdout))
    logs = ephemeral_dir() / "artifacts" / "playbooks"
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / f"{len(list(logs.iterdir())):03d}-{re.sub(r'[^A-Za-z0-9.=_-]+', '_', name)[:80]}.log"
    log.write_text(run.stdout + run.stderr)
    read = subprocess.run([sys.executable, str(ROOT / "scripts" / "ci_times.py"), str(log), "--one-off"],
                          capture_output=True, text=True, check=True, timeout=60)
    spent = float(read.stdout)
    if spent:
        one_off_file().parent.mkdir(parents=True, exist_ok=True)
        with one_off_file().open("a") as out:
            out.write(f"{spent:.1f}\n")
    print(f"[playbook] {name}: rc {run.returncode}, {time.monotonic() - started:.1f} s; slowest: {slow}; output: {log}",
          flush=True)
    return run


def record(kind: str, row: dict[str, Any]) -> None:
    """Append a row to artifacts/reports/<kind>.jsonl (the fault table of the closing report)."""
    reports = ephemeral_dir() / "artifacts" / "reports"
    reports.mkdir(parents=True, exist_ok=True)
    with (reports / f"{kind}.jsonl").open("a") as out:
        out.write(json.dumps(row) + "\n")
    print(f"[{kind}] " + " | ".join(f"{k}: {v}" for k, v in row.items()), flush=True)


def probe_from_container(targets: list[tuple[str, int]], *docker_args: str) -> dict[str, str]:
    """Try each target from a fresh container on the sandbox network; 'open' or the error's name."""
    script = ("import json, socket, sys\nout = {}\nfor host, port in json.loads(sys.argv[1]):\n"
              "    try:\n        socket.create_connection((host, port), timeout=5).close(); r = 'open'\n"
              "    except OSError as e:\n        r = type(e).__name__\n"
              "    out[f'{host}:{port}'] = r\nprint(json.dumps(out))")
    run = subprocess.run(["docker", "run", "--rm", "--network", NETWORK, *docker_args, "--entrypoint", "python3",
                          "dask-sandbox-host:bookworm", "-c", script, json.dumps(targets)],
                         capture_output=True, text=True, check=True, timeout=120)
    return dict(json.loads(run.stdout))


def tls_exchange(cert: tuple[str, str] | None) -> str:
    """Open a TLS connection to the scheduler that trusts the cluster's CA, presenting `cert` (or none), send a
    and read: 'answered' when the scheduler sends its comm handshake, else what ended the connection."""
    env = bundle()
    context = ssl.create_default_context(cafile=env["DASK_DISTRIBUTED__COMM__TLS__CA_FILE"])
    context.check_hostname = False
    if cert:
        context.load_cert_chain(*cert)
    host = address(SCHEDULER)
    try:
        with socket.create_connection((host, 8786), timeout=5) as raw, context.wrap_socket(raw) as tls:
            return "closed" if tls.recv(1) == b"" else "answered"
    except TimeoutError:
        return "kept open"
    except (ssl.SSLError, ConnectionError) as exc:
        return f"{type(exc).__name__}: {exc}"


# A client's first connection: warnings are errors, versions checked, one task computed (tests/sandbox/clients).
LOCK_CLIENT = """
import warnings
warnings.simplefilter("error")
from distributed import Client
with Client(timeout=60) as client:
    versions = client.get_versions(check=True)
    print("client", versions["client"]["packages"]["dask"], versions["client"]["packages"]["python"])
    print("scheduler", versions["scheduler"]["packages"]["dask"], versions["scheduler"]["packages"]["python"])
    print("sum", client.submit(sum, [1, 2, 3]).result())
"""


def lock_client(artifacts: str, venv: Path) -> tuple[subprocess.CompletedProcess[str], str, float]:
    """A client environment made from a cluster's lock (scripts/client-env.sh over <artifacts>/client) that connects
    with `Client()` and the bundle's environment: the run of LOCK_CLIENT, client-env.sh's first line, its seconds."""
    client_dir = ephemeral_dir() / artifacts / "client"
    started = time.monotonic()
    made = subprocess.run(["bash", str(ROOT / "scripts" / "client-env.sh"), str(client_dir), str(venv)],
                          capture_output=True, text=True, timeout=900)
    assert made.returncode == 0, made.stdout[-2000:] + made.stderr[-2000:]
    seconds = time.monotonic() - started
    env = {key: value for key, value in os.environ.items() if not key.startswith("DASK_")}
    env.update(bundle(artifacts))
    run = subprocess.run([str(venv / "bin" / "python"), "-c", LOCK_CLIENT], capture_output=True, text=True, env=env,
                         timeout=180)
    return run, made.stdout.splitlines()[0], seconds
