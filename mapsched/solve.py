"""One entry point for every method: :func:`solve`."""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np

from . import registry
from .context import Progress, SolveContext
from .errors import OptionError
from .problem import Problem
from .schedule import Schedule
from .validate import meets

__all__ = ["DEFAULT_METHOD", "SolveContext", "solve"]

DEFAULT_METHOD = "auto"
"""The pipeline of :mod:`mapsched.auto`: chosen by the problem's size and the time limit."""

BOUND_SHARE = 0.1
"""Share of a time limit that :func:`solve` gives the load LP of the bound it adds."""

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
    **options: Any,
) -> Schedule:
    """Map and schedule ``problem`` with a registered method.

    Parameters
    ----------
    problem : Problem
    method : str, optional
        A name from :func:`mapsched.methods`; by default ``auto``, which picks by the
        problem's size and the time limit (see :mod:`mapsched.auto`).
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
        (:mod:`mapsched.initial`); the log says how many, and how many the result moved.
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
    m = registry.get(method)
    if problem.objective.kind not in m.objectives:
        raise OptionError(
            f"--method: {method!r} does not handle the {problem.objective.kind} objective; "
            f"it handles {', '.join(m.objectives)}"
        )
    if time_limit is not None and not time_limit > 0:
        raise OptionError(f"--time-limit: expected a positive number of seconds, got {time_limit!r}")
    if threads is not None and threads < 0:
        raise OptionError(f"--threads: expected a positive number of threads (0 for every core), got {threads!r}")
    opts = m.parse_options(options)
    if initial is not None and not m.initial:
        takes = ", ".join(x.name for x in registry.all_methods() if x.initial)
        raise OptionError(f"--initial: method {method!r} does not start from a placement; these do: {takes}")
    from .bounds import lower_bound  # SciPy's LP: loaded on first solve, not at start-up

    loaded = time.perf_counter()

    if not (seed is None or isinstance(seed, np.random.Generator)
            or (isinstance(seed, (int, np.integer)) and not isinstance(seed, bool) and seed >= 0)):
        raise OptionError(f"--seed: expected a non-negative integer, got {seed!r}")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    # The bound's LP counts within the time limit (0.4 s at 10,000 tasks), and gets only
    # a share of it: without the LP the critical path and the work still hold.
    bound = lower_bound(problem, None if time_limit is None else BOUND_SHARE * time_limit).value
    ctx = SolveContext(time_limit, rng, threads or os.cpu_count() or 1, callback, log, bound, started=started)
    start = None
    if initial is not None:
        from .initial import initial_schedule, moved

        start = initial_schedule(problem, initial)
        ctx.initial = start.schedule
    result: Schedule = m.fn(problem, ctx, **opts)
    if start is not None:
        result.log = (start.describe() + f"the result runs {moved(problem, start.schedule, result)} task(s) "
                      "elsewhere than the initial placement\n" + result.log)
    # The time limit counts the loading (once a process); solve_seconds is the solve alone, the
    # history counts from the call.
    result.solve_seconds = time.perf_counter() - loaded
    if not result.method.startswith(f"{method}: "):  # a pipeline may name its stages so
        result.method = method
    result.history = ctx.history or [(result.solve_seconds, result.makespan)]
    if result.lower_bound is not None:
        bound = max(bound, result.lower_bound)
    result.lower_bound = bound
    # A makespan that meets a proved bound is proved optimal, whatever found it.
    if meets(result.makespan, bound):
        result.status = "optimal"
    return result
