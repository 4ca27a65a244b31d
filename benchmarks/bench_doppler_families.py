"""DOPPLER across problem families (issue 70): the policy shipped for 4 devices
(``--policy shipped``; 2 and 8 are shipped too), trained on a mixture of families, scored per family against
``critical-path`` (its 50 runs, its mapping run by the work-conserving model, as DOPPLER's
rollouts are), on the families it was trained on and on those it never saw.

Per family, ``--cases`` problems on 4 devices with seeds apart from training's and its
evaluation's: the median and the best ratio of ``doppler``'s makespan to ``critical-path``'s,
the share of cases at least 10% below it, and whether any is above it (``doppler`` returns
critical-path's assignment where no rollout beats it). ``--episodes N`` fine-tunes the policy
on each problem first.

Train the shipped policies (alone on the machine), then score the one for 4 devices, as it is
and fine-tuned, beside DOPPLER trained on each problem from scratch::

    for m in 2 4 8; do /usr/bin/time -f "%e s %M KB" mapsched train doppler --families giph,random,layered,dnn \\
        --devices $m --hidden 32 --episodes 100 --seed 1 -o doppler-$m.pt; done
    python benchmarks/bench_doppler_families.py --cases 20 --bound-seconds 2
    python benchmarks/bench_doppler_families.py --cases 10 --episodes 20 --families giph-alt,traced,wired
    python benchmarks/bench_doppler_families.py --cases 10 --episodes 20 --policy "" --families giph-alt,traced,wired
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from mapsched import solve
from mapsched.instances.families import FAMILIES, family_problem
from mapsched.learned.doppler import teacher_makespan
from mapsched.split import full_bound

TEST_SEED = 2 * 10**9


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--policy", default="shipped")
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--trained", default="giph,random,layered,dnn")
    ap.add_argument("--cases", type=int, default=20)
    ap.add_argument("--episodes", type=int, default=0)
    ap.add_argument("--tasks", default="10,60")
    ap.add_argument("--samples", type=int, default=None, help="doppler's --samples (default: its own)")
    ap.add_argument("--bound-seconds", type=float, default=0.0,
                    help="add the median of mapsched's bound over critical-path's makespan: how far below it "
                         "any placement can go (full_bound with this many seconds a case)")
    a = ap.parse_args()
    lo, hi = (int(x) for x in a.tasks.split(","))
    policy = a.policy or "none (trained on each problem)"
    print(f"policy {policy}, {a.cases} cases a family on 4 devices, {lo}-{hi} tasks, {a.episodes} fine-tuning "
          "episodes\n")
    bounded = a.bound_seconds > 0
    print("| family | trained on | cases | median doppler / critical-path | best | 10% below | above |"
          + (" median bound / critical-path |" if bounded else "") + " s |")
    print("|---|---|---:|---:|---:|---:|---:|" + ("---:|" if bounded else "") + "---:|")
    for family in a.families.split(","):
        t = time.perf_counter()
        ratios, floors = [], []
        for k in range(a.cases):
            p = family_problem(family, TEST_SEED + k, tasks=(lo, hi), devices=4)
            extra = {} if a.samples is None else {"samples": a.samples}
            r = solve(p, "doppler", policy=a.policy, episodes=a.episodes, seed=k, **extra)
            teacher = teacher_makespan(p)
            ratios.append(r.makespan / teacher)
            if bounded:
                floors.append(full_bound(p, a.bound_seconds).value / teacher)
        r = np.asarray(ratios)
        floor = f" {np.median(floors):.3f} |" if bounded else ""
        print(f"| {family} | {'yes' if family in a.trained.split(',') else 'no'} | {a.cases} | {np.median(r):.3f} | "
              f"{r.min():.3f} | {np.mean(r <= 0.9):.0%} | {int(np.sum(r > 1 + 1e-9))} |{floor} "
              f"{time.perf_counter() - t:.0f} |", flush=True)


if __name__ == "__main__":
    main()
