"""Decoder speed: the fitness function of every search heuristic.

Target (issue: foundation): a 1,000-task, 4-device graph decoded in under 5 ms.

    python benchmarks/bench_decoder.py
"""

from __future__ import annotations

import argparse
import timeit

import numpy as np

from mapsched.decoder import Decoder
from mapsched.generators import random_dag


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="100,1000,10000")
    ap.add_argument("--devices", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=20)
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


if __name__ == "__main__":
    main()
