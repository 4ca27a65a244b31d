"""``single-best``: the whole graph on the one device that runs it fastest."""

from __future__ import annotations

import numpy as np

from mapsched.engine.context import SolveContext
from mapsched.engine.registry import register
from mapsched.errors import InfeasibleError
from mapsched.model.problem import Problem
from mapsched.model.schedule import Schedule
from mapsched.scheduling.decoder import Decoder


@register("single-best", "everything on the one device that runs the whole graph fastest")
def single_best(problem: Problem, ctx: SolveContext) -> Schedule:
    """Try each device alone (all L inputs as one batch) and keep the fastest; past the time
    limit, the fastest of those tried (with a thousand devices, trying them all can take longer
than a short limit). O(m (n + E))."""
    dec = Decoder(problem)
    best, best_u = np.inf, -1
    for u in range(problem.m):
        ms = dec.makespan(np.full((problem.n, problem.L), u))
        if ms < best:
            best, best_u = ms, u
        if best_u >= 0 and ctx.expired():
            break
    if best_u < 0:
        raise InfeasibleError(
            f"single-best: no device can run all {problem.n} tasks on {problem.L} input(s) alone "
            "(a task it cannot run, an unsupported batch size, or too little memory)"
        )
    ctx.improved(best)
    return dec.schedule(np.full((problem.n, problem.L), best_u))
