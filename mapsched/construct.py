"""Pieces shared by the heuristics: per-task options and list construction (the ranks are in
:mod:`mapsched.ranks`).

Every constructive heuristic is one loop: take tasks in a priority order, try
each option of the current task with the :class:`~mapsched.decoder.Builder`,
commit the one its rule prefers. When memory or links leave a task no option,
the loop hands over to :func:`~mapsched.feasibility.feasible_counts`, which
keeps the choices made so far where it can, and decodes its mapping instead.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Sequence
from itertools import product

import numpy as np

from .decoder import Builder, Decoder, as_owner, checked_order, owner_counts, split_masks
from .problem import Problem
from .ranks import rank_order, upward_rank
from .schedule import Schedule
from .splits import batch_options, owner_from_counts

Option = list[tuple[int, int]]  # the jobs of one task: (device, input bitmask)
Trial = list[tuple[int, int, float, float, int]]  # Builder.trial output
Rule = Callable[[int, list[tuple[Option, Trial]], Builder], tuple[Option, Trial]]

MAX_SPLITS = 64  # candidate splits kept per task for batched heuristics
_ENUMERATE = 50_000  # above this many count vectors, _splits grows them by a beam instead


def _splits(problem: Problem, i: int) -> tuple[tuple[int, ...], ...]:
    """Feasible count vectors of task i, fastest (smallest longest job, then fewest devices)
    first, at most MAX_SPLITS.

    All vectors are enumerated when there are few (O(product of choices)); on many
    devices a beam over the devices keeps the MAX_SPLITS best partial vectors per
    partial sum instead (O(m L MAX_SPLITS nb)), which may miss some of the best.
    """
    p = problem
    choices = [[0, *batch_options(p, i, u)] for u in range(p.m)]
    if math.prod(len(c) for c in choices) <= _ENUMERATE:
        found = []
        for counts in product(*choices):
            if sum(counts) == p.L:
                longest = max(p.lat[i, u, p.batch_pos[c]] for u, c in enumerate(counts) if c)
                found.append((longest, sum(1 for c in counts if c), counts))
        return tuple(c for _, _, c in sorted(found)[:MAX_SPLITS])
    beam: dict[int, list[tuple[float, int, tuple[int, ...]]]] = {0: [(0.0, 0, ())]}
    for u, opts in enumerate(choices):
        grown: dict[int, list[tuple[float, int, tuple[int, ...]]]] = {}
        for total, parts in beam.items():
            for c in opts:
                if total + c > p.L:
                    continue
                t = float(p.lat[i, u, p.batch_pos[c]]) if c else 0.0
                grown.setdefault(total + c, []).extend(
                    (max(longest, t), used + (c > 0), counts + (c,)) for longest, used, counts in parts)
        beam = {total: heapq.nsmallest(MAX_SPLITS, parts) for total, parts in grown.items()}
    return tuple(c for _, _, c in beam.get(p.L, []))


def options(problem: Problem, i: int) -> list[Option]:
    """The ways to run task i: one device (latency) or one split of its inputs (throughput)."""
    if problem.L == 1:
        return [[(int(u), 1)] for u in np.flatnonzero(problem.can_run[i])]
    return [split_masks(c) for c in _splits(problem, i)]


def job_time(trial: Trial) -> float:
    """How long the task's slowest job lasts (its execution time, waiting excluded)."""
    return max(e - s for _, _, s, e, _ in trial)


def finish(trial: Trial) -> float:
    return max(e for _, _, _, e, _ in trial)


def construct(problem: Problem, order: Sequence[int], rule: Rule, insertion: bool, **kwargs) -> Schedule:
    """List-schedule ``order`` with ``rule`` choosing among each task's feasible options.

    ``order`` must list every task once, parents first (see
    :func:`~mapsched.decoder.checked_order`). Falls back to a feasibility repair when a task
    has no feasible option left.
    """
    order = checked_order(problem, order)
    b = Builder(problem, insertion)
    for i in order:
        tried = [(opt, t) for opt in options(problem, i) if (t := b.trial(i, opt)) is not None]
        if not tried:
            return _repair(problem, order, b, insertion, **kwargs)
        b.commit(i, rule(i, tried, b)[1])
    return b.schedule(**kwargs)


def _repair(problem: Problem, order: Sequence[int], b: Builder, insertion: bool, **kwargs) -> Schedule:
    """Finish a dead-ended construction: keep what was placed where memory and links allow."""
    prefer = owner_counts(problem, b.owner())
    prefer[[not jobs for jobs in b.placed]] = 0
    return repair(problem, order, prefer, insertion, **kwargs)


def repair(problem: Problem, order: Sequence[int], prefer: np.ndarray, insertion: bool, **kwargs) -> Schedule:
    """The schedule, decoded in ``order``, of a mapping that fits memory and links and keeps as
    much of ``prefer`` as it can.

    ``prefer[i, u]`` is the number of inputs of task i that a dead-ended construction put on
    device u, shape (n, m); a row of zeros marks a task it did not place, which then prefers
    its fastest device. Raises :class:`~mapsched.errors.InfeasibleError` when no mapping fits.
    """
    prefer = np.array(prefer, dtype=np.int64)
    for i in np.flatnonzero(prefer.sum(axis=1) == 0):
        prefer[i, int(np.argmin(problem.lat[i].min(axis=1)))] = problem.L
    from .feasibility import feasible_counts  # CP-SAT: loaded only when a construction dead-ends

    counts = feasible_counts(problem, prefer)
    s = Decoder(problem, order, insertion).schedule(owner_from_counts(counts), **kwargs)
    s.log += "construction dead-ended on memory or links; finished by a feasibility repair\n"
    return s


def repair_placement(problem: Problem, owner: np.ndarray) -> Schedule:
    """The feasibility repair of a dead-ended latency placement: ``owner[i]`` is task i's
    device, or -1 where the placer left it; the placed tasks keep their devices where memory
    and links allow, and the schedule is decoded by upward rank, with insertion."""
    p = problem
    prefer = np.zeros((p.n, p.m), dtype=np.int64)
    placed = np.flatnonzero(owner >= 0)
    prefer[placed, owner[placed]] = 1
    return repair(p, rank_order(p, upward_rank(p)), prefer, insertion=True)


def repaired_owner(problem: Problem) -> np.ndarray:
    """A latency placement that fits memory and links (a device index per task), for
    searches whose random starts do not: the feasibility repair's with nothing placed."""
    return as_owner(problem, repair_placement(problem, np.full(problem.n, -1, dtype=np.int64)).mapping())[:, 0]
