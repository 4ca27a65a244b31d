"""``sa``: simulated annealing over the mapping string, the decoder as fitness.

A move gives one random task another device (or, for throughput, a new random
split of its inputs). Worse moves are accepted with probability
``exp(-delta / T)``; the temperature falls geometrically from ``t0`` times the
starting makespan to a thousandth of that over the iteration budget. The best
mapping seen is returned (or the starting heuristic's own schedule when that is
better), so the result is never worse than the start; the search stops once the best
meets the solve's proved bound. With a relocation cost
(:mod:`mapsched.engine.relocation`) the fitness is the makespan plus that cost.
"""

from __future__ import annotations

import math

from mapsched.engine.registry import Option, get, register
from mapsched.heuristics.search import MappingSpace
from mapsched.model.problem import Problem
from mapsched.model.schedule import Schedule
from mapsched.scheduling.best_list import no_time_for_list
from mapsched.solve import SolveContext


@register(
    "sa",
    "simulated annealing over the mapping string",
    options=(
        Option("iterations", int, 5000, "moves to try"),
        Option("t0", float, 0.05, "initial temperature, relative to the starting makespan"),
        Option("init", str, "heft", "starting mapping (or the solve's initial one, if better; that one alone "
                                    "where the time limit leaves no time for the list scheduler)",
               choices=("heft", "met")),
    ),
    initial=True,
    relocation=True,
)
def sa(problem: Problem, ctx: SolveContext, iterations: int, t0: float, init: str) -> Schedule:
    """O(iterations (n + E)) for latency."""
    space = MappingSpace(problem, ctx.relocation)
    # The list scheduler itself: solve() would add a bound this start does not need (seconds
    # of LP and a second list schedule on a 150-task batched problem, outside the time limit).
    if ctx.initial is not None and no_time_for_list(problem, ctx):  # seconds at tens of thousands of tasks
        start = ctx.initial
    else:
        start = get(("b" if problem.L > 1 else "") + init).fn(problem, SolveContext())
        if ctx.initial is not None and ctx.objective(ctx.initial) < ctx.objective(start):
            start = ctx.initial
    cur = space.feasible(space.from_schedule(start))
    f_cur = space.fitness(cur)
    best, f_best = cur.copy(), f_cur
    ctx.improved(f_best)
    rng = ctx.rng
    temp0 = max(t0 * f_cur, 1e-12)
    f_start = ctx.objective(start)
    for k in range(iterations):
        if ctx.expired() or ctx.optimal(min(f_best, f_start)):
            break
        temp = temp0 * 1e-3 ** (k / iterations)
        i = int(rng.integers(problem.n))
        cand = cur.copy()
        space.mutate_gene(cand, i, rng)
        f = space.fitness(cand)
        if f <= f_cur or (math.isfinite(f) and rng.random() < math.exp(-(f - f_cur) / temp)):
            cur, f_cur = cand, f
            if f < f_best:
                best, f_best = cand.copy(), f
                ctx.improved(f_best)
    # The start's own schedule (HEFT's or the initial one, with insertion) may beat every
    # decoded string.
    return start if f_start <= f_best else space.schedule(best)
