"""Transfers that take turns: links and copy engines as resources of limited capacity.

A problem declares contention with ``links[].concurrency`` (how many transfers a link
carries at once, per direction where ``duplex``) and ``devices[].copy_engines`` (how
many copies a device runs at once beside its jobs; 0: its copies occupy the device
itself, as its jobs do). Without either, transfers occupy nothing and this module is
not used. With them, each cross-device transfer of an edge is an interval of its own,
on every resource it uses (:meth:`Resources.route`): the link's channel in its
direction, and at each end the device's copy engines (or the device itself). Each
resource of capacity c is kept as c lanes, lists of disjoint intervals in time order:
any set of intervals that never overlaps more than c at a time fits c lanes (interval
graphs are perfect), so lanes lose nothing but the choice of which lane. Re-timing a
schedule found without contention is :mod:`mapsched.scheduling.retime`.

A transfer of k inputs over the link from u to v lasts ``latency + k * bytes /
bandwidth`` (FORMAT.md's comm for one input): under contention the bytes of each input
cross the link.

Examples
--------
Two 4 ms copies from ``a`` to ``b`` over a link that carries one at a time: the second
waits for the first.

>>> from mapsched import Device, Edge, Link, Problem, System, Task
>>> link = Link("a", "b", 1e6, concurrency=1)
>>> p = Problem([Task("x", {"a": 1}), Task("y", {"a": 1}), Task("z", {"b": 1})],
...             [Edge("x", "z", 4000), Edge("y", "z", 4000)], System((Device("a"), Device("b")), (link,)))
>>> from mapsched.scheduling.decoder import decode
>>> s = decode(p, [0, 0, 1])
>>> [(t.src, t.start, t.end) for t in s.transfers], s.makespan
([('x', 1.0, 5.0), ('y', 5.0, 9.0)], 10.0)
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from operator import sub

from mapsched.model.problem import Problem

__all__ = ["Lanes", "Resources"]


_BLOCK = 64
"""Most intervals a block of a lane holds before it splits in two."""

_MARGIN = 2.0**-50
"""The relative slack of a block's longest gap against a length (see :meth:`_Lane.earliest`)."""


class _Lane:
    """One lane: disjoint busy intervals in time order, cut into blocks of at most
    :data:`_BLOCK`, each block with its last start and end and its longest gap (before each
    of its intervals, from the end of the one before; the lane's first has none). A search
    for a gap skips every block whose longest gap is too short; a change re-measures its
    block and the next one, O(B)."""

    __slots__ = ("ends", "gap", "last_end", "last_start", "starts")

    def __init__(self) -> None:
        self.starts: list[list[float]] = []
        self.ends: list[list[float]] = []
        self.last_start: list[float] = []
        self.last_end: list[float] = []
        self.gap: list[float] = []

    def _measure(self, j: int) -> None:
        st, en = self.starts[j], self.ends[j]
        prev = self.last_end[j - 1] if j else -math.inf
        self.gap[j] = max(map(sub, st, [prev, *en[:-1]]))
        self.last_start[j], self.last_end[j] = st[-1], en[-1]

    def earliest(self, ready: float, d: float, insertion: bool) -> float:
        """As :meth:`Lanes.earliest`, in this lane. The exact test is the flat scan's, so the
        answers are its own: a block is skipped only where its longest gap is short of ``d``
        by more than the rounding of ``prev + d <= start`` could make up."""
        last = self.last_end
        if not last or last[-1] <= ready:
            return ready
        if not insertion:
            return last[-1]
        j = bisect_right(last, ready)  # the first block not over by `ready`
        st, en = self.starts[j], self.ends[j]
        s = ready
        for q in range(bisect_right(en, ready), len(st)):
            if s + d <= st[q]:
                return s
            if en[q] > s:
                s = en[q]
        fit = d - (d + d + max(abs(s), abs(last[-1]))) * _MARGIN
        for b in range(j + 1, len(last)):
            if self.gap[b] >= fit:
                st, en = self.starts[b], self.ends[b]
                for q in range(len(st)):
                    if s + d <= st[q]:
                        return s
                    if en[q] > s:
                        s = en[q]
            elif last[b] > s:
                s = last[b]
        return s

    def _find(self, s: float, e: float, exact: bool) -> tuple[int, int]:
        """Where (block, index) the interval (s, e) goes (after zero-length ones at s that end
        by e), or with ``exact`` where it is."""
        j = min(bisect_left(self.last_start, s), len(self.starts) - 1)
        q = bisect_left(self.starts[j], s)
        while True:
            st, en = self.starts[j], self.ends[j]
            if q == len(st):
                if j + 1 == len(self.starts):
                    return j, q
                j, q = j + 1, 0
                continue
            if exact:
                if st[q] == s and en[q] == e:
                    return j, q
            elif not (st[q] == s and en[q] <= e):
                return j, q
            q += 1

    def reserve(self, s: float, e: float) -> None:
        if not self.starts:
            self.starts.append([s])
            self.ends.append([e])
            self.last_start.append(s)
            self.last_end.append(e)
            self.gap.append(-math.inf)
            self._measure(0)
            return
        j, q = self._find(s, e, exact=False)
        st, en = self.starts[j], self.ends[j]
        if q == len(st) and j + 1 == len(self.starts) and len(st) < _BLOCK:
            # After the lane's last interval, as most of a list schedule's are: one more gap.
            self.gap[j] = max(self.gap[j], s - en[-1])
            st.append(s)
            en.append(e)
            self.last_start[j], self.last_end[j] = s, e
            return
        st.insert(q, s)
        en.insert(q, e)
        if len(self.starts[j]) > _BLOCK:  # split in two
            h = _BLOCK // 2
            for lists in (self.starts, self.ends):
                lists.insert(j + 1, lists[j][h:])
                del lists[j][h:]
            for lists in (self.last_start, self.last_end, self.gap):
                lists.insert(j + 1, 0.0)
        self._measure(j)
        if j + 1 < len(self.starts):
            self._measure(j + 1)

    def release(self, s: float, e: float) -> None:
        j, q = self._find(s, e, exact=True)
        del self.starts[j][q], self.ends[j][q]
        if not self.starts[j]:
            for lists in (self.starts, self.ends, self.last_start, self.last_end, self.gap):
                del lists[j]
        else:
            self._measure(j)
            j += 1
        if j < len(self.starts):
            self._measure(j)


class Lanes:
    """A resource of capacity c: c lanes of disjoint busy intervals, each in time order.

    Notes
    -----
    Each lane is kept in blocks of at most B = :data:`_BLOCK` intervals with their longest
    gaps (:class:`_Lane`): :meth:`earliest` scans the block where ``ready`` falls, then skips
    the blocks whose gaps are too short, O(c (log k + B + k / B)) for k intervals a lane
    (without insertion O(c)), where a scan of every interval after ``ready`` took O(c k)
    (27.6 s of a 35,000-task ``heft`` with every device's copies on it went there);
    :meth:`reserve` and :meth:`release` O(log k + B). The answers are the scan's.
    """

    __slots__ = ("capacity", "insertion", "lanes")

    def __init__(self, capacity: int, insertion: bool) -> None:
        self.capacity = capacity
        self.lanes = [_Lane() for _ in range(capacity)]
        self.insertion = insertion

    def earliest(self, ready: float, d: float) -> tuple[float, int]:
        """The earliest start ``>= ready`` of an interval of length ``d`` in some lane, and that lane
        (the first of equals)."""
        if self.capacity == 1:
            return self.lanes[0].earliest(ready, d, self.insertion), 0
        best, lane = math.inf, 0
        for k, ln in enumerate(self.lanes):
            s = ln.earliest(ready, d, self.insertion)
            if s < best:
                best, lane = s, k
                if s == ready:
                    break
        return best, lane

    def reserve(self, lane: int, s: float, e: float) -> None:
        self.lanes[lane].reserve(s, e)

    def release(self, lane: int, s: float, e: float) -> None:
        self.lanes[lane].release(s, e)


class Resources:
    """Every resource of a contended problem's schedule: each device (capacity 1, its jobs and,
    with no copy engines, its copies), each device's copy engines, each link channel.

    Parameters
    ----------
    problem : Problem
    insertion : bool
        Intervals may go into idle gaps (insertion-based list scheduling) or only after the
        last interval of a lane.
    """

    def __init__(self, problem: Problem, insertion: bool = False) -> None:
        p = self.p = problem
        m = p.m
        self.lanes = [Lanes(1, insertion) for _ in range(m)]
        engine = [-1] * m
        for u, k in enumerate(p.copy_engines):
            if k == 0:
                engine[u] = u
            elif k is not None:
                engine[u] = len(self.lanes)
                self.lanes.append(Lanes(k, insertion))
        channel = [len(self.lanes) + c for c in range(len(p.channel_lanes))]
        self.lanes += [Lanes(c, insertion) for c in p.channel_lanes]
        self._route: list[list[tuple[int, ...]]] = [[() for _ in range(m)] for _ in range(m)]
        for u in range(m):
            for v in range(m):
                if u != v:
                    c = p.channel[u][v]
                    self._route[u][v] = tuple(r for r in (engine[u], channel[c] if c >= 0 else -1, engine[v])
                                              if r >= 0)

    def route(self, u: int, v: int) -> tuple[int, ...]:
        """The resources a transfer from device u to device v occupies."""
        return self._route[u][v]

    def earliest(self, resources: tuple[int, ...], ready: float, d: float) -> tuple[float, tuple[int, ...]]:
        """The earliest start ``>= ready`` at which every one of ``resources`` has a lane free for
        ``d``, and the lane of each. Each round moves the start to the latest of the resources'
        own earliest starts, until all agree. O(rounds x their :meth:`Lanes.earliest`)."""
        lanes = self.lanes
        t = ready
        while True:
            picked = []
            moved = False
            for r in resources:
                s, k = lanes[r].earliest(t, d)
                if s > t:
                    t, moved = s, True
                    break
                picked.append(k)
            if not moved:
                return t, tuple(picked)

    def reserve(self, resources: tuple[int, ...], picked: tuple[int, ...], s: float, e: float) -> None:
        for r, k in zip(resources, picked):
            self.lanes[r].reserve(k, s, e)

    def release(self, resources: tuple[int, ...], picked: tuple[int, ...], s: float, e: float) -> None:
        for r, k in zip(resources, picked):
            self.lanes[r].release(k, s, e)

