"""Which side of the real models' gap is loose (issue #68): reduced versions of the shipped
real-model instances that ``exact`` can close, with the proved optimum beside the best list
schedule, the default at a short limit, the quick bound and ``bound`` at the same limit.

A reduced instance is the first ``k`` tasks of the graph in topological order (the
subgraph they induce) on the same system. The accelerators (the devices that cannot hold
the whole model) hold ``share`` of the reduced model's memory between them (weights and
outputs, as the format charges them), as in the full instance (60%), each in the
proportion it had but at least the largest task it runs; the CPUs keep theirs. So memory
still decides where the tail goes, and transfers through host memory still cost more than
compute. Prints a markdown table.

    python benchmarks/bench_real_reduced.py --tasks 16 --time-limit 10 --exact-limit 120
"""

from __future__ import annotations

import argparse
import math
import time

from mapsched import Problem, instances, solve
from mapsched.bounds import lower_bound
from mapsched.split import full_bound

LAYER_INSTANCES = tuple(f"real/{m}-layer" for m in ("inception-v3", "resnet50", "bert", "gnmt"))


def reduced(p: Problem, k: int, share: float) -> Problem:
    """The first ``k`` tasks of ``p`` in topological order, on accelerators holding ``share``
    of their memory between them (each in the proportion it had)."""
    sub = p.restrict([int(i) for i in p.topo[:k]], name=f"{p.name} first {k}")
    d = sub.to_dict()
    need = float((sub.weight + sub.act).sum())
    whole = float((p.weight + p.act).sum())  # the CPUs hold the whole model and keep their memory
    finite = [(j, x) for j, x in enumerate(d["devices"]) if float(x.get("memory", math.inf)) < whole]
    total = sum(float(x["memory"]) for _, x in finite)
    for j, x in finite:  # but never below the largest task the device runs, which must still fit
        largest = max((float(sub.weight[i] + sub.act[i]) for i in range(sub.n) if math.isfinite(sub.lat[i, j, 0])),
                      default=0.0)
        x["memory"] = max(math.floor(share * need * float(x["memory"]) / total), math.ceil(largest))
    return Problem.from_dict(d)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, nargs="+", default=[16])
    ap.add_argument("--share", type=float, default=0.6)
    ap.add_argument("--time-limit", type=float, default=10.0, help="the default's and bound's limit")
    ap.add_argument("--exact-limit", type=float, default=120.0)
    ap.add_argument("--only", nargs="*", default=None)
    a = ap.parse_args()
    print(f"| instance | tasks | best list | default at {a.time_limit:g} s | optimum (exact) | exact's s "
          f"| quick bound | `bound` at {a.time_limit:g} s | list over opt | default over opt | opt over bound |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name in a.only or LAYER_INSTANCES:
        full = instances.load(name)
        for k in a.tasks:
            p = reduced(full, k, a.share)
            lst = min(solve(p, m).makespan for m in ("heft", "peft"))
            dflt = solve(p, time_limit=a.time_limit, seed=0).makespan
            t0 = time.perf_counter()
            ex = solve(p, "exact", time_limit=a.exact_limit, seed=0)
            sec = time.perf_counter() - t0
            opt = f"{ex.makespan:.4g}" + ("" if ex.status == "optimal" else f" (bound {ex.lower_bound:.4g})")
            quick = lower_bound(p).value
            fb = full_bound(p, time_limit=a.time_limit).value
            print(f"| {name} | {k} | {lst:.4g} | {dflt:.4g} | {opt} | {sec:.1f} | {quick:.4g} | {fb:.4g} | "
                  f"{100 * (lst / ex.makespan - 1):.1f}% | {100 * (dflt / ex.makespan - 1):.1f}% | "
                  f"{100 * (ex.makespan / fb - 1):.1f}% |", flush=True)


if __name__ == "__main__":
    main()
