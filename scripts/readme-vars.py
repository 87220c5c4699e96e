#!/usr/bin/env python3
"""Write the inventory-variable tables of docs/variables.md from every role's meta/argument_specs.yml: each
variable's type, default, allowed values (its choices, or its description's "Allowed:" item) and meaning.

    scripts/readme-vars.py           rewrite the part of docs/variables.md between the VARIABLES markers
    scripts/readme-vars.py --check   exit 1 if docs/variables.md differs from the specs (CI runs this)
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "docs" / "variables.md"
BEGIN, END = "<!-- BEGIN VARIABLES (scripts/readme-vars.py) -->", "<!-- END VARIABLES -->"
ORDER = ["dask", "dask_worker", "dask_scheduler", "dask_tls", "dask_firewall", "dask_images", "docker_engine",
         "nvidia_container_toolkit", "gpu_facts"]


def cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def default(option: dict[str, object]) -> str:
    if "default" not in option:
        return "see description"
    value = option["default"]
    shown = value if isinstance(value, str) and value else json.dumps(value)
    return f"`{shown}`"


def allowed(option: dict[str, object]) -> str:
    """The option's constraint: its choices, or its description's 'Allowed:' item (grammar in
    collections/ansible_collections/dask_gpu/bundle/plugins/plugin_utils/options.py)."""
    if "choices" in option:
        return "one of " + ", ".join(f"`{choice}`" for choice in option["choices"])  # type: ignore[attr-defined]
    items = option.get("description")
    found = [str(item)[len("Allowed:"):].strip() for item in (items if isinstance(items, list) else [items])
             if str(item).startswith("Allowed:")]
    return f"`{found[0]}`" if found else "(none)"


def meaning(option: dict[str, object]) -> str:
    items = option.get("description")
    return " ".join(str(item) for item in (items if isinstance(items, list) else [items])
                    if item is not None and not str(item).startswith("Allowed:"))


def tables() -> str:
    roles = sorted((ROOT / "roles").iterdir(), key=lambda p: (ORDER.index(p.name) if p.name in ORDER else 99, p.name))
    parts = []
    for role in roles:
        spec = yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]
        parts.append(f"#### `{role.name}`: {spec['short_description']}\n")
        parts.append("| variable | type | default | allowed | meaning |\n| --- | --- | --- | --- | --- |")
        for name, option in spec["options"].items():
            kind = option.get("type", "str")
            if kind == "list" and "elements" in option:
                kind += f" of {option['elements']}"
            parts.append(f"| `{name}` | {cell(kind)} | {cell(default(option))} | {cell(allowed(option))} "
                         f"| {cell(meaning(option))} |")
        parts.append("")
    return "\n".join(parts).rstrip() + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="fail if docs/variables.md is out of date")
    args = parser.parse_args()
    text = README.read_text()
    if BEGIN not in text or END not in text:
        print(f"docs/variables.md lacks the markers {BEGIN} ... {END}", file=sys.stderr)
        return 1
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    updated = f"{head}{BEGIN}\n{tables()}{END}{tail}"
    if args.check:
        if updated != text:
            print("docs/variables.md's variable tables differ from roles/*/meta/argument_specs.yml: "
                  "run scripts/readme-vars.py", file=sys.stderr)
            return 1
        print("docs/variables.md's variable tables match the argument specs")
        return 0
    README.write_text(updated)
    return 0


if __name__ == "__main__":
    sys.exit(main())
