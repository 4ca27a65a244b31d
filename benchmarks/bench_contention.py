"""Placements on hardware whose transfers take turns (issue #69): the real-model suite with
every accelerator's copies serialised on the accelerator (``copy_engines: 0``, the model of
the project issue #69 measured against), the CPUs' copies unlimited.

Per instance, every schedule timed under that contention (jobs and copies on the
accelerators taking turns):

- ``greedy``: the contiguous greedy, accelerators filled in topological order up to their
  memory, the rest on the CPUs in the same way (Baechi's m-TOPO with the memory cap,
  fastest devices first), decoded in that order with insertion;
- ``free``: the default's schedule of the problem without contention (the placement a
  contention-free model prefers), re-timed as :func:`mapsched.solve` re-times it (its start
  order, with insertion), and ``free sim``: the same mapping under ``simulate``;
- ``contended``: the default on the problem with contention;
- ``bound``: the best of the lower bound at 10 s and the two solves' proved bounds
  (contention only adds constraints, so a bound without it holds).

Prints a markdown table and writes the rows as JSON lines.

    python benchmarks/bench_contention.py --time-limit 20 -o benchmarks/results/contention.jsonl

``--large`` instead times ``heft``'s construction (upward ranks, then the insertion list
schedule) on the traced training steps, without contention and with every device's copies
on the device (``copy_engines: 0``), to show how the contended path grows with the graph.

    python benchmarks/bench_contention.py --large
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from mapsched import Problem, instances, solve, validate
from mapsched.bench.suites import REAL_MODELS
from mapsched.bounds import lower_bound
from mapsched.heuristics.heft import heft_schedule
from mapsched.scheduling.construct import topo_placement
from mapsched.scheduling.decoder import Decoder
from mapsched.scheduling.retime import retimed
from mapsched.scheduling.simulate import simulate


def serialised(p: Problem) -> Problem:
    """``p`` with each accelerator's copies on the accelerator itself (``copy_engines: 0``); an
    accelerator is a device that cannot hold the whole model."""
    whole = float((p.weight + p.act).sum())
    return p.with_contention({d: 0 for u, d in enumerate(p.device_names) if p.mem[u] < whole})


def greedy(p: Problem) -> float:
    """The contiguous greedy's makespan under ``p``'s contention."""
    speed = np.where(np.isfinite(p.dur), p.dur, 0.0).sum(axis=0)
    placed = topo_placement(p, "memory", devices=np.argsort(speed, kind="stable").tolist())
    s = Decoder(p, placed.order, insertion=True).schedule(placed.owner[:, None])
    assert validate(p, s) == []
    return s.makespan


def heft_seconds(p: Problem) -> tuple[float, float]:
    """Seconds of ``heft``'s construction on ``p`` (no bound, no validation), and its makespan."""
    began = time.perf_counter()
    makespan = heft_schedule(p).makespan
    return time.perf_counter() - began, makespan


def large() -> None:
    print("| instance | tasks | `heft` without contention (s) | with contention (s) | ratio | makespans |")
    print("|---|---:|---:|---:|---:|---:|")
    for name in REAL_MODELS:
        p0 = instances.load(name)
        if p0.n < 10_000:
            continue
        (f, fm), (c, cm) = heft_seconds(p0), heft_seconds(p0.with_contention(copy_engines=0))
        print(f"| {name.removeprefix('real/')} | {p0.n:,} | {f:.2f} | {c:.2f} | {c / f:.2f} | {fm:.4g}, {cm:.4g} |",
              flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=20.0)
    ap.add_argument("--most-tasks", type=int, default=1000)
    ap.add_argument("-o", "--output", default=None)
    ap.add_argument("--large", action="store_true", help="time heft on the training steps instead")
    args = ap.parse_args()
    if args.large:
        large()
        return
    rows = []
    print("| instance | tasks | greedy | free (re-timed) | free (simulate) | contended | bound | contended / greedy "
          "| contended / free | gap |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name in REAL_MODELS:
        p0 = instances.load(name)
        if p0.n > args.most_tasks:
            continue
        p = serialised(p0)
        g = greedy(p)
        t = time.perf_counter()
        free = solve(p0, time_limit=args.time_limit)
        mapping = free.mapping()
        free_sim = simulate(p, mapping).makespan
        free_ct = retimed(p, free).makespan
        c = solve(p, time_limit=args.time_limit)
        assert validate(p, c) == []
        bound = max(lower_bound(p, 10.0).value, free.lower_bound, c.lower_bound)  # exact's proofs hold here too
        row = {"instance": name.removeprefix("real/"), "tasks": p.n, "greedy": g, "free": free_ct, "free_sim": free_sim,
               "contended": c.makespan, "bound": bound, "method": c.method, "time_limit": args.time_limit,
               "seconds": time.perf_counter() - t}
        rows.append(row)
        print(f"| {row['instance']} | {p.n} | {g:.1f} | {free_ct:.1f} | {free_sim:.1f} | {c.makespan:.1f} | "
              f"{bound:.1f} | {c.makespan / g:.3f} | {c.makespan / min(free_ct, free_sim):.3f} | "
              f"{(c.makespan - bound) / c.makespan:.1%} |", flush=True)
    if args.output:
        with open(args.output, "w") as fh:
            for r in rows:
                fh.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
