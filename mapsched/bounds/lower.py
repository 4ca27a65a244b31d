"""The best proved lower bound of a problem, and the rule that proved it."""

from __future__ import annotations

from dataclasses import dataclass

from ..problem import Problem
from .chain import chain_bound
from .load import load_bound
from .simple import critical_path_bound, work_bound

__all__ = ["Bound", "lower_bound"]


@dataclass(frozen=True)
class Bound:
    """A lower bound on the optimal makespan and the rule that proved it."""

    value: float
    rule: str


def lower_bound(problem: Problem, effort: str = "fast", time_limit: float = 60.0) -> Bound:
    """The largest of the method-independent bounds, with the rule that gave it.

    ``effort="fast"`` (what every ``solve`` adds) takes the critical path, the total
    work and the load LP (:func:`~mapsched.bounds.load.load_bound`): O(n m nb L + E)
    and one LP. ``effort="full"`` adds the module-chain recursion of
    :func:`~mapsched.bounds.chain.chain_bound` (exact solves of module pieces, at
    most ``time_limit`` seconds).

    Examples
    --------
    >>> from mapsched import instances
    >>> lower_bound(instances.load("topcuoglu2002"))
    Bound(value=41.0, rule='critical-path')
    """
    if effort not in ("fast", "full"):
        raise ValueError(f"effort: expected 'fast' or 'full', got {effort!r}")
    rules = [
        Bound(critical_path_bound(problem), "critical-path"),
        Bound(work_bound(problem), "work"),
        Bound(load_bound(problem), "load"),
    ]
    if effort == "full":
        rules.append(Bound(chain_bound(problem, time_limit=time_limit), "module-chain"))
    return max(rules, key=lambda b: b.value)
