"""What the exact backends share: capped and scaled problems, the constraint hook, edge
crossing times, and turning a solver's answer back into a valid schedule. The valid
inequalities they share (time windows, load cuts) are :mod:`mapsched.bounds.cuts`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from typing import Any, Protocol

import numpy as np

from mapsched.model.problem import Problem
from mapsched.model.schedule import Schedule
from mapsched.scheduling.decoder import Builder, Decoder, ready_order

__all__ = ["HIGHS_BYTES", "ModelView", "Plugin", "apply_plugins", "capped", "clamp_times", "edge_comm", "retime",
           "retime_jobs"]


class ModelView(Protocol):
    """What a constraint plugin sees of an exact model, whatever the backend.

    Expressions are the backend's own (Pyomo or CP-SAT); both support ``+``,
    ``*`` by a number, ``sum`` and the comparisons ``<=``, ``>=`` and ``==``,
    so one plugin serves both. Compare times only with times: CP-SAT counts them
    in integer ticks, Pyomo in milliseconds.
    """

    problem: Problem

    def use(self, i: int, u: int) -> Any:
        """1 if task i runs (some of its inputs) on device u, else 0."""

    def count(self, i: int, u: int) -> Any:
        """Number of task i's inputs on device u."""

    def busy(self, u: int) -> Any:
        """Total busy time of device u."""

    def add(self, constraint: Any) -> None:
        """Add a constraint built from the expressions above."""


Plugin = Callable[[ModelView], None]
"""A constraint plugin: called once with the model view after the model is built."""


def apply_plugins(view: ModelView, plugins: Iterable[Plugin]) -> None:
    for plugin in plugins:
        plugin(view)


def clamp_times(times: np.ndarray, cap: float) -> np.ndarray:
    """``times`` with every finite value above ``cap`` lowered to ``cap``; ``inf`` (impossible) stays."""
    return np.where(np.isfinite(times), np.minimum(times, cap), times)


def capped(problem: Problem, cap: float) -> Problem:
    """The problem with every job and transfer time above ``cap`` lowered to ``cap``, for
    building models: a shallow copy whose ``lat``, ``dur`` and ``comm`` are clamped
    (:func:`clamp_times`), everything else shared. Its tasks and links keep the true
    times, so time and validate schedules against ``problem`` itself.

    Problem files allow jobs of 1e12 ms and transfers of 1e21 ms next to jobs of a
    microsecond: as coefficients they overflow CP-SAT's 64-bit ticks and make HiGHS's
    answers wrong. Shortening jobs and transfers keeps every schedule valid with the
    same starts and a makespan no larger, so the capped optimum is a lower bound of the
    real one, and a model's bound stays sound. Where a model's makespan cannot reach
    ``cap`` (it is capped by an upper bound below it), no schedule of it uses a capped
    job or transfer, so both have the same optimum and the same optimal schedules.
    Infinite times (a task a device cannot run, devices with no link) stay infinite.
    """
    q = copy.copy(problem)
    q.lat = clamp_times(problem.lat, cap)
    q.dur = clamp_times(problem.dur, cap)
    q.comm = clamp_times(problem.comm, cap)
    for a in (q.lat, q.dur, q.comm):
        a.setflags(write=False)
    return q


def scaled(problem: Problem, factor: float) -> Problem:
    """The problem with every time multiplied by ``factor`` (a power of two, so exactly), for
    building models that count time in another unit: a shallow copy as :func:`capped`
    makes, whose jobs, transfers and link latencies are scaled."""
    if factor == 1.0:
        return problem
    q = copy.copy(problem)
    for name in ("lat", "dur", "comm", "link_latency", "link_ms_per_byte"):
        a = getattr(problem, name) * factor
        a.setflags(write=False)
        setattr(q, name, a)
    return q


HIGHS_BYTES = 2.0**40
"""Largest size the HiGHS models state in a memory row (see :func:`byte_unit`)."""


def edge_comm(problem: Problem) -> tuple[np.ndarray, np.ndarray]:
    """Per edge: ``cmin``, the least time to cross any link (``inf`` if none can be crossed),
    and ``extra[e, u, v] = comm(e, u, v) - cmin[e]`` for u != v (``inf`` without a link).

    Models state "an edge whose ends sit on different devices costs at least cmin"
    with one literal per edge, and add pair constraints only where ``extra > 0``:
    none at all on a system whose links are all alike.
    """
    p = problem
    off = ~np.eye(p.m, dtype=bool)
    comm = np.where(off[None], p.comm, np.inf)
    cmin = comm.min(axis=(1, 2)) if p.m > 1 else np.full(p.E, np.inf)
    extra = comm - np.where(np.isfinite(cmin), cmin, 0.0)[:, None, None]
    return cmin, extra


def retime(problem: Problem, owner: np.ndarray, starts: np.ndarray, transfer_starts: dict[int, float] | None = None,
           **kwargs: Any) -> Schedule:
    """Re-time a solver's answer exactly: decode its mapping in the order of its start
    times (ties in topological order), each job in the first gap of its device that fits
    it. Each job then starts no later than the solver put it, up to the solver's rounding
    and tolerances. Where transfers take turns and the solver gives their starts, jobs and
    transfers go in the order of those starts instead (:func:`~mapsched.scheduling.retime.in_order`)."""
    if problem.contended and transfer_starts is not None:
        from mapsched.scheduling.retime import in_order

        return in_order(problem, np.asarray(owner)[:, 0].tolist(), starts, transfer_starts, **kwargs)
    # Taking the ready task that starts first is the start order whenever that order is
    # topological, and stays topological when solver tolerances blur zero-length jobs. Of
    # jobs that start together (to 1e-9 ms: HiGHS's starts differ by 1e-15), zero-length ones
    # go first: after a long one they would wait for its end and delay what follows. Gaps are
    # filled too (never later than appending: O(log n) more).
    p = problem
    zero = p.dur[np.arange(p.n), np.asarray(owner)[:, 0]] == 0
    tie = np.where(zero, 0, p.n) + np.arange(p.n)
    order = ready_order(p, -np.round(np.asarray(starts, dtype=float), 9), tie)
    return Decoder(p, order, insertion=True).schedule(owner, **kwargs)


def retime_jobs(problem: Problem, jobs: list[tuple[int, int, int, Any]], **kwargs: Any) -> Schedule:
    """Re-time batched jobs ``(task, device, input mask, key)`` exactly, one job at a time in
    the order of their keys (the solver's starts), each in the first gap of its device that
    fits it (as :func:`retime`: no job later than appending in that order puts it). A job
    whose parents' jobs (for its inputs) are not placed yet waits for them, so solver
    tolerances can never reorder a precedence."""
    p = problem
    pos = np.empty(p.n, dtype=np.int64)
    pos[p.topo] = np.arange(p.n)
    def long(job: tuple[int, int, int, Any]) -> bool:  # zero-length jobs first among equal starts (retime)
        c = job[2].bit_count()
        return c >= len(p.batch_pos) or p.batch_pos[c] < 0 or p.lat[job[0], job[1], p.batch_pos[c]] > 0

    def near(key: Any) -> Any:  # float starts to 1e-9 ms (retime); ticks and tuples as they are
        return round(float(key), 9) if isinstance(key, (float, np.floating)) else key

    queue = sorted(jobs, key=lambda j: (near(j[3]), long(j), pos[j[0]]))
    held = [0] * p.n  # input masks placed so far, per task
    b = Builder(p, insertion=True, check=False)
    while queue:
        k = next((k for k, (i, _, mask, _) in enumerate(queue)
                  if all(held[q] & mask == mask for q in p.pred[i])), None)
        if k is None:
            raise ValueError("retime_jobs: the jobs do not cover every parent's inputs")
        i, u, mask, _ = queue.pop(k)
        b.commit(i, b.trial(i, [(u, mask)]))
        held[i] |= mask
    return b.schedule(**kwargs)
