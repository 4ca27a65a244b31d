"""Heuristic time and quality on random DAGs of 100, 1,000 and 10,000 tasks over 4 devices.

Target (issue: heuristics): heft on 10,000 tasks and 4 devices in under 2 s.

    python benchmarks/bench_heuristics.py [--search-seconds 10]

Quality is the makespan and its gap to the method-independent lower bound; sa and
ea run for --search-seconds each (their iteration budget is set out of reach).
"""

from __future__ import annotations

import argparse

import mapsched
from mapsched.generators import random_dag

METHODS = ["single-best", "met", "greedy", "heft", "cpop", "random", "sa", "ea"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="100,1000,10000")
    ap.add_argument("--devices", type=int, default=4)
    ap.add_argument("--search-seconds", type=float, default=10.0)
    args = ap.parse_args()
    print("| tasks | method | makespan (ms) | gap to bound | seconds |")
    print("|---:|---|---:|---:|---:|")
    for n in map(int, args.sizes.split(",")):
        p = random_dag(n, args.devices, seed=0)
        for name in METHODS:
            opts = {"iterations": 10**9} if name in ("sa", "ea") else {}
            limit = args.search_seconds if name in ("sa", "ea", "random") else None
            r = mapsched.solve(p, name, time_limit=limit, seed=0, **opts)
            assert not mapsched.validate(p, r), name
            print(f"| {n} | {name} | {r.makespan:.1f} | {100 * r.gap:.1f}% | {r.solve_seconds:.3f} |", flush=True)


if __name__ == "__main__":
    main()
