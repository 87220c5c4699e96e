"""How many Dask tasks a job ran: a scheduler plugin counting tasks per client, and the client preload that names
a job's clients.

dask-gpu-job registers `JobTaskCounts` on the scheduler (idempotent: once per scheduler life) and starts the user's
script with this module as a client preload (DASK_DISTRIBUTED__CLIENT__PRELOAD), so every Client the script makes
appends its id to $DASK_JOB_DIR/clients. When the script ends, dask-gpu-job asks the scheduler for those clients'
counts (`take_counts`, run on the scheduler), which removes them there.

The plugin counts every client (a client becomes a job's only when the script has connected); the counts of a
client that left are kept for the most recent `KEEP_LEFT` clients, so the scheduler's memory stays bounded.
"""
from __future__ import annotations

import os
from collections import OrderedDict
from pathlib import Path
from typing import Any

from distributed.diagnostics.plugin import SchedulerPlugin

PLUGIN_NAME = "dask-gpu-job-tasks"
KEEP_LEFT = 10_000
COUNTED = ("submitted", "finished", "erred")


class JobTaskCounts(SchedulerPlugin):
    """Tasks submitted, finished (in memory) and erred, per client id."""

    name = PLUGIN_NAME
    idempotent = True  # registered once per scheduler life: the first job's registration stays

    def __init__(self) -> None:
        self.counts: dict[str, dict[str, int]] = {}
        self.left: OrderedDict[str, dict[str, int]] = OrderedDict()
        # Clients that want each task (identical keys are shared: a task two clients submit runs once, for both).
        self.owners: dict[Any, set[str]] = {}

    def update_graph(self, scheduler: Any, *, client: str, tasks: list[Any], **kwargs: Any) -> None:
        counts = self.counts.setdefault(str(client), dict.fromkeys(COUNTED, 0))
        counts["submitted"] += len(tasks)
        for key in tasks:
            self.owners.setdefault(key, set()).add(str(client))

    def transition(self, key: Any, start: str, finish: str, *args: Any, **kwargs: Any) -> None:
        owners = self.owners.get(key)
        if owners is None:
            return
        if finish == "forgotten":
            del self.owners[key]
            return
        if finish not in ("memory", "erred"):
            return
        for client in owners:
            counts = self.counts.get(client) or self.left.get(client)
            if counts is not None:
                counts["finished" if finish == "memory" else "erred"] += 1

    def remove_client(self, scheduler: Any, client: str) -> None:
        counts = self.counts.pop(str(client), None)
        if counts is not None:
            self.left[str(client)] = counts
            while len(self.left) > KEEP_LEFT:
                self.left.popitem(last=False)

    def take(self, clients: list[str]) -> dict[str, int]:
        """The summed counts of these clients, forgotten here afterwards."""
        total = dict.fromkeys(COUNTED, 0)
        for client in clients:
            counts = self.left.pop(client, None) or self.counts.get(client) or {}
            for name in COUNTED:
                total[name] += int(counts.get(name, 0))
        return total


def take_counts(clients: list[str], dask_scheduler: Any = None) -> dict[str, int] | None:
    """Run on the scheduler (Client.run_on_scheduler): the clients' counts, or None without the plugin."""
    plugin = dask_scheduler.plugins.get(PLUGIN_NAME)
    return plugin.take(clients) if plugin is not None else None


def dask_setup(client: Any) -> None:
    """Client preload: the job's clients are listed in $DASK_JOB_DIR/clients (one id a line)."""
    folder = os.environ.get("DASK_JOB_DIR")
    if folder:
        with Path(folder, "clients").open("a") as out:
            out.write(f"{client.id}\n")
