"""The lower-bound rules side by side on the stacks of bench_split.py.

For each stack: the critical path, the load LP, and the module-chain recursion
(``mapsched.split.chain_bound``) with the first part spanning one module and up to
two, each given --time-limit seconds, with the time each took.

    python benchmarks/bench_bound.py --time-limit 30
"""

from __future__ import annotations

import argparse
import time

from mapsched.bounds import critical_path_bound, load_bound
from mapsched.generators import stack
from mapsched.split import chain_bound

CONFIGS = [(1, "sdep"), (2, "sdep"), (4, "sdep"), (2, "wdep"), (4, "wdep")]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--modules", default="5,10,20")
    ap.add_argument("--time-limit", type=float, default=30.0)
    args = ap.parse_args()
    print("| modules | channels | critical path | load LP | chain, span 1 | (s) | chain, span 2 | (s) | best |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for T in map(int, args.modules.split(",")):
        for c, variant in CONFIGS:
            p = stack(T, 10, c, variant, seed=T)
            row = [critical_path_bound(p), load_bound(p)]
            cells = [f"{v:.3f}" for v in row]
            for span in (1, 2):
                t0 = time.perf_counter()
                row.append(chain_bound(p, time_limit=args.time_limit, span=span))
                cells += [f"{row[-1]:.3f}", f"{time.perf_counter() - t0:.1f}"]
            label = "1" if c == 1 else f"{c} {variant}"
            print(f"| {T} | {label} | {' | '.join(cells)} | {max(row):.3f} |", flush=True)


if __name__ == "__main__":
    main()
