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
from collections.abc import Iterable, Mapping
from typing import Any

from .session import EXIT_FAILED, EXIT_OK, EXIT_UNREACHABLE, connect, parse_host_count


def on_hosts(workers: Mapping[str, Mapping[str, Any]], hosts: Iterable[str]) -> dict[str, list[str]]:
    """Worker addresses by host (a host is the IP the workers advertise)."""
    wanted = set(hosts)
    found: dict[str, list[str]] = {host: [] for host in wanted}
    for address, info in workers.items():
        if str(info.get("host")) in wanted:
            found[str(info.get("host"))].append(address)
    return found


def keys_on(client: Any, addresses: list[str], *, only: bool = False) -> int:
    """How many keys the scheduler has in memory on these workers (only=True: held nowhere else)."""
    if not addresses:
        return 0
    keys = {key for held in client.has_what(workers=addresses).values() for key in held}
    if not only or not keys:
        return len(keys)
    holders = client.who_has()  # every key (who_has takes futures, not keys)
    return sum(1 for key in keys if set(holders.get(key) or ()) <= set(addresses))


def running_tasks(client: Any, addresses: list[str]) -> int:
    """How many tasks the workers are running now (seceded ones included); a worker that does not answer counts 0."""
    def count(dask_worker: Any) -> int:  # nested: pickled by value, the workers cannot import this module
        return len(dask_worker.state.executing) + len(dask_worker.state.long_running)

    answers = client.run(count, workers=addresses, on_error="return")
    return sum(answer for answer in answers.values() if isinstance(answer, int))


def retire(client: Any, hosts: list[str], timeout: float) -> dict[str, Any]:
    """Retire every worker of the hosts (keys moved away, workers left running, the tasks they were running waited
    for and their results moved too); bounded by timeout in all."""
    info = client.scheduler_info(n_workers=-1)["workers"]
    found = on_hosts(info, hosts)
    addresses = [address for host in hosts for address in found[host]]
    result: dict[str, Any] = {"hosts": {host: {"workers": found[host]} for host in hosts},
                              # a worker process's own folder: unique, where an address may come back
                              "retired": [str(info[address].get("local_directory")) for address in addresses]}
    before = keys_on(client, addresses)
    started = time.monotonic()
    deadline = started + timeout
    timed_out = False
    rounds = 0
    idle = False  # whether no task was running there when this round began (known only once they stopped starting)
    while addresses:
        try:
            client.sync(_retire_bounded, client, addresses, max(deadline - time.monotonic(), 0.01))
        except TimeoutError:
            timed_out = True
            break
        rounds += 1
        if idle and keys_on(client, addresses, only=True) == 0:
            break
        if time.monotonic() >= deadline:
            timed_out = True
            break
        idle = running_tasks(client, addresses) == 0
        if not idle:
            time.sleep(0.2)
    result.update(keys_before=before, keys_only_there=keys_on(client, addresses, only=True), timed_out=timed_out,
                  rounds=rounds, running_left=running_tasks(client, addresses) if timed_out else 0,
                  seconds=round(time.monotonic() - started, 2))
    return result


async def _retire_bounded(client: Any, addresses: list[str], timeout: float) -> None:
    """The scheduler's retire_workers, given up after timeout seconds (asyncio.TimeoutError is TimeoutError)."""
    import asyncio

    await asyncio.wait_for(client.scheduler.retire_workers(workers=addresses, close_workers=False, remove=False),
                           timeout)


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
