"""``relax-round``: the relaxation's shares of each task on each class of identical devices,
rounded, then list-scheduled within the classes.

On memory-tight systems (a few fast accelerators of little memory beside slow CPU cores
that hold everything) the list schedulers fill the fast devices in rank order and push
whatever comes last onto the slow ones, where it runs tens of times longer on the critical
path. Which tasks should leave the fast devices is a choice over the whole graph: those
whose memory is large and whose time and transfers matter least. The linear programme of
:mod:`mapsched.bounds.relaxation`, with each class of identical devices folded into one
(:func:`~mapsched.bounds.relaxation.folded_relaxation`), weighs memory, paths, loads and
transfers together, and its share ``x[i, c]`` of task i on class c says where i belongs.
Given the time, the same programme with load cuts and every task whole (mixed-integer) then
chooses one class per task within the classes' memory: no rounding moves a task there, and
on ResNet-50's graphs its choice schedules 7% shorter than the rounded shares.

Rounding, for each slack in :data:`SLACKS` and two preferences, takes the tasks in
decreasing order of their share on the class they prefer, and puts each on the first class
of its preference that still holds it (the class's memory summed over its devices and
divided by the slack, which leaves each device room to pack, and one device that holds the
task alone). A task prefers its classes in decreasing order of its share (*largest*), or
fastest first (*fastest*: the fast devices keep every task they have room for, and only what
the programme moves off them most leaves). ``heft`` and ``peft`` then place each task within
its class (the problem restricted to it), and the best mapping is decoded on the problem.

Examples
--------
>>> import mapsched
>>> p = mapsched.instances.load("real/gnmt-layer")
>>> s = mapsched.solve(p, "relax-round")
>>> s.makespan < mapsched.solve(p, "heft").makespan, mapsched.validate(p, s)
(True, [])
"""

from __future__ import annotations

import time

import numpy as np

from mapsched.bounds.relaxation import folded_relaxation
from mapsched.engine import interrupt
from mapsched.engine.context import SolveContext
from mapsched.engine.registry import Option, get, register
from mapsched.errors import InfeasibleError, OptionError, shown
from mapsched.model.problem import Problem
from mapsched.model.schedule import Schedule
from mapsched.scheduling.best_list import best_list_schedule
from mapsched.scheduling.retime import redecoded

__all__ = ["PREFERENCES", "REPAIR_SECONDS", "SCHEDULERS", "SLACKS", "relax_round", "rounded_classes",
           "rounded_schedule"]

SLACKS = (1.0, 1.05, 1.1, 1.25)
"""Factors the memory of each class is divided by before rounding: at 1.0 the fast devices
take all they can hold together, which may not pack onto each of them."""

PREFERENCES = ("largest", "fastest")
"""The orders in which a task tries the classes (see the module docstring)."""

SCHEDULERS = ("heft", "peft")
"""The list schedulers that place each task within its class."""

REPAIR_SECONDS = 1.0
"""The most seconds a list schedule that dead-ends on memory gets for its feasibility repair
(:func:`~mapsched.scheduling.construct.repair`)."""


def rounded_classes(problem: Problem, classes: list[list[int]], x: np.ndarray, slack: float = 1.0,
                    prefer: str = "largest") -> list[list[int]] | None:
    """The devices each task may use after rounding the shares ``x`` (tasks by classes; see the
    module docstring), or None where some task fits no class that has room left. O(n k log n)
    for k classes.

    Examples
    --------
    >>> from mapsched import instances
    >>> p = instances.load("topcuoglu2002")
    >>> x = np.zeros((p.n, 3)); x[:, 1] = 1
    >>> rounded_classes(p, [[0], [1], [2]], x)[0]
    [1]
    """
    if prefer not in PREFERENCES:
        raise OptionError(f"prefer: expected one of {', '.join(PREFERENCES)}, got {shown(prefer)}")
    p = problem
    need = p.weight + p.act
    holds = p.can_run & (need[:, None] <= p.room[None, :])
    fits = np.stack([holds[:, c].any(axis=1) for c in classes], axis=1)
    room = np.array([p.room[c].sum() for c in classes]) / slack
    if prefer == "largest":
        order_c = np.argsort(-x, axis=1, kind="stable")
    else:
        t = np.stack([np.where(holds[:, c], p.dur[:, c], np.inf).min(axis=1) for c in classes], axis=1)
        order_c = np.argsort(t, axis=1, kind="stable")
    first = x[np.arange(p.n), order_c[:, 0]]
    on = np.full(p.n, -1)
    closed = np.zeros(len(classes), dtype=bool)
    for i in np.argsort(-first, kind="stable").tolist():
        for c in order_c[i].tolist():
            if fits[i, c] and need[i] <= room[c] and not closed[c]:
                room[c] -= need[i]
                on[i] = c
                break
            # Fastest first, a class full for one task takes no later one: the tasks the
            # programme moves off it most leave, not the largest
            closed[c] |= prefer == "fastest" and fits[i, c]
        else:
            return None
    allowed = [[u for u in classes[c] if holds[i, u]] for i, c in enumerate(on.tolist())]
    return allowed if _packs(p, allowed, need) else None


def _packs(p: Problem, allowed: list[list[int]], need: np.ndarray) -> bool:
    """Whether the tasks fit their devices' memory, each task on one of its ``allowed``
    devices, by first fit in decreasing size (a heuristic: a rounding it cannot pack, the list
    schedulers would end in a feasibility repair, which costs seconds). O(n log n + n m)."""
    room = p.room.copy()
    for i in np.argsort(-need, kind="stable").tolist():
        for u in allowed[i]:
            if need[i] <= room[u]:
                room[u] -= need[i]
                break
        else:
            return False
    return True


def rounded_schedule(problem: Problem, ctx: SolveContext, lp_seconds: float) -> Schedule | None:
    """The best schedule of the roundings (see the module docstring), or None where the
    programme is not solved within ``lp_seconds`` (or the problem is a throughput one or has
    over :data:`~mapsched.bounds.relaxation.RELAXATION_TASKS` tasks) or no rounding fits.
    The folded programme (``n k + n + 1 + E k^2`` columns for k classes) within ``lp_seconds``,
    then at most ``len(SLACKS) * (len(PREFERENCES) + 1) * len(SCHEDULERS)`` list schedules of
    O((n m + E) log n). The schedule's bound is what the programme proved."""
    p = problem
    began = time.perf_counter()
    seconds = min(lp_seconds, ctx.remaining())
    folded = folded_relaxation(p, seconds) if seconds > 0 else None
    if folded is None:
        return None
    # (shares, preference, name in the log)
    roundings = [(folded.shares, prefer, prefer) for prefer in PREFERENCES]
    if folded.whole is not None:
        roundings.append((folded.whole, "largest", "whole"))
    best: Schedule | None = None
    tried: list[str] = []
    seen: set[tuple[tuple[int, ...], ...]] = set()
    for slack in SLACKS:
        for x, prefer, what in roundings:
            allowed = rounded_classes(p, folded.classes, x, slack, prefer)
            if allowed is None or ctx.expired():
                continue
            key = tuple(map(tuple, allowed))
            if key in seen:  # the same rounding: the same schedules
                continue
            seen.add(key)
            q = p.restrict(range(p.n), fix=dict(enumerate(allowed)), name=p.name)
            for name in SCHEDULERS:
                try:
                    with interrupt.until(time.perf_counter() + REPAIR_SECONDS):
                        s = get(name).fn(q, SolveContext())
                except InfeasibleError:  # its devices could not pack this rounding in time
                    continue
                tried.append(f"{name} at slack {slack:g} ({what}) {s.makespan:.6g}")
                if best is None or s.makespan < best.makespan:
                    best = s
    if best is None:
        return None
    s = redecoded(p, best, method="relax-round")
    s.lower_bound = folded.bound or None
    ctx.fast_bound = max(ctx.fast_bound, folded.bound)  # the stages after it may stop on meeting it
    s.log = (f"relax-round: programme (bound {folded.bound:.6g}) and roundings in {time.perf_counter() - began:.3g} s; "
             f"{', '.join(tried)}\n")
    ctx.improved(s.makespan)
    return s


@register("relax-round", "the relaxation's shares of each task on each class of identical devices, "
          "rounded, then heft and peft within the classes: for memory-tight systems",
          objectives=("latency",),
          options=(Option("lp_seconds", float, 20.0, "most seconds for the linear programme"),))
def relax_round(problem: Problem, ctx: SolveContext, lp_seconds: float) -> Schedule:
    """:func:`rounded_schedule`, or where it finds none, the best list schedule, which its
    log says."""
    s = rounded_schedule(problem, ctx, lp_seconds)
    if s is None:
        s = best_list_schedule(problem, ctx)
        s.log += ("relax-round: no rounding (the programme unsolved in time, or none fits); "
                  "the best list schedule\n")
        ctx.improved(s.makespan)
    return s
