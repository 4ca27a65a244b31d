"""Exact latency solves on single random-wired modules: CP-SAT against HiGHS, and
mapsched's CP-SAT set-up against other CP-SAT set-ups of the same model.

Erdos-Renyi(0.2) modules of N in {10, 20, 32} nodes (plus their input and output
nodes), 3 seeds each, on the cpu-t4-a100 preset (relative speeds 7.1x / 1.26x / 1x).
Each solve gets --threads threads and --time-limit seconds. "cpsat" is ``exact`` as
shipped: on models with load cuts (``mapsched.formulations.common.load_cuts``, all of
these graphs) two threads run CP-SAT's LP-free search beside its default search and a
large-neighbourhood search (``mapsched.formulations.cpsat.portfolio``). The other
CP-SAT rows change one thing each: "no transfer margins" states the load cuts without
the transfers around each device's work (``Margins(zero=True)``, as mapsched
was before them); "lower-bound search" puts CP-SAT's objective lower-bound search in
place of the default one, as ``exact`` does with a time limit on graphs without load
cuts; "no load cuts" leaves the cuts out, with the lower-bound search; "default 2
workers" runs CP-SAT's default search on two workers.

    python benchmarks/bench_exact.py --time-limit 60
"""

from __future__ import annotations

import argparse
import functools
import time

from ortools.sat.python import cp_model

import mapsched
from mapsched.bounds.cuts import LOAD_CUT_TERMS
from mapsched.formulations import common
from mapsched.formulations.cpsat import CpSatModel, run_cpsat
from mapsched.formulations.milp import build_model
from mapsched.generators import random_wired
from mapsched.scheduling.best_list import best_list_schedule


def cpsat_run(p: mapsched.Problem, limit: float, threads: int, model_kwargs: dict | None = None,
              margins: bool = True, **kwargs) -> tuple[str, str, str, float]:
    """The exact CP-SAT model as ``exact`` builds it (with ``model_kwargs`` on top, and
    without the load cuts' transfer margins unless ``margins``) from the warm start,
    solved by ``run_cpsat`` with ``kwargs``."""
    start = best_list_schedule(p)
    real = common.Margins
    if not margins:
        common.Margins = functools.partial(real, zero=True)
    try:
        model = CpSatModel(p, start.makespan, **{"load_cut_terms": LOAD_CUT_TERMS, **(model_kwargs or {})})
    finally:
        common.Margins = real
    model.hint(start)
    t0 = time.perf_counter()
    solver, status, _ = run_cpsat(model, limit, threads, 0, False, **kwargs)
    secs = time.perf_counter() - t0
    bound = solver.best_objective_bound / model.res
    best = min(solver.objective_value / model.res, start.makespan)
    state = "optimal" if status == cp_model.OPTIMAL else f"gap {100 * (best - bound) / best:.1f}%"
    return f"{best:.3f}", f"{bound:.3f}", state, secs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10,20,32")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    print("| N | seed | tasks | heft | solver | makespan | bound | status | build (s) | solve (s) |")
    print("|---:|---:|---:|---:|---|---:|---:|---|---:|---:|")
    for n in map(int, args.sizes.split(",")):
        for seed in map(int, args.seeds.split(",")):
            p = random_wired(n, "er", seed=seed)
            ub = best_list_schedule(p).makespan
            t0 = time.perf_counter()
            CpSatModel(p, ub, load_cut_terms=LOAD_CUT_TERMS)
            builds = {"cpsat": time.perf_counter() - t0,
                      "highs": build_model(p, ub, load_cut_terms=LOAD_CUT_TERMS).build_seconds}
            rows = []
            for backend in ("cpsat", "highs"):
                r = mapsched.solve(p, "exact", backend=backend, time_limit=args.time_limit, threads=args.threads)
                assert not mapsched.validate(p, r)
                gap = "optimal" if r.status == "optimal" else f"gap {100 * r.gap:.1f}%"
                rows.append([backend, f"{r.makespan:.3f}", f"{r.lower_bound:.3f}", gap,
                             f"{builds[backend]:.3f}", f"{r.solve_seconds:.2f}"])
            variants = [("cpsat, no transfer margins", {"margins": False}),
                        ("cpsat, lower-bound search", {"deadline": True}),
                        ("cpsat, no load cuts", {"model_kwargs": {"load_cut_terms": 0}, "deadline": True}),
                        ("cpsat, default 2 workers", {"workers": 2})]
            for k, (label, kwargs) in enumerate(variants, start=1):
                best, bound, state, secs = cpsat_run(p, args.time_limit, args.threads, **kwargs)
                rows.insert(k, [label, best, bound, state, f"{builds['cpsat']:.3f}", f"{secs:.2f}"])
            for k, row in enumerate(rows):
                head = [str(n), str(seed), str(p.n), f"{ub:.3f}"] if k == 0 else ["", "", "", ""]
                print("| " + " | ".join(head + row) + " |", flush=True)


if __name__ == "__main__":
    main()
