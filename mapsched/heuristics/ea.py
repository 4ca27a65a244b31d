"""``ea``: the biased (1+1) evolutionary algorithm.

It starts from every task on its fastest device (hence "biased"; repaired to
fit memory and links if needed), or from the solve's initial placement, mutates each gene with probability 1/n, and
keeps the child when it is no worse. The result is never worse than the start; the search
stops once it meets the solve's proved bound. With a
relocation cost (:mod:`mapsched.engine.relocation`) the fitness is the makespan plus that cost.
"""

from __future__ import annotations

import numpy as np

from mapsched.engine.context import SolveContext
from mapsched.engine.registry import Option, get, register
from mapsched.errors import InfeasibleError
from mapsched.heuristics.search import MappingSpace
from mapsched.model.problem import Problem
from mapsched.model.schedule import Schedule


def start_mapping(problem: Problem) -> np.ndarray:
    """The biased start: the fastest mapping, made feasible (for throughput, BHEFT's where
    the repair finds none)."""
    space = MappingSpace(problem)
    try:
        return space.feasible(space.fastest())
    except InfeasibleError:
        if problem.L == 1:
            raise
        # The repair's counts keep a parent's and a child's inputs off unlinked devices
        # altogether (mapsched.feasibility): a mapping that pairs them input by input may exist.
        return space.from_schedule(get("bheft").fn(problem, SolveContext()))


@register(
    "ea",
    "biased (1+1) evolutionary algorithm from the fastest-device mapping",
    options=(Option("iterations", int, 5000, "children to try"),),
    initial=True,
    relocation=True,
)
def ea(problem: Problem, ctx: SolveContext, iterations: int) -> Schedule:
    """O(iterations (n + E)) for latency."""
    space = MappingSpace(problem, ctx.relocation)
    cur = start_mapping(problem) if ctx.initial is None else space.feasible(space.from_schedule(ctx.initial))
    f_cur = space.fitness(cur)
    ctx.improved(f_cur)
    rng, n = ctx.rng, problem.n
    for _ in range(iterations):
        if ctx.expired() or ctx.optimal(f_cur):
            break
        genes = np.flatnonzero(rng.random(n) < 1.0 / n)
        if not len(genes):
            continue
        child = cur.copy()
        for i in genes:
            space.mutate_gene(child, int(i), rng)
        f = space.fitness(child)
        if f <= f_cur:
            if f < f_cur:
                ctx.improved(f)
            cur, f_cur = child, f
    s = space.schedule(cur)
    # The initial placement's own schedule (re-timed with insertion) may beat the decoded string.
    return ctx.initial if ctx.initial is not None and ctx.objective(ctx.initial) < ctx.objective(s) else s
