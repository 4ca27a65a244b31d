"""One entry point for every method: :func:`solve`."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from mapsched import checks
from mapsched.engine import interrupt, registry
from mapsched.engine.context import Progress, SolveContext
from mapsched.errors import OptionError, shown
from mapsched.model import arguments
from mapsched.model.problem import Problem
from mapsched.model.schedule import Schedule
from mapsched.model.validate import meets

__all__ = ["DEFAULT_METHOD", "FOLDED_SECONDS", "SolveContext", "solve"]

DEFAULT_METHOD = "auto"
"""The pipeline of :mod:`mapsched.heuristics.auto`: chosen by the problem's size and the time limit."""

MAX_THREADS = 1024
"""Most solver threads a solve takes: past it HiGHS spends seconds making threads and, at
100,000, aborts the process; CP-SAT refuses counts past 32 bits."""
BOUND_SHARE = 0.1
"""Share of a time limit that :func:`solve` gives the bound it adds to every result,
:func:`mapsched.bounds.lower_bound` (the critical path, the work, the load LP, the path with
transfers and memory, the load LP with memory rows where memory binds, and the interval load
LP or the batched relaxation in what is left of the share; then, with a time limit, for
latency, the relaxation over classes of identical devices folded into one,
:func:`~mapsched.bounds.relaxation.folded_relaxation`, in what is left of it, where that is at least
:data:`FOLDED_SECONDS`). It is spent before
the method starts, and counts within the time limit: with ``time_limit=T`` the method has
``0.9 T`` or more left (the LPs stop at their share; the rules without an LP, O(n m nb L + E
m^2), run whatever the share). Without a time limit the bound's LPs run to their optimum. The result's
``lower_bound`` is the larger of this and the method's own proved bound (``exact``'s dual
bound)."""

FOLDED_SECONDS = 0.5
"""Least time the bound's share must still have for :func:`solve` to add the folded relaxation
(:data:`BOUND_SHARE`): finding the classes and building the programme take tenths of a second
at a thousand tasks, which a share of a second's limit does not have."""


def solve(
    problem: Problem,
    method: str | None = DEFAULT_METHOD,
    time_limit: float | None = None,
    seed: int | np.random.Generator | None = 0,
    *,
    threads: int | None = None,
    callback: Progress | None = None,
    log: bool = False,
    initial: Any = None,
    relocation: Any = None,
    **options: Any,
) -> Schedule:
    """Map and schedule ``problem`` with a registered method.

    Parameters
    ----------
    problem : Problem
    method : str, optional
        A name from :func:`mapsched.methods`; by default ``auto``, which picks by the
        problem's size and the time limit (see :mod:`mapsched.heuristics.auto`).
    time_limit : float, optional
        Seconds, the bound added to the result included; on expiry a method returns its
        best schedule with status ``feasible``.
    seed : int or numpy.random.Generator, optional
        The same seed gives the same schedule (for exact solvers, with ``threads=1``
        and no time limit reached: parallel workers may find another optimum).
    threads : int, optional
        For exact solvers; defaults to the number of cores (so does 0).
    callback : callable, optional
        ``callback(seconds, makespan)`` on every improvement.
    log : bool
        Keep the solver's log in ``Schedule.log``.
    initial : Schedule or mapping, optional
        A placement to start from (latency; methods that take one: see ``mapsched methods``):
        a schedule, perhaps of an earlier version of the problem, or task names mapped to
        device names. Tasks on devices that are gone or cannot run them are placed afresh
        (:mod:`mapsched.scheduling.initial`); the log says how many, and how many the result moved.
    relocation : Relocation or mapping, optional
        With ``initial``: what moving a task away from it costs (a
        :class:`~mapsched.engine.relocation.Relocation`, or a mapping of its fields); methods that
        take one (see ``mapsched methods``) minimise the makespan plus that cost, and the
        result's ``relocation_cost`` says what it came to.
    **options
        Method options (see ``mapsched methods``).

    Returns
    -------
    Schedule
        With ``lower_bound`` the best proved bound (the method's own or
        :func:`mapsched.bounds.lower_bound`), and ``status`` ``optimal`` only when proved.

    Examples
    --------
    >>> import mapsched
    >>> p = mapsched.instances.load("topcuoglu2002")
    >>> r = mapsched.solve(p, "single-best")
    >>> r.makespan, r.status
    (127.0, 'feasible')
    """
    started = time.perf_counter()  # loading the method's solvers (a second or more, once) counts too
    if method is None:
        method = DEFAULT_METHOD
    arguments.problem(problem)
    m = registry.get(method)
    if problem.objective.kind not in m.objectives:
        raise OptionError(
            f"--method: {shown(method)} does not handle the {problem.objective.kind} objective; "
            f"it handles {', '.join(m.objectives)}"
        )
    time_limit = checks.seconds(time_limit, "--time-limit")
    threads = checks.integer(threads, "--threads", 0, MAX_THREADS, none=True)  # 0: every core
    if callback is not None and not callable(callback):
        raise OptionError(f"callback: expected a function of (seconds, makespan), got {shown(callback)}")
    opts = m.parse_options(options)
    if initial is not None and not m.initial:
        raise OptionError(f"initial: method {shown(method)} does not start from a placement; these do: "
                          f"{registry.taking('initial')}")
    if relocation is not None:
        if initial is None:
            raise OptionError("--relocation: a cost of moving away from a placement needs one; give --initial")
        if not m.relocation:
            raise OptionError(f"--relocation: method {shown(method)} does not weigh relocation costs; these do: "
                              f"{registry.taking('relocation')}")
        from mapsched.engine.relocation import RELOCATION_FORMAT, Relocation

        if isinstance(relocation, Mapping):
            relocation = Relocation.from_dict({"format": RELOCATION_FORMAT, **relocation})
        elif not isinstance(relocation, Relocation):
            raise OptionError(f"--relocation: expected a Relocation or a mapping of its fields, got "
                              f"{type(relocation).__name__}")
    from mapsched.bounds import lower_bound  # SciPy's LP: loaded on first solve, not at start-up

    loaded = time.perf_counter()

    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(
        checks.integer(seed, "--seed", 0, none=True))
    with interrupt.solving():  # a stop requested outside interrupt.graceful() ends with the solves it stops
        # The bound's LPs count within the time limit, and get only
        # a share of it: without the LP the critical path and the work still hold.
        bound = lower_bound(problem, None if time_limit is None else BOUND_SHARE * time_limit).value
        left = 0.0 if time_limit is None else BOUND_SHARE * time_limit - (time.perf_counter() - loaded)
        if left >= FOLDED_SECONDS and problem.L == 1:  # what the share leaves: the relaxation, identical devices folded
            from mapsched.bounds.relaxation import folded_relaxation

            folded = folded_relaxation(problem, left, unfolded=False)
            bound = max(bound, 0.0 if folded is None else folded.bound)
        ctx = SolveContext(time_limit, rng, threads or os.cpu_count() or 1, callback, log, bound, started=started)
        start = None
        if initial is not None:
            from mapsched.scheduling.initial import initial_schedule, moved

            start = initial_schedule(problem, initial)
            ctx.initial = start.schedule
            if relocation is not None:
                from mapsched.engine.relocation import RelocationCosts, relocation_costs

                ctx.relocation = RelocationCosts(problem, relocation_costs(problem, relocation, start.origin))
        with interrupt.until(started + time_limit if time_limit is not None else math.inf):
            result: Schedule = m.fn(problem, ctx, **opts)
        if problem.contended:
            from mapsched.scheduling.retime import retimed

            result = retimed(problem, result)
        # This solve's, never one a returned initial schedule brought from an earlier solve.
        result.relocation_cost = None if ctx.relocation is None else ctx.relocation.of(result)
        if start is not None:
            head = (start.describe() + f"the result runs {moved(problem, start.schedule, result)} task(s) "
                    "elsewhere than the initial placement\n")
            if result.relocation_cost is not None:
                head += (f"relocation cost {result.relocation_cost:.6g}; makespan plus relocation "
                         f"{result.makespan + result.relocation_cost:.6g}\n")
            result.log = head + result.log
        # The time limit counts the loading (once a process); solve_seconds is the solve alone, the
        # history counts from the call.
        result.solve_seconds = time.perf_counter() - loaded
        if not result.method.startswith(f"{method}: "):  # a pipeline may name its stages so
            result.method = method
        result.history = ctx.history or [(result.solve_seconds, result.makespan)]
        # The method's own proof, or what its stages proved on the way (ctx.fast_bound)
        bound = max(bound, ctx.fast_bound, result.lower_bound or 0.0)
        result.lower_bound = bound
        # A makespan that meets a proved bound is proved optimal, whatever found it; with a
        # relocation cost, the bound (on the makespan alone) proves only an objective that meets it.
        if meets(result.makespan + (result.relocation_cost or 0.0), bound):
            result.status = "optimal"
        elif result.relocation_cost is not None:  # a method's own proof is of the makespan alone
            result.status = "feasible"
        if interrupt.requested():  # stopped (interrupt.request): the best so far (FORMAT.md)
            result.status, result.interrupted = "feasible", True
        return result

