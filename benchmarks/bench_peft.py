"""``peft`` against ``heft``: how often the look-ahead wins, and by how much.

For each family, ``--seeds`` problems: the ratio peft / heft of the two makespans (below 1:
peft better), counted as wins, ties and losses, with its geometric mean and range. Prints a
markdown table.

    python benchmarks/bench_peft.py [--seeds 20]

Families: ``random_dag`` at 50, 200 and 1,000 tasks on 4 devices; the seed paper's
10-module stacks (latency; seed s has Table I's (s mod 7)-th channel count and variant); GiPH's random
graphs on its 20-device networks.
"""

from __future__ import annotations

import argparse
import math

import mapsched
from mapsched.bench.suites import STACKS
from mapsched.generators import giph_instance, random_dag, stack


def families(seeds: int):
    for n in (50, 200, 1000):
        yield f"random_dag {n}, 4 devices", [random_dag(n, 4, seed=s) for s in range(seeds)]
    yield "10-module stacks", [stack(modules=10, n=10, channels=STACKS[s % 7][0], variant=STACKS[s % 7][1], seed=s)
                               for s in range(seeds)]
    yield "GiPH graphs, 20 devices", [giph_instance(v=15, alpha=0.2, conn_prob=0.2, seed=s, m=20, network_seed=s % 10)
                                      for s in range(seeds)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=20)
    a = ap.parse_args()
    print("| problems | count | peft better | equal | heft better | geometric mean peft / heft | range |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for label, problems in families(a.seeds):
        ratios = []
        for p in problems:
            h, q = mapsched.solve(p, "heft"), mapsched.solve(p, "peft")
            assert not mapsched.validate(p, q)
            ratios.append(q.makespan / h.makespan)
        better = sum(r < 1 - 1e-9 for r in ratios)
        worse = sum(r > 1 + 1e-9 for r in ratios)
        mean = math.exp(sum(map(math.log, ratios)) / len(ratios))
        print(f"| {label} | {len(ratios)} | {better} | {len(ratios) - better - worse} | {worse} | {mean:.4f} "
              f"| {min(ratios):.3f}-{max(ratios):.3f} |", flush=True)


if __name__ == "__main__":
    main()
