"""MILP-SPLIT against a full exact solve on stacks of Erdos-Renyi(0.2) modules.

Stacks of 5, 10 and 20 modules of 10 nodes, single-channel and 2- and 4-channel
sdep and wdep variants, on the cpu-t4-a100 preset. For each: split's time and
makespan; a full CP-SAT solve of the whole graph given ten times split's time
(capped by --exact-cap); and the best lower bound (the module-chain recursion,
split's own DP bound where exact, and the exact solve's bound).

    python benchmarks/bench_split.py --exact-cap 60
"""

from __future__ import annotations

import argparse

import mapsched
from mapsched.bounds import chain_bound
from mapsched.generators import stack

CONFIGS = [(1, "sdep"), (2, "sdep"), (4, "sdep"), (2, "wdep"), (4, "wdep")]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--modules", default="5,10,20")
    ap.add_argument("--exact-cap", type=float, default=60.0)
    ap.add_argument("--module-time-limit", type=float, default=5.0)
    ap.add_argument("--bound-time", type=float, default=30.0)
    args = ap.parse_args()
    print("| modules | channels | tasks | split (s) | split | exact (s) | exact | split vs exact "
          "| bound | split gap to bound |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for T in map(int, args.modules.split(",")):
        for c, variant in CONFIGS:
            p = stack(T, 10, c, variant, seed=T)
            s = mapsched.solve(p, "split", channels=c, module_time_limit=args.module_time_limit)
            assert not mapsched.validate(p, s)
            limit = min(10 * s.solve_seconds, args.exact_cap)
            e = mapsched.solve(p, "exact", time_limit=limit, threads=2)
            b = max(chain_bound(p, time_limit=args.bound_time), s.lower_bound, e.lower_bound)
            label = "1" if c == 1 else f"{c} {variant}"
            ratio = f"{100 * (s.makespan / e.makespan - 1):+.1f}%"
            print(f"| {T} | {label} | {p.n} | {s.solve_seconds:.1f} | {s.makespan:.3f} | {e.solve_seconds:.1f} "
                  f"| {e.makespan:.3f}{' (opt)' if e.status == 'optimal' else ''} | {ratio} | {b:.3f} "
                  f"| {100 * (s.makespan - b) / s.makespan:.1f}% |", flush=True)


if __name__ == "__main__":
    main()
