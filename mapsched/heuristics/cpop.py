"""``cpop``: Critical-Path-on-a-Processor (Topcuoglu, Hariri and Wu, 2002).

Priority is upward plus downward rank. The tasks of the critical path (those
whose priority equals the entry's) all go to the one device that runs them
fastest in total, when it can; every other task goes to its earliest-finishing
device, with insertion. Ready tasks are taken by highest priority.
"""

from __future__ import annotations

import numpy as np

from mapsched.engine.context import SolveContext
from mapsched.engine.registry import register
from mapsched.model.problem import Problem
from mapsched.model.schedule import Schedule
from mapsched.scheduling.construct import construct, earliest_finish
from mapsched.scheduling.decoder import ready_order
from mapsched.scheduling.ranks import downward_rank, upward_rank


def critical_path(problem: Problem, priority: np.ndarray) -> list[int]:
    """Tasks of the critical path: from the top entry, follow the child of equal priority."""
    p = problem
    tol = 1e-9 * max(1.0, float(priority.max()))
    entries = [i for i in range(p.n) if not p.pred[i]]
    k = max(entries, key=lambda i: priority[i])
    path = [k]
    while p.succ[k]:
        k = max(p.succ[k], key=lambda j: priority[j])
        if priority[k] < priority[path[0]] - tol:
            break
        path.append(k)
    return path


@register("cpop", "Critical-Path-on-a-Processor (Topcuoglu et al. 2002)", objectives=("latency",))
def cpop(problem: Problem, ctx: SolveContext) -> Schedule:
    """O(n log n + E) for the priorities, then O(n m) trials with insertion."""
    p = problem
    priority = upward_rank(p) + downward_rank(p)
    cp = set(critical_path(p, priority))
    cp_idx = sorted(cp)
    able = p.can_run[cp_idx].all(axis=0)
    cost = np.where(able, p.dur[cp_idx].sum(axis=0), np.inf)
    cp_dev = int(np.argmin(cost)) if able.any() else -1

    def rule(i, tried, b):
        if i in cp:
            on_cp = [t for t in tried if t[0][0][0] == cp_dev]
            if on_cp:
                return on_cp[0]
        return earliest_finish(i, tried, b)

    s = construct(p, ready_order(p, priority), rule, insertion=True)
    ctx.improved(s.makespan)
    return s
