"""Symmetry breaking and multi-node scheduling: the seed paper's Table V, and the
effect of symmetry breaking on a server with 4 identical GPUs.

Part 1 (Table V). A GPT-3-like decoder (``mapsched.generators.gpt3``: d_model 12288,
96 heads in 4 groups, one decoding step of 20 tokens per input) with ``--layers``
layers, throughput over B inputs, on the ``multi-node`` preset: 6 servers, each a CPU
and 4 identical A100s, joined by a 100 Gb/s network. Rows:

- single node: one sixth of the layers scheduled on one server (by ``exact`` and by
  ``split``), then replicated: server s runs the s-th sixth with the same device
  choices, and the whole graph is re-timed exactly;
- multi node: ``split`` over all 30 devices with no symmetry breaking in the module
  solves, then with each criterion (batch, task, time);
- the upper bound on throughput (from the proved lower bound on the makespan).

Part 2. ``exact`` (latency, 2 threads) on independent tasks over 4 identical, fully
linked devices (``random_dag(n, 4, degree=0, speeds=[1] * 4, jitter=0)``), with each
symmetry criterion, with the solver's own symmetry detection on (the default) and off:
time to a proved optimum, or the gap left at the time limit. (On the GPU-server preset
the latency optimum of random-wired modules is proved in a fraction of a second with
or without breaking: one GPU runs the critical path and the bounds meet at once.)

    python benchmarks/bench_symmetry.py --layers 6 --batch 16 --time-limit 120 \
        --sizes 14,18 --seeds 3 --exact-limit 20

Part 3, for ``exact``'s default (``symmetry="auto"``: ``lex`` with CP-SAT, ``none`` with
HiGHS): ``none`` against ``lex`` where part 2 does not look, HiGHS on the latency instances
of ``--highs-sizes`` tasks, and CP-SAT on batched problems over the same four identical
devices (8 independent tasks with L=8, random DAGs of 10 tasks with L=8 and of 12 with
L=4). Time to a proved optimum (the batched ones: among schedules with one job per task
and device), or the makespan reached at the time limit:

    python benchmarks/bench_symmetry.py --part 3 --exact-limit 20 --seeds 3

Part 4: ``exact`` with ``lex`` (CP-SAT) on part 2's latency instances and part 3's batched
ones, its start hinted as the list scheduler found it against renamed into the lex order
(:func:`mapsched.model.symmetry.lex_relabelled`, which ``exact`` applies): time to a proof or the
makespan at the limit, the two one after the other:

    python benchmarks/bench_symmetry.py --part 4 --exact-limit 20 --seeds 3
"""

from __future__ import annotations

import argparse
import re
import time

import numpy as np

import mapsched
from mapsched import Objective
from mapsched.formulations.common import retime_jobs
from mapsched.generators import gpt3, gpu_server, random_dag
from mapsched.model.symmetry import find_symmetry


def replicate(full: mapsched.Problem, part: mapsched.Schedule, per: int, servers: int) -> mapsched.Schedule:
    """Server s runs layers [s*per, (s+1)*per) as node0 ran layers [0, per) in ``part``."""
    jobs = []
    for j in part.jobs:
        mask = sum(1 << i for i in j.inputs)
        if j.task == "embed":
            jobs.append((full.task_index["embed"], full.device_index[j.device], mask, (0, j.start)))
            continue
        layer, rest = j.task[1:].split(".", 1)
        for stage in range(servers):
            task = f"l{stage * per + int(layer)}.{rest}"
            dev = j.device.replace("n0-", f"n{stage}-", 1)
            jobs.append((full.task_index[task], full.device_index[dev], mask, (stage, j.start)))
    return retime_jobs(full, jobs, method="replicated")


def subproblems(r: mapsched.Schedule) -> str:
    m = re.search(r"(\d+) module subproblems solved", r.log)
    return m.group(1) if m else "-"


def table_v(layers: int, batch: int, limit: float, servers: int = 6) -> None:
    obj = mapsched.Objective("throughput", batch)
    full = gpt3(layers, objective=obj)
    per = layers // servers
    one = gpt3(per, platform=gpu_server(4, "node0", "n0-"), objective=obj)
    sym = find_symmetry(full)
    print(f"{full!r}; one server's share: {one!r}")
    print(f"symmetry group order {sym.order():.3g} "
          f"({len(sym.devices)} classes of identical GPUs, {len(sym.servers)} class of servers)\n")
    print("| schedule | throughput (inputs/s) | makespan (ms) | seconds | module subproblems solved |")
    print("|---|---:|---:|---:|---:|")
    best_bound = mapsched.lower_bound(full).value
    for method in ("exact", "split"):
        t0 = time.perf_counter()
        r = mapsched.solve(one, method, time_limit=limit, threads=2)
        s = replicate(full, r, per, servers)
        assert mapsched.validate(full, s) == []
        print(f"| single node, {method}, replicated | {s.throughput:.2f} | {s.makespan:.2f} "
              f"| {time.perf_counter() - t0:.1f} | {subproblems(r)} |")
    for crit in ("none", "batch", "task", "time"):
        r = mapsched.solve(full, "split", time_limit=limit, symmetry=crit)
        assert mapsched.validate(full, r) == []
        best_bound = max(best_bound, r.lower_bound or 0.0)
        label = "no symmetry breaking" if crit == "none" else f"symmetry breaking by {crit}"
        print(f"| multi node, split, {label} | {r.throughput:.2f} | {r.makespan:.2f} | {r.solve_seconds:.1f} "
              f"| {subproblems(r)} |")
    r = mapsched.solve(full, "split", time_limit=limit, orbits=False)
    print(f"| multi node, split, no symmetry and no orbit reduction | {r.throughput:.2f} | {r.makespan:.2f} "
          f"| {r.solve_seconds:.1f} | {subproblems(r)} |")
    print(f"| upper bound | {1000.0 * batch / best_bound:.2f} | {best_bound:.2f} (lower bound) | | |")


def identical_gpus(sizes: list[int], limit: float, seeds: int) -> None:
    print("\n| instance | symmetry | solver's own detection on | off |")
    print("|---|---|---:|---:|")
    for n in sizes:
        for seed in range(seeds):
            # independent tasks on four identical devices: pure load balancing, where every
            # schedule has 4! relabellings and the proof must rule them all out
            p = random_dag(n, 4, seed=seed, degree=0, speeds=[1.0] * 4, jitter=0.0)
            for crit in ("none", "task", "batch", "time", "lex"):
                cells = []
                for own in (True, False):
                    r = mapsched.solve(p, "exact", time_limit=limit, threads=2, symmetry=crit, solver_symmetry=own)
                    cells.append(f"{r.solve_seconds:.2f} s" if r.status == "optimal" else
                                 f"{r.solve_seconds:.0f} s, gap {100 * r.gap:.2f}%")
                print(f"| {n} tasks, seed {seed} | {crit} | {cells[0]} | {cells[1]} |", flush=True)


def cell(r: mapsched.Schedule) -> str:
    """Seconds to a proof (batched: among schedules with one job per task and device), or the
    seconds and makespan at the time limit."""
    proved = r.status == "optimal" or "optimal among" in r.log
    return f"{r.solve_seconds:.2f} s" if proved else f"{r.solve_seconds:.0f} s, {r.makespan:.5f} ms"


BATCHED_CASES = [(f"{n} tasks, L={L}, degree {d}", dict(n=n, degree=d, objective=Objective("throughput", L)))
                 for n, L, d in ((8, 8, 0), (10, 8, 2), (12, 4, 2))]
"""Part 3's and part 4's batched problems over four identical devices."""


def default_choice(highs_sizes: list[int], limit: float, seeds: int) -> None:
    print("\n| instance | backend | none | lex |")
    print("|---|---|---:|---:|")
    cases = [(f"{n} tasks", "highs", dict(n=n, degree=0)) for n in highs_sizes]
    cases += [(name, "cpsat", kw) for name, kw in BATCHED_CASES]
    for name, backend, kw in cases:
        for seed in range(seeds):
            p = random_dag(m=4, seed=seed, speeds=[1.0] * 4, jitter=0.0, **kw)
            runs = [mapsched.solve(p, "exact", backend=backend, time_limit=limit, threads=2, symmetry=crit)
                    for crit in ("none", "lex")]
            print(f"| {name}, seed {seed} | {backend} | {cell(runs[0])} | {cell(runs[1])} |", flush=True)


def renamed_hint(sizes: list[int], limit: float, seeds: int) -> None:
    """exact with lex (CP-SAT), its start hinted as found against renamed into lex order."""
    from mapsched.formulations import exact

    renamed = exact.lex_relabelled
    print("\n| instance | start as found | start renamed |")
    print("|---|---:|---:|")
    cases = [(f"{n} tasks latency", dict(n=n, degree=0)) for n in sizes] + BATCHED_CASES
    for name, kw in cases:
        for seed in range(seeds):
            p = random_dag(m=4, seed=seed, speeds=[1.0] * 4, jitter=0.0, **kw)
            cells = []
            for rename in (lambda q, s: s, renamed):
                exact.lex_relabelled = rename
                cells.append(cell(mapsched.solve(p, "exact", time_limit=limit, threads=2, symmetry="lex")))
            exact.lex_relabelled = renamed
            print(f"| {name}, seed {seed} | {cells[0]} | {cells[1]} |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--time-limit", type=float, default=120.0)
    ap.add_argument("--exact-limit", type=float, default=60.0, help="part 2: seconds per exact solve")
    ap.add_argument("--sizes", default="14,18", help="part 2: tasks of the random instances")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--highs-sizes", default="10,14", help="part 3: tasks of the HiGHS latency instances")
    ap.add_argument("--part", type=int, choices=(1, 2, 3, 4), help="run only part 1 (Table V), 2, 3 or 4")
    args = ap.parse_args()
    np.set_printoptions(precision=3)
    if args.part in (None, 1):
        table_v(args.layers, args.batch, args.time_limit)
    if args.part in (None, 2):
        identical_gpus([int(n) for n in args.sizes.split(",")], args.exact_limit, args.seeds)
    if args.part in (None, 3):
        default_choice([int(n) for n in args.highs_sizes.split(",")], args.exact_limit, args.seeds)
    if args.part in (None, 4):
        renamed_hint([int(n) for n in args.sizes.split(",")], args.exact_limit, args.seeds)


if __name__ == "__main__":
    main()
