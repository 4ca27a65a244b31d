"""Batched throughput: the exact backends against bheft and bmet.

Single random-wired ER(0.2) modules of N=10 and 4-module single-channel stacks, with
B=16 inputs; every device takes batches of B/4, B/2, 3B/4 or B (cpu-t4-a100 preset).
Each backend gets 2 threads and --time-limit seconds. Throughput in inputs/s; the
bound column is the upper bound on throughput implied by the best proved makespan bound.

    python benchmarks/bench_throughput.py --time-limit 60
"""

from __future__ import annotations

import argparse

import mapsched
from mapsched import Objective
from mapsched.generators import stack


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--time-limit", type=float, default=60.0)
    args = ap.parse_args()
    cases = [(f"module N=10, seed {s}", dict(modules=1, seed=s)) for s in range(3)]
    cases += [(f"4-module stack, seed {s}", dict(modules=4, seed=s)) for s in range(2)]
    print("| instance | tasks | bmet | bheft | cpsat | cpsat (s) | highs | highs (s) | throughput bound |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, kw in cases:
        p = stack(n=10, channels=1, objective=Objective("throughput", 16), **kw)
        runs = {m: mapsched.solve(p, m) for m in ("bmet", "bheft")}
        for backend in ("cpsat", "highs"):
            runs[backend] = mapsched.solve(p, "exact", backend=backend, time_limit=args.time_limit, threads=2)
        assert all(not mapsched.validate(p, r) for r in runs.values())
        bound = max(r.lower_bound for r in runs.values())
        cell = {k: f"{r.throughput:.1f}" + (" (opt)" if r.status == "optimal" else "") for k, r in runs.items()}
        print(f"| {name} | {p.n} | {cell['bmet']} | {cell['bheft']} | {cell['cpsat']} "
              f"| {runs['cpsat'].solve_seconds:.1f} | {cell['highs']} | {runs['highs'].solve_seconds:.1f} "
              f"| {1000 * p.L / bound:.1f} |", flush=True)


if __name__ == "__main__":
    main()
