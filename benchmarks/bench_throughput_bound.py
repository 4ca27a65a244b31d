"""Throughput bounds against the best known schedules on the Table IV stacks (issue 30).

For each stack of the ``paper-throughput`` suite (10 ER(0.2) modules of 10 nodes, B=16
inputs, batches of 4, 8, 12 or 16): the old bound (the quick rules, critical path, work
and load LP, which the Table IV bound column showed: the chain recursion never beat
the load LP there), the new one (``mapsched.split.full_bound``, with the batched
relaxation, the pipeline stages and the two-part bound), the rule that gave it, and the
best makespan of ``sa`` and ``split``. The gaps are best makespan over bound, less 1;
the goal is at most 10% with the new bound. Throughputs are 1000 * 16 / makespan.

    python benchmarks/bench_throughput_bound.py --bound-time 45 --sa-time 10 --split-time 45

``--only 1-chan`` runs one stack (a smoke run).
"""

from __future__ import annotations

import argparse
import time

import mapsched
from mapsched.bench.suites import SUITES
from mapsched.bounds import critical_path_bound, load_bound, work_bound
from mapsched.split import full_bound


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bound-time", type=float, default=45.0)
    ap.add_argument("--sa-time", type=float, default=10.0)
    ap.add_argument("--split-time", type=float, default=45.0)
    ap.add_argument("--only", action="append", help="instance name to run (repeatable); default: all seven")
    args = ap.parse_args()
    cases = [c for c in SUITES["paper-throughput"].cases if not args.only or c.name in args.only]
    print("| instance | old bound (ms) | new bound (ms) | rule | bound (s) | sa (ms) | split (ms) "
          "| best (inputs/s) | gap to old | gap to new |")
    print("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|")
    for case in cases:
        p = case.build()
        old = max(critical_path_bound(p), work_bound(p), load_bound(p))
        t0 = time.perf_counter()
        new = full_bound(p, args.bound_time)
        took = time.perf_counter() - t0
        runs = {m: mapsched.solve(p, m, time_limit=limit, seed=0, threads=1)
                for m, limit in (("sa", args.sa_time), ("split", args.split_time))}
        assert all(not mapsched.validate(p, r) for r in runs.values())
        best = min(r.makespan for r in runs.values())
        print(f"| {case.name} | {old:.1f} | {new.value:.1f} | {new.rule} | {took:.1f} | {runs['sa'].makespan:.1f} "
              f"| {runs['split'].makespan:.1f} | {1000 * p.L / best:.2f} | {best / old - 1:.1%} "
              f"| {best / new.value - 1:.1%} |", flush=True)


if __name__ == "__main__":
    main()
