"""The ansible-playbook options of this run that no variable carries (--start-at-task, --step): site.yml records a
converge only when it ran whole (roles/dask_record)."""
from __future__ import annotations

from typing import Any

from ansible import context
from ansible.errors import AnsibleError
from ansible.plugins.lookup import LookupBase

DOCUMENTATION = r"""
name: run_options
short_description: This run's ansible-playbook options that no variable carries
description:
  - Returns, for each term, the value of that command-line option of this ansible-playbook run (C(start_at_task) is
    the task named or none, C(step) true or false). Tags and the limit are not here; ansible_run_tags,
    ansible_skip_tags and ansible_limit carry them.
options:
  _terms:
    description: Option names, C(start_at_task) or C(step).
    required: true
author: dask-gpu bundle
"""

KNOWN = ("start_at_task", "step")


class LookupModule(LookupBase):  # type: ignore[misc]  # ansible-core ships no type hints
    def run(self, terms: list[Any], variables: dict[str, Any] | None = None, **kwargs: Any) -> list[Any]:
        unknown = [term for term in terms if term not in KNOWN]
        if unknown:
            raise AnsibleError(f"run_options: unknown option(s) {unknown}; known: {list(KNOWN)}")
        return [context.CLIARGS.get(term) for term in terms]
