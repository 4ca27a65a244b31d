"""MILP-SPLIT against a full exact solve on stacks of Erdos-Renyi(0.2) modules.

Stacks of 5, 10 and 20 modules of 10 nodes, single-channel and 2- and 4-channel
sdep and wdep variants, on the cpu-t4-a100 preset. For each: split's time and
makespan with no time limit (with several channels, the rolling stitching, and
beside it the seed paper's independent module solves, ``--window 0``); split with
a time limit of --budget seconds (what is left after stitching goes to the exact
model of the whole graph); a full CP-SAT solve of the whole graph given ten times
split's time (capped by --exact-cap); and the best lower bound (the module-chain
recursion, the head-and-tail windows, the load LP, the relaxation with separated load
cuts and whole tasks, split's own DP bound where exact, and the solvers' bounds).
"best" is the best makespan any of these runs found. Every solve gets --threads
threads.

    python benchmarks/bench_split.py --exact-cap 60 --budget 10
"""

from __future__ import annotations

import argparse

import mapsched
from mapsched.bounds import load_bound
from mapsched.bounds.relaxation import relaxation_bound
from mapsched.generators import stack
from mapsched.split import chain_bound, window_bound

CONFIGS = [(1, "sdep"), (2, "sdep"), (4, "sdep"), (2, "wdep"), (4, "wdep")]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--modules", default="5,10,20")
    ap.add_argument("--exact-cap", type=float, default=60.0)
    ap.add_argument("--module-time-limit", type=float, default=5.0)
    ap.add_argument("--bound-time", type=float, default=30.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--budget", type=float, default=10.0)
    ap.add_argument("--step-time-limit", type=float, default=0.5)
    args = ap.parse_args()
    budget = f"{args.budget:g} s"
    print(f"| modules | channels | tasks | split (s) | split | split in {budget} | paper split (s) | paper split "
          f"| exact (s) | exact | best | split vs best | split in {budget} vs best | bound | split gap "
          f"| split in {budget} gap |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")

    def cell(r: mapsched.Result) -> str:
        return f"{r.makespan:.3f}{' (opt)' if r.status == 'optimal' else ''}"

    for T in map(int, args.modules.split(",")):
        for c, variant in CONFIGS:
            p = stack(T, 10, c, variant, seed=T)
            opts = dict(channels=c, module_time_limit=args.module_time_limit, step_time_limit=args.step_time_limit,
                        threads=args.threads)
            s = mapsched.solve(p, "split", **opts)
            w = mapsched.solve(p, "split", time_limit=args.budget, **opts)
            runs = [s, w]
            paper = ["-", "-"]
            if c > 1:  # the independent module solves of the seed paper, for comparison
                q = mapsched.solve(p, "split", window=0, **opts)
                paper = [f"{q.solve_seconds:.1f}", f"{q.makespan:.3f}"]
                runs.append(q)
            e = mapsched.solve(p, "exact", time_limit=min(10 * s.solve_seconds, args.exact_cap), threads=args.threads)
            runs.append(e)
            assert not any(mapsched.validate(p, r) for r in runs)
            best = min(r.makespan for r in runs)
            # windows one at a time, as measured in BENCHMARKS.md
            windows = window_bound(p, time_limit=2 * args.bound_time, threads=1)
            b = max(chain_bound(p, time_limit=args.bound_time), windows, load_bound(p),
                    relaxation_bound(p, time_limit=args.bound_time), *(r.lower_bound for r in runs))
            label = "1" if c == 1 else f"{c} {variant}"
            print(f"| {T} | {label} | {p.n} | {s.solve_seconds:.1f} | {cell(s)} | {cell(w)} | {paper[0]} | {paper[1]} "
                  f"| {e.solve_seconds:.1f} | {cell(e)} | {best:.3f} | {100 * (s.makespan / best - 1):+.1f}% "
                  f"| {100 * (w.makespan / best - 1):+.1f}% | {b:.3f} | {100 * (s.makespan - b) / s.makespan:.1f}% "
                  f"| {100 * (w.makespan - b) / w.makespan:.1f}% |", flush=True)


if __name__ == "__main__":
    main()
