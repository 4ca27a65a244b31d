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

import math
import time

import numpy as np
from scipy.optimize import linprog
from scipy.sparse import coo_matrix

from mapsched import checks
from mapsched.model import arguments
from mapsched.model.problem import Problem
from mapsched.model.validate import floating_bound

__all__ = ["load_bound"]

LP_COLUMNS = 10_000
"""Above this many LP columns (distinct tasks times devices times batch sizes) the bound is
the best point of the dual found by :func:`_dual_ascent` instead: HiGHS's time grows about
fourfold as the columns double, the ascent's about twofold, and the ascent comes within
1e-8 of the LP's optimum on chains and random graphs of that size, so past this size the
LP costs every solve time for no better bound."""

ASCENT_STEPS = 300


def load_bound(problem: Problem, time_limit: float | None = None) -> float:
    """The optimum of the load LP (see the module docstring), slightly rounded down; 0 if
    HiGHS does not prove it within ``time_limit`` seconds (default: no limit).

    Tasks whose times are alike on every device and batch size enter the LP once, with
    their number as weight: a fractional share of one such task is a share of all, so the
    optimum is the same. A traced training step has a few dozen kinds of task. When the
    LP is still over :data:`LP_COLUMNS` columns (random graphs: every task differs), the
    bound is instead the best dual point of :data:`ASCENT_STEPS` steps of a multiplicative
    ascent, which any point proves (see :func:`_dual_ascent`); within 0.001% of the
    optimum on traced training steps and random DAGs of 5,000-36,000 tasks. The ascent stops at ``time_limit`` with the
    best point so far.

    Notes
    -----
    O(n m nb log n) to group the tasks, then one LP with ``g m nb + 1`` columns and
    ``g + m`` rows for g kinds of task, or O(ASCENT_STEPS n m) for the ascent.

    Examples
    --------
    >>> from mapsched import instances
    >>> round(load_bound(instances.load("topcuoglu2002")), 3)
    30.785
    """
    value, _ = _load_lp(arguments.problem(problem), checks.seconds(time_limit, "time_limit"))
    return max(0.0, floating_bound(value))


def device_prices(problem: Problem) -> np.ndarray:
    """Weights ``lam[u] >= 0`` summing to 1 that the load LP's optimal dual puts on the devices'
    loads (the ascent's best point above :data:`LP_COLUMNS` columns; equal weights where the LP
    fails): ``C >= sum_u lam[u] load[u]`` for every schedule, and with these weights the least
    right-hand side over the tasks' cheapest jobs is the load bound. Same cost as :func:`load_bound`.

    >>> from mapsched import instances
    >>> round(float(device_prices(instances.load("topcuoglu2002")).sum()), 9)
    1.0
    """
    _, lam = _load_lp(problem, None)
    return lam


def _load_lp(problem: Problem, time_limit: float | None) -> tuple[float, np.ndarray]:
    """The load LP's optimum (or the ascent's bound) and its device weights; ``(0, equal
    weights)`` where HiGHS proves nothing."""
    began = time.perf_counter()
    p = problem
    equal = np.full(p.m, 1.0 / p.m)
    sizes = p.batch_sizes.astype(float)
    fits = np.isfinite(p.lat) & (sizes[None, None, :] <= p.L) & (
        p.weight[:, None, None] + p.act[:, None, None] * sizes[None, None, :] <= p.room[None, :, None])
    if not fits.any():  # nothing can run: the problem was rejected when built; keep the function total
        return 0.0, equal
    kinds, count = np.unique(np.where(fits, p.lat, np.inf).reshape(p.n, -1), axis=0, return_counts=True)
    lat = kinds.reshape(len(kinds), p.m, len(sizes))
    fits = np.isfinite(lat)
    if fits.sum() > LP_COLUMNS:
        per_input = np.where(fits, lat / sizes[None, None, :], np.inf).min(axis=2)
        value, lam = _dual_ascent(per_input, count, math.inf if time_limit is None else began + time_limit)
        return p.L * value, lam
    i, u, k = np.nonzero(fits)
    cols = len(i)
    rows = np.concatenate([i, len(kinds) + u, len(kinds) + np.arange(p.m)])
    colidx = np.concatenate([np.arange(cols), np.arange(cols), np.full(p.m, cols)])
    vals = np.concatenate([sizes[k], lat[i, u, k], -np.ones(p.m)])
    a = coo_matrix((vals, (rows, colidx)), shape=(len(kinds) + p.m, cols + 1)).tocsr()
    c = np.zeros(cols + 1)
    c[-1] = 1.0
    res = linprog(c, A_ub=a[len(kinds):], b_ub=np.zeros(p.m), A_eq=a[:len(kinds)], b_eq=p.L * count.astype(float),
                  bounds=(0, None), method="highs", options={} if time_limit is None else {"time_limit": time_limit})
    if res.status != 0:  # always feasible and bounded: a solver failure or the time limit proves nothing
        return 0.0, equal
    lam = np.maximum(-np.asarray(res.ineqlin.marginals, dtype=float), 0.0)
    return float(res.fun), (lam / lam.sum() if lam.sum() > 0 else equal)


def _dual_ascent(r: np.ndarray, weight: np.ndarray, deadline: float = math.inf) -> tuple[float, np.ndarray]:
    """A lower bound on the load LP per input, from its dual, and the device weights of its
    best point.

    ``r[g, u]`` is the least time per input of a task of kind g on device u (``inf`` where
    it cannot run), ``weight[g]`` the number of such tasks. For any device weights
    ``lam >= 0`` summing to 1, every schedule has ``C >= sum_u lam_u load_u >=
    sum_g weight_g min_u lam_u r[g, u]``: each task's work, wherever it runs, costs at least
    its cheapest weighted time. The LP's optimum is the largest such value (LP duality).
    Devices alike for every kind share one weight (an optimum has them equal, and ties
    among them would make the steps swing): a class of c devices has weight ``c mu``.
    Multiplicative steps move weight towards the classes that the current weights load
    most per device (a supergradient); the best value seen is returned, so stopping early
    stays sound: past ``deadline`` (a ``time.perf_counter()`` time) no step is taken after
    the first (a step is one pass over the task classes, short beside any limit).
    """
    r, of, count = np.unique(r.T, axis=0, return_inverse=True, return_counts=True)
    r = r.T / count  # per device of a class, at the class's weight lam = c mu
    lam = count / count.sum()
    rows = np.arange(len(r))
    best, at = 0.0, lam
    for step in range(ASCENT_STEPS):
        v = r * lam
        a = v.argmin(axis=1)
        value = float(weight @ v[rows, a])
        if value > best:
            best, at = value, lam
        if time.perf_counter() > deadline:
            break
        # Per device of each class, against the mean over all devices (bounded, unlike
        # against the value, which tiny weights make tiny).
        load = np.bincount(a, weights=weight * r[rows, a], minlength=len(lam))
        share = load * count.sum() / max(float(count @ load), 1e-300)
        lam = lam * np.exp(2.0 / np.sqrt(step + 1) * (share - 1))
        lam = np.maximum(lam / lam.sum(), 1e-300)  # never 0: 0 times an unrunnable inf is nan
    return best, (at / count)[of.ravel()]
