"""The ansible-playbook command line that runs a playbook with this run's inventory and extra vars: a command a run
prints (site.yml's `Verify:` line) reaches the cluster the run deployed, whatever `-e` named it."""
from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from typing import Any

from ansible import context
from ansible.plugins.lookup import LookupBase

DOCUMENTATION = r"""
name: playbook_command
short_description: The ansible-playbook command line that runs a playbook with this run's inventory and extra vars
description:
  - Returns, for each playbook path given, C(ansible-playbook) with this run's C(-i) sources and its C(-e) values as
    given (an C(@file) with its path made absolute), shell-quoted, so that the line runs as printed, from the folder
    the playbook path is relative to.
options:
  _terms:
    description: Playbook paths.
    required: true
author: dask-gpu bundle
"""


def command(playbook: str, inventory: Sequence[str], extra_vars: Sequence[str], cwd: str) -> str:
    """The shell-quoted line: each `-e` value as the run got it, an `@file` made absolute from the run's folder (cwd),
    where Ansible looked for it."""
    argv = ["ansible-playbook"]
    for source in inventory:
        argv += ["-i", source]
    argv.append(playbook)
    for value in extra_vars:
        if value.startswith("@"):
            value = "@" + os.path.normpath(os.path.join(cwd, os.path.expanduser(value[1:])))
        argv += ["-e", value]
    return shlex.join(argv)


class LookupModule(LookupBase):  # type: ignore[misc]  # ansible-core ships no type hints
    def run(self, terms: list[Any], variables: dict[str, Any] | None = None, **kwargs: Any) -> list[str]:
        # The CLI made the inventory sources absolute (ansible.cfg's when no -i was given).
        inventory = list(context.CLIARGS.get("inventory") or [])
        extra_vars = list(context.CLIARGS.get("extra_vars") or [])
        return [command(str(term), inventory, extra_vars, os.getcwd()) for term in terms]
