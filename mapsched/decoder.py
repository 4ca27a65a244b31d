"""The schedule decoder: from a mapping and a priority order to the earliest schedule.

This is list scheduling. Tasks are taken in the priority order (which must be
topological); each job starts as soon as its inputs have arrived from its
parents' jobs, communication included, and its device is free. By default a job
is appended after the last job of its device, so the device order follows the
priority order; with ``insertion=True`` it goes into the first idle gap long
enough to hold it, as in insertion-based HEFT.

A mapping is an ``owner`` array: ``owner[i, l]`` is the device that runs task i
for input l (shape ``(n, L)``; for latency a plain ``(n,)`` array of devices will
do). All inputs of a task on one device form one batch. It is the fitness function
of every search heuristic, so the hot loop runs over plain Python lists.

Examples
--------
>>> from mapsched import instances
>>> from mapsched.decoder import decode
>>> p = instances.load("topcuoglu2002")
>>> decode(p, {t: "p3" for t in p.task_names}).makespan  # everything on p3
143.0
"""

from __future__ import annotations

import heapq
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .errors import InfeasibleError
from .problem import Problem
from .schedule import Job, Schedule

__all__ = [
    "Builder", "Decoder", "Timeline", "as_owner", "decode", "memory_use", "owner_counts", "owner_masks",
    "ready_order", "split_masks",
]


def ready_order(problem: Problem, priority: np.ndarray) -> list[int]:
    """Topological order taking, at each step, the ready task of highest priority
    (ties: lowest index). O(n log n + E)."""
    p = problem
    indeg = np.bincount(p.dst, minlength=p.n).tolist()
    heap = [(-priority[i], i) for i in range(p.n) if indeg[i] == 0]
    heapq.heapify(heap)
    order = []
    while heap:
        _, i = heapq.heappop(heap)
        order.append(i)
        for j in p.succ[i]:
            indeg[j] -= 1
            if indeg[j] == 0:
                heapq.heappush(heap, (-priority[j], j))
    return order


class Timeline:
    """Busy intervals per device, for append-only or insertion list scheduling."""

    def __init__(self, m: int, insertion: bool = False) -> None:
        self.insertion = insertion
        self.starts: list[list[float]] = [[] for _ in range(m)]
        self.ends: list[list[float]] = [[] for _ in range(m)]

    def earliest(self, u: int, ready: float, d: float) -> tuple[float, int]:
        """Earliest start >= ``ready`` of a job of length ``d`` on device u, and its slot."""
        starts, ends = self.starts[u], self.ends[u]
        if not self.insertion:
            return (ends[-1] if ends and ends[-1] > ready else ready), len(ends)
        # Intervals never overlap, so ends are sorted like starts; skip those done by `ready`.
        s = ready
        for k in range(bisect_right(ends, ready), len(starts)):
            if s + d <= starts[k]:
                return s, k
            if ends[k] > s:
                s = ends[k]
        return s, len(starts)

    def reserve(self, u: int, s: float, e: float, slot: int) -> None:
        self.starts[u].insert(slot, s)
        self.ends[u].insert(slot, e)

    def place(self, u: int, ready: float, d: float) -> float:
        s, slot = self.earliest(u, ready, d)
        self.reserve(u, s, s + d, slot)
        return s


def owner_counts(problem: Problem, owner: np.ndarray) -> np.ndarray:
    """Inputs of each task on each device, shape (n, m)."""
    return np.stack([(owner == u).sum(axis=1) for u in range(problem.m)], axis=1)


def memory_use(problem: Problem, counts: np.ndarray) -> np.ndarray:
    """Bytes used on each device (FORMAT.md rule 6) given inputs per task and device."""
    return problem.act @ counts + problem.weight @ (counts > 0)


def as_owner(problem: Problem, mapping: Any) -> np.ndarray:
    """Normalise a mapping to an ``(n, L)`` owner array of device indices.

    Accepts an array of shape ``(n,)`` (all inputs of a task on one device) or
    ``(n, L)``, a dict from task name to device name, or a dict from task name to
    ``{device name: inputs}``.
    """
    n, L = problem.n, problem.L
    if isinstance(mapping, Mapping):
        owner = np.full((n, L), -1, dtype=np.int64)
        for task, where in mapping.items():
            if task not in problem.task_index:
                raise InfeasibleError(f"mapping: unknown task {task!r}")
            i = problem.task_index[task]
            pairs = where.items() if isinstance(where, Mapping) else [(where, range(L))]
            for dev, inputs in pairs:
                if dev not in problem.device_index:
                    raise InfeasibleError(f"mapping[{task!r}]: unknown device {dev!r}")
                for lo in inputs:
                    if not 0 <= lo < L:
                        raise InfeasibleError(f"mapping[{task!r}]: input {lo} is not in 0..{L - 1}")
                    owner[i, lo] = problem.device_index[dev]
        missing = np.flatnonzero((owner < 0).any(axis=1))
        if len(missing):
            raise InfeasibleError(
                f"mapping: task {problem.task_names[missing[0]]!r} has inputs on no device"
            )
        return owner
    owner = np.asarray(mapping, dtype=np.int64)
    if owner.ndim == 1:
        owner = np.repeat(owner[:, None], L, axis=1)
    if owner.shape != (n, L):
        raise InfeasibleError(f"mapping: expected shape ({n},) or ({n}, {L}), got {owner.shape}")
    if owner.min() < 0 or owner.max() >= problem.m:
        raise InfeasibleError(f"mapping: device indices must lie in 0..{problem.m - 1}")
    return owner


def _hot_lists(p: Problem) -> tuple[list, list, list, list]:
    """Plain-list views for the scalar hot loops (list indexing beats numpy scalars ~10x):
    per task its ``(parent, edge)`` pairs, link latency, ms per byte, and edge bytes."""
    pred_edges = [[(int(p.src[e]), e) for e in p.in_edges[i]] for i in range(p.n)]
    return pred_edges, p.link_latency.tolist(), p.link_ms_per_byte.tolist(), p.nbytes.tolist()


def owner_masks(row: Sequence[int]) -> list[tuple[int, int]]:
    """The jobs of one task as ``(device, input bitmask)`` pairs, from its owner row."""
    masks: dict[int, int] = {}
    for lo, u in enumerate(row.tolist() if isinstance(row, np.ndarray) else row):
        masks[u] = masks.get(u, 0) | (1 << lo)
    return sorted(masks.items())


def split_masks(counts: Sequence[int]) -> list[tuple[int, int]]:
    """Jobs ``(device, bitmask)`` giving device u a contiguous block of ``counts[u]`` inputs."""
    out, lo = [], 0
    for u, c in enumerate(counts):
        if c:
            out.append((u, ((1 << c) - 1) << lo))
            lo += c
    return out


class Builder:
    """A schedule built one task at a time: the incremental form of the decoder.

    Constructive heuristics ask :meth:`trial` where the jobs of a task would run
    (without committing), pick one option, and :meth:`commit` it. Tasks must be
    committed in a topological order.

    With ``check=True``, :meth:`trial` returns None for an option that cannot run:
    an unsupported batch size, a device out of memory, or data crossing devices
    with no link.
    """

    def __init__(self, problem: Problem, insertion: bool = False, check: bool = True) -> None:
        p = problem
        self.p, self.check = p, check
        self.timeline = Timeline(p.m, insertion)
        self.placed: list[list[tuple[int, int, float, float]]] = [[] for _ in range(p.n)]
        self.mem_left = p.mem.astype(float).copy()
        self.finish = 0.0
        self._order: list[int] = []
        self._pred_edges, self._llat, self._mpb, self._nbytes = _hot_lists(p)

    def ready(self, i: int, u: int, mask: int) -> float:
        """When the inputs in ``mask`` of task i can all be on device u (``inf``: no link)."""
        llat, mpb, nb = self._llat, self._mpb, self._nbytes
        r = 0.0
        for q, e in self._pred_edges[i]:
            for v, qmask, _, qend in self.placed[q]:
                if qmask & mask:
                    t = qend if v == u else qend + llat[v][u] + nb[e] * mpb[v][u]
                    if t > r:
                        r = t
        return r

    def trial(self, i: int, jobs: list[tuple[int, int]]) -> list[tuple[int, int, float, float, int]] | None:
        """Where jobs ``(device, mask)`` of task i would start and end: ``(u, mask, start, end, slot)``."""
        p = self.p
        out = []
        for u, mask in jobs:
            c = mask.bit_count()
            k = p.batch_pos[c] if c < len(p.batch_pos) else -1
            d = float(p.lat[i, u, k]) if k >= 0 else np.inf
            if self.check and (d == np.inf or p.weight[i] + p.act[i] * c > self.mem_left[u] * (1 + 1e-9)):
                return None
            r = self.ready(i, u, mask)
            if r == np.inf:
                return None
            s, slot = self.timeline.earliest(u, r, d)
            out.append((u, mask, s, s + d, slot))
        return out

    def commit(self, i: int, trial: list[tuple[int, int, float, float, int]]) -> None:
        """Place the jobs of task i as tried."""
        p = self.p
        if not self.placed[i]:  # a task may be committed job by job
            self._order.append(i)
        for u, mask, s, e, slot in trial:
            self.timeline.reserve(u, s, e, slot)
            self.placed[i].append((u, mask, s, e))
            self.mem_left[u] -= p.weight[i] + p.act[i] * mask.bit_count()
            self.finish = max(self.finish, e)

    def jobs(self) -> list[tuple[int, int, float, float, int]]:
        """Committed jobs ``(task, device, start, end, mask)`` in commit order."""
        return [(i, u, s, e, mask) for i in self._order for u, mask, s, e in self.placed[i]]

    def owner(self) -> np.ndarray:
        """The committed mapping as an owner array."""
        owner = np.zeros((self.p.n, self.p.L), dtype=np.int64)
        for i, jobs in enumerate(self.placed):
            for u, mask, _, _ in jobs:
                for lo in range(self.p.L):
                    if mask >> lo & 1:
                        owner[i, lo] = u
        return owner

    def schedule(self, **kwargs: Any) -> Schedule:
        return _to_schedule(self.p, self.jobs(), **kwargs)


def _to_schedule(p: Problem, jobs: list[tuple[int, int, float, float, int]], **kwargs: Any) -> Schedule:
    tn, dn = p.task_names, p.device_names
    out = [Job(tn[i], dn[u], s, e, tuple(lo for lo in range(p.L) if mask >> lo & 1)) for i, u, s, e, mask in jobs]
    return Schedule.from_jobs(p, out, **kwargs)


class Decoder:
    """A decoder bound to one problem and one priority order, for repeated use.

    Parameters
    ----------
    problem : Problem
    order : sequence of int, optional
        A topological order of the tasks; by default the problem's breadth-first one.
    insertion : bool
        Fill idle gaps (insertion-based list scheduling) instead of appending.

    Notes
    -----
    One decode costs O(n + E) for latency and O(n m + E m^2) for throughput,
    plus O(log n) per job with insertion.
    """

    def __init__(self, problem: Problem, order: Sequence[int] | None = None, insertion: bool = False):
        self.p = problem
        self.insertion = insertion
        if order is None:
            self.order = problem.topo.tolist()
        else:
            order = np.asarray(order, dtype=np.int64)
            if order.shape != (problem.n,) or np.bincount(order, minlength=problem.n).max() != 1:
                raise ValueError("order: expected a permutation of the task indices")
            pos = np.empty(problem.n, dtype=np.int64)
            pos[order] = np.arange(problem.n)
            if (pos[problem.src] >= pos[problem.dst]).any():
                raise ValueError("order: expected a topological order (every edge forwards)")
            self.order = order.tolist()
        self._pred_edges, self._llat, self._mpb, self._nbytes = _hot_lists(problem)

    # ------------------------------------------------------------ feasibility
    def infeasibility(self, owner: np.ndarray) -> str | None:
        """Why the mapping admits no schedule (a one-line reason), or None."""
        p = self.p
        counts = owner_counts(p, owner)
        bad = np.argwhere(counts > 0)
        k = p.batch_pos[counts[bad[:, 0], bad[:, 1]]]
        lat = np.where(k >= 0, p.lat[bad[:, 0], bad[:, 1], np.maximum(k, 0)], np.inf)
        if not np.isfinite(lat).all():
            i, u = bad[np.flatnonzero(~np.isfinite(lat))[0]]
            return (
                f"task {p.task_names[i]!r} cannot run on device {p.device_names[u]!r} "
                f"at batch size {counts[i, u]}"
            )
        used = memory_use(p, counts)
        over = np.flatnonzero(used > p.mem * (1 + 1e-9))
        if len(over):
            u = over[0]
            return f"device {p.device_names[u]!r} needs {used[u]:.0f} bytes of memory, has {p.mem[u]:.0f}"
        if p.E:
            cross = np.isinf(p.link_latency[owner[p.src], owner[p.dst]])
            if cross.any():
                e, lo = np.argwhere(cross)[0]
                a, b = owner[p.src[e], lo], owner[p.dst[e], lo]
                return (
                    f"edge {p.task_names[p.src[e]]!r} -> {p.task_names[p.dst[e]]!r} crosses from "
                    f"{p.device_names[a]!r} to {p.device_names[b]!r}, which have no link"
                )
        return None

    # ------------------------------------------------------------------ timing
    def times(self, owner: np.ndarray) -> list[tuple[int, int, float, float, int]]:
        """Jobs ``(task, device, start, end, input bitmask)`` of a feasible mapping."""
        if self.p.L == 1:
            return self._times_single(owner[:, 0].tolist())
        return self._times_batched(owner)

    def _times_single(self, dev: list[int]) -> list[tuple[int, int, float, float, int]]:
        n = self.p.n
        dur = self.p.dur
        llat, mpb, nb, pe = self._llat, self._mpb, self._nbytes, self._pred_edges
        tl = Timeline(self.p.m, self.insertion)
        d = dur[np.arange(n), dev].tolist()
        end = [0.0] * n
        jobs = []
        for i in self.order:
            u = dev[i]
            ready = 0.0
            for q, e in pe[i]:
                v = dev[q]
                t = end[q] if v == u else end[q] + llat[v][u] + nb[e] * mpb[v][u]
                if t > ready:
                    ready = t
            s = tl.place(u, ready, d[i])
            end[i] = s + d[i]
            jobs.append((i, u, s, end[i], 1))
        return jobs

    def _times_batched(self, owner: np.ndarray) -> list[tuple[int, int, float, float, int]]:
        b = Builder(self.p, self.insertion, check=False)
        for i in self.order:
            b.commit(i, b.trial(i, owner_masks(owner[i])))
        return b.jobs()

    # ------------------------------------------------------------------ public
    def makespan(self, owner: np.ndarray) -> float:
        """Makespan of the decoded schedule, or ``inf`` for an infeasible mapping."""
        if self.infeasibility(owner) is not None:
            return float("inf")
        return max(j[3] for j in self.times(owner))

    def schedule(self, owner: np.ndarray, **kwargs: Any) -> Schedule:
        """The decoded :class:`Schedule`; raises :class:`InfeasibleError` with the reason."""
        reason = self.infeasibility(owner)
        if reason is not None:
            raise InfeasibleError(f"mapping is infeasible: {reason}")
        return _to_schedule(self.p, self.times(owner), **kwargs)


def decode(
    problem: Problem,
    mapping: Any,
    order: Sequence[int] | None = None,
    insertion: bool = False,
    **kwargs: Any,
) -> Schedule:
    """Decode a mapping into the earliest schedule that follows ``order``.

    Parameters
    ----------
    problem : Problem
    mapping : array or dict
        See :func:`as_owner`.
    order : sequence of int, optional
        A topological order of task indices (default: breadth-first).
    insertion : bool
        Insert jobs into idle gaps instead of appending them.
    **kwargs
        Passed on to :class:`~mapsched.schedule.Schedule` (``method``, ``status``...).

    Raises
    ------
    InfeasibleError
        If a task cannot run where it is mapped, memory overflows, or data must
        cross between devices with no link.
    """
    return Decoder(problem, order, insertion).schedule(as_owner(problem, mapping), **kwargs)
