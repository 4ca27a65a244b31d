"""Decoder speed: the fitness function of every search heuristic, and heft's placement.

Target (issue: foundation): a 1,000-task, 4-device graph decoded in under 5 ms.
The second table times the ``heft`` method itself (ranks and insertion list
scheduling, without the lower bound that :func:`mapsched.solve` adds), which
stresses the idle-gap search on long device timelines (issue 25).

    python benchmarks/bench_decoder.py
"""

from __future__ import annotations

import argparse
import timeit

import numpy as np

from mapsched.generators import random_dag
from mapsched.heuristics.heft import heft
from mapsched.scheduling.decoder import Decoder
from mapsched.solve import SolveContext


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="100,1000,10000")
    ap.add_argument("--devices", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--heft-sizes", default="10000,36000")
    ap.add_argument("--heft-devices", type=int, default=5)
    ap.add_argument("--heft-repeat", type=int, default=3)
    args = ap.parse_args()
    print("| tasks | edges | devices | append (ms) | insertion (ms) |")
    print("|---:|---:|---:|---:|---:|")
    for n in map(int, args.sizes.split(",")):
        p = random_dag(n, args.devices, seed=0)
        owner = np.random.default_rng(0).integers(p.m, size=(p.n, 1))
        cells = []
        for insertion in (False, True):
            dec = Decoder(p, insertion=insertion)
            dec.makespan(owner)  # warm caches
            t = min(timeit.repeat(lambda d=dec, o=owner: d.makespan(o), number=1, repeat=args.repeat))
            cells.append(f"{1000 * t:.2f}")
        print(f"| {p.n} | {p.E} | {p.m} | {cells[0]} | {cells[1]} |")
    print()
    print("| tasks | edges | devices | heft (s) |")
    print("|---:|---:|---:|---:|")
    for n in map(int, args.heft_sizes.split(",")):
        p = random_dag(n, args.heft_devices, seed=0)
        t = min(timeit.repeat(lambda q=p: heft(q, SolveContext()), number=1, repeat=args.heft_repeat))
        print(f"| {p.n} | {p.E} | {p.m} | {t:.2f} |", flush=True)


if __name__ == "__main__":
    main()
