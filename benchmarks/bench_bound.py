"""The lower-bound rules side by side on the stacks of bench_split.py.

For each stack: the critical path, the load LP, the relaxation with separated load
cuts (``mapsched.bounds.relaxation.relaxation_bound``) as an LP and with whole
tasks (--relax-time seconds), the module-chain recursion
(``mapsched.split.chain_bound``) with the first part spanning one module and up to
two, each given --time-limit seconds, and the head-and-tail windows
(``mapsched.split.window_bound``, --window-time seconds in all, --window-solve seconds
per window, --window-threads windows at a time), with the time each took.
Then the gap of the best of them to ``split`` given --budget seconds (its default
options, --threads threads), which is within 1.1% of the best makespan known on every
stack of BENCHMARKS.md's split table.

    python benchmarks/bench_bound.py --time-limit 30 --relax-time 30 --window-time 60 --budget 10

--configs picks stacks by channels and variant (``4sdep``, ``2wdep``, ``1``: single
channel), for longer runs on a few of them.
"""

from __future__ import annotations

import argparse
import time

import mapsched
from mapsched.bounds import critical_path_bound, load_bound
from mapsched.bounds.relaxation import relaxation_bound
from mapsched.generators import stack
from mapsched.split import chain_bound, window_bound

CONFIGS = [(1, "sdep"), (2, "sdep"), (4, "sdep"), (2, "wdep"), (4, "wdep")]


def _label(channels: int, variant: str) -> str:
    return "1" if channels == 1 else f"{channels}{variant}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--modules", default="5,10,20")
    ap.add_argument("--time-limit", type=float, default=30.0)
    ap.add_argument("--window-time", type=float, default=60.0)
    ap.add_argument("--relax-time", type=float, default=30.0, help="seconds for the relaxation with whole tasks")
    ap.add_argument("--budget", type=float, default=10.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--window-solve", type=float, default=1.0, help="seconds per window solve")
    ap.add_argument("--window-threads", type=int, default=1, help="windows solved at once")
    ap.add_argument("--configs", default=",".join(_label(c, v) for c, v in CONFIGS))
    args = ap.parse_args()
    configs = [(c, v) for c, v in CONFIGS if _label(c, v) in args.configs.split(",")]
    if not configs:
        ap.error(f"--configs: none of {args.configs!r}; pick from {', '.join(_label(c, v) for c, v in CONFIGS)}")
    budget = f"{args.budget:g} s"
    print("| modules | channels | critical path | load LP | relaxation LP | (s) | relaxation, whole tasks | (s) "
          f"| chain, span 1 | (s) | chain, span 2 | (s) | windows | (s) | best | split in {budget} | gap |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for T in map(int, args.modules.split(",")):
        for c, variant in configs:
            p = stack(T, 10, c, variant, seed=T)
            row = [critical_path_bound(p), load_bound(p)]
            cells = [f"{v:.3f}" for v in row]
            rules = [(relaxation_bound, dict(time_limit=args.time_limit, integral=False)),
                     (relaxation_bound, dict(time_limit=args.relax_time)),
                     (chain_bound, dict(time_limit=args.time_limit, span=1)),
                     (chain_bound, dict(time_limit=args.time_limit, span=2)),
                     (window_bound, dict(time_limit=args.window_time, window_time_limit=args.window_solve,
                                           threads=args.window_threads))]
            for rule, kw in rules:
                t0 = time.perf_counter()
                row.append(rule(p, **kw))
                cells += [f"{row[-1]:.3f}", f"{time.perf_counter() - t0:.1f}"]
            s = mapsched.solve(p, "split", channels=c, time_limit=args.budget, threads=args.threads)
            assert not mapsched.validate(p, s)
            best = max(row + [s.lower_bound])
            label = "1" if c == 1 else f"{c} {variant}"
            print(f"| {T} | {label} | {' | '.join(cells)} | {best:.3f} | {s.makespan:.3f} "
                  f"| {100 * (s.makespan - best) / s.makespan:.1f}% |", flush=True)


if __name__ == "__main__":
    main()
