"""Valid inequalities that every exact model and LP relaxation shares: time windows (the
earliest a task can start and the least time after it ends) and the load cuts between two
ordered tasks, with their transfer margins.

Each holds for every schedule, so the models (:mod:`mapsched.formulations`) add them as
redundant constraints and the relaxation bounds (:mod:`mapsched.bounds.relaxation`) as rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

import numpy as np

from mapsched.model.closure import Closure
from mapsched.model.problem import Problem
from mapsched.scheduling.ranks import optimistic_cost

__all__ = ["LOAD_CUT_TERMS", "LoadCut", "Margins", "device_load_cuts", "device_windows", "load_cuts", "time_windows"]


def time_windows(problem: Problem) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per task: its shortest job ``dmin``, ``head`` (the longest chain of shortest jobs
    before it) and ``tail`` (after it), with no communication. Every schedule starts
    task i at ``head[i]`` or later and runs ``tail[i]`` or more after it ends. O(n m + E).
    """
    p = problem
    dmin = np.where(np.isfinite(p.lat), p.lat, np.inf).min(axis=(1, 2))
    head, tail = np.zeros(p.n), np.zeros(p.n)
    for i in p.topo.tolist():
        for q in p.pred[i]:
            head[i] = max(head[i], head[q] + dmin[q])
    for i in reversed(p.topo.tolist()):
        for j in p.succ[i]:
            tail[i] = max(tail[i], tail[j] + dmin[j])
    return dmin, head, tail


def device_windows(problem: Problem) -> tuple[np.ndarray, np.ndarray]:
    """Per task and device, ``head[i, u]``: the earliest task i can start if it runs on u,
    and ``tail[i, u]``: the least time the rest of the graph needs after it ends there,
    counting transfers but no device contention. Shapes (n, m); both ``inf`` where no
    schedule puts i on u (u cannot run it, or its data cannot reach u or leave it).
    O(E m^2).

    A parent q of i ends at ``head[q, v] + t[q, v]`` at the earliest on whichever device v
    it takes, and its data then needs ``comm(e, v, u)`` to reach u (nothing if v == u);
    the least of these over v bounds i's start on u, and the largest over its parents
    holds. Every model states ``s[i] >= sum_u head[i, u] x[i, u]`` and
    ``C >= s[i] + sum_u (t[i, u] + tail[i, u]) x[i, u]``: exactly one ``x[i, u]`` is 1,
    so both are valid, and linear with no big-M.
    """
    p = problem
    dur = np.where(p.can_run, p.dur, np.inf)
    head = np.zeros((p.n, p.m))
    same = np.eye(p.m, dtype=bool)
    for i in p.topo.tolist():
        for e in p.in_edges[i]:
            q = int(p.src[e])
            # ready[v, u]: parent on v, task i on u
            ready = (head[q] + dur[q])[:, None] + np.where(same, 0.0, p.comm[e])
            head[i] = np.maximum(head[i], ready.min(axis=0))
    tail = optimistic_cost(p)  # the same recursion after each task, children first
    placeable = p.can_run & np.isfinite(head) & np.isfinite(tail)
    return np.where(placeable, head, np.inf), np.where(placeable, tail, np.inf)


LOAD_CUT_TERMS = 20_000
"""Default budget of :func:`load_cuts`, in task-device terms: room for all the sets of a
32-node module, the largest that ``exact`` proves within a minute, and not for a stack of
modules, whose search the cuts would slow."""


def load_cuts(problem: Problem, max_terms: int = LOAD_CUT_TERMS) -> list[tuple[int, int, np.ndarray]]:
    """Task sets that run between two tasks, for the redundant "load cuts" of the models.

    For tasks i and k with a path from i to k, every task of ``B = desc(i) & anc(k)``
    starts after i ends and ends before k starts, and those on one device v run one at a
    time, so for every device v::

        s[k] >= e[i] + sum_{j in B} t[j, v] x[j, v].

    With ``i = -1`` (the start of time, ``e = 0``) B is ``anc(k)``; with ``k = -1`` (the
    makespan C) it is ``desc(i)``. Both models can state these cuts (``exact`` has them
    do so, through :func:`device_load_cuts`): they are linear, need no big-M, and tie the
    schedule's shape to where the work goes, where device loads and time windows alone
    let the search spread a task's ancestors over the devices and still start it early.
    :func:`device_load_cuts` adds the transfers into and out of v where i or k runs
    elsewhere (:class:`Margins`). Flooring keeps the cuts valid in CP-SAT's
    ticks, since ``floor(a + b) >= floor(a) + floor(b)``.

    They speed up proofs on small graphs and slow down the search for schedules on large
    ones (built into every CP-SAT model, they made ``split``'s short rolling steps worse and
    left the window bound no higher), so a graph gets all of its cuts or none.

    Returns
    -------
    list of (i, k, B)
        Every set of two or more tasks, if their sizes times the number of devices sum to
        ``max_terms`` or less; otherwise none.

    Notes
    -----
    O(n^3 / w) bit operations on the shared transitive closure (w the word size), and
    less once the budget is spent. Graphs whose longest paths alone overrun the budget
    are answered in O(n + E), without the closure's n^2 bytes (100 MB at 10,000 tasks).

    Examples
    --------
    >>> from mapsched import instances
    >>> cuts = load_cuts(instances.load("topcuoglu2002"))
    >>> len(cuts), [(i, k, b.tolist()) for i, k, b in cuts[:1]]
    (15, [(-1, 6, [0, 2])])
    >>> load_cuts(instances.load("topcuoglu2002"), max_terms=10)
    []
    """
    p = problem
    if max_terms <= 0 or _least_terms(p) > max_terms:
        return []
    reach = Closure(p).matrix()  # reach[i, k]: a path leads from i to k
    out: list[tuple[int, int, np.ndarray]] = []
    terms = 0
    for i in range(-1, p.n):
        ks = np.flatnonzero(reach[i]) if i >= 0 else np.arange(p.n)
        # row r: desc(i) & anc(ks[r]), and last desc(i) itself (k = -1)
        inside = (reach[:, ks].T if i < 0 else reach[i][None, :] & reach[:, ks].T)
        rows = [(int(k), row) for k, row in zip(ks.tolist(), inside)] + ([(-1, reach[i])] if i >= 0 else [])
        for k, row in rows:
            b = np.flatnonzero(row)
            if len(b) < 2:
                continue
            terms += len(b) * p.m
            if terms > max_terms:
                return []
            out.append((i, k, b))
    return out


def _least_terms(p: Problem) -> int:
    """A lower bound on the terms of all of :func:`load_cuts`'s sets: a task has at least as
    many ancestors (descendants) as its longest path in (out) has edges, and the sets
    ``anc(k)`` and ``desc(i)`` of two or more tasks are among those counted."""
    order = p.topo.tolist()
    depth, height = [0] * p.n, [0] * p.n
    for i in order:
        depth[i] = max((depth[q] + 1 for q in p.pred[i]), default=0)
    for i in reversed(order):
        height[i] = max((height[j] + 1 for j in p.succ[i]), default=0)
    return p.m * sum(d for d in depth + height if d >= 2)


def device_load_cuts(problem: Problem, max_terms: int) -> Iterator[LoadCut]:
    """The cuts of :func:`load_cuts`, one per device v, where v can run two or more tasks
    of B (with one, the cut repeats a precedence), with the transfer margins of
    :class:`Margins`."""
    cuts = load_cuts(problem, max_terms)
    if not cuts:
        return
    margins = Margins(problem)
    for i, k, between in cuts:
        for v in range(problem.m):
            runs = [j for j in between.tolist() if problem.can_run[j, v]]
            if len(runs) >= 2:
                yield margins.cut(i, k, v, between, runs)


class LoadCut(NamedTuple):
    """``s[k] >= e[i] + sum_{j in runs} t[j, v] x[j, v] + first (1 - x[i, v]) + last (1 - x[k, v])``
    (``i = -1``: time 0, ``k = -1``: the makespan; a task that v cannot run has ``x = 0``)."""

    i: int
    k: int
    v: int
    runs: list[int]
    first: float
    last: float


class Margins:
    """The transfer margins of the load cuts, per task and device on first use (or all
    zero with ``zero``), and the :class:`LoadCut` of a task set with them.

    Of the tasks between i and k (the set B of :func:`load_cuts`) let f be the first to
    run on device v. If i runs elsewhere, every task on a path from i to f runs off v
    (one on v would come before f), so f starts at least ``into(i, v)[f]`` after i ends:
    the earliest start of f on v when i ends at time 0 off v and the descendants of i
    before f run off v, counting transfers but no contention. Likewise the last task l
    of B on v ends at least ``out_of(k, v)[l]`` before k starts when k runs off v. Both
    are ``inf`` where no such placement exists. The load cut then gains
    ``into (1 - x[i, v]) + out_of (1 - x[k, v])``: the device cannot work on B until
    i's data reach it, nor hand its last result to k for free.

    Notes
    -----
    One pass over the descendants (ancestors) of a task per device and direction,
    O(E m^3) each: O(n E m^3) for every task, as the exact models' cuts need.
    """

    def __init__(self, problem: Problem, zero: bool = False) -> None:
        p = self.problem = problem
        self.zero = zero
        self.dmin = time_windows(p)[0]
        self.reach = Closure(p).matrix()
        self.dur = np.where(p.can_run, p.dur, np.inf)
        self.hop = np.where(np.eye(p.m, dtype=bool)[None], 0.0, p.comm)  # [e, u, w]: transfer from u to w
        self.rows: dict[tuple[int, int, bool], np.ndarray] = {}

    def into(self, i: int, v: int) -> np.ndarray:
        """Per task f, the least time between i's end off v and f's start on v (ms)."""
        return self._row(i, v, True)

    def out_of(self, k: int, v: int) -> np.ndarray:
        """Per task l, the least time between l's end on v and k's start off v (ms)."""
        return self._row(k, v, False)

    def _row(self, i: int, v: int, forward: bool) -> np.ndarray:
        if (i, v, forward) not in self.rows:
            cone = self.reach[i] if forward else self.reach[:, i]
            self.rows[i, v, forward] = _off_device_heads(self.problem, i, v, cone, self.dur, self.hop, forward)
        return self.rows[i, v, forward]

    def cut(self, i: int, k: int, v: int, between: np.ndarray, runs: list[int]) -> LoadCut:
        """The cut of device v on the set ``between`` of tasks between i and k, of which v
        can run ``runs``."""
        if self.zero:
            return LoadCut(i, k, v, runs, 0.0, 0.0)
        # With no task of B on v the cut must still hold: then s[k] - e[i] spans a chain
        # through B, so the margins together stay within B's longest shortest job.
        cap = float(self.dmin[between].max())
        first = min(cap, float(self.into(i, v)[runs].min())) if i >= 0 else 0.0
        last = min(cap - first, float(self.out_of(k, v)[runs].min())) if k >= 0 else 0.0
        return LoadCut(i, k, v, runs, first, last)


def _off_device_heads(p: Problem, i: int, v: int, cone: np.ndarray, dur: np.ndarray, hop: np.ndarray,
                      forward: bool) -> np.ndarray:
    """Per task of ``cone`` (the descendants of i, or its ancestors if not ``forward``),
    the least time between i's end and its start on v (between its end on v and i's
    start), with i and the cone's tasks in between off v. Edges from outside the cone
    are left out, which only lowers the times."""
    inside = cone.copy()
    inside[i] = True
    off = np.arange(p.m) != v
    # reach_at[a, u]: least time between i and a's far side (its end if forward) with a on u
    reach_at = np.full((p.n, p.m), np.inf)
    reach_at[i, off] = 0.0
    out = np.full(p.n, np.inf)
    order = p.topo.tolist() if forward else p.topo.tolist()[::-1]
    for a in order:
        if not cone[a]:
            continue
        near = np.zeros(p.m)  # least time between i and a's near side, a on each device
        for e in (p.in_edges[a] if forward else p.out_edges[a]):
            q = int(p.src[e] if forward else p.dst[e])
            if inside[q]:
                hops = hop[e] if forward else hop[e].T  # [q's device, a's device]
                near = np.maximum(near, (reach_at[q][:, None] + hops).min(axis=0))
        out[a] = near[v] if p.can_run[a, v] else np.inf
        reach_at[a] = np.where(off, near + dur[a], np.inf)
    return out
