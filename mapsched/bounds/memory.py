"""Bounds that see memory and transfers (issue #68): the load LP with the devices' memory,
and the longest path with the transfers that the devices and their memory force.

On memory-tight systems (a few accelerators of little memory beside CPU cores that hold
everything, transfers through host memory slower than the kernels) the quick bounds of
:mod:`mapsched.bounds.simple` and :mod:`mapsched.bounds.load` let every task run on the
fastest device with no transfer, and fall far below the optimum. The rules here keep
what every schedule must do:

* :func:`memory_load_bound`: the work that the fast devices cannot hold runs elsewhere;
* :func:`transfer_path_bound`: along a path, two consecutive tasks that share no device
  (no device runs both, or none holds both) pay a transfer between them, and every task
  runs only where it fits;
* :func:`memory_chain_bound`: a path whose tasks a fast device cannot hold all together
  runs partly on slower ones, with the transfers in and out.
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

__all__ = ["BLOCK_TERMS", "CHAIN_DUAL_STEPS", "LEAST_LEVEL", "MEMORY_COLUMNS", "device_times", "memory_binds",
           "memory_chain_bound", "memory_load_bound", "path_windows", "transfer_path_bound"]

BLOCK_TERMS = 1 << 20
"""Most edge-device-device terms :func:`path_windows` holds at once (8 MB of transfer times),
so that graphs of tens of thousands of edges on tens of devices stay within memory."""

MEMORY_COLUMNS = 40_000
"""Most LP columns (kinds of task times devices times batch sizes) that
:func:`memory_load_bound` solves; above it the rule proves nothing (0): HiGHS's time grows
faster than the columns, and every solve runs this LP, so a graph whose tasks all differ
(a random DAG of thousands of tasks) is left to the path rules and the load LP's ascent."""


def _fits(p: Problem) -> np.ndarray:
    """``fits[i, u, k]``: device u can run a job of task i at batch size ``batch_sizes[k]``
    (no larger than L) that its memory holds alone."""
    sizes = p.batch_sizes.astype(float)
    return np.isfinite(p.lat) & (sizes[None, None, :] <= p.L) & (
        p.weight[:, None, None] + p.act[:, None, None] * sizes[None, None, :] <= p.room[None, :, None])


CHAIN_DUAL_STEPS = 100
"""Most subgradient steps of :func:`memory_chain_bound` on the prices of the devices' memory
(a path): on the real models' layer graphs the bound stops rising within 30-100 steps."""

LEAST_LEVEL = 1e-4
"""The subgradient steps of :func:`memory_chain_bound` stop when a step's target above the
best bound so far has shrunk below this share of it: ten failed steps in a row."""


def device_times(problem: Problem) -> np.ndarray:
    """``t[i, u]``: the shortest job of task i that device u can run and hold (any batch size
    up to L), shape (n, m); ``inf`` where there is none. For latency, ``dur`` where
    ``can_run``. Every job of i on u in a valid schedule lasts at least this. O(n m nb)."""
    p = arguments.problem(problem)
    return np.where(_fits(p), p.lat, np.inf).min(axis=2)


def memory_binds(problem: Problem) -> bool:
    """Whether some device's memory could not hold every task it can run at once, with all L
    inputs: only then can :func:`memory_load_bound` exceed the load LP. O(n m nb)."""
    p = problem
    runs = _fits(p).any(axis=2)
    want = (runs * (p.weight + p.act * p.L)[:, None]).sum(axis=0)
    return bool((want > p.room).any())


def memory_load_bound(problem: Problem, time_limit: float | None = None) -> float:
    """The load LP of :func:`~mapsched.bounds.load.load_bound` with a memory row per device:
    the least makespan at which the devices can share out the work when no device holds
    more than its memory. 0 if HiGHS does not prove the optimum within ``time_limit``
    seconds, or the LP is over :data:`MEMORY_COLUMNS` columns.

    Variables ``z[i, u, k] >= 0``, the number of jobs of task i on device u at batch size
    ``b_k`` (only where u runs that size and holds one such job), and C. Rows:
    ``sum_{u,k} b_k z[i, u, k] = L``; ``sum_{i,k} t[i, u, k] z[i, u, k] <= C``; and
    ``sum_{i,k} (act[i] + weight[i] / L) b_k z[i, u, k] <= room[u]``. Minimise C.

    Soundness: a valid schedule's job counts are a feasible point. Let
    ``c[i, u] = sum_k b_k z[i, u, k]`` be the inputs of i on u (at most L, FORMAT.md rule 3).
    Rule 6 holds u's memory at ``act @ c + weight @ (c > 0)`` within ``room[u]``, and
    ``(c > 0) >= c / L``, so the memory row holds; the others are the load LP's. Tasks with
    equal times, weight and activations enter once with their number as weight (summing
    their rows: a relaxation of the LP, with the same optimum).

    Notes
    -----
    O(n m nb log n) to group the tasks, then one LP of ``g m nb + 1`` columns and
    ``g + 2 m`` rows for g kinds of task.

    Examples
    --------
    >>> from mapsched import instances
    >>> from mapsched.bounds import load_bound
    >>> p = instances.load("topcuoglu2002")
    >>> memory_load_bound(p) == load_bound(p)  # no memory limit: the load LP
    True
    """
    p = arguments.problem(problem)
    time_limit = checks.seconds(time_limit, "time_limit")
    sizes = p.batch_sizes.astype(float)
    fits = _fits(p)
    if not fits.any():
        return 0.0
    key = np.concatenate([np.where(fits, p.lat, np.inf).reshape(p.n, -1), p.weight[:, None], p.act[:, None]], axis=1)
    kinds, count = np.unique(key, axis=0, return_counts=True)
    g = len(kinds)
    lat = kinds[:, :-2].reshape(g, p.m, len(sizes))
    weight, act = kinds[:, -2], kinds[:, -1]
    gi, u, k = np.nonzero(np.isfinite(lat))
    cols = len(gi)
    if cols > MEMORY_COLUMNS:
        return 0.0
    limited = np.flatnonzero(np.isfinite(p.room))
    row_of = np.full(p.m, -1)
    row_of[limited] = np.arange(len(limited))
    mem = row_of[u] >= 0
    # eq rows 0..g-1; load rows g..g+m-1; memory rows (in shares of the room) after them
    rows = np.concatenate([gi, g + u, g + p.m + row_of[u[mem]], g + np.arange(p.m)])
    colidx = np.concatenate([np.arange(cols), np.arange(cols), np.flatnonzero(mem), np.full(p.m, cols)])
    share = (act[gi] + weight[gi] / p.L) * sizes[k]
    vals = np.concatenate([sizes[k], lat[gi, u, k], share[mem] / p.room[u[mem]], -np.ones(p.m)])
    a = coo_matrix((vals, (rows, colidx)), shape=(g + p.m + len(limited), cols + 1)).tocsr()
    c = np.zeros(cols + 1)
    c[-1] = 1.0
    b_ub = np.concatenate([np.zeros(p.m), np.ones(len(limited))])
    res = linprog(c, A_ub=a[g:], b_ub=b_ub, A_eq=a[:g], b_eq=p.L * count.astype(float), bounds=(0, None),
                  method="highs", options={} if time_limit is None else {"time_limit": time_limit})
    if res.status != 0:  # infeasible only for a problem no schedule meets; a failure or the limit proves nothing
        return 0.0
    return max(0.0, floating_bound(float(res.fun)))


def _together(p: Problem) -> np.ndarray:
    """``[e, u]``: device u can hold both ends of edge e at once (one input each)."""
    need = p.weight + p.act
    return (need[p.src][:, None] + need[p.dst][:, None]) <= p.room[None, :]


def path_windows(problem: Problem) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(head, t, tail)``, each of shape (n, m): ``t`` of :func:`device_times`; ``head[i, u]``
    the earliest an input's job of task i can start on device u, and ``tail[i, u]`` the
    least time the rest of the graph needs after it ends there, counting the transfers
    that a change of device costs; ``inf`` where no schedule can put i on u.

    Like :func:`~mapsched.bounds.cuts.device_windows`, with two more things every schedule
    obeys: a job lasts at least ``t`` (the shortest that fits, at any batch size), and a
    parent and child run on one device without a transfer only where its memory holds both.
    O(n m nb + E m^2), vectorised over the edges into (out of) the tasks at one depth (height).
    """
    p = arguments.problem(problem)
    t = device_times(p)
    same = np.eye(p.m, dtype=bool)
    together = _together(p)
    head = np.zeros((p.n, p.m))
    tail = np.zeros((p.n, p.m))

    def hops(e: np.ndarray) -> np.ndarray:
        """[edge, from device, to device]: a transfer; on one device none where it holds both ends."""
        comm = p.link_latency + p.nbytes[e][:, None, None] * p.link_ms_per_byte
        return np.where(same[None], np.where(together[e], 0.0, np.inf)[:, None, :], comm)

    # Level by level (the longest path of edges before a task, or after it), edges in blocks of
    # BLOCK_TERMS task-device-device terms: a Python step per level and block, not per task.
    order = p.topo.tolist()
    depth, height = [0] * p.n, [0] * p.n
    for i in order:
        depth[i] = max((depth[q] + 1 for q in p.pred[i]), default=0)
    for i in reversed(order):
        height[i] = max((height[j] + 1 for j in p.succ[i]), default=0)
    block = max(1, BLOCK_TERMS // (p.m * p.m))
    for level, ends, into in ((np.asarray(depth)[p.dst], p.dst, True), (np.asarray(height)[p.src], p.src, False)):
        by = np.argsort(level, kind="stable")
        cut = np.flatnonzero(np.diff(level[by])) + 1
        for edges in np.split(by, cut):
            for lo in range(0, len(edges), block):
                e = edges[lo:lo + block]
                if into:  # head of the child on u: the parent on v ends, its data hop from v to u
                    ready = (head + t)[p.src[e]]
                    np.maximum.at(head, ends[e], (ready[:, :, None] + hops(e)).min(axis=1))
                else:  # tail of the parent on u: a hop from u to the child on v, which runs on
                    after = (t + tail)[p.dst[e]]
                    np.maximum.at(tail, ends[e], (hops(e) + after[:, None, :]).min(axis=2))
    bad = ~np.isfinite(t) | ~np.isfinite(head) | ~np.isfinite(tail)
    return np.where(bad, np.inf, head), t, np.where(bad, np.inf, tail)


def transfer_path_bound(problem: Problem) -> float:
    """The longest path with devices, memory and transfers:
    ``max_i min_u (head[i, u] + t[i, u] + tail[i, u])`` over :func:`path_windows`.

    Soundness: follow one input through a valid schedule; its job of task i runs on some
    device ``u_i`` and lasts at least ``t[i, u_i]`` (a job that fits, FORMAT.md rules 1, 2
    and 6). Along an edge e from q to i its data leave q's job and reach i's no sooner
    than ``comm(e, u_q, u_i)`` later (rule 4; nothing on one device). On one device both
    jobs count in its memory (rule 6), with at least ``weight + act`` each, so ``u_q ==
    u_i`` only where the device holds both. By induction along the topological order the
    job of i starts at ``head[i, u_i]`` or later, and the schedule runs ``tail[i, u_i]``
    or more after it ends, so the makespan is at least ``head + t + tail`` at ``u_i``, and
    so at least its least value over the devices. Without transfers or memory it is the
    critical path of :func:`~mapsched.bounds.simple.critical_path_bound` on the devices
    that hold each task. O(n m nb + E m^2).

    Examples
    --------
    >>> from mapsched import instances
    >>> from mapsched.bounds import critical_path_bound
    >>> p = instances.load("topcuoglu2002")
    >>> transfer_path_bound(p) >= critical_path_bound(p)
    True
    """
    head, t, tail = path_windows(problem)
    total = (head + t + tail).min(axis=1)
    total = total[np.isfinite(total)]  # a task with no placement at all: no schedule exists, any bound holds
    return float(total.max()) if len(total) else 0.0


def _chain_edges(p: Problem, chain: list[int]) -> list[int]:
    """The edge from each task of a path to the next."""
    out = []
    for a, b in zip(chain, chain[1:]):
        out.append(next(e for e in p.out_edges[a] if int(p.dst[e]) == b))
    return out


def memory_chain_bound(problem: Problem, chains: list[list[int]] | None = None,
                       dual_steps: int = CHAIN_DUAL_STEPS, time_limit: float | None = None) -> float:
    """The longest of some paths (default: a longest path under the tasks' shortest times, and
    one under their memory) when a device can hold only so much of a path: each path is cut
    into runs of consecutive tasks on one device, each run within that device's memory, and
    all the runs on one device within it together, with a transfer between runs. A dynamic
    programme over the path finds the least such time with runs that fit, from the first
    task's earliest start on its device to the last task's least tail there
    (:func:`path_windows`); the runs' memory together is priced into it (a Lagrangian
    relaxation): each task's time on device u counts ``lam[u]`` ms per byte it needs there,
    less ``lam[u]`` times u's memory, and ``dual_steps`` subgradient steps raise the prices
    of the devices whose memory the cheapest cut overfills, until ``time_limit`` seconds (the
    first programme of each path runs whatever the limit).

    Soundness: follow one input through a valid schedule along the path ``c_0, ..., c_K``.
    Its jobs' devices cut the path into maximal runs on one device; all of a run's tasks run
    (at least that input) on that device, so its memory holds at least their ``weight + act``
    together (FORMAT.md rule 6): each run fits, and so do all the runs on one device. Within
    a run a task starts after the one before it ends, between runs after it ends and its
    data cross (rule 4), each job lasts at least ``t`` (:func:`device_times`), the first
    starts at ``head`` or later and the schedule runs ``tail`` or more after the last. So
    the makespan is at least the path's time for the schedule's own runs; with prices
    ``lam >= 0`` that time is at least the priced one, whose added terms ``lam[u] (held[u] -
    memory[u])`` are none positive where every device holds its runs (weak duality), and the
    programme minimises the priced time over all runs that fit. Without memory limits it is
    at most :func:`transfer_path_bound`; where a path's tasks cannot all stay on the fast
    devices it adds the transfers or the slow devices they force.

    Notes
    -----
    O(S K m^2) for a path of K tasks on m devices and S = ``dual_steps`` (a sliding-window
    minimum per device), plus :func:`path_windows`. The steps stop where the cheapest cut
    fits every device's memory: no price can then prove more.

    Examples
    --------
    A chain of four 1 ms tasks on a GPU that holds two of them (10 ms each on a CPU, 5 ms a
    transfer): runs of two fit one at a time, but not both on the GPU. The optimum is 27 (two
    on the GPU, two on the CPU); the prices' best is 25, and the steps come close to it.

    >>> from mapsched import Device, Edge, Link, Problem, System, Task
    >>> tasks = [Task(x, {"gpu": 1.0, "cpu": 10.0}, 20.0, 10.0, 10.0) for x in "abcd"]
    >>> p = Problem(tasks, [Edge(a, b, 500.0) for a, b in ("ab", "bc", "cd")],
    ...             System((Device("gpu", 100.0), Device("cpu")), (Link("gpu", "cpu", 1e5),)))
    >>> memory_chain_bound(p, dual_steps=0), round(memory_chain_bound(p), 2)
    (23.0, 24.76)
    """
    began = time.perf_counter()
    p = arguments.problem(problem)
    checks.count(dual_steps, "dual_steps", least=0)
    until = began + (math.inf if (time_limit := checks.seconds(time_limit, "time_limit")) is None else time_limit)
    head, t, tail = path_windows(p)
    need = p.weight + p.act
    if chains is None:
        from mapsched.bounds.interval import _critical_chain

        shortest = np.where(np.isfinite(t), t, np.inf).min(axis=1)
        chains = [_critical_chain(p, shortest.tolist()), _critical_chain(p, need.tolist())]
    limited = np.isfinite(p.room)
    room = np.where(limited, p.room * (1 + 1e-9), 0.0)  # a hair more allowed: rounding only widens it
    best = 0.0
    for chain in chains:
        if not chain:
            continue
        cuts = _PathCuts(p, chain, head, t, tail, need)
        lam = np.zeros(p.m)
        found = -np.inf
        level = 0.1  # the target of each step: this much above the best priced time so far
        for _ in range(dual_steps + 1):
            value, held = cuts(lam)
            if not np.isfinite(value):
                break
            value -= float(lam @ room)
            if value > found:
                found = value
                level *= 1.5
            else:
                level /= 2
            over = np.where(limited & ((lam > 0) | (held > room)), held - room, 0.0)
            norm = float(over @ over)
            if norm == 0.0 or level < LEAST_LEVEL or time.perf_counter() > until:
                break  # the cheapest cut fits (no price proves more), no step helps, or the time is up
            lam = np.maximum(0.0, lam + level * max(abs(found), 1e-9) / norm * over)
        if np.isfinite(found):
            best = max(best, found)
    return best


class _PathCuts:
    """The cuts of one path into runs that each fit their device (see
    :func:`memory_chain_bound`): what does not depend on the prices is found once, and each
    call runs the dynamic programme at one set of prices. O(K m^2) to set up and per call."""

    def __init__(self, p: Problem, chain: list[int], head: np.ndarray, t: np.ndarray, tail: np.ndarray,
                 need: np.ndarray) -> None:
        c = np.asarray(chain)
        K = len(c)
        self.K, self.m = K, p.m
        self.head, self.tail = head[c[0]], tail[c[-1]]
        self.t, self.need = t[c], need[c]
        self.ok = np.isfinite(self.t)
        self.cum_need = np.concatenate([[0.0], np.cumsum(self.need)])
        # hop[j - 1][v, u]: the transfer into c_j on u from c_(j-1) on another device v
        e = np.asarray(_chain_edges(p, chain), dtype=np.int64)
        hop = p.link_latency[None] + p.nbytes[e][:, None, None] * p.link_ms_per_byte[None]
        self.hop = np.where(np.eye(p.m, dtype=bool)[None], np.inf, hop)
        # lo[j, u]: the first start of a run on u that ends at c_j, its memory within the room
        # (a hair more allowed: rounding only widens it) and after the last task u cannot run
        lo = np.searchsorted(self.cum_need, self.cum_need[1:, None] - p.room[None, :] * (1 + 1e-9), "left")
        blocked = np.maximum.accumulate(np.where(self.ok, 0, np.arange(1, K + 1)[:, None]), axis=0)
        self.lo = np.maximum(lo, blocked).tolist()

    def __call__(self, lam: np.ndarray) -> tuple[float, np.ndarray]:
        """The least priced time of the path, and the memory each device holds of it in such a
        cut (``inf`` and zeros where no cut exists)."""
        from collections import deque

        K, m, ok, lo = self.K, self.m, self.ok, self.lo
        tc = np.where(ok, self.t + lam[None, :] * self.need[:, None], 0.0)  # (K, m), priced
        cum_t = np.vstack([np.zeros(m), np.cumsum(tc, axis=0)])
        f = np.full((K, m), np.inf)
        g = np.full((K, m), np.inf)  # enter[k, u] - cum_t[k, u]: a run on u starting at c_k
        came = np.zeros((K, m), dtype=np.int64)  # the device a run starting at c_k comes from
        run = np.zeros((K, m), dtype=np.int64)  # where the run ending at c_j on u starts
        windows = [deque() for _ in range(m)]  # positions k, their g increasing
        for j in range(K):
            if j == 0:
                enter = self.head
            else:
                into = f[j - 1][:, None] + self.hop[j - 1]  # from another device
                came[j] = into.argmin(axis=0)
                enter = into.min(axis=0)
            g[j] = enter - cum_t[j]
            for u in range(m):
                w = windows[u]
                if not ok[j, u]:
                    w.clear()
                    continue
                while w and g[w[-1], u] >= g[j, u]:
                    w.pop()
                w.append(j)
                while w and w[0] < lo[j][u]:
                    w.popleft()
                if w:
                    f[j, u] = cum_t[j + 1, u] + g[w[0], u]
                    run[j, u] = w[0]
        last = f[K - 1] + self.tail
        held = np.zeros(m)
        u = int(last.argmin())
        value = float(last[u])
        if not np.isfinite(value):
            return np.inf, held
        j = K - 1
        while True:  # back along the cut, run by run
            k = int(run[j, u])
            held[u] += self.cum_need[j + 1] - self.cum_need[k]
            if k == 0:
                return value, held
            u, j = int(came[k, u]), k - 1
