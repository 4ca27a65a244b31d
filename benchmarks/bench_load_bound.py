"""The load bound at 5,000-36,000 tasks: the LP over kinds of task against the dual ascent.

For each problem: the number of kinds of task (tasks alike on every device and batch
size), then ``mapsched.bounds.load_bound`` three ways, with its time: as shipped, with the
LP forced however large (``LP_COLUMNS`` unlimited: the exact optimum), and with the
dual ascent forced (``LP_COLUMNS = 0``); the last column is the ascent's share of the
optimum.

    python benchmarks/bench_load_bound.py

Problems: ``generate transformer-train --layers 12`` and ``22`` on ``4-gpu-server`` and
``cpu-t4-a100`` (the torch-free stand-ins of the traced GPT steps, with the same op
count), ``random_dag(n, 4)`` at 5,000 and 36,000 tasks, and ``random_dag(n, 3)`` at 3,000,
6,000 and 12,000.
"""

from __future__ import annotations

import time

import numpy as np

from mapsched.bounds import load
from mapsched.generators import platform, random_dag, transformer_train


def timed(p, columns: float) -> tuple[float, float]:
    saved = load.LP_COLUMNS
    load.LP_COLUMNS = columns
    try:
        t = time.perf_counter()
        return load.load_bound(p), time.perf_counter() - t
    finally:
        load.LP_COLUMNS = saved


def main() -> None:
    cases = [(f"transformer-train {layers} layers, {system}", lambda layers=layers, system=system:
              transformer_train(layers, platform=platform(system)))
             for layers in (12, 22) for system in ("4-gpu-server", "cpu-t4-a100")]
    cases += [(f"random_dag {n:,}", lambda n=n: random_dag(n, 4, seed=0)) for n in (5000, 36000)]
    # where the LP's time grows fourfold a doubling: 9,000 to 36,000 columns on 3 devices
    cases += [(f"random_dag {n:,}, 3 devices", lambda n=n: random_dag(n, 3, seed=0)) for n in (3000, 6000, 12000)]
    print("| problem | tasks | kinds | shipped (s) | LP forced (s) | optimum | ascent (s) | ascent / optimum |")
    print("|---|---|---|---|---|---|---|---|")
    for label, build in cases:
        p = build()
        kinds = len(np.unique(p.lat.reshape(p.n, -1), axis=0))
        _, shipped = timed(p, load.LP_COLUMNS)
        opt, forced = timed(p, float("inf"))
        dual, ascent = timed(p, 0)
        print(f"| {label} | {p.n:,} | {kinds:,} | {shipped:.2f} | {forced:.2f} | {opt:.6g} | {ascent:.2f} "
              f"| {dual / opt:.5f} |", flush=True)


if __name__ == "__main__":
    main()
