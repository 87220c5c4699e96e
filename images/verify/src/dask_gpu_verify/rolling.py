"""dask-gpu-roll: the scheduler-side steps of a rolling worker restart (site.yml, role dask_worker, rolling.yml).

    dask-gpu-roll retire --scheduler ADDR --host IP [--host IP ...] [--timeout S]
    dask-gpu-roll wait   --scheduler ADDR --host IP=COUNT [...] [--exclude ID ...] [--timeout S]

`retire` moves the data of every worker on the given hosts to the other workers through the scheduler
(`retire_workers(close_workers=False, remove=False)`: the workers stay up, so systemd does not start them again
half-way, and stay known to the scheduler until their unit restarts). A retiring worker stops starting tasks, but a
task it was running finishes there after upstream's retirement has returned, its result held only there (upstream
lets it be lost and recomputed): `retire` waits for those tasks and retires again until a round that began with none
running leaves no key only there. Upstream waits without a limit; this waits at most --timeout seconds in all, then
reports the keys held only there.
`wait` returns once each host has COUNT running workers, none of them an --exclude'd (retired) one, known by its
local directory. Both print one JSON object on stdout and exit 0, or 1 when the time ran out (the object says what
was missing), 2 when the scheduler is unreachable.
TLS comes from the Dask configuration (DASK_DISTRIBUTED__COMM__TLS__*).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from .retirement import on_hosts, retire
from .session import EXIT_FAILED, EXIT_OK, EXIT_UNREACHABLE, connect, parse_host_count


def wait(client: Any, counts: dict[str, int], exclude: set[str], timeout: float) -> dict[str, Any]:
    """Wait until each host has its count of running workers that are not excluded (retired) ones."""
    started = time.monotonic()
    while True:
        info = client.scheduler_info(n_workers=-1)["workers"]
        fresh = {address: worker for address, worker in info.items()
                 if str(worker.get("local_directory")) not in exclude
                 and str(worker.get("status", "running")) == "running"}
        found = {host: len(addresses) for host, addresses in on_hosts(fresh, counts).items()}
        done = all(found[host] >= count for host, count in counts.items())
        if done or time.monotonic() - started > timeout:
            return {"hosts": found, "expected": counts, "registered": done,
                    "seconds": round(time.monotonic() - started, 2)}
        time.sleep(0.5)


def parser() -> argparse.ArgumentParser:
    parse = argparse.ArgumentParser(prog="dask-gpu-roll", description=__doc__.split("\n\n")[0])
    steps = parse.add_subparsers(dest="step", required=True)
    for name in ("retire", "wait"):
        step = steps.add_parser(name)
        step.add_argument("--scheduler", required=True)
        step.add_argument("--timeout", type=float, default=300.0)
        if name == "retire":
            step.add_argument("--host", action="append", required=True, help="IP the host's workers advertise")
        else:
            step.add_argument("--host", action="append", required=True, type=parse_host_count, metavar="IP=COUNT")
            step.add_argument("--exclude", action="append", default=[],
                              help="a retired worker's local directory (retire's `retired`)")
    return parse


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        client = connect(args.scheduler, None, timeout=30)
    except (OSError, TimeoutError) as error:
        print(json.dumps({"error": f"scheduler unreachable: {error}"}))
        return EXIT_UNREACHABLE
    with client:
        if args.step == "retire":
            result = retire(client, list(args.host), args.timeout)
            ok = not result["timed_out"]
        else:
            result = wait(client, dict(args.host), set(args.exclude), args.timeout)
            ok = bool(result["registered"])
    print(json.dumps(result))
    return EXIT_OK if ok else EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
