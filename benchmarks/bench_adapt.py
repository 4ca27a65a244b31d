"""Re-placement after device changes: warm-started from the previous placement, or from scratch.

A sequence of 20 changes on a 300-task random DAG over 8 devices: each step takes a random
device away (never below 3) or adds a copy of a random one (never above 10). After each
change the method runs twice on the changed problem: from the previous step's placement
(``initial=``), and from scratch, each with the same budget. Prints, per method, the mean
and worst ratio of warm to scratch makespan and the mean wall time of a warm re-placement.

    python benchmarks/bench_adapt.py [--steps 20] [--budget 1.0]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import mapsched
from mapsched import solve

METHODS = ("cp-search", "sa")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--budget", type=float, default=1.0, help="seconds per solve")
    a = ap.parse_args()
    print("| method | changes | warm / scratch, mean | worst | warm placement, mean s | tasks moved, mean |")
    print("|---|---|---|---|---|---|")
    for method in METHODS:
        rng = np.random.default_rng(0)
        p = mapsched.generators.random_dag(300, 8, seed=0)
        prev = solve(p, method, time_limit=a.budget)
        ratios, walls, moved, added = [], [], [], 0
        for _ in range(a.steps):
            if p.m > 3 and (p.m >= 10 or rng.random() < 0.5):
                q = p.without_devices([p.device_names[int(rng.integers(p.m))]])
            else:
                added += 1
                q = p.with_devices({f"new{added}": p.device_names[int(rng.integers(p.m))]})
            t = time.perf_counter()
            warm = solve(q, method, time_limit=a.budget, initial=prev)
            walls.append(time.perf_counter() - t)
            scratch = solve(q, method, time_limit=a.budget)
            ratios.append(warm.makespan / scratch.makespan)
            moved.append(int(warm.log.split("the result runs ")[1].split(" ")[0]))
            p, prev = q, warm
        print(f"| {method} | {a.steps} | {np.mean(ratios):.4f} | {max(ratios):.4f} | {np.mean(walls):.2f} "
              f"| {np.mean(moved):.0f} |", flush=True)


if __name__ == "__main__":
    main()
