"""The interval load bound: the load LP cut into the intervals between a critical path's tasks.

Take a critical path under each task's shortest time (the path of
:func:`~mapsched.bounds.simple.critical_path_bound`) and some of its tasks, the *cuts*
``c_0, ..., c_{J-1}`` in path order. In any schedule let ``c_j`` run from ``s_j`` to
``e_j``. The times ``0 <= s_0 <= e_0 <= s_1 <= ... <= e_{J-1} <= makespan`` cut the
schedule into 2J + 1 intervals, whose lengths sum to the makespan. A task whose latest
ancestor among the cuts is ``c_a`` and whose earliest descendant is ``c_b`` starts after
``e_a`` and ends before ``s_b``: it runs within a window of consecutive intervals. A linear
programme shares out every task's time over the intervals of its window and the devices
that can hold it:

* ``sum_{k, u} x[i, k, u] = 1`` for each task i, over the intervals k of its window;
* ``sum_i t[i, u] x[i, k, u] <= l_k`` for each interval k and device u;
* ``l_k >=`` the path's tasks in interval k, one after the other at their shortest times
  (a cut alone in its own interval; the path's other tasks in the gaps between cuts);

minimise ``sum_k l_k``. Any schedule gives a feasible point (each task's share of its
time in each interval, and the lengths of the intervals), so the optimum is a lower bound.
With every window in it, it holds the load LP (sum each device's rows over the intervals)
and the critical path (the lengths' lower limits sum to it), and it sees more than both
where a graph alternates sequential stretches with wide ones: on a traced GPT training
step on four GPUs the attention blocks must fill the GPUs between the path's tasks, which
neither the critical path nor the load LP sees.
Communication is ignored, as in the other quick bounds.

Where some device's memory cannot hold every task it can run, each device class also gets
a memory row: the tasks placed on it (``sum_k x[i, k, u]``, 1 for the device a task runs
on) hold their weights and activations within its memory (FORMAT.md rule 6), summed over
the class; tasks then group by that memory too.

Devices with equal times for every task enter as one class with its count (summing their
rows: a relaxation, exact for identical devices), and tasks alike in times and window as
one group with its count. The cuts are the path's tasks where the most windows begin or
end, at most :data:`INTERVAL_CUTS`. A group costs a column per interval of its window and
device class; past the column budget (:data:`INTERVAL_COLUMNS`) the groups with the
longest windows are shared over the whole schedule instead (one row per device class
against the makespan), or left out if even that does not fit: the optimum stays a bound,
only a weaker one.
"""

from __future__ import annotations

import time

import numpy as np
from scipy.optimize import linprog
from scipy.sparse import coo_matrix, vstack

from mapsched import checks
from mapsched.model import arguments
from mapsched.model.problem import Problem
from mapsched.model.validate import floating_bound

__all__ = ["COLUMNS_PER_TASK", "INTERVAL_COLUMNS", "INTERVAL_CUTS", "interval_load_bound"]

INTERVAL_COLUMNS = 80_000
"""The most LP columns (task groups times the intervals of their windows times device
classes; by default also at most :data:`COLUMNS_PER_TASK` a task, plus 2,000) before the
tasks with the longest windows are shared over the whole schedule instead, so that the LP
of a traced training step of tens of thousands of tasks (few task groups) stays a small part
of a solve's time. On a random DAG, where every task is a group of its own, the LP grows
harder per column, hence also the budget per task."""

COLUMNS_PER_TASK = 8
"""The default column budget per task (see :data:`INTERVAL_COLUMNS`)."""

INTERVAL_CUTS = 100
"""Path tasks that cut the intervals: on traced GPT training steps, 100 gave the best bound
of 30 to 1,000 (more intervals make longer windows, which
:data:`INTERVAL_COLUMNS` then leaves out)."""


def _critical_chain(problem: Problem, w: list[float]) -> list[int]:
    """A longest path under the task times ``w``, first task first. O(n + E)."""
    p = problem
    src = p.src.tolist()
    head, back = [0.0] * p.n, [-1] * p.n
    for i in p.topo.tolist():
        for e in p.in_edges[i]:
            q = src[e]
            if head[q] + w[q] > head[i]:
                head[i], back[i] = head[q] + w[q], q
    i = max(range(p.n), key=lambda k: head[k] + w[k])
    chain = []
    while i >= 0:
        chain.append(i)
        i = back[i]
    return chain[::-1]


def _windows(problem: Problem, chain: list[int], w: np.ndarray, cuts: int
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The intervals cut by at most ``cuts`` tasks of the path, and each task's first and
    last interval. With cut tasks ``c_0, ..., c_{J-1}`` starting at ``s_j`` and ending at
    ``e_j``, the intervals are ``[0, s_0)``, then for each j ``[s_j, e_j)`` and
    ``[e_j, s_{j+1})`` (the last to the makespan), numbered 0, 2j + 1 and 2j + 2; returns
    the least length of each (the path's tasks in it: they run one after the other there)
    and each task's first and last. The path tasks kept as cuts are those where the most
    windows begin or end. O(n log n + E)."""
    p = problem
    K = len(chain)
    on = dict(zip(chain, range(K)))
    src, dst = p.src.tolist(), p.dst.tolist()
    after = [-1] * p.n  # the latest path task among the task's ancestors (or itself)
    for i in p.topo.tolist():
        after[i] = on[i] if i in on else max((after[src[e]] for e in p.in_edges[i]), default=-1)
    before = [K] * p.n  # the earliest path task among its descendants (or itself)
    for i in reversed(p.topo.tolist()):
        before[i] = on[i] if i in on else min((before[dst[e]] for e in p.out_edges[i]), default=K)
    a, b = np.array(after), np.array(before)
    ends = np.bincount(a[a >= 0], minlength=K) + np.bincount(b[b < K], minlength=K)
    kept = np.sort(np.argsort(-ends, kind="stable")[:cuts])
    # Each task between the cuts at or before its latest path ancestor and at or after its
    # earliest path descendant (the cuts are ancestors and descendants of those).
    ca = np.searchsorted(kept, a, side="right") - 1
    cb = np.searchsorted(kept, b, side="left")
    lo, hi = np.where(ca >= 0, 2 * ca + 2, 0), 2 * cb
    cut = np.asarray(chain)[kept]
    lo[cut] = hi[cut] = 2 * np.arange(len(kept)) + 1  # a cut task runs in its own interval
    wc = w[chain]
    least = np.zeros(2 * len(kept) + 1)
    least[1::2] = wc[kept]
    total = np.concatenate([[0.0], np.cumsum(wc)])  # total[k]: the path's first k tasks
    least[0] = total[kept[0]]
    least[2::2] = total[np.append(kept[1:], K)] - total[kept + 1]
    return least, lo, hi


def interval_load_bound(problem: Problem, time_limit: float | None = None, columns: int | None = None,
                        cuts: int = INTERVAL_CUTS) -> float:
    """The optimum of the interval load LP (see the module docstring), slightly rounded
    down; 0 for a throughput problem, or if HiGHS does not prove it within ``time_limit``
    seconds (default: no limit).

    Parameters
    ----------
    problem : Problem
    time_limit : float, optional
        Seconds for HiGHS.
    columns : int, optional
        Most LP columns for the task groups (default: :data:`COLUMNS_PER_TASK` a task plus
        2,000, at most :data:`INTERVAL_COLUMNS`); the groups with the longest windows are
        shared over the whole schedule instead, or left out if that does not fit either.
    cuts : int
        Most path tasks cutting the schedule into intervals: those where the most windows
        begin or end.

    Notes
    -----
    O(n m log n + E) to find the path, the windows and the groups, then one LP of at most
    ``columns + 2 cuts + 1`` columns and ``(2 cuts + 2) m + g`` rows for m device classes
    and g groups.

    Examples
    --------
    Two fork-joins in series on two identical devices: a unit task, eight unit tasks
    after it, a unit task joining them, eight more, and a last one. The critical path is
    5 and the load 19 / 2 = 9.5, but each fan of eight must run between its fork and its
    join, four to a device: 1 + 4 + 1 + 4 + 1 = 11, the optimum.

    >>> from mapsched import Device, Edge, Problem, System, Task
    >>> names = ["a"] + [f"x{k}" for k in range(8)] + ["b"] + [f"y{k}" for k in range(8)] + ["c"]
    >>> tasks = [Task(n, {"d0": 1.0, "d1": 1.0}) for n in names]
    >>> edges = ([Edge("a", f"x{k}") for k in range(8)] + [Edge(f"x{k}", "b") for k in range(8)]
    ...          + [Edge("b", f"y{k}") for k in range(8)] + [Edge(f"y{k}", "c") for k in range(8)])
    >>> p = Problem(tasks, edges, System((Device("d0"), Device("d1")), ()))
    >>> round(interval_load_bound(p), 4)
    11.0
    """
    started = time.perf_counter()
    p = arguments.problem(problem)
    time_limit = checks.seconds(time_limit, "time_limit")
    columns = checks.count(columns, "columns", least=0, none=True)
    cuts = checks.count(cuts, "cuts")
    if p.L != 1:
        return 0.0
    if columns is None:
        columns = min(INTERVAL_COLUMNS, COLUMNS_PER_TASK * p.n + 2000)
    t = np.where(p.can_run, p.dur, np.inf)  # can_run holds memory: a task alone on the device
    w = t.min(axis=1)
    chain = _critical_chain(p, w.tolist())
    least, lo, hi = _windows(p, chain, w, cuts)
    need = p.weight + p.act  # what a task holds on its device (one input)
    # Device classes: equal times for every task, and equal memory.
    _, first, size = np.unique(np.column_stack([t.T, p.room]), axis=0, return_index=True, return_counts=True)
    size = size.astype(float)
    tc = t[:, first]  # (n, classes)
    C = len(size)
    room = p.room[first]
    limited = np.isfinite(room) & (np.where(np.isfinite(tc), need[:, None], 0.0).sum(axis=0) > room)
    groups, count = np.unique(np.column_stack([tc, lo, hi, need * limited.any()]), axis=0, return_counts=True)
    gt, glo, ghi = groups[:, :C], groups[:, C].astype(np.int64), groups[:, C + 1].astype(np.int64)
    gneed = groups[:, C + 2]
    span = ghi - glo + 1
    cost = span * np.isfinite(gt).sum(axis=1)  # a group's columns: its intervals times its classes
    by_span = np.argsort(span, kind="stable")
    windowed = np.zeros(len(groups), dtype=bool)
    windowed[by_span[np.cumsum(cost[by_span]) <= columns]] = True
    # The other tasks, merged by their times, are shared over the whole schedule, if that fits too.
    rest, merged = np.unique(np.column_stack([gt[~windowed], gneed[~windowed]]), axis=0, return_inverse=True)
    rest, rest_need = rest[:, :C], rest[:, C]
    rest_count = np.bincount(merged.ravel(), weights=count[~windowed], minlength=len(rest))
    if np.isfinite(rest).sum() + cost[windowed].sum() > columns:
        rest, rest_need, rest_count = rest[:0], rest_need[:0], rest_count[:0]  # left out: a weaker bound
    gt, glo, span, count, gneed = gt[windowed], glo[windowed], span[windowed], count[windowed], gneed[windowed]
    G, N = len(gt), len(least)

    # Columns: x of each windowed group, interval of its window and class; the N interval
    # lengths; y of each other kind of task and class.
    g = np.repeat(np.arange(G), span)
    k = glo[g] + np.arange(len(g)) - np.repeat(np.cumsum(span) - span, span)
    g, k, cx = np.repeat(g, C), np.repeat(k, C), np.tile(np.arange(C), len(g))
    keep = np.isfinite(gt[g, cx])
    gx, kx, cx = g[keep], k[keep], cx[keep]
    hy, cy = np.nonzero(np.isfinite(rest))
    nx, ny = len(gx), len(hy)
    x, ell, y = np.arange(nx), nx + np.arange(N), nx + N + np.arange(ny)
    cols = nx + N + ny
    a_eq = coo_matrix((np.ones(nx + ny), (np.concatenate([gx, G + hy]), np.concatenate([x, y]))),
                      shape=(G + len(rest), cols))
    # Each interval and class: the work in it at most the class's devices times its length.
    ell_rows = np.arange(N * C)
    blocks = [coo_matrix((np.concatenate([gt[gx, cx], -np.tile(size, N)]),
                          (np.concatenate([kx * C + cx, ell_rows]), np.concatenate([x, np.repeat(ell, C)]))),
                         shape=(N * C, cols))]
    if ny:  # each class: all its work at most its devices times the makespan
        blocks.append(coo_matrix((np.concatenate([gt[gx, cx], rest[hy, cy], -np.tile(size, N)]),
                                  (np.concatenate([cx, cy, ell_rows % C]), np.concatenate([x, y, np.repeat(ell, C)]))),
                                 shape=(C, cols)))
    if limited.any():  # each class whose memory cannot hold all it runs: the memory its tasks hold
        row_of = np.cumsum(limited) - 1
        mx, my = limited[cx], limited[cy]
        scale = size * np.where(limited, room, 1.0)  # in shares of the class's memory
        blocks.append(coo_matrix((np.concatenate([gneed[gx[mx]] / scale[cx[mx]], rest_need[hy[my]] / scale[cy[my]]]),
                                  (np.concatenate([row_of[cx[mx]], row_of[cy[my]]]), np.concatenate([x[mx], y[my]]))),
                                 shape=(int(limited.sum()), cols)))
    a_ub = vstack(blocks).tocsr()
    b_ub = np.concatenate([np.zeros(a_ub.shape[0] - int(limited.sum())), np.ones(int(limited.sum()))])
    c = np.zeros(cols)
    c[ell] = 1.0
    bounds = np.zeros((cols, 2))
    bounds[:, 1] = np.inf
    bounds[ell, 0] = least
    options = {}
    if time_limit is not None:  # HiGHS gets what the windows and the build left
        options["time_limit"] = time_limit - (time.perf_counter() - started)
        if options["time_limit"] <= 0:
            return 0.0
    res = linprog(c, A_ub=a_ub, b_ub=b_ub, A_eq=a_eq.tocsr(),
                  b_eq=np.concatenate([count, rest_count]).astype(float), bounds=bounds, method="highs",
                  options=options)
    if res.status != 0:  # always feasible and bounded: a solver failure or the time limit proves nothing
        return 0.0
    return max(0.0, floating_bound(float(res.fun)))
