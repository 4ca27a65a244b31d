"""GiPH off its training distribution (issue 70): a policy scored per problem family, the
families it was trained on beside those it never saw (:mod:`mapsched.instances.families`).

Per family, ``--cases`` problems with seeds apart from training's and its evaluation's
(:func:`mapsched.learned.giph_training.generalization`):

- GiPH's protocol: 2 |V| moves from a random placement, against ``heft``'s placement, both run
  by the work-conserving model: the share of cases no worse, and the mean ratio;
- ``solve -m giph`` with its defaults (start: the better of ``heft`` and ``peft``): the median
  and the worst gain below that start.

Train the shipped policy (alone on the machine: GiPH's ``multi-diff`` policy, itself
``mapsched train giph --suite multi-diff --episodes 200 --seed 1 --eval-every 10
--eval-cases 24``, trained further on the mixture), then score it::

    /usr/bin/time -f "%e s %M KB" mapsched train giph --init multi-diff --lr 0.001 --episodes 600 \\
        --seed 3 --eval-every 25 --eval-cases 24 -o giph.pt
    python benchmarks/bench_giph_families.py --policy giph.pt
    python benchmarks/bench_giph_families.py --policy multi-diff --trained giph

Smoke run (seconds)::

    python benchmarks/bench_giph_families.py --cases 2 --tasks 10,20
"""

from __future__ import annotations

import argparse
import time

from mapsched.instances.families import FAMILIES, TRAINING
from mapsched.learned.giph_training import generalization


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--policy", default="", help="policy file (default: the shipped one)")
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--trained", default=",".join(TRAINING), help="the families the policy was trained on")
    ap.add_argument("--cases", type=int, default=30)
    ap.add_argument("--tasks", default="10,200", help="least,most tasks of the families that draw a size")
    ap.add_argument("--no-defaults", action="store_true", help="GiPH's protocol only")
    a = ap.parse_args()
    lo, hi = (int(x) for x in a.tasks.split(","))
    print(f"policy {a.policy or 'shipped'}, {a.cases} cases a family, {lo}-{hi} tasks\n")
    print("| family | trained on | cases | giph <= heft (random start) | mean giph / heft | median gain below "
          "start (defaults) | worst gain | s |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for family in a.families.split(","):
        t = time.perf_counter()
        (s,) = generalization(a.policy, [family], a.cases, a.trained.split(","), tasks=(lo, hi),
                              defaults=not a.no_defaults)
        gains = "- | -" if a.no_defaults else f"{100 * s.median_gain:.1f}% | {100 * s.worst_gain:.1f}%"
        print(f"| {s.family} | {'yes' if s.trained else 'no'} | {s.cases} | {100 * s.no_worse:.1f}% | "
              f"{s.mean_ratio:.3f} | {gains} | {time.perf_counter() - t:.0f} |", flush=True)


if __name__ == "__main__":
    main()
