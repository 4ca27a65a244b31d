"""Exact latency solves on single random-wired modules, CP-SAT against HiGHS.

Erdos-Renyi(0.2) modules of N in {10, 20, 32} nodes (plus their input and output
nodes), 3 seeds each, on the cpu-t4-a100 preset (relative speeds 7.1x / 1.26x / 1x);
each backend gets 2 threads and --time-limit seconds.

    python benchmarks/bench_exact.py --time-limit 60
"""

from __future__ import annotations

import argparse
import time

import mapsched
from mapsched.formulations.common import warm_start
from mapsched.formulations.cpsat import CpSatModel
from mapsched.formulations.milp import build_model
from mapsched.generators import random_wired


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10,20,32")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    print("| N | seed | tasks | heft | backend | makespan | bound | status | build (s) | solve (s) "
          "| highs/cpsat time |")
    print("|---:|---:|---:|---:|---|---:|---:|---|---:|---:|---:|")
    for n in map(int, args.sizes.split(",")):
        for seed in map(int, args.seeds.split(",")):
            p = random_wired(n, "er", seed=seed)
            ub = warm_start(p).makespan
            t0 = time.perf_counter()
            CpSatModel(p, ub)
            builds = {"cpsat": time.perf_counter() - t0, "highs": build_model(p, ub).build_seconds}
            rows, secs = [], {}
            for backend in ("cpsat", "highs"):
                r = mapsched.solve(p, "exact", backend=backend, time_limit=args.time_limit, threads=args.threads)
                assert not mapsched.validate(p, r)
                secs[backend] = r.solve_seconds
                gap = "optimal" if r.status == "optimal" else f"gap {100 * r.gap:.1f}%"
                rows.append([backend, f"{r.makespan:.3f}", f"{r.lower_bound:.3f}", gap,
                             f"{builds[backend]:.3f}", f"{r.solve_seconds:.2f}"])
            ratio = f"{secs['highs'] / secs['cpsat']:.1f}x"
            for k, row in enumerate(rows):
                head = [str(n), str(seed), str(p.n), f"{ub:.3f}"] if k == 0 else ["", "", "", ""]
                print("| " + " | ".join(head + row + [ratio if k == 0 else ""]) + " |", flush=True)


if __name__ == "__main__":
    main()
