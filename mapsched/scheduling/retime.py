"""Schedules re-timed where transfers take turns (:mod:`mapsched.scheduling.contention`): a
method's schedule found without contention, in its start order, and a solver's jobs and
transfers in the order of their starts."""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from mapsched.model.problem import Problem
from mapsched.model.schedule import Schedule
from mapsched.model.validate import validate
from mapsched.scheduling.contention import Resources
from mapsched.scheduling.decoder import Decoder, _to_schedule, as_owner, ready_order

__all__ = ["in_order", "redecoded", "retimed"]


def retimed(problem: Problem, schedule: Schedule) -> Schedule:
    """``schedule``, or where its transfers do not take turns as ``problem`` declares (a method
    that times without contention), its mapping re-timed by the decoder in its start order,
    with insertion, every transfer on its resources (:func:`redecoded`). Its proved bound stays:
    contention only adds constraints, so a bound without it holds. O(J log J + E L), plus two
    decodes."""
    if not [v for v in validate(problem, schedule) if v.rule >= 8]:
        return schedule
    s = redecoded(problem, schedule, method=schedule.method, lower_bound=schedule.lower_bound)
    s.log = (schedule.log + f"{schedule.method} times transfers without contention: its makespan "
             f"{schedule.makespan:.6g} re-timed with transfers taking turns, {s.makespan:.6g}\n")
    s.interrupted = schedule.interrupted
    return s


def redecoded(problem: Problem, schedule: Schedule, **kwargs: Any) -> Schedule:
    """The mapping of ``schedule`` (of ``problem`` or of a problem with the same tasks and
    devices) decoded on ``problem`` in its start order, with insertion; where transfers take
    turns in a latency problem, the better of the decodes that reserve each transfer as its
    destination or as its source is placed (``send`` of
    :class:`~mapsched.scheduling.decoder.Decoder`; neither wins everywhere). ``kwargs`` go
    to :meth:`~mapsched.scheduling.decoder.Decoder.schedule`. O(J + n log n), plus a decode or two."""
    first = np.full(problem.n, np.inf)
    for j in schedule.jobs:
        i = problem.task_index[j.task]
        first[i] = min(first[i], j.start)
    order, owner = ready_order(problem, -first), as_owner(problem, schedule.mapping())
    ways = (False, True) if problem.contended and problem.L == 1 else (False,)
    return min((Decoder(problem, order, insertion=True, send=send).schedule(owner, **kwargs) for send in ways),
               key=lambda s: s.makespan)


def in_order(problem: Problem, dev: Sequence[int], job_start: Sequence[float], transfer_start: Mapping[int, float],
             **kwargs: Any) -> Schedule:
    """A latency mapping timed with its jobs and transfers taken in the order of the given
    starts (a solver's, in ms), each appended to its resources' lanes (the lane free first) as
    soon as its predecessors end: a transfer after its source's job, a job after its inputs.
    Every resource then runs its jobs and transfers in the given order, so where the starts are
    a valid schedule's (up to rounding), none starts later than there. A transfer with no start
    given goes at its source's. O((n + E) log n) plus the lanes' appends."""
    p = problem
    res = Resources(p)
    src, dst = p.src.tolist(), p.dst.tolist()
    cross = [e for e in range(p.E) if dev[src[e]] != dev[dst[e]]]
    # Activities: jobs 0..n-1, then the transfers of the cross edges.
    key = [float(x) for x in job_start] + [transfer_start.get(e, float(job_start[src[e]])) for e in cross]
    dur = [float(p.dur[i, dev[i]]) for i in range(p.n)] + [float(p.comm[e, dev[src[e]], dev[dst[e]]]) for e in cross]
    rs = [(dev[i],) for i in range(p.n)] + [res.route(dev[src[e]], dev[dst[e]]) for e in cross]
    after: list[list[int]] = [[] for _ in key]
    waits = [0] * len(key)
    slot = {e: p.n + k for k, e in enumerate(cross)}
    for e in range(p.E):
        if e in slot:
            after[src[e]].append(slot[e])
            after[slot[e]].append(dst[e])
            waits[slot[e]] += 1
        else:
            after[src[e]].append(dst[e])
        waits[dst[e]] += 1
    ready = [0.0] * len(key)
    # zero-length activities first among equal starts: after a long one they would wait for its end
    heap = [(round(key[a], 9), dur[a] > 0, a) for a in range(len(key)) if not waits[a]]
    heapq.heapify(heap)
    end = [0.0] * len(key)
    while heap:
        a = heapq.heappop(heap)[2]
        s, lanes = res.earliest(rs[a], ready[a], dur[a])
        res.reserve(rs[a], lanes, s, s + dur[a])
        end[a] = s + dur[a]
        for b in after[a]:
            ready[b] = max(ready[b], end[a])
            waits[b] -= 1
            if not waits[b]:
                heapq.heappush(heap, (round(key[b], 9), dur[b] > 0, b))
    jobs = [(i, dev[i], end[i] - dur[i], end[i], 1) for i in range(p.n)]
    moves = [(e, 1, end[p.n + k] - dur[p.n + k], end[p.n + k]) for k, e in enumerate(cross)]
    return _to_schedule(p, sorted(jobs, key=lambda j: (j[2], j[0])), moves, **kwargs)
