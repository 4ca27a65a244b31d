"""The copy-load bound: where copies take turns on a device, they count in its load.

Where a problem declares contention (:mod:`mapsched.scheduling.contention`), a device
without copy engines runs its jobs and every copy into or out of it one at a time, and a
device with k copy engines runs at most k copies at once. A linear programme over
``x[i, u]``, the share of task i on device u:

* each task runs somewhere, ``sum_u x[i, u] = 1``, on a device that can run it and hold it;
* each device's memory holds its share, ``sum_i (weight + act)[i] x[i, u] <= memory[u]``;
* each device is busy at most C with its jobs, ``sum_i t[i, u] x[i, u] <= C``;
* for each device w whose copies take turns, ``out[e, w] >= x[src, w] - x[dst, w]`` and
  ``in[e, w] >= x[dst, w] - x[src, w]``: edge e leaves w (enters w) when its source is on w
  and its destination is not (and the other way), and then its copy takes at least
  ``cout[e, w]``, the shortest time from w to a device that can run the destination
  (``cin[e, w]``: from a device that can run the source);
* with no copy engines on w: ``sum_i t[i, w] x[i, w] + sum_e cout[e, w] out[e, w] + cin[e, w]
  in[e, w] <= C``; with k: the copies alone at most ``k C``.

Minimise C. Every schedule gives a feasible point (its devices as x, out and in as the
copies it makes), so the optimum bounds the makespan from below. It weighs what the load
bound with memory rows does, and where memory pushes part of the graph off a device
without copy engines, the copies that this forces onto it.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linprog
from scipy.sparse import coo_matrix

from mapsched import checks
from mapsched.model import arguments
from mapsched.model.problem import Problem
from mapsched.model.validate import floating_bound

__all__ = ["COPY_COLUMNS", "copy_load_bound"]

COPY_COLUMNS = 200_000
"""Largest LP (columns: tasks times devices plus two per edge and device whose copies take
turns) that :func:`copy_load_bound` builds; past it the bound is 0."""


def copy_load_bound(problem: Problem, time_limit: float | None = None) -> float:
    """The optimum of the copy-load LP (module docstring), slightly rounded down; 0 for a
    problem without contention or of throughput, past :data:`COPY_COLUMNS` columns, or if
    HiGHS does not prove it within ``time_limit`` seconds.

    Notes
    -----
    An LP with ``n m + 2 E w`` columns and ``n + 2 m + 2 E w`` rows for w devices whose
    copies take turns, built in O(n m + E m w).

    Examples
    --------
    ``a`` holds only one of two tasks, so y runs on ``b`` and x's 4 ms copy to it occupies
    ``a``, which has no copy engines: ``a`` is busy 1 + 4 ms (the optimum is 6, y's 1 ms after
    the copy):

    >>> from mapsched import Device, Edge, Link, Problem, System, Task
    >>> p = Problem([Task("x", {"a": 1}, 0, 0, 1), Task("y", {"a": 1, "b": 1}, 0, 0, 1)], [Edge("x", "y", 4000)],
    ...             System((Device("a", memory=1, copy_engines=0), Device("b")), (Link("a", "b", 1e6),)))
    >>> round(copy_load_bound(p), 3)
    5.0
    """
    p = arguments.problem(problem)
    time_limit = checks.seconds(time_limit, "time_limit")
    if not p.contended or p.L != 1:
        return 0.0
    turns = [w for w in range(p.m) if p.copy_engines[w] is not None]
    if not turns:
        return 0.0
    ok = p.can_run & ((p.weight + p.act)[:, None] <= p.room[None, :])
    i_of, u_of = np.nonzero(ok)
    nx = len(i_of)
    col = np.full((p.n, p.m), -1, dtype=np.int64)
    col[i_of, u_of] = np.arange(nx)
    off = ~np.eye(p.m, dtype=bool)
    comm = np.where(off[None] & np.isfinite(p.comm), p.comm, np.inf)  # (E, m, m)
    if nx + 2 * p.E * len(turns) + 1 > COPY_COLUMNS:
        return 0.0
    rows, cols, vals = [], [], []
    b_ub: list[float] = []
    r = 0

    def row(entries: list[tuple[int, float]], rhs: float) -> None:
        nonlocal r
        for c, v in entries:
            rows.append(r)
            cols.append(c)
            vals.append(v)
        b_ub.append(rhs)
        r += 1

    C = nx  # the makespan's column; the copies' columns follow
    nxt = nx + 1
    copies: dict[int, list[tuple[int, float]]] = {w: [] for w in turns}
    src, dst = p.src.tolist(), p.dst.tolist()
    for w in turns:
        for e in range(p.E):
            a, b = src[e], dst[e]
            xa, xb = int(col[a, w]), int(col[b, w])
            if xa < 0 and xb < 0:
                continue  # neither end can be on w
            cout = comm[e, w][ok[b]].min(initial=np.inf)  # w to a device that can run the destination
            cin = comm[e, :, w][ok[a]].min(initial=np.inf)
            for leaves, enters, t in ((xa, xb, cout), (xb, xa, cin)):
                if leaves < 0 or not np.isfinite(t) or t <= 0:
                    continue
                # leaves - enters - y <= 0
                row([(leaves, 1.0), *([(enters, -1.0)] if enters >= 0 else []), (nxt, -1.0)], 0.0)
                copies[w].append((nxt, float(t)))
                nxt += 1
    for u in range(p.m):
        on = np.flatnonzero(col[:, u] >= 0)
        jobs = [(int(col[i, u]), float(p.dur[i, u])) for i in on]
        engines = p.copy_engines[u]
        if engines == 0:
            row([*jobs, *copies[u], (C, -1.0)], 0.0)
        else:
            row([*jobs, (C, -1.0)], 0.0)
            if engines is not None and copies[u]:
                row([*copies[u], (C, -float(engines))], 0.0)
        if np.isfinite(p.mem[u]) and len(on):
            row([(int(col[i, u]), float(p.weight[i] + p.act[i])) for i in on], float(p.room[u]))
    a_ub = coo_matrix((vals, (rows, cols)), shape=(r, nxt)).tocsr()
    a_eq = coo_matrix((np.ones(nx), (i_of, np.arange(nx))), shape=(p.n, nxt)).tocsr()
    c = np.zeros(nxt)
    c[C] = 1.0
    res = linprog(c, A_ub=a_ub, b_ub=np.array(b_ub), A_eq=a_eq, b_eq=np.ones(p.n), bounds=(0, None),
                  method="highs", options={} if time_limit is None else {"time_limit": time_limit})
    if res.status != 0:  # always feasible and bounded: a solver failure or the time limit proves nothing
        return 0.0
    return max(0.0, floating_bound(float(res.fun)))
