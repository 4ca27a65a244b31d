"""MILP-SPLIT against a full exact solve on stacks of Erdos-Renyi(0.2) modules.

Stacks of 5, 10 and 20 modules of 10 nodes, single-channel and 2- and 4-channel
sdep and wdep variants, on the cpu-t4-a100 preset. For each: split's time and
makespan (with several channels, the rolling stitching, and beside it the seed
paper's independent module solves, ``--window 0``); a full CP-SAT solve of the whole
graph given ten times split's time (capped by --exact-cap); and the best lower bound
(the module-chain recursion, the load LP, split's own DP bound where exact, and the
exact solve's bound). Every solve gets --threads threads.

    python benchmarks/bench_split.py --exact-cap 60
"""

from __future__ import annotations

import argparse

import mapsched
from mapsched.bounds import load_bound
from mapsched.generators import stack
from mapsched.split import chain_bound

CONFIGS = [(1, "sdep"), (2, "sdep"), (4, "sdep"), (2, "wdep"), (4, "wdep")]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--modules", default="5,10,20")
    ap.add_argument("--exact-cap", type=float, default=60.0)
    ap.add_argument("--module-time-limit", type=float, default=5.0)
    ap.add_argument("--bound-time", type=float, default=30.0)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    print("| modules | channels | tasks | split (s) | split | paper split (s) | paper split | exact (s) | exact "
          "| split vs exact | bound | split gap to bound |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for T in map(int, args.modules.split(",")):
        for c, variant in CONFIGS:
            p = stack(T, 10, c, variant, seed=T)
            s = mapsched.solve(p, "split", channels=c, module_time_limit=args.module_time_limit, threads=args.threads)
            assert not mapsched.validate(p, s)
            paper = ["-", "-"]
            if c > 1:  # the independent module solves of the seed paper, for comparison
                q = mapsched.solve(p, "split", channels=c, window=0, module_time_limit=args.module_time_limit,
                                   threads=args.threads)
                paper = [f"{q.solve_seconds:.1f}", f"{q.makespan:.3f}"]
            limit = min(10 * s.solve_seconds, args.exact_cap)
            e = mapsched.solve(p, "exact", time_limit=limit, threads=args.threads)
            b = max(chain_bound(p, time_limit=args.bound_time), load_bound(p), s.lower_bound, e.lower_bound)
            label = "1" if c == 1 else f"{c} {variant}"
            ratio = f"{100 * (s.makespan / e.makespan - 1):+.1f}%"
            print(f"| {T} | {label} | {p.n} | {s.solve_seconds:.1f} | {s.makespan:.3f}"
                  f"{' (opt)' if s.status == 'optimal' else ''} | {paper[0]} | {paper[1]} | {e.solve_seconds:.1f} "
                  f"| {e.makespan:.3f}{' (opt)' if e.status == 'optimal' else ''} | {ratio} | {b:.3f} "
                  f"| {100 * (s.makespan - b) / s.makespan:.1f}% |", flush=True)


if __name__ == "__main__":
    main()
