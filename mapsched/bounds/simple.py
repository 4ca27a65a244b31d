"""Simple lower bounds: the critical path and the total work.

Both relax the problem (no communication, no memory, perfect load balance), so
each is a valid lower bound on the optimal makespan.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from typing import Any

import numpy as np

from mapsched import checks
from mapsched.errors import OptionError, shown
from mapsched.model import arguments
from mapsched.model.problem import Problem

__all__ = ["SubsetBound", "critical_path_bound", "min_work", "slr", "work_bound"]


def min_work(problem: Problem) -> np.ndarray:
    """Least total device time of each task over all its L inputs, shape (n,).

    The cheapest way to cover L inputs with jobs, any number of them on any device (the
    format lets a task run several jobs on one device), found by an unbounded knapsack
    recursion over the batch sizes, vectorised over tasks: O(L m nb n).
    """
    p = problem
    L = p.L
    sizes = p.batch_sizes.tolist()
    cheapest = p.lat.min(axis=1)  # (n, nb): the fastest device at each batch size
    best = np.full((p.n, L + 1), np.inf)
    best[:, 0] = 0.0
    for c in range(1, L + 1):
        for k, b in enumerate(sizes):
            if b <= c:
                best[:, c] = np.minimum(best[:, c], best[:, c - b] + cheapest[:, k])
    return best[:, L]


def critical_path_bound(problem: Problem) -> float:
    """Longest path where each task takes its shortest job on any device, with no communication.

    Every input crosses every path, and each job on it lasts at least that long.
    O(n m nb + E).
    """
    p = arguments.problem(problem)
    shortest = p.lat.min(axis=(1, 2)).tolist()
    finish = [0.0] * p.n
    for i in p.topo.tolist():
        finish[i] = shortest[i] + max((finish[q] for q in p.pred[i]), default=0.0)
    return max(finish)


def slr(problem: Problem, result: Any) -> float:
    """Schedule length ratio (Topcuoglu et al. 2002; GiPH's metric): the makespan of ``result``
    (a :class:`~mapsched.model.schedule.Schedule` or a number) over :func:`critical_path_bound`, the
    critical path under each task's least latency, without communication. At least 1 for
    every schedule; where the critical path is 0 ms, 1 for a 0 ms schedule and infinite for
    any other. (GiPH's code divides by the *shortest* entry-exit path instead, which gives
    larger ratios.) O(n m nb + E).

    Examples
    --------
    >>> from mapsched import instances
    >>> p = instances.load("topcuoglu2002")
    >>> round(slr(p, 2 * critical_path_bound(p)), 6)
    2.0
    """
    makespan = getattr(result, "makespan", result)
    if not (checks.real(makespan) and makespan >= 0):
        raise OptionError(f"result: expected a schedule or a makespan in ms, got {shown(result)}")
    cp = critical_path_bound(problem)
    if cp == 0:  # every task can take 0 ms: a 0 ms schedule meets the bound, any other is infinitely above
        return 1.0 if makespan == 0 else math.inf
    return float(makespan) / cp


def work_bound(problem: Problem) -> float:
    """Least total work spread perfectly over all devices: sum of :func:`min_work` / m."""
    return float(min_work(arguments.problem(problem)).sum() / problem.m)


class SubsetBound:
    """The larger of :func:`critical_path_bound` and :func:`work_bound` of
    ``problem.restrict(tasks)`` for many task sets, computed from the whole problem's
    arrays: the same values without building each restriction, whose copies would cost
    more than the bounds. O(n m nb L) once, then O(n + E) a set.

    Examples
    --------
    >>> from mapsched import instances
    >>> p = instances.load("topcuoglu2002")
    >>> q = p.restrict([0, 1, 2, 5])
    >>> SubsetBound(p)([0, 1, 2, 5]) == max(critical_path_bound(q), work_bound(q))
    True
    """

    def __init__(self, problem: Problem) -> None:
        self.p = arguments.problem(problem)
        self.shortest = problem.lat.min(axis=(1, 2)).tolist()
        self.work = min_work(problem) / problem.m

    def __call__(self, tasks: Collection[int]) -> float:
        finish = dict.fromkeys(arguments.tasks(self.p, tasks, "tasks"), 0.0)
        for i in self.p.topo.tolist():
            if i in finish:
                finish[i] = self.shortest[i] + max((finish[q] for q in self.p.pred[i] if q in finish), default=0.0)
        return max(max(finish.values()), float(self.work[sorted(finish)].sum()))
