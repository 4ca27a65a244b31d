"""The best of the fast list schedulers: the start of every exact, split and default solve.

A time limit, when given, is honoured between schedulers: the first always runs
(so there is always an answer), and each next one only when the time left is more
than twice what the slowest so far took.

The schedulers are deterministic, and one solve asks more than once for the same
problem (the batched relaxation's cap in the bound :func:`mapsched.solve` adds, then the
method's start): the last problem's complete answer is kept, so it is computed once.
"""

from __future__ import annotations

import math
import time
import weakref
from dataclasses import replace

from mapsched.model.problem import Problem
from mapsched.model.schedule import Schedule

__all__ = ["LIST_SCHEDULERS", "LIST_SECONDS", "best_list_schedule", "best_start", "makespan_cap",
           "no_time_for_list", "seconds_per_pass"]

LIST_SCHEDULERS = {"latency": ("heft", "peft", "cpop", "m-etf"), "throughput": ("bheft",)}
"""The list schedulers tried, first to last, per objective: each is near-linear in the graph,
so all of them fit the time of even a large graph's solve."""


def best_list_schedule(problem: Problem, ctx=None) -> Schedule:
    """The best schedule of the :data:`LIST_SCHEDULERS` (the first of equals), with the
    method that found it in ``method`` and the ones tried in ``log``.

    Parameters
    ----------
    problem : Problem
    ctx : SolveContext, optional
        Its time limit is checked between schedulers; none is reported to its callback.
        No bound is computed.

    Returns
    -------
    Schedule

    Notes
    -----
    O(the schedulers' time): O((n m + E) log n) each for latency; O(jobs) for the same
    problem object as the last call, when that one ran every scheduler.

    Examples
    --------
    >>> import mapsched
    >>> from mapsched.scheduling.best_list import best_list_schedule
    >>> best_list_schedule(mapsched.instances.load("topcuoglu2002")).makespan
    80.0
    """
    from mapsched.engine.context import SolveContext
    from mapsched.engine.registry import get
    from mapsched.scheduling.feasibility import NotFound

    global _last, _passes
    last = _last  # read once: solves in other threads may replace it
    if last is not None and last[0]() is problem:
        return _copy(last[1])
    best, slowest, tried, began_all = None, 0.0, [], time.perf_counter()
    for name in LIST_SCHEDULERS[problem.objective.kind]:
        if best is not None and ctx is not None and ctx.remaining() <= 2 * slowest:
            break
        began = time.perf_counter()
        try:
            s = get(name).fn(problem, SolveContext())
        except NotFound as exc:  # its repair ran out of time: the others may still place every task
            missed = exc
            tried.append(f"{name} none in time")
            continue
        finally:
            slowest = max(slowest, time.perf_counter() - began)
        s.method = name
        tried.append(f"{name} {s.makespan:.6g}")
        if best is None or s.makespan < best.makespan:
            best = s
    _passes = (weakref.ref(problem), (time.perf_counter() - began_all) / len(tried))
    if best is None:
        raise missed
    best.log += f"list schedulers: {', '.join(tried)}; best {best.method}\n"
    if len(tried) == len(LIST_SCHEDULERS[problem.objective.kind]):  # not cut short by a time limit
        _last = (weakref.ref(problem), _copy(best))
    return best


_last: tuple[weakref.ref[Problem], Schedule] | None = None
"""The last problem that every list scheduler ran on (held weakly), and its best schedule."""

_passes: tuple[weakref.ref[Problem], float] | None = None
"""The last problem any list scheduler ran on (held weakly), and the mean seconds of its passes."""


def seconds_per_pass(problem: Problem) -> float | None:
    """The mean seconds one list scheduler took on ``problem`` when
    :func:`best_list_schedule` last computed its answer: what another pass over the whole
    graph takes. None if it has not run on this problem object since another."""
    passes = _passes
    return passes[1] if passes is not None and passes[0]() is problem else None


def makespan_cap(problem: Problem, until: float) -> float:
    """A length no job or transfer of an optimal schedule exceeds: the best list schedule's
    makespan (a hair above), found by ``until`` (:func:`time.perf_counter`). Infinite where
    none is found (memory and links too tight for one in time, or one job per task and
    device ruling every mapping out): no cap, and the relaxation that uses it still sound."""
    from mapsched.engine import interrupt
    from mapsched.errors import InfeasibleError

    try:
        with interrupt.until(until):  # a repair's CP-SAT within the caller's time
            return best_list_schedule(problem).makespan * (1 + 1e-9)
    except InfeasibleError:
        return math.inf


def _copy(s: Schedule) -> Schedule:
    """A copy whose fields a caller may change (jobs are immutable)."""
    return replace(s, jobs=list(s.jobs), history=list(s.history))


LIST_SECONDS = 5e-5
"""Seconds per task and device that a list scheduler may take: a margin of about four over
HEFT's time on tens of thousands of tasks on the slowest machines it was measured on
(:func:`no_time_for_list`)."""


def no_time_for_list(problem: Problem, ctx) -> bool:
    """Whether ``ctx``'s time limit leaves less than a list scheduler may take on ``problem``
    (:data:`LIST_SECONDS`): then a search that has an initial placement starts from it alone."""
    return ctx is not None and ctx.time_limit is not None and ctx.remaining() < LIST_SECONDS * problem.n * problem.m


def best_start(problem: Problem, initial: Schedule | None, ctx=None) -> Schedule:
    """The better of :func:`best_list_schedule` (given ``ctx``) and ``initial``, a solve's
    initial placement (:attr:`SolveContext.initial`), if any; the list schedule on ties.
    ``initial`` alone where the time limit leaves no time for a list scheduler."""
    if initial is not None and no_time_for_list(problem, ctx):
        initial.method = "initial"
        return initial
    s = best_list_schedule(problem, ctx)
    if initial is not None and initial.makespan < s.makespan:
        s = initial
        s.method = "initial"
    return s
