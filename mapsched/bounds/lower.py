"""The best proved lower bound of a problem, and the rule that proved it."""

from __future__ import annotations

import time
from dataclasses import dataclass

from mapsched import checks
from mapsched.bounds.batched import BATCHED_TASKS, batched_relaxation_bound
from mapsched.bounds.contention import copy_load_bound
from mapsched.bounds.interval import interval_load_bound
from mapsched.bounds.load import load_bound
from mapsched.bounds.memory import memory_binds, memory_chain_bound, memory_load_bound, transfer_path_bound
from mapsched.bounds.simple import critical_path_bound, work_bound
from mapsched.model import arguments
from mapsched.model.problem import Problem

__all__ = ["BATCHED_SECONDS", "Bound", "CHAIN_SECONDS", "CHAIN_SHARE", "INTERVAL_SECONDS", "INTERVAL_SETUP",
           "MEMORY_SECONDS", "lower_bound"]


BATCHED_SECONDS = 5.0
"""Seconds :func:`lower_bound` gives the batched relaxation without a time limit (it
converges in a few rounds of separation on stacks of a hundred-odd tasks, well within it)."""

INTERVAL_SECONDS = 5.0
"""Seconds :func:`lower_bound` gives the interval load LP without a time limit (its size is
capped by :data:`~mapsched.bounds.interval.INTERVAL_COLUMNS`, so a traced training step's LP
ends well within it)."""

INTERVAL_SETUP = 2e-5
"""Seconds per task and edge that the interval load LP needs left before it starts: about
twice what building it takes, so that a short time limit is not overrun by a bound that
would have no time to solve."""


@dataclass(frozen=True)
class Bound:
    """A lower bound on the optimal makespan and the rule that proved it."""

    value: float
    rule: str


CHAIN_SECONDS = 1.0
"""Most seconds :func:`lower_bound` gives the price steps of
:func:`~mapsched.bounds.memory.memory_chain_bound` (up to a second on the real models' layer
graphs, where it gains most)."""

CHAIN_SHARE = 0.1
"""Share of a ``time_limit`` that :func:`lower_bound` gives those steps, if less."""

MEMORY_SECONDS = 5.0
"""Seconds :func:`lower_bound` gives the load LP with memory rows without a time limit (its
size is capped by :data:`~mapsched.bounds.memory.MEMORY_COLUMNS`, so it ends well within it)."""


def lower_bound(problem: Problem, time_limit: float | None = None, *, batched: bool = True) -> Bound:
    """The largest of the quick bounds, with the rule that gave it: the critical path, the
    total work and the load LP (:func:`~mapsched.bounds.load.load_bound`, given
    ``time_limit`` seconds if set); the longest path with devices, memory and transfers
    (:func:`~mapsched.bounds.memory.transfer_path_bound`); where some device's memory cannot
    hold all it can run, two longest paths cut into runs that fit the devices' memory, each
    device's runs together priced in (:func:`~mapsched.bounds.memory.memory_chain_bound`, for
    :data:`CHAIN_SECONDS` or :data:`CHAIN_SHARE` of ``time_limit``) and the load LP with memory rows
    (:func:`~mapsched.bounds.memory.memory_load_bound`, with the time left, or
    :data:`MEMORY_SECONDS`); where transfers take turns, the load LP that counts the copies
    forced onto devices whose copies take turns (:func:`~mapsched.bounds.contention.copy_load_bound`,
    with the time left, or :data:`MEMORY_SECONDS`); for latency the interval load LP
    (:func:`~mapsched.bounds.interval.interval_load_bound`, which sees the load between the
    critical path's tasks: the time left of ``time_limit``, if enough to build it
    (:data:`INTERVAL_SETUP`), or :data:`INTERVAL_SECONDS`);
    and for throughput problems of at most
    :data:`~mapsched.bounds.batched.BATCHED_TASKS` tasks the batched relaxation's LP
    (:func:`~mapsched.bounds.batched.batched_relaxation_bound`, which sees that an input
    waits for its whole batch: the time left of ``time_limit``, or
    :data:`BATCHED_SECONDS`; ``batched=False`` leaves it to the caller). Every ``solve``
    adds it. O(n m nb L + E) and one LP, plus for throughput rounds of O(m n^3)
    separation, for latency O(n m log n + E) and an LP of
    capped size.
    :func:`mapsched.split.full_bound` adds the module-chain recursion.

    Examples
    --------
    >>> from mapsched import instances
    >>> b = lower_bound(instances.load("topcuoglu2002"))
    >>> round(b.value, 3), b.rule
    (54.0, 'transfer-path')
    """
    started = time.perf_counter()
    arguments.problem(problem)
    time_limit = checks.seconds(time_limit, "time_limit")
    checks.flag(batched, "batched")
    rules = [
        Bound(critical_path_bound(problem), "critical-path"),
        Bound(work_bound(problem), "work"),
        Bound(load_bound(problem, time_limit), "load"),
    ]

    def add(value: float, rule: str) -> None:
        """Named only where it proves more than the rules before it."""
        if value > max(r.value for r in rules) * (1 + 1e-9):
            rules.append(Bound(value, rule))

    add(transfer_path_bound(problem), "transfer-path")
    if memory_binds(problem):
        chain_s = CHAIN_SECONDS if time_limit is None else min(CHAIN_SECONDS, CHAIN_SHARE * time_limit)
        add(memory_chain_bound(problem, time_limit=chain_s), "memory-path")
        left = MEMORY_SECONDS if time_limit is None else time_limit - (time.perf_counter() - started)
        if left > 0:
            add(memory_load_bound(problem, left), "memory-load")
    if problem.contended and problem.L == 1:
        left = MEMORY_SECONDS if time_limit is None else time_limit - (time.perf_counter() - started)
        if left > 0:
            add(copy_load_bound(problem, left), "copy-load")
    if time_limit is None:
        left = INTERVAL_SECONDS if problem.L == 1 else BATCHED_SECONDS
    else:
        left = time_limit - (time.perf_counter() - started)
    if problem.L == 1:
        # It holds the others when nothing is left out: named only where it proves more.
        if left > INTERVAL_SETUP * (problem.n + problem.E):
            add(interval_load_bound(problem, left), "interval-load")
    elif batched and problem.n <= BATCHED_TASKS and left > 0:
        rules.append(Bound(batched_relaxation_bound(problem, left, integral=False), "batched-relaxation"))
    return max(rules, key=lambda b: b.value)
