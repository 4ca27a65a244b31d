"""Re-placement after device changes: warm-started from the previous placement, or from scratch.

A sequence of 20 changes on a 300-task random DAG over 8 devices: each step takes a random
device away (never below 3) or adds a copy of a random one (never above 10). After each
change the method runs twice on the changed problem: from the previous step's placement
(``initial=``), and from scratch, each with the same budget. Prints, per method, the mean
and worst ratio of warm to scratch makespan and the mean wall time of a warm re-placement.

Then the same sequence with relocation costs (:mod:`mapsched.engine.relocation`): a moved task
costs the mean task time as start-up plus its weights' migration, over ``runs`` runs.
After each change the method runs warm twice, weighing that cost and not; the table
gives the tasks moved, the makespan and makespan plus relocation cost of each, as means
over the changes.

    python benchmarks/bench_adapt.py [--steps 20] [--budget 1.0]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import mapsched
from mapsched import solve
from mapsched.engine.relocation import Relocation, RelocationCosts, relocation_costs

METHODS = ("cp-search", "sa")
RELOCATING = ("sa", "ea", "giph")


def changes(steps: int):
    """The problems of the change sequence, the first one before any change."""
    rng = np.random.default_rng(0)
    p = mapsched.generators.random_dag(300, 8, seed=0)
    yield p
    added = 0
    for _ in range(steps):
        if p.m > 3 and (p.m >= 10 or rng.random() < 0.5):
            p = p.without_devices([p.device_names[int(rng.integers(p.m))]])
        else:
            added += 1
            p = p.with_devices({f"new{added}": p.device_names[int(rng.integers(p.m))]})
        yield p


def moved(s: mapsched.Schedule) -> int:
    return int(s.log.split("the result runs ")[1].split(" ")[0])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--budget", type=float, default=1.0, help="seconds per solve")
    a = ap.parse_args()
    print("| method | changes | warm / scratch, mean | worst | warm placement, mean s | tasks moved, mean |")
    print("|---|---|---|---|---|---|")
    for method in METHODS:
        seq = changes(a.steps)
        prev = solve(next(seq), method, time_limit=a.budget)
        ratios, walls, moves = [], [], []
        for q in seq:
            t = time.perf_counter()
            warm = solve(q, method, time_limit=a.budget, initial=prev)
            walls.append(time.perf_counter() - t)
            scratch = solve(q, method, time_limit=a.budget)
            ratios.append(warm.makespan / scratch.makespan)
            moves.append(moved(warm))
            prev = warm
        print(f"| {method} | {a.steps} | {np.mean(ratios):.4f} | {max(ratios):.4f} | {np.mean(walls):.2f} "
              f"| {np.mean(moves):.0f} |", flush=True)

    print("\n| method | runs | moved, weighed / ignored | makespan, weighed / ignored | makespan + relocation, "
          "weighed / ignored |")
    print("|---|---:|---|---|---|")
    methods = [m for m in RELOCATING if mapsched.engine.registry.get(m).available()]
    for method in methods:
        for runs in (1, 10, 100):
            seq = changes(a.steps)
            p0 = next(seq)
            reloc = Relocation(startup=float(np.nanmean(np.where(p0.can_run, p0.dur, np.nan))), runs=runs)
            prev = solve(p0, method, time_limit=a.budget)
            rows = []
            for q in seq:
                weighed = solve(q, method, time_limit=a.budget, initial=prev, relocation=reloc)
                ignored = solve(q, method, time_limit=a.budget, initial=prev)
                cost = RelocationCosts(q, relocation_costs(q, reloc, {j.task: j.device for j in prev.jobs}))
                rows.append((moved(weighed), moved(ignored), weighed.makespan, ignored.makespan,
                             weighed.makespan + weighed.relocation_cost, ignored.makespan + cost.of(ignored)))
                prev = weighed
            m = np.mean(rows, axis=0)
            print(f"| {method} | {runs} | {m[0]:.0f} / {m[1]:.0f} | {m[2]:.1f} / {m[3]:.1f} "
                  f"| {m[4]:.1f} / {m[5]:.1f} |", flush=True)


if __name__ == "__main__":
    main()
