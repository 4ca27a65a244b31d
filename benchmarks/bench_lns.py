"""``lns`` alone on the real models (issue #68): from ``heft``'s schedule of each graph, the
search for a fixed time, with its counts of neighbourhoods solved and kept.

Comparing two commits: run it once with each on the import path, alone, one after the other
(a second process on a 2-core machine spoils both), for example

    git worktree add /tmp/before e90f854
    PYTHONPATH=/tmp/before python benchmarks/bench_lns.py --seconds 30
    python benchmarks/bench_lns.py --seconds 30

Prints a markdown table.
"""

from __future__ import annotations

import argparse
import re

import numpy as np

import mapsched
from mapsched import instances, solve
from mapsched.heuristics.lns import improve_lns
from mapsched.solve import SolveContext

INSTANCES = tuple(f"real/{m}" for m in ("resnet50-op", "inception-v3-op", "bert-op", "resnet50-train-op", "gnmt-op"))
"""The real graphs where the default runs ``lns`` (over 300 tasks, or ``exact`` handing over)."""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", nargs="*", default=None)
    a = ap.parse_args()
    print(f"mapsched from {mapsched.__file__}")
    print(f"| instance | tasks | heft | lns, {a.seconds:g} s | below heft | neighbourhoods | solved | kept |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name in a.only or INSTANCES:
        p = instances.load(name)
        start = solve(p, "heft")
        ctx = SolveContext(time_limit=a.seconds, rng=np.random.default_rng(a.seed))
        r = improve_lns(p, start, ctx)
        assert mapsched.validate(p, r) == []
        line = r.log.splitlines()[-1]
        tried, solved = re.search(r"lns: (\d+) neighbourhoods, (\d+) solved", line).groups()
        kept = re.search(r"(\d+) kept", line)
        print(f"| {name} | {p.n} | {start.makespan:.4g} | {r.makespan:.4g} | "
              f"{100 * (1 - r.makespan / start.makespan):.1f}% | {tried} | {solved} | "
              f"{kept.group(1) if kept else 0} |", flush=True)


if __name__ == "__main__":
    main()
