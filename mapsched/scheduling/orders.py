"""Topological orders that keep a path's tasks together: Celeritas's depth-first DFS-TOPO
(section 4.2.2) and its critical-path-first CPD-TOPO, which operation fusion
(:func:`mapsched.scheduling.coarsen.fuse_intervals`) and Celeritas's placers cut into
intervals: an order that runs each source's descendants next cuts fewer edges.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from mapsched.model.problem import Problem
from mapsched.scheduling.ranks import downward_rank, upward_rank

__all__ = ["cpd_topo", "dfs_topo"]


def dfs_topo(problem: Problem) -> np.ndarray:
    """Celeritas's DFS-TOPO order: Kahn's algorithm that takes a ready successor next.

    Kahn's algorithm with a deque instead of m-TOPO's first-in first-out queue
    (Xu et al., section 4.2.2): the sources start in index order; the head is
    output and its out-edges deleted, and the successors that this makes ready
    are pushed to the head, the lowest index ending first. So a task's
    successors follow it as soon as they are ready, depth first, where the
    breadth-first :attr:`Problem.topo` takes every source before any successor
    and a device filled along it cuts the edges between them.

    Parameters
    ----------
    problem : Problem

    Returns
    -------
    order : ndarray of int, shape (n,)
        Task indices, every edge pointing forwards.

    Notes
    -----
    :func:`cpd_topo` is this procedure with critical-path priorities; here all
    priorities are equal, so ties (index order) decide. O(n + E log E): the
    successors are sorted once.

    Examples
    --------
    Two sources, each with a child: breadth-first takes both sources first,
    DFS-TOPO each source with its child.

    >>> from mapsched import Problem
    >>> p = Problem.from_arrays([[1]] * 4, [(0, 2), (1, 3)])
    >>> dfs_topo(p).tolist(), p.topo.tolist()
    ([0, 2, 1, 3], [0, 1, 2, 3])
    """
    return _head_first(problem, np.zeros(problem.n))


def cpd_topo(problem: Problem) -> np.ndarray:
    """Celeritas's CPD-TOPO order: a topological order that follows critical paths depth-first.

    Each task's critical-path length ``cpath = tlevel + blevel`` is the longest
    path through it, its own cost and communication included (CPOP's priority;
    on heterogeneous devices, mean cost over the devices that run the task and
    mean communication over the links, as in :func:`~mapsched.scheduling.ranks.upward_rank`).
    Kahn's algorithm then runs with a deque (:func:`dfs_topo`): the sources start
    in decreasing ``cpath``; when a task is output, its successors that become
    ready are pushed to the head in increasing ``cpath``, so the most critical
    one comes next. Ties go to the lower task index.

    Parameters
    ----------
    problem : Problem

    Returns
    -------
    order : ndarray of int, shape (n,)
        Task indices, every edge pointing forwards.

    Notes
    -----
    O(n + E log E): the ranks in O(n + E), the successors sorted once.

    Examples
    --------
    ``a`` feeds a light ``b`` and a heavy ``c``, both feed ``d``, and a light
    source ``e`` also feeds ``d``: the critical ``c`` goes right after ``a`` and
    ``e`` waits until ``d`` needs it (breadth-first would give a, e, b, c, d).

    >>> from mapsched import Problem
    >>> p = Problem.from_arrays([[1], [2], [4], [1], [1]], [(0, 1), (0, 2), (1, 3), (2, 3), (4, 3)])
    >>> cpd_topo(p).tolist()
    [0, 2, 1, 4, 3]
    """
    return _head_first(problem, upward_rank(problem) + downward_rank(problem))


def _head_first(p: Problem, priority: np.ndarray) -> np.ndarray:
    """Kahn's algorithm with a deque: sources by decreasing priority, and each output task's
    newly ready successors pushed to the head so that the highest priority comes next (ties:
    lower index first)."""
    # Successors of each task in increasing priority (ties: higher index first, so lower ends at the head).
    e = np.lexsort((-p.dst, priority[p.dst], p.src))
    kids = p.dst[e].tolist()
    first = np.concatenate(([0], np.cumsum(np.bincount(p.src, minlength=p.n)))).tolist()
    indeg = np.bincount(p.dst, minlength=p.n).tolist()
    sources = np.flatnonzero(np.bincount(p.dst, minlength=p.n) == 0)
    queue = deque(sources[np.lexsort((sources, -priority[sources]))].tolist())
    order = []
    while queue:
        v = queue.popleft()
        order.append(v)
        for c in kids[first[v]:first[v + 1]]:
            indeg[c] -= 1
            if indeg[c] == 0:
                queue.appendleft(c)
    return np.array(order, dtype=np.int64)


# ------------------------------------------------------------- interval fusion
