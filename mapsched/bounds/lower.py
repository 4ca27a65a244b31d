"""The best proved lower bound of a problem, and the rule that proved it."""

from __future__ import annotations

from dataclasses import dataclass

from ..problem import Problem
from .load import load_bound
from .simple import critical_path_bound, work_bound

__all__ = ["Bound", "lower_bound"]


@dataclass(frozen=True)
class Bound:
    """A lower bound on the optimal makespan and the rule that proved it."""

    value: float
    rule: str


def lower_bound(problem: Problem, time_limit: float | None = None) -> Bound:
    """The largest of the quick bounds, with the rule that gave it: the critical path, the
    total work and the load LP (:func:`~mapsched.bounds.load.load_bound`, given
    ``time_limit`` seconds if set). Every ``solve`` adds it. O(n m nb L + E) and one LP.
    :func:`mapsched.split.full_bound` adds the module-chain recursion.

    Examples
    --------
    >>> from mapsched import instances
    >>> lower_bound(instances.load("topcuoglu2002"))
    Bound(value=41.0, rule='critical-path')
    """
    rules = [
        Bound(critical_path_bound(problem), "critical-path"),
        Bound(work_bound(problem), "work"),
        Bound(load_bound(problem, time_limit), "load"),
    ]
    return max(rules, key=lambda b: b.value)
