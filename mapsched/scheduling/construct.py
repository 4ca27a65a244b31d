"""Pieces shared by the heuristics: per-task options and list construction (the ranks are in
:mod:`mapsched.scheduling.ranks`).

Every constructive heuristic is one loop: take tasks in a priority order, try
each option of the current task with the :class:`~mapsched.scheduling.decoder.Builder`,
commit the one its rule prefers. When memory or links leave a task no option,
the loop hands over to :func:`~mapsched.scheduling.feasibility.feasible_counts`, which
keeps the choices made so far where it can, and decodes its mapping instead.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Sequence
from itertools import product
from typing import NamedTuple

import numpy as np

from mapsched.errors import OptionError, shown
from mapsched.model.owners import batch_options, owner_from_counts
from mapsched.model.problem import Problem
from mapsched.model.schedule import Schedule
from mapsched.scheduling.decoder import Builder, Decoder, as_owner, checked_order, owner_counts, split_masks
from mapsched.scheduling.ranks import rank_order, upward_rank

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


def earliest_finish(i: int, tried: list[tuple[Option, Trial]], b: Builder) -> tuple[Option, Trial]:
    """The :data:`Rule` of HEFT: the option that finishes first (the first of equals)."""
    return min(tried, key=lambda t: finish(t[1]))


def construct(problem: Problem, order: Sequence[int], rule: Rule, insertion: bool, **kwargs) -> Schedule:
    """List-schedule ``order`` with ``rule`` choosing among each task's feasible options.

    ``order`` must list every task once, parents first (see
    :func:`~mapsched.scheduling.decoder.checked_order`). Falls back to a feasibility repair when a task
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
    from mapsched.scheduling.feasibility import (  # CP-SAT: loaded only when a construction dead-ends
        NotFound,
        feasible_counts,
    )

    try:
        counts = feasible_counts(problem, prefer)
    except NotFound:  # time ran out (no proof): filling the devices in order may still find one
        owner = _filled(problem)
        if owner is None:
            raise
        s = Decoder(problem, order, insertion).schedule(owner[:, None], **kwargs)
        s.log += ("construction dead-ended on memory or links, and the feasibility repair found no mapping "
                  "in time; devices filled in topological order instead (m-TOPO)\n")
        return s
    s = Decoder(problem, order, insertion).schedule(owner_from_counts(counts), **kwargs)
    s.log += "construction dead-ended on memory or links; finished by a feasibility repair\n"
    return s


def _filled(problem: Problem) -> np.ndarray | None:
    """A latency placement that fits memory and links found by filling the devices in
    topological order (Baechi's m-TOPO, each cap in turn), or None. O(E m + n m) each: where
    CP-SAT runs out of time on 10,000 tight tasks, this finds one in a second or two."""
    if problem.L > 1:
        return None
    for cap in ("uniform", "memory"):
        owner = topo_placement(problem, cap).owner
        if (owner >= 0).all():
            return owner
    return None


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


class Placement(NamedTuple):
    """A placer's output: ``owner[i]`` the device of task i (-1: not placed, after a dead
    end), ``order`` the tasks in the order placed (topological), ``pushes`` the heap
    pushes spent, ``hurried`` whether the time limit cut the ETF loop short."""

    owner: np.ndarray
    order: list[int]
    pushes: int = 0
    hurried: bool = False


def topo_placement(problem: Problem, cap: str = "uniform", order: Sequence[int] | None = None,
                   devices: Sequence[int] | None = None) -> Placement:
    """m-TOPO's placement: devices filled in order along the breadth-first topological order.

    Parameters
    ----------
    problem : Problem
    cap : {"uniform", "memory"}
        ``uniform``: each device holds at most the memory of all tasks over the number of
        devices plus the largest task's (Baechi's default), and never more than its own
        memory; ``memory``: each device is filled to its memory, so the graph spreads
        over as few devices as memory allows.
    order : sequence of int, optional
        The topological order to walk; by default the breadth-first :attr:`Problem.topo`
        (Celeritas's Order-Place walks its coarse graph in CPD-TOPO order instead).
    devices : sequence of int, optional
        The devices in the order they are filled, a permutation; by default by index.

    Notes
    -----
    A task goes to the current device while it fits under its cap; when it does not,
    the current device is full and the next one becomes current. A task that the current
    device cannot run, or whose parents' devices have no link to it, goes to the first
    device after it (cyclically) with room under its cap, else to the first whose memory
    still holds it. Tasks that hold no memory all stay on the first device. O(E m + n m).

    Examples
    --------
    >>> from mapsched import instances
    >>> topo_placement(instances.load("topcuoglu2002")).owner.tolist()  # no memory limits
    [0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
    """
    p = problem
    if cap not in ("uniform", "memory"):
        raise OptionError(f"cap: expected 'uniform' or 'memory', got {shown(cap)}")
    need = (p.weight + p.act).tolist()
    room = p.room.tolist()
    if cap == "uniform":
        share = sum(need) / p.m + max(need)
        limit = [min(r, share) for r in room]
    else:
        limit = room
    linked = np.isfinite(p.link_latency).tolist()
    can = p.can_run.tolist()
    seq = list(range(p.m)) if devices is None else [int(u) for u in devices]
    if sorted(seq) != list(range(p.m)):
        raise OptionError(f"devices: expected a permutation of the {p.m} device indices, got {seq}")
    used = [0.0] * p.m
    owner = np.full(p.n, -1, dtype=np.int64)
    placed = []
    k = 0  # the current device is seq[k]
    for i in (p.topo.tolist() if order is None else checked_order(p, order)):
        sources = {int(owner[q]) for q in p.pred[i]}
        ok = [can[i][u] and all(linked[v][u] for v in sources) for u in range(p.m)]
        while k < p.m and ok[seq[k]] and used[seq[k]] + need[i] > limit[seq[k]]:
            k += 1  # the current device is full
        turn = seq[k:] + seq[:k]
        u = next((u for u in turn if ok[u] and used[u] + need[i] <= limit[u]), None)
        if u is None:
            u = next((u for u in turn if ok[u] and used[u] + need[i] <= room[u]), None)
        if u is None:
            break  # dead end: the repair takes over
        owner[i] = u
        used[u] += need[i]
        placed.append(i)
    return Placement(owner, placed)
