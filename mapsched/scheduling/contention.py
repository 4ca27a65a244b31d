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

from mapsched.model.problem import Problem

__all__ = ["Lanes", "Resources"]


class Lanes:
    """A resource of capacity c: c lanes of disjoint busy intervals, each in time order.

    Notes
    -----
    :meth:`earliest` scans, in each lane, the intervals that end after ``ready``: O(c (log k
    + s)) for s intervals scanned (without insertion O(c)); :meth:`reserve` and
    :meth:`release` O(log k + k) list moves (C-level).
    """

    __slots__ = ("ends", "insertion", "starts")

    def __init__(self, capacity: int, insertion: bool) -> None:
        self.starts: list[list[float]] = [[] for _ in range(capacity)]
        self.ends: list[list[float]] = [[] for _ in range(capacity)]
        self.insertion = insertion

    def earliest(self, ready: float, d: float) -> tuple[float, int]:
        """The earliest start ``>= ready`` of an interval of length ``d`` in some lane, and that lane
        (the first of equals)."""
        best, lane = math.inf, 0
        for k, (st, en) in enumerate(zip(self.starts, self.ends)):
            if not self.insertion:
                s = en[-1] if en and en[-1] > ready else ready
            else:
                s = ready
                for q in range(bisect_right(en, ready), len(st)):  # the intervals not over by `ready`
                    if s + d <= st[q]:
                        break
                    if en[q] > s:
                        s = en[q]
            if s < best:
                best, lane = s, k
                if s == ready:
                    break
        return best, lane

    def reserve(self, lane: int, s: float, e: float) -> None:
        st, en = self.starts[lane], self.ends[lane]
        q = bisect_left(st, s)
        while q < len(st) and st[q] == s and en[q] <= e:  # zero-length intervals at s first
            q += 1
        st.insert(q, s)
        en.insert(q, e)

    def release(self, lane: int, s: float, e: float) -> None:
        st, en = self.starts[lane], self.ends[lane]
        q = bisect_left(st, s)
        while en[q] != e or st[q] != s:
            q += 1
        del st[q], en[q]


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

