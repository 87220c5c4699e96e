"""Controller CPU per task: where a playbook's controller time goes (docs/fleets.md, "Where a host's controller time
went"). A measuring aid for the fleet benchmark, not part of the bundle:

    ANSIBLE_CALLBACK_PLUGINS=tests/fleet/callback ANSIBLE_CALLBACKS_ENABLED=cpu_per_task \\
      CPU_PER_TASK_OUT=reports/cpu.tsv ansible-playbook -i INVENTORY playbooks/check.yml

Writes one line per task: the main process's CPU seconds, its children's (the forked workers, reaped when the task
ends, and their ssh), wall seconds and the task's name, tab-separated. With the linear strategy every host finishes a
task before the next starts, so a task's children CPU is its workers' (plus a little of the next task's start)."""
from __future__ import annotations

import os
import resource
import time
from typing import Any

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
    name: cpu_per_task
    type: aggregate
    short_description: controller CPU seconds per task (main process and forked workers), to a TSV file
    description: [The file is CPU_PER_TASK_OUT, default reports/cpu-per-task.tsv.]
"""


def _now() -> tuple[float, float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    forks = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, forks.ru_utime + forks.ru_stime, time.monotonic()


class CallbackModule(CallbackBase):  # type: ignore[misc]  # ansible-core ships no type hints
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "cpu_per_task"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self) -> None:
        super().__init__()
        self._rows: list[tuple[str, float, float, float]] = []
        self._current: tuple[str, tuple[float, float, float]] | None = None

    def _close(self) -> None:
        if self._current is not None:
            name, (own, forks, wall) = self._current
            own_now, forks_now, wall_now = _now()
            self._rows.append((name, own_now - own, forks_now - forks, wall_now - wall))
            self._current = None

    def v2_playbook_on_task_start(self, task: Any, is_conditional: bool) -> None:
        self._close()
        self._current = (task.get_name(), _now())

    def v2_playbook_on_handler_task_start(self, task: Any) -> None:
        self.v2_playbook_on_task_start(task, False)

    def v2_playbook_on_stats(self, stats: Any) -> None:
        self._close()
        path = os.environ.get("CPU_PER_TASK_OUT", "reports/cpu-per-task.tsv")
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "w", encoding="utf-8") as sink:
            sink.write("main_cpu_s\tworkers_cpu_s\twall_s\ttask\n")
            for name, own, forks, wall in self._rows:
                sink.write(f"{own:.2f}\t{forks:.2f}\t{wall:.2f}\t{name}\n")
