"""DOPPLER's Table 2 shape: the four workloads over 4 GPUs, every row timed by the
work-conserving runtime model (:mod:`mapsched.scheduling.simulate`).

Rows: one device; ``critical-path`` (best of 50 randomised runs); ``heft`` and ``sa``
(their mappings re-timed by the runtime model); ``exact`` given --exact-time seconds
(its mapping re-timed, with its proved bound, which bounds every work-conserving run
too); ``placeto`` (DOPPLER's learned baseline) trained --placeto-episodes episodes,
by default as many as ``doppler``'s two stages together (the paper gives every learner
the same count); ``doppler`` after Stages I and II (--episodes per stage). Each row gives
the simulated makespan, its ratio to ``critical-path`` and the seconds the method took
(training included for ``placeto`` and ``doppler``). Stage III (measured rewards) is not
implemented. Prints a markdown table.

    python benchmarks/bench_doppler.py [--episodes 400] [--placeto-episodes 800] [--exact-time 60] [--seed 0]
        [--workloads ChainMM,FFNN,Llama-block,Llama-layer]
"""

from __future__ import annotations

import argparse
import time

from mapsched import solve
from mapsched.generators import chainmm, ffnn, llama_block, llama_layer
from mapsched.scheduling.simulate import simulate

WORKLOADS = {"ChainMM": chainmm, "FFNN": ffnn, "Llama-block": llama_block, "Llama-layer": llama_layer}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=400, help="doppler episodes per stage")
    ap.add_argument("--placeto-episodes", type=int, default=None,
                    help="placeto training episodes (default: 2 x --episodes, doppler's two stages)")
    ap.add_argument("--exact-time", type=float, default=60.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workloads", default=",".join(WORKLOADS),
                    help="comma-separated subset of " + ", ".join(WORKLOADS))
    a = ap.parse_args()
    chosen = [w.strip() for w in a.workloads.split(",")]
    unknown = [w for w in chosen if w not in WORKLOADS]
    if unknown:
        ap.error(f"--workloads: unknown {unknown[0]!r}; choose among {', '.join(WORKLOADS)}")
    placeto_episodes = 2 * a.episodes if a.placeto_episodes is None else a.placeto_episodes
    print("| workload | ops | method | simulated | / critical-path | bound | seconds |")
    print("|---|---|---|---|---|---|---|")
    for label in chosen:
        p = WORKLOADS[label](devices=4)
        rows = []
        for name, kw in (("single-best", {}), ("critical-path", {}), ("heft", {}), ("sa", {}),
                         ("exact", {"time_limit": a.exact_time}), ("placeto", {"episodes": placeto_episodes}),
                         ("doppler", {"episodes": a.episodes})):
            opts = {k: v for k, v in kw.items() if k != "time_limit"}
            t = time.perf_counter()
            r = solve(p, name, time_limit=kw.get("time_limit"), seed=a.seed, **opts)
            seconds = time.perf_counter() - t
            rows.append((name, simulate(p, r.mapping()).makespan, r.lower_bound if name == "exact" else None,
                         seconds))
        cp = rows[1][1]
        for name, sim, bound, seconds in rows:
            b = "" if bound is None else f"{bound:.4g}"
            print(f"| {label} | {p.n} | {name} | {sim:.4g} | {sim / cp:.3f} | {b} | {seconds:.1f} |", flush=True)


if __name__ == "__main__":
    main()
