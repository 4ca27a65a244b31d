"""``random``: the best of N random mappings, each decoded in breadth-first order."""

from __future__ import annotations

import numpy as np

from ..decoder import Decoder
from ..errors import InfeasibleError
from ..problem import Problem
from ..registry import Option, register
from ..schedule import Schedule
from ..solve import SolveContext
from ..splits import owner_from_counts, sample_split


def random_owner(problem: Problem, rng: np.random.Generator) -> np.ndarray:
    """A random mapping: each task on a random device that can run it (latency), or a
    random feasible split of its inputs (throughput). Memory may still overflow."""
    p = problem
    if p.L == 1:
        return np.array([rng.choice(np.flatnonzero(p.can_run[i])) for i in range(p.n)])[:, None]
    return owner_from_counts(np.stack([sample_split(p, i, rng) for i in range(p.n)]))


@register(
    "random",
    "best of N random mappings",
    options=(Option("samples", int, 100, "number of random mappings to try"),),
)
def random_search(problem: Problem, ctx: SolveContext, samples: int) -> Schedule:
    """Sample ``samples`` mappings (stopping early at the time limit). O(samples (n + E))."""
    dec = Decoder(problem)
    best, best_owner = np.inf, None
    for _ in range(max(1, samples)):
        owner = random_owner(problem, ctx.rng)
        ms = dec.makespan(owner)
        if ms < best:
            best, best_owner = ms, owner
            ctx.improved(ms)
        if ctx.expired():
            break
    if best_owner is None:
        raise InfeasibleError(
            f"random: none of {samples} random mappings fits the devices' memory and links; "
            "try more --samples or another method"
        )
    return dec.schedule(best_owner)
