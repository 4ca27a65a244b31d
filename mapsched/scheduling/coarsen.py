"""Coarsening: solve a smaller problem whose tasks are groups of tasks, then expand its schedule.

A partition of the tasks is an integer array ``groups`` of length n: tasks with
equal values form one group. :func:`quotient` builds the coarse :class:`Problem`
whose tasks are the groups, any method solves it, and :func:`expand` runs every
task on its group's device and re-times the whole graph by insertion-based list
scheduling. Two partitions are built in:

- :func:`coplace`, Baechi's co-placement rule (Jeon et al. 2020): a task with a
  single consumer joins that consumer's group. Groups are in-trees: only branches
  that end in one consumer are serialised, so most parallelism survives.
- :func:`fuse_intervals` over :func:`~mapsched.scheduling.orders.cpd_topo`, Celeritas's optimal operation
  fusion (Xu et al., "Celeritas: Fast Optimizer for Large Dataflow Graphs",
  section 5.1.3): a topological order cut into intervals of at most ``R`` tasks
  and ``M`` bytes so that the cut edges weigh least. Intervals serialise parallel
  branches: good for memory-bound placements with costly transfers, poor for latency.
  :func:`~mapsched.scheduling.orders.dfs_topo`, Celeritas's plain depth-first order (section 4.2.2), or any
  other topological order can stand in for CPD-TOPO.

Both keep every group runnable: some device runs all its members and holds their
summed memory. Coarsening can still lose feasibility, since a group must sit on
one device: through a missing link (a group whose members needed two devices to
reach its neighbours) or memory that fits only when a group's members are spread.

Only the latency objective is handled (one input, one job per task): the partitions,
:func:`quotient` and :func:`expand` raise :class:`~mapsched.errors.OptionError` on a
throughput problem.

Examples
--------
>>> import mapsched
>>> from mapsched.scheduling.coarsen import coplace, expand, quotient
>>> p = mapsched.generators.random_dag(300, 3, seed=1)
>>> groups = coplace(p)
>>> q, group_of = quotient(p, groups)
>>> q.n < p.n
True
>>> coarse = mapsched.solve(q, "heft")
>>> s = expand(p, coarse, groups)
>>> mapsched.validate(p, s), s.makespan <= coarse.makespan
([], True)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import networkx as nx
import numpy as np

from mapsched import checks
from mapsched.errors import OptionError, shown
from mapsched.model.problem import Edge, Problem, Task
from mapsched.model.schedule import Schedule
from mapsched.scheduling.decoder import Decoder, checked_order, ready_order
from mapsched.scheduling.orders import cpd_topo
from mapsched.scheduling.ranks import mean_comm

__all__ = ["coplace", "expand", "fuse_intervals", "quotient"]

SLACK = 1e-9
"""Relative memory margin of a merged group: its summed bytes times ``1 + SLACK`` must fit
a device, so that rounding in a sum of many floats never makes the quotient's exact check
fail (sums of integer byte counts below 2**53 are exact anyway)."""


def _latency_only(problem: Problem, what: str) -> None:
    if problem.L != 1:
        raise OptionError(
            f"{what}: coarsening handles the latency objective only; this problem has a throughput "
            f"objective over {problem.L} inputs"
        )


def _need(problem: Problem) -> np.ndarray:
    """Bytes each task holds on its device under rule 6 with one input: weights plus activations."""
    return problem.weight + problem.act


def _labels(problem: Problem, groups: Sequence[int]) -> tuple[np.ndarray, int]:
    """Group index 0..k-1 of each task (group ids in increasing order), and k."""
    g = np.asarray(groups)
    if g.shape != (problem.n,) or g.dtype.kind not in "iu":
        raise OptionError(f"groups: expected {problem.n} integer group ids, one per task, got shape {g.shape}")
    ids, of = np.unique(g, return_inverse=True)
    return of.reshape(-1).astype(np.int64), len(ids)


def _names(k: int) -> list[str]:
    """Task names of a quotient with k groups: ``g0 .. g{k-1}``."""
    return [f"g{c}" for c in range(k)]


# ----------------------------------------------------------------- co-placement
def coplace(problem: Problem) -> np.ndarray:
    """Baechi's co-placement groups: a task with exactly one successor joins its successor's group.

    Tasks are visited in reverse topological order; a task with a single
    successor joins that successor's group when some device runs every member of
    the joined group and holds their summed memory (weights plus activations,
    times ``1 + SLACK``), and otherwise starts a group of its own. Without device
    restrictions or memory limits the groups are the in-trees of Baechi's
    ``CoplacementGrouper``, whatever the visiting order.

    Parameters
    ----------
    problem : Problem
        A latency problem.

    Returns
    -------
    groups : ndarray of int, shape (n,)
        The group of each task, named by its root: the member whose successors
        may lie outside the group (it has none, several, or was refused by its
        successor's group).

    Notes
    -----
    Why the quotient is acyclic: every member of a group except its root has
    exactly one successor, and that successor is in the same group, so from any
    member the chain of unique successors stays in the group and ends at the
    root, and edges leave a group only from its root. A cycle of groups
    ``G1 -> G2 -> ... -> G1`` would then lift to a closed walk of the original
    graph: enter each group at some member, follow its successor chain to the
    root, take the edge to the next group. So the only condition is the joining
    task's out-degree; the consumer's other predecessors need none (they may
    even reach the joining task, as ``p -> v -> c`` beside ``p -> c``: nothing
    leaves ``{v, c}`` except through ``c``). Merging by in-degree too (a task with
    one producer joining it) breaks this argument.

    O(n m + E).

    Examples
    --------
    A chain ``a -> b -> c`` with a side branch ``a -> d``: ``b`` joins ``c``, and
    ``a`` (two successors) and ``d`` (none) stay alone.

    >>> from mapsched import Problem
    >>> p = Problem.from_arrays([[1], [1], [1], [1]], [(0, 1), (1, 2), (0, 3)])
    >>> coplace(p).tolist()
    [0, 2, 2, 3]
    """
    p = problem
    _latency_only(p, "coplace")
    need = _need(p).tolist()
    mem = p.mem.tolist()
    able = [0] * p.n  # bit u set: device u runs the task alone
    for i, u in zip(*(a.tolist() for a in np.nonzero(p.can_run))):
        able[i] |= 1 << u
    group = list(range(p.n))
    # Per root: the devices that run every member, and the members' summed memory.
    gable, gneed = able[:], need[:]
    for v in reversed(p.topo.tolist()):
        if len(p.succ[v]) != 1:
            continue
        r = group[p.succ[v][0]]
        both, total = gable[r] & able[v], gneed[r] + need[v]
        if _fits(both, total, mem):
            group[v], gable[r], gneed[r] = r, both, total
    return np.array(group, dtype=np.int64)


def _fits(devices: int, total: float, mem: list[float]) -> bool:
    """Whether a device of the bit set holds ``total`` bytes, with the SLACK margin."""
    while devices:
        u = (devices & -devices).bit_length() - 1
        if total * (1.0 + SLACK) <= mem[u]:
            return True
        devices &= devices - 1
    return False


# ----------------------------------------------------------- DFS-TOPO, CPD-TOPO
def fuse_intervals(
    problem: Problem,
    order: Sequence[int] | None = None,
    *,
    R: int = 200,
    M: float | None = None,
    cost: Sequence[float] | None = None,
) -> np.ndarray:
    """Celeritas's optimal operation fusion: cut a topological order into intervals that cut least.

    An interval ``[i, j)`` of positions in ``order`` may become a group when it
    holds at most ``R`` tasks, its tasks' memory (weights plus activations)
    sums to at most ``M``, and some device runs all of them and holds that
    sum (times ``1 + SLACK``); a single task is always allowed. Among the
    partitions of ``order`` into such intervals, the one of least total cost of
    cut edges is returned, and of those the one with fewest intervals. This is
    the dynamic programme of eqs. 4-6 of the paper::

        S(0) = 0,   S(j) = min over allowed [i, j) of  S(i) + cost(i, j),

    where ``cost(i, j)`` sums the edges from ``[i, j)`` to positions ``>= j``,
    kept for all i of the window by eq. 5 as j grows: add the new task's
    out-edges, subtract its in-edges for the intervals that now contain both
    ends. Each cut edge is counted once, in its source's interval.

    Parameters
    ----------
    problem : Problem
        A latency problem.
    order : sequence of int, optional
        A topological order; by default :func:`~mapsched.scheduling.orders.cpd_topo`.
    R : int
        Most tasks per interval (the paper's 200).
    M : float, optional
        Most bytes per interval; by default a quarter of the largest finite device
        memory (the paper's ``0.25 *`` a GPU's memory), unlimited when no device
        has a limit. Together with ``R`` it sets the granularity: with neither,
        one interval would cut nothing.
    cost : sequence of float, optional
        Cost of cutting each edge; by default its mean communication time over
        the links (zero without links: then intervals are as long as allowed).

    Returns
    -------
    groups : ndarray of int, shape (n,)
        The interval of each task, numbered 0, 1, ... along ``order``.

    Notes
    -----
    Why the quotient is acyclic: an edge goes forwards in ``order``, so it stays
    inside an interval or goes from an interval to a later one; the interval
    numbers are then a topological order of the quotient, which has no cycle.
    This holds for any partition of a topological order into contiguous
    intervals, however they are chosen.

    O(n m log n) for the allowed starts (prefix sums of memory, the last position
    each device cannot run), then n steps of O(R) array work plus O(R) for each
    edge shorter than R: O((n + E) R) in n + E numpy calls. The window sums are
    exact for integer costs.

    Examples
    --------
    A chain of four tasks whose middle edge is cheap, cut into intervals of at
    most two:

    >>> from mapsched import Problem
    >>> p = Problem.from_arrays([[1]] * 4, [(0, 1), (1, 2), (2, 3)])
    >>> fuse_intervals(p, R=2, cost=[5, 1, 5]).tolist()
    [0, 0, 1, 1]
    """
    p = problem
    _latency_only(p, "fuse_intervals")
    if isinstance(R, bool) or not isinstance(R, (int, np.integer)) or R < 1:
        raise OptionError(f"R: expected a positive number of tasks, got {shown(R)}")
    R = min(int(R), p.n)  # no interval is longer than the graph; and numpy's ints are 64-bit
    order = cpd_topo(p) if order is None else np.asarray(checked_order(p, order), dtype=np.int64)
    if M is None:
        finite = p.mem[np.isfinite(p.mem)]
        M = 0.25 * float(finite.max()) if finite.size else np.inf
    elif not (checks.real(M) and M >= 0):
        raise OptionError(f"M: expected a non-negative number of bytes, got {shown(M)}")
    try:
        w = mean_comm(p) if cost is None else np.asarray(cost, dtype=float)
    except (TypeError, ValueError):
        w = np.full(0, np.nan)
    if w.shape != (p.E,) or not np.isfinite(w).all():
        raise OptionError(f"cost: expected {p.E} finite edge costs, got {shown(cost)}")

    n = p.n
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n)
    a, b = pos[p.src], pos[p.dst]
    out_w = np.bincount(a, weights=w, minlength=n).tolist()
    # In-edges of each position that an interval of at most R tasks can hold, as (source position, cost).
    near = np.flatnonzero(b - a < R)
    ins: list[list[tuple[int, float]]] = [[] for _ in range(n)]
    for s, d, c in zip(a[near].tolist(), b[near].tolist(), w[near].tolist()):
        ins[d].append((s, c))
    lo = _interval_starts(p, order, R, M).tolist()

    S = np.zeros(n + 1)  # least cut cost of positions [0, j)
    count = np.zeros(n + 1, dtype=np.int64)  # intervals of that partition
    back = np.zeros(n + 1, dtype=np.int64)  # where its last interval starts
    window = np.zeros(n + 1)  # window[i] = cost(i, j + 1) for the i an interval ending at j may start at
    for j in range(n):
        w0 = max(0, j + 1 - R)
        window[j] = 0.0
        window[w0:j + 1] += out_w[j]
        for s, c in ins[j]:
            window[w0:s + 1] -= c  # the edge s -> j is now inside the intervals [i, j + 1), i <= s
        i0 = lo[j + 1]
        vals = S[i0:j + 1] + window[i0:j + 1]
        best = vals.min()
        ties = np.flatnonzero(vals == best)
        k = ties[0] if len(ties) == 1 else ties[np.argmin(count[i0 + ties])]
        S[j + 1], count[j + 1], back[j + 1] = best, count[i0 + k] + 1, i0 + k

    cuts = [n]
    while cuts[-1] > 0:
        cuts.append(int(back[cuts[-1]]))
    cuts.reverse()
    groups = np.empty(n, dtype=np.int64)
    groups[order] = np.repeat(np.arange(len(cuts) - 1), np.diff(cuts))
    return groups


def _interval_starts(p: Problem, order: np.ndarray, R: int, M: float) -> np.ndarray:
    """``lo[j]``: the first position i at which an allowed interval ``[i, j)`` may start (j >= 1).

    Allowed intervals shrink to allowed intervals, so they are exactly ``lo[j] <= i < j``.
    """
    n = p.n
    pm = np.concatenate(([0.0], np.cumsum(_need(p)[order])))  # bytes of positions [0, j)
    j = np.arange(n + 1)
    lo = np.maximum(j - R, np.searchsorted(pm, pm - M))
    # Some device u must run the whole interval: after u's last bad position, and within u's memory.
    on_some = np.full(n + 1, n + 1)
    for u in range(p.m):
        bad = np.where(p.can_run[order, u], -1, np.arange(n))
        after_bad = np.concatenate(([0], np.maximum.accumulate(bad) + 1))
        start = np.maximum(after_bad, np.searchsorted(pm, pm - p.mem[u] / (1.0 + SLACK)))
        np.minimum(on_some, start, out=on_some)
    lo = np.maximum(lo, on_some)
    return np.minimum(lo, np.maximum(j - 1, 0))  # a single task is always allowed


# ------------------------------------------------------------------- quotient
def quotient(
    problem: Problem, groups: Sequence[int], *, merge: Literal["sum", "max"] = "sum"
) -> tuple[Problem, np.ndarray]:
    """The coarse problem whose tasks are the groups of a partition.

    Group c becomes task ``g{c}`` (groups numbered in increasing id). Its latency
    on a device is the sum of its members' latencies there, and it runs only on
    the devices that run every member. Its weight, input and output bytes are
    its members' sums. The edges between two groups become one edge whose bytes
    are the sum (``merge="sum"``) or the largest (``"max"``) of theirs; edges
    inside a group are dropped. The system and objective are the problem's.

    Parameters
    ----------
    problem : Problem
        A latency problem.
    groups : sequence of int, shape (n,)
        Any integer group id per task.
    merge : {"sum", "max"}
        How the bytes of parallel edges between two groups combine.

    Returns
    -------
    coarse : Problem
    group_of : ndarray of int, shape (n,)
        The coarse task index of each task.

    Raises
    ------
    ValueError
        If ``groups`` is not one id per task, if the groups' graph has a cycle
        (naming the groups of one), or if a group runs on no device (no device
        runs every member, or none holds their summed memory).
    ProblemError
        If a sum leaves the ranges of ``docs/format.md`` (1e12 ms, 1e18 bytes).

    Notes
    -----
    Memory is exact: with one input, rule 6 charges a device the weights plus
    activations of the tasks on it, a sum over tasks, so a coarse mapping uses
    on each device exactly the bytes that the same mapping of the members uses;
    the coarse rule is as strict as the original, never looser.

    Edge bytes: the default sum is Celeritas's, and counts every tensor that
    crosses (what a shared link would carry). mapsched's links are
    contention-free and each edge pays its transfer separately, so the largest
    of the parallel edges is enough for the coarse timing to bound the fine one
    (``"max"``: a tighter coarse model). Either way each fine transfer takes at
    most the coarse edge's time, which :func:`expand` relies on.

    Latency sums are exact for a group that runs its members back to back;
    :func:`expand` may overlap them with other work and never does worse.

    The quotient of any partition exists (as a graph); it is acyclic exactly when
    no path leaves a group and comes back. :func:`coplace` and
    :func:`fuse_intervals` guarantee it, an arbitrary partition need not.

    O(n m + E log E), plus building the coarse problem (O(k m + E')).

    Examples
    --------
    >>> from mapsched import Problem
    >>> p = Problem.from_arrays([[1, 2], [3, 4], [5, 6]], [(0, 1, 8), (0, 2, 2), (1, 2, 4)])
    >>> q, group_of = quotient(p, [0, 0, 1])
    >>> q.dur.tolist(), q.nbytes.tolist(), group_of.tolist()
    ([[4.0, 6.0], [5.0, 6.0]], [6.0], [0, 0, 1])
    """
    p = problem
    _latency_only(p, "quotient")
    if merge not in ("sum", "max"):
        raise OptionError(f"merge: expected 'sum' or 'max', got {shown(merge)}")
    of, k = _labels(p, groups)
    lat = np.stack([np.bincount(of, weights=p.dur[:, u], minlength=k) for u in range(p.m)], axis=1)
    weight = np.bincount(of, weights=p.weight, minlength=k)
    inputs = np.bincount(of, weights=[t.input_bytes for t in p.tasks], minlength=k)
    outputs = np.bincount(of, weights=[t.output_bytes for t in p.tasks], minlength=k)
    runnable = np.isfinite(lat) & ((weight + inputs + outputs)[:, None] <= p.room[None, :])
    if not runnable.any(axis=1).all():
        c = int(np.flatnonzero(~runnable.any(axis=1))[0])
        members = np.flatnonzero(of == c)
        raise OptionError(
            f"groups: no device runs the {len(members)} tasks grouped with {shown(p.task_names[members[0]])} "
            "and holds their memory"
        )

    s, d = of[p.src], of[p.dst]
    cross = s != d
    pairs, which = np.unique(s[cross] * k + d[cross], return_inverse=True)
    if merge == "sum":
        nbytes = np.bincount(which, weights=p.nbytes[cross], minlength=len(pairs))
    else:
        nbytes = np.zeros(len(pairs))
        np.maximum.at(nbytes, which, p.nbytes[cross])
    cs, cd = pairs // k, pairs % k
    _check_acyclic(p, of, k, cs, cd)

    names, dn = _names(k), p.device_names
    tasks = [
        Task(names[c], {dn[u]: {1: t} for u, t in enumerate(row) if t != np.inf}, wb, ib, ob)
        for c, (row, wb, ib, ob) in enumerate(zip(lat.tolist(), weight.tolist(), inputs.tolist(), outputs.tolist()))
    ]
    edges = [Edge(names[x], names[y], nb) for x, y, nb in zip(cs.tolist(), cd.tolist(), nbytes.tolist())]
    # Sums of checked numbers, not numbers of a file: a group's time may pass the format's 1e12 ms
    # (two tasks of 6e11 ms were refused, naming a field of no file the user wrote).
    return p._derived(tasks, edges, p.system, p.objective, f"{p.name}[{k} groups]", None), of


def _check_acyclic(p: Problem, of: np.ndarray, k: int, cs: np.ndarray, cd: np.ndarray) -> None:
    """Kahn's algorithm on the groups' graph; a ValueError naming a cycle's groups if it has one."""
    succ: list[list[int]] = [[] for _ in range(k)]
    for x, y in zip(cs.tolist(), cd.tolist()):
        succ[x].append(y)
    indeg = np.bincount(cd, minlength=k).tolist()
    ready = [c for c in range(k) if indeg[c] == 0]
    seen = 0
    while ready:
        x = ready.pop()
        seen += 1
        for y in succ[x]:
            indeg[y] -= 1
            if indeg[y] == 0:
                ready.append(y)
    if seen < k:
        cycle = nx.find_cycle(nx.DiGraph(zip(cs.tolist(), cd.tolist())))
        rep = {c: p.task_names[int(np.flatnonzero(of == c)[0])] for c, _ in cycle}
        path = " -> ".join(f"group of {shown(rep[c])}" for c, _ in cycle)
        raise OptionError(f"groups: the quotient has a cycle, {path} -> back; no path may leave a group and return")


# --------------------------------------------------------------------- expand
def expand(
    problem: Problem, coarse_schedule: Schedule, groups: Sequence[int], *, insertion: bool = True, **kwargs: Any
) -> Schedule:
    """A schedule of ``problem`` that runs each task on its group's device in a coarse schedule.

    The tasks are taken in a topological order that sorts them by their group's
    coarse (start, end) and re-timed by :class:`~mapsched.scheduling.decoder.Decoder`, as the
    heuristics' feasibility repair turns a device per task and an order into a
    schedule: each task starts once its inputs have arrived and a gap of its
    device holds it (insertion).

    Parameters
    ----------
    problem : Problem
        The original (fine) latency problem.
    coarse_schedule : Schedule
        A schedule of ``quotient(problem, groups)[0]``: one job per group.
    groups : sequence of int, shape (n,)
        The partition that built the quotient.
    insertion : bool
        Fill idle gaps (the default) or append to each device's last job.
    **kwargs
        Passed on to the :class:`~mapsched.model.schedule.Schedule` (``method`` defaults to
        the coarse schedule's). The coarse lower bound is not carried over: it bounds
        the coarse problem, whose optimum can exceed the original's.

    Returns
    -------
    Schedule

    Raises
    ------
    ValueError
        If the coarse schedule names an unknown group or device, or has no job or
        two jobs for a group.
    InfeasibleError
        If the mapping it implies cannot run (the coarse schedule was invalid).

    Notes
    -----
    The expanded makespan is at most the coarse one when the coarse schedule
    meets its constraints exactly (as mapsched's decoders build them, without
    the validator's tolerance). Let each group run its members back to back
    within its coarse slot, in the order taken: a valid fine schedule, since
    each fine edge's transfer takes at most its coarse edge's time (same link,
    no more bytes), and the order takes the groups of a device in the order of
    their slots. Appending in that order starts every task no later than there
    (it is the earliest start for these device sequences), and insertion no
    later than appending.

    O(n log n + E), plus about O(log n) amortised per job for the insertion gap search
    (see :class:`~mapsched.scheduling.decoder.Timeline`).

    Examples
    --------
    >>> from mapsched import Problem, decode, validate
    >>> p = Problem.from_arrays([[1, 2], [3, 1], [2, 2]], [(0, 1, 1), (0, 2, 1)])
    >>> q, _ = quotient(p, [0, 0, 1])
    >>> s = expand(p, decode(q, [0, 1]), [0, 0, 1])
    >>> [(j.task, j.device, j.start) for j in s.jobs], validate(p, s)
    ([('t0', 'p0', 0.0), ('t1', 'p0', 1.0), ('t2', 'p1', 2.0)], [])
    """
    p = problem
    _latency_only(p, "expand")
    if not isinstance(coarse_schedule, Schedule):
        raise OptionError(f"coarse_schedule: expected a Schedule of the quotient, got {type(coarse_schedule).__name__}")
    of, k = _labels(p, groups)
    index = {name: c for c, name in enumerate(_names(k))}
    dev = np.full(k, -1, dtype=np.int64)
    start, end = np.zeros(k), np.zeros(k)
    for j in coarse_schedule.jobs:
        c, u = index.get(j.task), p.device_index.get(j.device)
        if c is None or u is None:
            what = f"group {shown(j.task)}" if c is None else f"device {shown(j.device)}"
            raise OptionError(f"coarse_schedule: unknown {what}; expected the quotient of these groups")
        if dev[c] >= 0:
            raise OptionError(f"coarse_schedule: group {shown(j.task)} has two jobs; expected one per group")
        dev[c], start[c], end[c] = u, j.start, j.end
    if (dev < 0).any():
        raise OptionError(f"coarse_schedule: group 'g{int(np.argmin(dev))}' has no job")
    # Rank groups by (start, end), equal pairs equal: the rank never falls along an edge, so the
    # ready-first order below lists the tasks by rank.
    by = np.lexsort((end, start))
    rank = np.empty(k)
    rank[by] = np.concatenate(([0], np.cumsum((np.diff(start[by]) != 0) | (np.diff(end[by]) != 0))))
    order = ready_order(p, -rank[of])
    kwargs.setdefault("method", coarse_schedule.method)
    return Decoder(p, order, insertion).schedule(dev[of][:, None], **kwargs)
