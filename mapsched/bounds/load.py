"""The load bound: the least makespan at which the devices can share out all the work.

A linear programme over ``z[i, u, k]``, the number of jobs of task i that device u runs
at batch size ``b_k`` (relaxed to any non-negative amount):

* each task's jobs hold its L inputs: ``sum_{u,k} b_k z[i, u, k] = L``;
* each device is busy at most C: ``sum_{i,k} t[i, u, k] z[i, u, k] <= C``;
* only where the device runs that batch size and its memory holds one such job.

Minimise C. The jobs of any schedule give a feasible point (count them), so the
optimum bounds the makespan from below. Unlike the total-work bound it weighs each
device by its own speed: a CPU seven times slower than a GPU takes a seventh of the
share. Precedence and communication are ignored.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linprog
from scipy.sparse import coo_matrix

from ..problem import Problem
from ..validate import floating_bound

__all__ = ["load_bound"]


def load_bound(problem: Problem, time_limit: float | None = None) -> float:
    """The optimum of the load LP (see the module docstring), slightly rounded down; 0 if
    HiGHS does not prove it within ``time_limit`` seconds (default: no limit).

    Notes
    -----
    One LP with ``n m nb + 1`` columns and ``n + m`` rows, solved by HiGHS (through
    SciPy); about a second for 10,000 tasks on 4 devices.

    Examples
    --------
    >>> from mapsched import instances
    >>> round(load_bound(instances.load("topcuoglu2002")), 3)
    30.785
    """
    p = problem
    sizes = p.batch_sizes.astype(float)
    fits = np.isfinite(p.lat) & (sizes[None, None, :] <= p.L) & (
        p.weight[:, None, None] + p.act[:, None, None] * sizes[None, None, :] <= p.mem[None, :, None])
    i, u, k = np.nonzero(fits)
    cols = len(i)
    if cols == 0:  # nothing can run: the problem was rejected when built; keep the function total
        return 0.0
    rows = np.concatenate([i, p.n + u, p.n + np.arange(p.m)])
    colidx = np.concatenate([np.arange(cols), np.arange(cols), np.full(p.m, cols)])
    vals = np.concatenate([sizes[k], p.lat[i, u, k], -np.ones(p.m)])
    a = coo_matrix((vals, (rows, colidx)), shape=(p.n + p.m, cols + 1)).tocsr()
    c = np.zeros(cols + 1)
    c[-1] = 1.0
    res = linprog(c, A_ub=a[p.n:], b_ub=np.zeros(p.m), A_eq=a[:p.n], b_eq=np.full(p.n, float(p.L)),
                  bounds=(0, None), method="highs", options={} if time_limit is None else {"time_limit": time_limit})
    if res.status != 0:  # always feasible and bounded: a solver failure or the time limit proves nothing
        return 0.0
    return max(0.0, floating_bound(float(res.fun)))
