"""How the host allocator moves a measured schedule: runs of one schedule with glibc's
malloc thresholds left to move (as before the harness fixed them) or fixed
(:func:`mapsched.harness.allocator.steady`), each run's values freed before the next
(as :func:`~mapsched.harness.execute` does now) or all kept alive until the end (as it
did before).

Each setting runs in a fresh process: Inception (the bench_harness size) is profiled on
``cpu:0,cpu:1``, then its every-task-on-``cpu:0`` schedule for 4 inputs is launched
``--runs`` times in a row, ``--rounds`` times, through the executor's own launch. Printed
per setting: the fastest, median and slowest run (ms), the share of runs more than
20% above the fastest, and the medians of the fastest and slowest round (what an
execution of ``--runs`` timed runs would report).

    python benchmarks/bench_steady.py --runs 20 --rounds 5
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

SETTINGS = {"moving, kept": (False, True), "moving, freed": (False, False),
            "fixed, kept": (True, True), "fixed, freed": (True, False)}


def child(fixed: bool, keep: bool, runs: int, rounds: int) -> list[float]:
    import gc

    import numpy as np
    import torch

    import mapsched
    from mapsched.harness import allocator, profile, trace
    from mapsched.harness.calibrate import _decode
    from mapsched.harness.execute import _Devices, _launch
    from mapsched.harness.models import FACTORIES

    if not fixed:
        allocator._state.append(False)  # steady() then does nothing in this process
    torch.set_num_threads(1)
    model = FACTORIES["inception"](width=16, image=64)
    example = torch.randn(model.input_shape, generator=torch.Generator().manual_seed(0))
    graph = trace(model, example)
    p = profile(model, example, ["cpu:0", "cpu:1"], [1, 2, 4]).with_objective(mapsched.Objective("throughput", 4))
    x = torch.randn(4, *model.input_shape[1:], generator=torch.Generator().manual_seed(1))
    jobs = list(_decode(p, np.zeros(p.n, dtype=np.int64), "only cpu:0").jobs)
    walls = []
    for _ in range(rounds):
        devs = _Devices.open(graph, p, jobs, (x,), "none")
        kept = []
        gc.disable()
        for _ in range(runs + 1):
            done, wall = _launch(graph, jobs, (x,), devs)
            walls.append(wall)
            if keep:
                kept.append(done)
            del done
        walls.pop(-runs - 1)  # each round's first run warms up
        gc.enable()
    return walls


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20, help="timed runs a round")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        fixed, keep = SETTINGS[args.child]
        print(json.dumps(child(fixed, keep, args.runs, args.rounds)))
        return
    import numpy as np

    print("| malloc thresholds, runs' values | runs | fastest (ms) | median (ms) | slowest (ms) | runs > 1.2x fastest "
          "| round medians (ms) |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for name in SETTINGS:
        out = subprocess.run([sys.executable, __file__, "--child", name, "--runs", str(args.runs),
                              "--rounds", str(args.rounds)], capture_output=True, text=True, check=True)
        w = np.array(json.loads(out.stdout.strip().splitlines()[-1]))
        rounds = np.median(w.reshape(args.rounds, args.runs), axis=1)
        print(f"| {name} | {len(w)} | {w.min():.1f} | {np.median(w):.1f} | {w.max():.1f} "
              f"| {np.mean(w > 1.2 * w.min()):.0%} | {rounds.min():.1f} to {rounds.max():.1f} |", flush=True)


if __name__ == "__main__":
    main()
