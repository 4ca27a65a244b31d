"""``random-eft``: GiPH's Random-task + EFT baseline (Hu et al. 2023, issue 29), a local
search scored by the work-conserving runtime model (:mod:`mapsched.scheduling.simulate`).

From a random mapping (the feasibility repair's when 100 draws do not fit memory and
links), each step picks a task uniformly and moves it to the device
(among those that can run it) where it would finish first: its data-ready time there,
``max over parents of (parent's finish + transfer)``, plus its time on the device; the
device's queue is ignored, as in GiPH's code, and a task without parents goes to a
random device. Finishes come from the runtime model's run of the current mapping. The
result is the best mapping seen, as the runtime model runs it. ``steps`` defaults to
2|V|, GiPH's budget. With ``noise`` (GiPH's noisy runs: 0.2) every run draws GiPH's noise
(:func:`~mapsched.scheduling.simulate.simulate`, ``noise_model="giph"``) from the solve's seed, as its
search sees it; the best noisy run's mapping is returned as the noiseless model runs it.
"""

from __future__ import annotations

import numpy as np

from mapsched.engine.context import SolveContext
from mapsched.engine.registry import Option, register
from mapsched.errors import InfeasibleError
from mapsched.heuristics.random_search import random_owner
from mapsched.model.problem import Problem
from mapsched.model.schedule import Schedule
from mapsched.scheduling.construct import repaired_owner
from mapsched.scheduling.simulate import simulate


def _finishes(problem: Problem, s: Schedule) -> np.ndarray:
    end = np.zeros(problem.n)
    for j in s.jobs:
        end[problem.task_index[j.task]] = j.end
    return end


@register(
    "random-eft",
    "random task moved to its earliest-finish device, 2|V| steps, scored by the runtime model (GiPH's baseline)",
    objectives=("latency",),
    options=(Option("steps", int, 0, "moves (0: 2 per task)"),
             Option("noise", float, 0.0, "GiPH's noise on every run of the search (its noisy runs: 0.2)")),
)
def random_eft(problem: Problem, ctx: SolveContext, steps: int, noise: float = 0.0) -> Schedule:
    """O(steps (n + E) log n): one runtime-model run per step."""
    p, rng = problem, ctx.rng

    def run(owner: np.ndarray) -> Schedule:
        return simulate(p, owner, noise, rng, "giph") if noise else simulate(p, owner)

    cur = None
    for _ in range(100):  # a random start that fits memory and links
        owner = random_owner(p, rng)[:, 0]
        try:
            cur = run(owner)
            break
        except InfeasibleError:
            continue
    if cur is None:  # memory or links leave few random mappings that fit: start from the repair's
        owner = repaired_owner(p)
        cur = run(owner)
    best, best_owner = cur, owner.copy()
    if not noise:  # noisy makespans are not the returned schedule's: no progress history then
        ctx.improved(cur.makespan)
    for _ in range(steps or 2 * p.n):
        if ctx.expired() or (not noise and ctx.optimal(best.makespan)):
            break
        i = int(rng.integers(p.n))
        can = np.flatnonzero(p.can_run[i])
        if not p.pred[i]:
            d = int(rng.choice(can))
        else:
            end = _finishes(p, cur)
            ready = np.zeros(len(can))
            for e in p.in_edges[i]:
                q = int(p.src[e])
                ready = np.maximum(ready, end[q] + p.link_latency[owner[q], can] +
                                   p.nbytes[e] * p.link_ms_per_byte[owner[q], can])
            d = int(can[np.argmin(ready + p.dur[i, can])])
        old, owner[i] = owner[i], d
        try:
            cur = run(owner)
        except InfeasibleError:  # the move broke memory or a link: undo it
            owner[i] = old
            continue
        if cur.makespan < best.makespan:
            best, best_owner = cur, owner.copy()
            if not noise:
                ctx.improved(cur.makespan)
    return simulate(p, best_owner) if noise else best
