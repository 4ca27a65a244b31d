"""Task priorities shared by list schedulers, orderings and learned methods: mean costs over
the devices that can run a task, mean communication over the links, and the upward and
downward ranks built from them (Topcuoglu, Hariri and Wu, 2002), and PEFT's optimistic cost
table (Arabnejad and Barbosa, 2014)."""

from __future__ import annotations

import numpy as np

from mapsched.model.problem import Problem

__all__ = ["downward_rank", "mean_comm", "mean_cost", "optimistic_cost", "rank_order", "upward_rank"]

def mean_cost(problem: Problem) -> np.ndarray:
    """Mean job time of each task over the (device, batch) pairs that can run it, shape (n,)."""
    usable = problem.batch_sizes <= problem.L
    lat = np.where(np.isfinite(problem.lat[:, :, usable]), problem.lat[:, :, usable], np.nan)
    if problem.L == 1:
        lat = np.where(problem.can_run, problem.dur, np.nan)[:, :, None]
    return np.nanmean(lat.reshape(problem.n, -1), axis=1)

def mean_comm(problem: Problem) -> np.ndarray:
    """Mean communication time of each edge over the links (ordered pairs of distinct linked devices)."""
    p = problem
    linked = np.isfinite(p.link_latency) & ~np.eye(p.m, dtype=bool)
    if not linked.any():
        return np.zeros(p.E)
    return p.link_latency[linked].mean() + p.nbytes * p.link_ms_per_byte[linked].mean()

def upward_rank(problem: Problem) -> np.ndarray:
    """HEFT's rank_u: mean cost plus the longest mean path to an exit. O(n + E)."""
    p = problem
    w, c = mean_cost(p).tolist(), mean_comm(p).tolist()
    dst = p.dst.tolist()
    rank = [0.0] * p.n
    for i in reversed(p.topo.tolist()):
        rank[i] = w[i] + max((c[e] + rank[dst[e]] for e in p.out_edges[i]), default=0.0)
    return np.array(rank)

def downward_rank(problem: Problem) -> np.ndarray:
    """CPOP's rank_d: the longest mean path from an entry, excluding the task itself. O(n + E)."""
    p = problem
    w, c = mean_cost(p).tolist(), mean_comm(p).tolist()
    src = p.src.tolist()
    rank = [0.0] * p.n
    for i in p.topo.tolist():
        rank[i] = max((rank[src[e]] + w[src[e]] + c[e] for e in p.in_edges[i]), default=0.0)
    return np.array(rank)

def rank_order(problem: Problem, priority: np.ndarray) -> list[int]:
    """Tasks by decreasing priority, ties in topological order (so the order stays topological
    when ranks tie along zero-cost edges)."""
    pos = np.empty(problem.n, dtype=np.int64)
    pos[problem.topo] = np.arange(problem.n)
    return np.lexsort((pos, -priority)).tolist()


def optimistic_cost(problem: Problem) -> np.ndarray:
    """PEFT's optimistic cost table (Arabnejad and Barbosa 2014), shape (n, m): ``[i, u]`` is
    the longest path after task i ends on device u, each later task on its best device for
    that path and each transfer at its link's cost (none on the same device); ``inf`` where
    i's children cannot be reached from u at all. It is also the least time the rest of
    the graph needs after i ends on u (:func:`mapsched.bounds.cuts.device_windows`).

    Notes
    -----
    O(E m^2): each edge compares every pair of devices.

    Examples
    --------
    >>> import mapsched
    >>> from mapsched.scheduling.ranks import optimistic_cost
    >>> p = mapsched.instances.load("topcuoglu2002")
    >>> optimistic_cost(p)[p.task_index["t10"]].tolist()  # the exit: nothing after it
    [0.0, 0.0, 0.0]
    """
    p = problem
    t = np.where(p.can_run, p.dur, np.inf)
    table = np.zeros((p.n, p.m))
    dst = p.dst
    for i in reversed(p.topo.tolist()):
        out = p.out_edges[i]
        if out:
            e = np.asarray(out)
            after = table[dst[e]] + t[dst[e]]  # (children, v)
            # (children, u, v), built per task: Problem.comm's (E, m, m) array would hold 0.3 GB
            # at 40,000 edges and 30 devices.
            comm = p.link_latency + p.nbytes[e][:, None, None] * p.link_ms_per_byte
            table[i] = (after[:, None, :] + comm).min(axis=2).max(axis=0)
    return table
