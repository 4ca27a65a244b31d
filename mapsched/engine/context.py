"""What a method gets besides the problem and its options: :class:`SolveContext`.

Its own module, below :mod:`mapsched.solve`, so that the pieces :func:`~mapsched.solve`
itself uses (the bounds, the list-scheduling portfolio) can take one without importing
``solve``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from mapsched.engine import interrupt
from mapsched.model.schedule import Schedule
from mapsched.model.validate import meets

if TYPE_CHECKING:
    from mapsched.engine.relocation import RelocationCosts

__all__ = ["Progress", "SolveContext"]

Progress = Callable[[float, float], None]
"""A progress callback: called with (seconds since start, best makespan so far)."""


@dataclass
class SolveContext:
    """What a method needs besides the problem and its options.

    Attributes
    ----------
    time_limit : float or None
        Seconds the method may spend; None means its own budget (iterations).
    rng : numpy.random.Generator
        The only source of randomness a method may use.
    threads : int
        Threads an exact solver may use.
    callback : callable or None
        Called as ``callback(seconds, makespan)`` on every improvement.
    fast_bound : float
        A proved lower bound on the optimal makespan: :func:`mapsched.bounds.lower_bound`,
        computed once by :func:`solve` for the method and for the result. A method that
        proves more on the way raises it, and the result carries it.
    initial : Schedule or None
        The valid schedule of ``solve(..., initial=...)`` (see :mod:`mapsched.scheduling.initial`), for
        methods registered with ``initial=True`` to start from; their result is never worse.
    relocation : RelocationCosts or None
        The cost of moving tasks away from the initial placement (``solve(...,
        relocation=...)``), for methods registered with ``relocation=True`` to add to the
        makespan; see :meth:`objective`.
    """

    time_limit: float | None = None
    rng: np.random.Generator = field(default_factory=lambda: np.random.default_rng(0))
    threads: int = 1
    callback: Progress | None = None
    log: bool = False
    fast_bound: float = 0.0
    started: float = field(default_factory=time.perf_counter)
    history: list[tuple[float, float]] = field(default_factory=list)
    initial: Schedule | None = None
    relocation: RelocationCosts | None = None

    def objective(self, schedule: Schedule) -> float:
        """What the solve minimises: the makespan, plus the relocation cost when one is given."""
        return schedule.makespan + (0.0 if self.relocation is None else self.relocation.of(schedule))

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def remaining(self) -> float:
        """Seconds left before the time limit (``inf`` without one; 0 once interrupted)."""
        if interrupt.requested():
            return 0.0
        return math.inf if self.time_limit is None else max(0.0, self.time_limit - self.elapsed())

    def remaining_or_none(self) -> float | None:
        """Seconds left, or None without a time limit (for solvers' own limits); 0 once interrupted."""
        return None if self.time_limit is None and not interrupt.requested() else self.remaining()

    def expired(self) -> bool:
        return self.remaining() <= 0.0

    def optimal(self, value: float) -> bool:
        """Whether ``value``, a makespan or an :meth:`objective` (never below the makespan),
        meets :attr:`fast_bound`: it is then optimal, and a search may stop."""
        return meets(value, self.fast_bound)

    def improved(self, makespan: float) -> None:
        """Record a new best makespan, and tell the callback."""
        if self.history and makespan >= self.history[-1][1]:
            return
        t = self.elapsed()
        self.history.append((t, makespan))
        if self.callback is not None:
            self.callback(t, makespan)
