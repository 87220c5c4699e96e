"""Ansible's default output, plus progress a person can follow (ansible.cfg: stdout_callback)."""
from __future__ import annotations

DOCUMENTATION = r"""
    name: progress
    type: stdout
    short_description: Ansible's default output, with a line of progress at least every 30 seconds
    description:
      - Prints what ansible.builtin.default prints, and while a task runs longer than I(interval) seconds without
        other output, a line every I(interval) seconds naming the task, the time it has taken and the hosts it
        still runs on (an image build, an archive copy or load, a push or pull, the wait for workers, a job).
      - A task that retries (C(until)) and returns C(progress_lines) (module dask_gpu.bundle.job_output) has those
        lines printed as they come instead of the retry notice, so a job's output streams.
    extends_documentation_fragment:
      - default_callback
      - result_format_callback
    options:
      interval:
        description: Seconds without output after which a line of progress is printed.
        type: int
        default: 30
        env:
          - name: DASK_PROGRESS_INTERVAL
    requirements:
      - set as stdout_callback in ansible.cfg
"""

import threading
import time
from typing import Any

from ansible import constants as C  # noqa: N812 - Ansible's own name for it
from ansible.plugins.callback.default import CallbackModule as DefaultCallback
from ansible_collections.dask_gpu.bundle.plugins.plugin_utils.preload import preload


class CallbackModule(DefaultCallback):  # type: ignore[misc]  # ansible-core ships no type hints
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "stdout"
    CALLBACK_NAME = "dask_gpu.bundle.progress"

    def __init__(self) -> None:
        super().__init__()
        # Loaded in the main process, so every forked worker inherits them (plugin_utils/preload.py).
        preload(C.DEFAULT_ROLES_PATH or [])
        self._lock = threading.Lock()
        self._task_name = ""
        self._task_started = 0.0
        self._last_output = 0.0
        self._running: set[str] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _interval(self) -> int:
        try:
            return max(1, int(self.get_option("interval")))
        except (KeyError, TypeError, ValueError):
            return 30

    def _watch(self) -> None:
        while not self._stop.wait(1.0):
            with self._lock:
                if not self._task_name:
                    continue
                now = time.monotonic()
                if now - self._last_output < self._interval():
                    continue
                hosts = ", ".join(sorted(self._running)) or "no host yet"
                line = (f"[progress] {self._task_name}: {round(now - self._task_started)} s so far, "
                        f"running on {hosts}")
                self._last_output = now
            self._display.display(line)

    def _begin(self, task: Any) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._watch, daemon=True)
            self._thread.start()
        with self._lock:
            self._task_name = task.get_name().strip()
            self._task_started = self._last_output = time.monotonic()
            self._running = set()

    def _output(self) -> None:
        with self._lock:
            self._last_output = time.monotonic()

    def _ended(self, result: Any) -> None:
        with self._lock:
            self._running.discard(result.host.get_name())
            self._last_output = time.monotonic()

    def v2_playbook_on_task_start(self, task: Any, is_conditional: bool) -> None:
        self._begin(task)
        super().v2_playbook_on_task_start(task, is_conditional)

    def v2_playbook_on_handler_task_start(self, task: Any) -> None:
        self._begin(task)
        super().v2_playbook_on_handler_task_start(task)

    def v2_runner_on_start(self, host: Any, task: Any) -> None:
        with self._lock:
            self._running.add(host.get_name())
        super().v2_runner_on_start(host, task)

    def _stream(self, result: Any) -> bool:
        lines = result.result.get("progress_lines")
        if not isinstance(lines, list):
            return False
        for line in lines:
            self._display.display(f"  {self.host_label(result)} | {line}")
        self._output()
        return True

    def v2_runner_retry(self, result: Any) -> None:
        if not self._stream(result):
            super().v2_runner_retry(result)
        self._output()

    def v2_runner_on_ok(self, result: Any) -> None:
        self._stream(result)
        self._ended(result)
        super().v2_runner_on_ok(result)

    def v2_runner_on_failed(self, result: Any, ignore_errors: bool = False) -> None:
        self._stream(result)
        self._ended(result)
        super().v2_runner_on_failed(result, ignore_errors)

    def v2_runner_on_skipped(self, result: Any) -> None:
        self._ended(result)
        super().v2_runner_on_skipped(result)

    def v2_runner_on_unreachable(self, result: Any) -> None:
        self._ended(result)
        super().v2_runner_on_unreachable(result)

    def v2_playbook_on_stats(self, stats: Any) -> None:
        with self._lock:
            self._task_name = ""
        self._stop.set()
        super().v2_playbook_on_stats(stats)
