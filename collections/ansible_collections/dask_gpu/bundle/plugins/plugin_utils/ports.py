"""Ports by name: each host's model lists the TCP ports it takes as {setting: [FIRST, LAST]} (the core's and each
feature's), and one function finds the ones that collide, on a host and between clusters that share it."""
from __future__ import annotations

from collections.abc import Mapping

Span = list[int]


def span(first: int, count: int = 1) -> Span:
    return [int(first), int(first) + max(int(count), 1) - 1]


def overlap(first: Span, second: Span) -> bool:
    return first[0] <= second[1] and second[0] <= first[1]


def describe(name: str, ports: Span) -> str:
    return f"{name} ({ports[0]})" if ports[0] == ports[1] else f"{name} ({ports[0]}-{ports[1]})"


def clashes(taken: Mapping[str, Span]) -> list[tuple[str, str]]:
    """Pairs of names whose ports overlap (each pair once, in the order given)."""
    names = list(taken)
    return [(first, second) for index, first in enumerate(names) for second in names[index + 1:]
            if overlap(list(taken[first]), list(taken[second]))]


def between(ours: Mapping[str, Span], theirs: Mapping[str, Span]) -> list[tuple[str, str]]:
    """(our name, their name) for every port of ours that another cluster's record holds."""
    return [(mine, other) for mine, first in ours.items() for other, second in theirs.items()
            if overlap(list(first), list(second))]
