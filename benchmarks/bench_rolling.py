"""split's rolling stitching under several step time limits, side by side.

The 20-module stacks of bench_split.py with 2 and 4 channels (sdep and wdep), on the
cpu-t4-a100 preset: split's makespan and time for each ``step_time_limit``, with no
time limit on the solve and --threads threads.

    python benchmarks/bench_rolling.py --limits 0.25,0.5,1
"""

from __future__ import annotations

import argparse

import mapsched
from mapsched.generators import stack

CONFIGS = [(2, "sdep"), (2, "wdep"), (4, "sdep"), (4, "wdep")]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--modules", type=int, default=20)
    ap.add_argument("--limits", default="0.25,0.5,1")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    labels = [f"{c} {variant}" for c, variant in CONFIGS]
    print(f"| step limit | {' | '.join(labels)} | time (s) |")
    print("|---:|" + "---:|" * len(CONFIGS) + "---:|")
    for limit in map(float, args.limits.split(",")):
        cells, times = [], []
        for c, variant in CONFIGS:
            p = stack(args.modules, 10, c, variant, seed=args.modules)
            r = mapsched.solve(p, "split", channels=c, step_time_limit=limit, threads=args.threads)
            assert not mapsched.validate(p, r)
            cells.append(f"{r.makespan:.3f}")
            times.append(r.solve_seconds)
        print(f"| {limit:g} s | {' | '.join(cells)} | {min(times):.1f} to {max(times):.1f} |", flush=True)


if __name__ == "__main__":
    main()
