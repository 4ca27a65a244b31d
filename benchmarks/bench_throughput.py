"""Batched throughput: the exact backends and split against bheft and bmet.

Single random-wired ER(0.2) modules of N=10 and 4-module single-channel stacks, with
B=16 inputs; every device takes batches of B/4, B/2, 3B/4 or B (cpu-t4-a100 preset).
Each backend gets ``--threads`` (default 2) threads and ``--time-limit`` seconds. Throughput
in inputs/s; the bound column is the upper bound on throughput implied by the best proved
makespan bound.

    python benchmarks/bench_throughput.py --time-limit 60

The issue-30 goal, single N=10 modules with B=16 proved optimal in under 10 s by CP-SAT
(the ``cpsat (s)`` column; ``(opt)`` marks a proved optimum, ``(opt*)`` an optimum proved
among schedules with one job per task and device, which is all the batched models
express), alone:

    python benchmarks/bench_throughput.py --time-limit 60 --modules-only --backends cpsat

``--split`` adds a column for ``split`` (its pipelined walk, module recursion and
whole-graph polish) with the same time limit.
"""

from __future__ import annotations

import argparse

import mapsched
from mapsched import Objective
from mapsched.generators import stack

ONE_BATCH = "batched model: optimal among schedules with one job per task and device"
"""What ``exact`` logs when its batched model is proved (see mapsched.formulations.exact)."""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--seeds", type=int, default=3, help="single modules: seeds 0 .. seeds-1")
    ap.add_argument("--modules-only", action="store_true", help="leave out the 4-module stacks")
    ap.add_argument("--backends", default="cpsat,highs", help="exact backends, comma-separated")
    ap.add_argument("--split", action="store_true", help="add split with the same time limit")
    ap.add_argument("--threads", type=int, default=2, help="solver threads of every backend and of split")
    args = ap.parse_args()
    backends = [b for b in args.backends.split(",") if b]
    cases = [(f"module N=10, seed {s}", dict(modules=1, seed=s)) for s in range(args.seeds)]
    if not args.modules_only:
        cases += [(f"4-module stack, seed {s}", dict(modules=4, seed=s)) for s in range(2)]
    cols = ["bmet", "bheft"] + [c for b in backends for c in (b, f"{b} (s)")] + (["split", "split (s)"] if args.split
                                                                                 else [])
    print("| instance | tasks | " + " | ".join(cols) + " | throughput bound |")
    print("|---|---:|" + "---:|" * (len(cols) + 1))
    for name, kw in cases:
        p = stack(n=10, channels=1, objective=Objective("throughput", 16), **kw)
        runs = {m: mapsched.solve(p, m) for m in ("bmet", "bheft")}
        for backend in backends:
            runs[backend] = mapsched.solve(p, "exact", backend=backend, time_limit=args.time_limit,
                                           threads=args.threads)
        if args.split:
            runs["split"] = mapsched.solve(p, "split", time_limit=args.time_limit, threads=args.threads)
        assert all(not mapsched.validate(p, r) for r in runs.values())
        bound = max(r.lower_bound or 0.0 for r in runs.values())
        cell = {k: f"{r.throughput:.1f}" + (" (opt)" if r.status == "optimal" else " (opt*)" if ONE_BATCH in r.log
                                            else "") for k, r in runs.items()}
        cell |= {f"{k} (s)": f"{r.solve_seconds:.1f}" for k, r in runs.items()}
        print(f"| {name} | {p.n} | " + " | ".join(cell[c] for c in cols)
              + f" | {1000 * p.L / bound if bound else float('inf'):.1f} |", flush=True)


if __name__ == "__main__":
    main()
