"""Retiring workers without losing a result, through the scheduler: the library of dask-gpu-roll (a rolling
restart's and a host retirement's step) and dask-gpu-autoscale (scale-down).

`retire` moves the data of every worker on the given hosts to the other workers
(`retire_workers(close_workers=False, remove=False)`: the workers stay up, so systemd does not start them again
half-way, and stay known to the scheduler until their unit stops). A retiring worker stops starting tasks, but a
task it was running finishes there after upstream's retirement has returned, its result held only there (upstream
lets it be lost and recomputed): `retire` waits for those tasks and retires again until a round that began with none
running leaves no key only there. Upstream waits without a limit; this waits at most `timeout` seconds in all.
"""
from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any


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
    result: dict[str, Any] = {"hosts": {host: {"workers": found[host]} for host in hosts}}
    return {**result, **retire_workers(client, addresses, timeout, info)}


def retire_workers(client: Any, addresses: list[str], timeout: float,
                   info: dict[str, Any] | None = None) -> dict[str, Any]:
    """retire() for workers given by address."""
    info = info if info is not None else client.scheduler_info(n_workers=-1)["workers"]
    # a worker process's own folder: unique, where an address may come back
    result: dict[str, Any] = {"retired": [str(info[address].get("local_directory")) for address in addresses
                                          if address in info]}
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
