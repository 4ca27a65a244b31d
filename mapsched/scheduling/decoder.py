"""The schedule decoder: from a mapping and a priority order to the earliest schedule.

One algorithm in one module (the timelines, the builder and the decoder share their
hot loops' data layout), kept whole although it passes 600 lines.

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
>>> from mapsched.scheduling.decoder import decode
>>> p = instances.load("topcuoglu2002")
>>> decode(p, {t: "p3" for t in p.task_names}).makespan  # everything on p3
143.0
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_right
from collections.abc import Sequence
from itertools import chain
from operator import add, sub
from typing import Any

import numpy as np

from mapsched.errors import InfeasibleError, OptionError, shown
from mapsched.model.owners import as_owner, memory_use, owner_counts
from mapsched.model.problem import MEMORY_SLACK, Problem
from mapsched.model.schedule import Job, Schedule, Transfer
from mapsched.scheduling.contention import Resources

__all__ = [
    "Builder", "Decoder", "Timeline", "as_owner", "checked_order", "decode", "memory_use", "owner_counts",
    "owner_masks", "ready_order", "split_masks",
]


def ready_order(problem: Problem, priority: np.ndarray, tie: Sequence[int] | None = None) -> list[int]:
    """Topological order taking, at each step, the ready task of highest priority
    (ties: lowest ``tie[i]``, by default the index; a random permutation breaks them
    uniformly at random). O(n log n + E)."""
    p = problem
    tie = range(p.n) if tie is None else tie
    indeg = np.bincount(p.dst, minlength=p.n).tolist()
    heap = [(-priority[i], tie[i], i) for i in range(p.n) if indeg[i] == 0]
    heapq.heapify(heap)
    order = []
    while heap:
        i = heapq.heappop(heap)[2]
        order.append(i)
        for j in p.succ[i]:
            indeg[j] -= 1
            if indeg[j] == 0:
                heapq.heappush(heap, (-priority[j], tie[j], j))
    return order


def checked_order(problem: Problem, order: Sequence[int]) -> list[int]:
    """``order`` as a list, once checked to be a topological order of all the tasks
    (:class:`~mapsched.errors.OptionError`, a ``ValueError``, otherwise: a task timed before
    its parents makes an invalid schedule). O(n + E)."""
    order = np.asarray(order)
    if not order.size:
        order = order.astype(np.int64)
    if order.shape != (problem.n,) or order.dtype.kind not in "iu" or (problem.n and (
            order.min() < 0 or order.max() >= problem.n or np.bincount(order, minlength=problem.n).max() != 1)):
        raise OptionError("order: expected a permutation of the task indices")
    pos = np.empty(problem.n, dtype=np.int64)
    pos[order] = np.arange(problem.n)
    if (pos[problem.src] >= pos[problem.dst]).any():
        raise OptionError("order: expected a topological order (every edge forwards)")
    return order.tolist()


_NO_GAP = -math.inf  # the gap before a device's first interval: no job fits there by a gap
_MARGIN = 2.0**-50  # eight units in the last place: see _Gaps.earliest
_BLOCK = 128  # intervals a block holds, closed or open


class _Gaps:
    """The busy intervals of one device, indexed for the first idle gap that fits a job.

    The intervals, in time order, are cut into blocks. The last block, the tail, where
    nearly all the work of list scheduling happens, is two plain lists searched as
    without an index; once it holds more than ``_BLOCK`` intervals its first half closes
    into a block of its own. A closed block keeps the length of the gap before each of
    its intervals (its keys), measured the first time a search or an insertion reaches
    it. A max segment tree over the closed blocks' longest gaps (infinite while not
    measured) lets a search skip every run of blocks whose gaps are all too short, and
    the same tree over their interval counts turns a block into a slot (an interval's
    index in time order) and back.

    Notes
    -----
    For k intervals and B = ``_BLOCK``, :meth:`earliest` and :meth:`reserve` take
    O(B + log k) steps amortised (measuring a block costs O(B + log k), once per block),
    plus O(B) for each block whose longest gap passes the filter of :meth:`earliest`
    while the exact test then fails, which takes a gap within 2**-50 (2d + the largest
    time) of the job's length d. A closed block that overflows splits in two, rebuilding the
    trees in O(k / B) C-level steps, at most once per B / 2 insertions into it.
    """

    __slots__ = ("cap", "closed", "count", "ends", "hint", "keys", "last", "starts", "tail_ends",
                 "tail_at", "tail_starts", "tail_top", "top")

    def __init__(self) -> None:
        self.starts: list[list[float]] = []  # per closed block, in time order
        self.ends: list[list[float]] = []
        self.keys: list[list[float] | None] = []  # None: not measured since the block closed
        self.last: list[float] = []  # each closed block's last end, for bisection
        self.tail_starts: list[float] = []
        self.tail_ends: list[float] = []
        # The tail's longest gap, as of when the device held `tail_at` intervals: the tail
        # changes only with an insertion (a close follows one), so a new count means stale.
        self.tail_top = _NO_GAP
        self.tail_at = -1
        self.closed = 0  # intervals in closed blocks
        self.hint = (-1, 0, 0)  # (slot, block, index) of the last closed answer, until a reserve
        # The trees of no closed block, as _build([], []) makes them: spelt out, for a decoder
        # makes a Timeline per decode.
        self.cap, self.top, self.count = 1, [_NO_GAP, _NO_GAP], [0, 0]

    def _build(self, tops: list[float], counts: list[int]) -> None:
        """Both trees, for closed blocks with these longest gaps and interval counts. O(k / B)."""
        self.cap = cap = 1 << max(len(tops) - 1, 0).bit_length()
        self.top = top = [_NO_GAP] * cap + tops + [_NO_GAP] * (cap - len(tops))
        self.count = count = [0] * cap + counts + [0] * (cap - len(counts))
        lo = cap >> 1
        while lo:  # a level at a time; node i's children are 2i and 2i + 1
            top[lo:2 * lo] = map(max, top[2 * lo:4 * lo:2], top[2 * lo + 1:4 * lo:2])
            count[lo:2 * lo] = map(add, count[2 * lo:4 * lo:2], count[2 * lo + 1:4 * lo:2])
            lo >>= 1

    def _before(self, j: int) -> int:
        """Intervals in the closed blocks before block j. O(log k)."""
        count, i, c = self.count, j + self.cap, 0
        while i > 1:
            if i & 1:  # a right child: its left sibling's blocks come first
                c += count[i - 1]
            i >>= 1
        return c

    def _first_fit(self, j: int, fit: float) -> int:
        """The first closed block from block j on with a gap of at least ``fit`` (none: their count). O(log k)."""
        top, i = self.top, j + self.cap
        while top[i] < fit:
            while i & 1:  # climb while a right child, then step to the next subtree on the right
                i >>= 1
            if not i:
                return len(self.last)
            i += 1
        while i < self.cap:
            i <<= 1
            if top[i] < fit:
                i += 1
        return i - self.cap

    def earliest(self, ready: float, d: float) -> tuple[float, int]:
        """As :meth:`Timeline.earliest` with insertion."""
        starts, ends = self.tail_starts, self.tail_ends  # empty only while the device is
        first = bisect_right(ends, ready)  # the first interval of the tail not over by `ready`
        if first == len(ends):  # every interval is over by `ready`
            return ready, self.closed + first
        last = self.last
        if first or not last or last[-1] <= ready:  # the tail is all that is left: scan it
            if ready + d <= starts[first]:
                return ready, self.closed + first
            for k in range(first + 1, len(starts)):
                if ends[k - 1] + d <= starts[k]:
                    return ends[k - 1], self.closed + k
            return ends[-1], self.closed + len(ends)
        j = bisect_right(last, ready)
        starts, ends = self.starts[j], self.ends[j]
        k = bisect_right(ends, ready)  # the first interval not over by `ready`
        if ready + d <= starts[k]:
            slot = self._before(j) + k
            self.hint = (slot, j, k)
            return ready, slot
        # Later gaps open where an interval ends, and the job fits after `prev` iff
        # prev + d <= start, the scan's exact test. In floating point a gap start - prev
        # that passes it is at least d - 2**-53 (|prev| + 2d); `fit` takes eight times that
        # margin, with the device's largest |time| for |prev|. So blocks whose longest gap
        # is under `fit` hold no fitting gap, and the exact test decides within the others.
        fit = d - (d + d + max(self.tail_ends[-1], -self.starts[0][0])) * _MARGIN
        if self.keys[j] is None:
            self._measure(j)
        prev, lo = ends[k], k + 1
        if self.top[self.cap + j] < fit:
            lo = len(starts)
        while True:
            for k in range(lo, len(starts)):
                if prev + d <= starts[k]:
                    slot = self._before(j) + k
                    self.hint = (slot, j, k)
                    return prev, slot
                prev = ends[k]
            j += 1
            while j < len(last):
                j = self._first_fit(j, fit)
                if j == len(last) or self.keys[j] is not None:
                    break
                self._measure(j)  # a block not searched since it closed: measure it, then look again
                if self.top[self.cap + j] >= fit:
                    break
                j += 1
            if j == len(last):
                break
            starts, ends, prev, lo = self.starts[j], self.ends[j], last[j - 1], 0
        starts, ends = self.tail_starts, self.tail_ends
        if self.tail_at != self.closed + len(starts):
            self.tail_top = max(map(sub, starts, [last[-1], *ends[:-1]]))
            self.tail_at = self.closed + len(starts)
        if self.tail_top >= fit:
            prev = last[-1]
            for k in range(len(starts)):
                if prev + d <= starts[k]:
                    return prev, self.closed + k
                prev = ends[k]
        return ends[-1], self.closed + len(ends)

    def reserve(self, s: float, e: float, slot: int) -> None:
        """As :meth:`Timeline.reserve` with insertion."""
        k = slot - self.closed
        if k >= 0:  # into the tail; the closed blocks and the hint stay as they are
            starts = self.tail_starts
            starts.insert(k, s)
            self.tail_ends.insert(k, e)
            if len(starts) > _BLOCK:
                self._close()
            return
        if slot == self.hint[0]:
            _, j, k = self.hint
        else:  # the closed block holding the interval now at `slot`: descend by counts
            count, i, k = self.count, 1, slot
            while i < self.cap:
                i <<= 1
                if k >= count[i]:
                    k -= count[i]
                    i += 1
            j = i - self.cap
        self.hint = (-1, 0, 0)
        self.closed += 1
        if self.keys[j] is None:
            self._measure(j)
        starts, ends, keys = self.starts[j], self.ends[j], self.keys[j]
        # The job splits the gap before interval k (of its block) in two, the one before it
        # and the one after it.
        key = s - (ends[k - 1] if k else self.last[j - 1]) if k or j else _NO_GAP
        best = self.top[self.cap + j]
        shrunk = keys[k] >= best  # the split gap may have been the block's longest
        keys[k] = starts[k] - e
        best = max(best, key, keys[k])
        starts.insert(k, s)
        ends.insert(k, e)
        keys.insert(k, key)
        if len(starts) > _BLOCK:
            self._split(j)
            return
        count, i = self.count, self.cap + j
        while i:
            count[i] += 1
            i >>= 1
        self._set_top(j, max(keys) if shrunk else best)

    def _set_top(self, j: int, best: float) -> None:
        """Make ``best`` closed block j's longest gap in the tree. O(log k)."""
        top, i = self.top, self.cap + j
        while top[i] != best:  # up the tree while the longest gap below changes
            top[i] = best
            i >>= 1
            if not i:
                break
            a, b = top[2 * i], top[2 * i + 1]
            best = a if a >= b else b

    def _measure(self, j: int) -> None:
        """The gaps of closed block j, which closed unmeasured. O(B + log k)."""
        starts, ends = self.starts[j], self.ends[j]
        if j:
            self.keys[j] = keys = [*map(sub, starts, [self.last[j - 1], *ends[:-1]])]
        else:
            self.keys[j] = keys = [_NO_GAP, *map(sub, starts[1:], ends[:-1])]
        self._set_top(j, max(keys))

    def _close(self) -> None:
        """Close the tail's first half into a block, its gaps unmeasured until a search or an
        insertion reaches it (most never do). O(B + log k) amortised."""
        h, ts, te, last = _BLOCK // 2, self.tail_starts, self.tail_ends, self.last
        self.starts.append(ts[:h])
        self.ends.append(te[:h])
        self.keys.append(None)
        del ts[:h], te[:h]
        last.append(self.ends[-1][-1])
        self.closed += h
        nb = len(last)
        if nb > self.cap:  # the segment tree is full: double it
            self._build([*self.top[self.cap:], math.inf], [*map(len, self.starts)])
            return
        count, i = self.count, self.cap + nb - 1
        while i:
            count[i] += h
            i >>= 1
        self._set_top(nb - 1, math.inf)  # unmeasured: any job may fit

    def _split(self, j: int) -> None:
        """Halve closed block j and rebuild the trees. O(k / B)."""
        h = len(self.starts[j]) // 2
        for blocks in (self.starts, self.ends, self.keys):
            blocks.insert(j + 1, blocks[j][h:])
            del blocks[j][h:]
        self.last.insert(j, self.ends[j][-1])
        nb, cap = len(self.last) - 1, self.cap
        tops = self.top[cap:cap + nb]
        tops[j:j + 1] = max(self.keys[j]), max(self.keys[j + 1])
        self._build(tops, [*map(len, self.starts)])

    def busy(self) -> tuple[list[float], list[float]]:
        """Starts and ends of all the intervals, in time order. O(k)."""
        return ([*chain.from_iterable(self.starts), *self.tail_starts],
                [*chain.from_iterable(self.ends), *self.tail_ends])


class Timeline:
    """Busy intervals per device, for append-only or insertion list scheduling.

    Notes
    -----
    Appending costs O(1) per job. With insertion, each device keeps its k intervals in
    a :class:`_Gaps` index: finding the first idle gap that fits a job and reserving it
    take O(B + log k) steps amortised (B = 128 intervals a block), plus O(k / B) C-level
    steps when a block splits, at most once per B / 2 insertions into it, where a scan
    of the intervals after ``ready`` and a list insertion took O(k). The answers are the
    scan's, to the bit.
    """

    def __init__(self, m: int, insertion: bool = False) -> None:
        self.insertion = insertion
        self._starts: list[list[float]] = [[] for _ in range(m)]  # without insertion
        self._ends: list[list[float]] = [[] for _ in range(m)]
        self._gaps = [_Gaps() for _ in range(m)] if insertion else []

    def earliest(self, u: int, ready: float, d: float) -> tuple[float, int]:
        """Earliest start >= ``ready`` of a job of length ``d >= 0`` on device u, and its slot.

        The slot is the job's index among device u's intervals in time order. With
        insertion the start is that of the first idle gap (in time order) that holds the
        job, counted from ``ready`` where ``ready`` falls in a gap; without, it is after
        the device's last interval.
        """
        if self.insertion:
            return self._gaps[u].earliest(ready, d)
        ends = self._ends[u]
        return (ends[-1] if ends and ends[-1] > ready else ready), len(ends)

    def reserve(self, u: int, s: float, e: float, slot: int) -> None:
        """Mark device u busy from s to e, at the slot :meth:`earliest` gave for this start."""
        if self.insertion:
            self._gaps[u].reserve(s, e, slot)
        else:
            self._starts[u].insert(slot, s)
            self._ends[u].insert(slot, e)

    def place(self, u: int, ready: float, d: float) -> float:
        """Reserve the earliest start of a job and return it."""
        if not self.insertion:
            s, slot = self.earliest(u, ready, d)
            self.reserve(u, s, s + d, slot)
            return s
        gaps = self._gaps[u]  # straight to the device's index: place() is the decoder's inner loop
        s, slot = gaps.earliest(ready, d)
        gaps.reserve(s, s + d, slot)
        return s

    def busy(self, u: int) -> tuple[list[float], list[float]]:
        """Starts and ends of device u's intervals, in time order. O(k)."""
        if self.insertion:
            return self._gaps[u].busy()
        return list(self._starts[u]), list(self._ends[u])


def _hot_lists(p: Problem) -> tuple[list, list, list, list]:
    """Plain-list views for the scalar hot loops (indexing a list is far cheaper than a numpy scalar):
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
        # Where transfers take turns, jobs and transfers share the resources' lanes instead
        self.resources = Resources(p, insertion) if p.contended else None
        self.transfers: list[tuple[int, int, float, float]] = []  # (edge, input mask, start, end)
        self._sent: dict[int, tuple[int, float]] = {}  # edge -> (destination device, arrival), see send

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

    def _length(self, i: int, u: int, mask: int) -> float | None:
        """How long the job of task i on device u for the inputs in ``mask`` lasts (``inf`` where
        it cannot run); None where ``check`` rules it out: no such batch, or no memory left."""
        p = self.p
        c = mask.bit_count()
        k = p.batch_pos[c] if c < len(p.batch_pos) else -1
        d = float(p.lat[i, u, k]) if k >= 0 else np.inf
        if self.check and (d == np.inf or p.weight[i] + p.act[i] * c > self.mem_left[u] * (1 + MEMORY_SLACK)):
            return None
        return d

    def trial(self, i: int, jobs: list[tuple[int, int]]) -> list[tuple[int, int, float, float, int]] | None:
        """Where jobs ``(device, mask)`` of task i would start and end: ``(u, mask, start, end, slot)``."""
        if self.resources is not None:
            return self._contended_trial(i, jobs)
        out = []
        for u, mask in jobs:
            d = self._length(i, u, mask)
            if d is None:
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
            if self.resources is None:
                self.timeline.reserve(u, s, e, slot)
            else:
                picked, moves = slot
                for edge, share, ts, te, rs, lanes in moves:
                    self.resources.reserve(rs, lanes, ts, te)
                    self.transfers.append((edge, share, ts, te))
                self.resources.reserve((u,), picked, s, e)
            self.placed[i].append((u, mask, s, e))
            self.mem_left[u] -= p.weight[i] + p.act[i] * mask.bit_count()
            self.finish = max(self.finish, e)

    def send(self, q: int, dev: Sequence[int]) -> None:
        """Where transfers take turns in a latency problem, reserve now the transfers out of the
        committed task q to its successors' devices ``dev`` (a whole mapping), each as early as
        its resources are free, as ``simulate`` starts a transfer when its data is ready. A
        successor committed later on that device takes its data from them. Without it each
        transfer is reserved when its destination is committed: a transfer whose destination
        waits for another input then goes behind the transfers of destinations committed
        before it, and ``simulate``'s schedule of ``resnet50-layer`` with every accelerator's
        copies on the accelerator, 338.4, decodes in its start order to 379.4. O(out-edges)."""
        res = self.resources
        v, _, _, qend = self.placed[q][0]
        for e in self.p.out_edges[q]:
            u = dev[int(self.p.dst[e])]
            if u == v or self._llat[v][u] == np.inf:
                continue
            dt = self._llat[v][u] + self._nbytes[e] * self._mpb[v][u]
            rs = res.route(v, u)
            ts, lanes = res.earliest(rs, qend, dt)
            res.reserve(rs, lanes, ts, ts + dt)
            self.transfers.append((int(e), 1, ts, ts + dt))
            self._sent[int(e)] = (u, ts + dt)

    def _contended_trial(self, i: int, jobs: list[tuple[int, int]]) -> list[tuple[int, int, float, float, Any]] | None:
        """:meth:`trial` where transfers take turns: each cross-device transfer into the jobs goes
        on its resources (earliest source first) as early as they are all free, and the job
        after the last arrival. The slot is ``(device lane, transfers)``. What is tried is
        reserved while trying, so that the task's own transfers and jobs take turns too, and
        released after. The last job and its last transfer are not reserved: nothing tried
        after them starts before they end."""
        res = self.resources
        llat, mpb, nb, sent = self._llat, self._mpb, self._nbytes, self._sent
        held = []
        out = []
        last = len(jobs) - 1
        try:
            for j, (u, mask) in enumerate(jobs):
                d = self._length(i, u, mask)
                if d is None:
                    return None
                ready = 0.0
                arriving = []
                for q, e in self._pred_edges[i]:
                    for v, qmask, _, qend in self.placed[q]:
                        share = qmask & mask
                        if not share:
                            continue
                        if v == u:
                            ready = max(ready, qend)
                        elif e in sent and sent[e][0] == u:  # sent ahead (send)
                            ready = max(ready, sent[e][1])
                        elif llat[v][u] == np.inf:
                            return None
                        else:
                            arriving.append((qend, e, v, share, llat[v][u] + share.bit_count() * nb[e] * mpb[v][u]))
                moves = []
                arriving.sort()
                for a, (qend, e, v, share, dt) in enumerate(arriving):
                    rs = res.route(v, u)
                    ts, lanes = res.earliest(rs, qend, dt)
                    if j < last or a + 1 < len(arriving):
                        res.reserve(rs, lanes, ts, ts + dt)
                        held.append((rs, lanes, ts, ts + dt))
                    moves.append((e, share, ts, ts + dt, rs, lanes))
                    ready = max(ready, ts + dt)
                s, picked = res.earliest((u,), ready, d)
                if j < last:
                    res.reserve((u,), picked, s, s + d)
                    held.append(((u,), picked, s, s + d))
                out.append((u, mask, s, s + d, (picked, moves)))
            return out
        finally:
            for rs, lanes, ts, te in reversed(held):
                res.release(rs, lanes, ts, te)

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
        return _to_schedule(self.p, self.jobs(), self.transfers, **kwargs)


def _to_schedule(p: Problem, jobs: list[tuple[int, int, float, float, int]],
                 transfers: Sequence[tuple[int, int, float, float]] = (), **kwargs: Any) -> Schedule:
    tn, dn, L = p.task_names, p.device_names, p.L
    out = [Job(tn[i], dn[u], s, e, tuple(lo for lo in range(L) if mask >> lo & 1)) for i, u, s, e, mask in jobs]
    s = Schedule.from_jobs(p, out, **kwargs)
    s.transfers = [Transfer(tn[p.src[e]], tn[p.dst[e]], ts, te, tuple(lo for lo in range(L) if mask >> lo & 1))
                   for e, mask, ts, te in transfers]
    return s


class Decoder:
    """A decoder bound to one problem and one priority order, for repeated use.

    Parameters
    ----------
    problem : Problem
    order : sequence of int, optional
        A topological order of the tasks; by default the problem's breadth-first one.
    insertion : bool
        Fill idle gaps (insertion-based list scheduling) instead of appending.
    send : bool
        Where transfers take turns, in a latency problem: reserve each task's transfers out as
        it is placed (:meth:`Builder.send`) instead of as their destinations are.

    Notes
    -----
    One decode costs O(n + E) for latency and O(n m + E m^2) for throughput,
    plus about O(log n) amortised per job with insertion (see :class:`Timeline`).
    """

    def __init__(self, problem: Problem, order: Sequence[int] | None = None, insertion: bool = False,
                 send: bool = False):
        self.p = problem
        self.insertion = insertion
        self.send = send and problem.contended and problem.L == 1
        self.order = problem.topo.tolist() if order is None else checked_order(problem, order)
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
                f"task {shown(p.task_names[i])} cannot run on device {shown(p.device_names[u])} "
                f"at batch size {counts[i, u]}"
            )
        used = memory_use(p, counts)
        over = np.flatnonzero(used > p.room)
        if len(over):
            u = over[0]
            return f"device {shown(p.device_names[u])} needs {used[u]:.0f} bytes of memory, has {p.mem[u]:.0f}"
        if p.E:
            cross = np.isinf(p.link_latency[owner[p.src], owner[p.dst]])
            if cross.any():
                e, lo = np.argwhere(cross)[0]
                a, b = owner[p.src[e], lo], owner[p.dst[e], lo]
                return (
                    f"edge {shown(p.task_names[p.src[e]])} -> {shown(p.task_names[p.dst[e]])} crosses from "
                    f"{shown(p.device_names[a])} to {shown(p.device_names[b])}, which have no link"
                )
        return None

    # ------------------------------------------------------------------ timing
    def times(self, owner: np.ndarray) -> list[tuple[int, int, float, float, int]]:
        """Jobs ``(task, device, start, end, input bitmask)`` of a feasible mapping."""
        if self.p.L == 1 and not self.p.contended:
            return self._times_single(owner[:, 0].tolist())
        return self._built(owner).jobs()

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

    def _built(self, owner: np.ndarray) -> Builder:
        """The mapping committed task by task (batched jobs, or transfers that take turns)."""
        b = Builder(self.p, self.insertion, check=False)
        dev = owner[:, 0].tolist() if self.send else None
        for i in self.order:
            b.commit(i, b.trial(i, owner_masks(owner[i])))
            if dev is not None:
                b.send(i, dev)
        return b

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
        if self.p.contended:
            return self._built(owner).schedule(**kwargs)
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
        Passed on to :class:`~mapsched.model.schedule.Schedule` (``method``, ``status``...).

    Raises
    ------
    InfeasibleError
        If a task cannot run where it is mapped, memory overflows, or data must
        cross between devices with no link.
    """
    return Decoder(problem, order, insertion).schedule(as_owner(problem, mapping), **kwargs)
