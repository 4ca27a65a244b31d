"""``random``: the best of N random mappings, each decoded in breadth-first order, or run
by the work-conserving runtime model (``evaluator="simulate"``; GiPH's random-sampling
baseline is ``samples=0``, 2|V| mappings, with that evaluator)."""

from __future__ import annotations

import numpy as np

from mapsched.engine.context import SolveContext
from mapsched.engine.registry import Option, register
from mapsched.errors import InfeasibleError, OptionError
from mapsched.model.owners import owner_from_counts, sample_split
from mapsched.model.problem import Problem
from mapsched.model.schedule import Schedule
from mapsched.scheduling.decoder import Decoder


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
    options=(Option("samples", int, 100, "number of random mappings to try (0: 2 per task, GiPH's budget)"),
             Option("evaluator", str, "decoder", "decoder: each mapping decoded in breadth-first order; simulate: "
                    "run by the work-conserving runtime model (mapsched.scheduling.simulate, latency only)",
                    choices=("decoder", "simulate")),
             Option("noise", float, 0.0, "with --evaluator simulate: GiPH's noise on every sampled run (its noisy "
                    "runs: 0.2); the best one's mapping is returned as the noiseless model runs it")),
)
def random_search(problem: Problem, ctx: SolveContext, samples: int, evaluator: str = "decoder",
                  noise: float = 0.0) -> Schedule:
    """Sample ``samples`` mappings (stopping early at the time limit). O(samples (n + E))."""
    if evaluator == "simulate":
        return _random_simulated(problem, ctx, samples or 2 * problem.n, noise)
    if noise:
        raise OptionError("--noise: only --evaluator simulate runs mappings with noise; add it or drop --noise")
    dec = Decoder(problem)
    best, best_owner = np.inf, None
    for _ in range(max(1, samples or 2 * problem.n)):
        owner = random_owner(problem, ctx.rng)
        ms = dec.makespan(owner)
        if ms < best:
            best, best_owner = ms, owner
            ctx.improved(ms)
        if ctx.expired() or ctx.optimal(best):
            break
    if best_owner is None:
        raise InfeasibleError(
            f"random: none of {samples} random mappings fits the devices' memory and links; "
            "try more --samples or another method"
        )
    return dec.schedule(best_owner)


def _random_simulated(problem: Problem, ctx: SolveContext, samples: int, noise: float) -> Schedule:
    """``random`` with ``evaluator="simulate"``: the best run of the work-conserving model."""
    from mapsched.scheduling.simulate import simulate

    if problem.objective.kind != "latency":
        raise OptionError("--evaluator: simulate runs latency problems only; use --evaluator decoder")
    best, best_owner = None, None
    for _ in range(max(1, samples)):
        owner = random_owner(problem, ctx.rng)[:, 0]
        try:
            s = simulate(problem, owner, noise, ctx.rng, "giph") if noise else simulate(problem, owner)
        except InfeasibleError:  # memory or a missing link
            s = None
        if s is not None and (best is None or s.makespan < best.makespan):
            best, best_owner = s, owner
            if not noise:  # noisy makespans are not the returned schedule's
                ctx.improved(s.makespan)
        if ctx.expired() or (best is not None and not noise and ctx.optimal(best.makespan)):
            break
    if best is not None and noise:
        best = simulate(problem, best_owner)
    if best is None:
        raise InfeasibleError(
            f"random: none of {samples} random mappings fits the devices' memory and links; "
            "try more --samples or another method"
        )
    return best
