"""The interval load bound on large graphs: how much it proves beyond the quick bounds.

For each problem: the critical path, the load LP, the interval load LP as shipped (with its
seconds), and ``heft``'s makespan over the best bound without the interval LP and with it
(makespan / bound - 1): how far from the optimum heft can at most be. Prints a markdown
table.

    python benchmarks/bench_interval_bound.py [--quick] [--out DIR]

Problems: ``gpt_train12`` and ``gpt_train22`` traced with ``mapsched trace`` (torch) on
``4-gpu-server``, ``cpu-t4-a100`` and (12 layers) ``multi-node``, ``resnet50`` on
``4-gpu-server``, the torch-free ``generate transformer-train --layers 12`` on
``4-gpu-server``, and ``random_dag`` at 5,000 and 36,000 tasks on 4 devices. ``--quick``
skips the traced ones. ``--out DIR`` keeps the problem files (and reuses them).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

import mapsched
from mapsched import Problem
from mapsched.bounds import critical_path_bound, interval_load_bound, load_bound, work_bound


def problems(out: str, quick: bool) -> list[tuple[str, str]]:
    def make(name: str, *args: str) -> tuple[str, str]:
        path = os.path.join(out, name + ".json")
        if not os.path.exists(path):
            subprocess.run([sys.executable, "-m", "mapsched", *args, "-o", path], check=True, capture_output=True)
        return name, path

    cases = []
    if not quick:
        for model, systems in (("gpt_train12", ("4-gpu-server", "cpu-t4-a100", "multi-node")),
                               ("gpt_train22", ("4-gpu-server", "cpu-t4-a100")), ("resnet50", ("4-gpu-server",))):
            cases += [make(f"{model} {s}", "trace", f"mapsched.harness.models:{model}", "--system", s) for s in systems]
    cases.append(make("transformer-train 12 4-gpu-server", "generate", "transformer-train", "--layers", "12",
                      "--system", "4-gpu-server"))
    cases += [make(f"random_dag {n}", "generate", "random-dag", "--tasks", str(n), "--devices", "4")
              for n in (5000, 36000)]
    return cases


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or tmp
        os.makedirs(out, exist_ok=True)
        print("| problem | tasks | devices | critical path | load LP | interval LP | interval (s) | heft "
              "| heft over the quick bounds | heft over the interval LP |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for label, path in problems(out, args.quick):
            p = Problem.read(path)
            cp, load = critical_path_bound(p), load_bound(p)
            quick = max(cp, load, work_bound(p))
            t = time.perf_counter()
            interval = interval_load_bound(p)
            seconds = time.perf_counter() - t
            heft = mapsched.solve(p, "heft").makespan
            best = max(quick, interval)
            print(f"| {label} | {p.n:,} | {p.m} | {cp:.6g} | {load:.6g} | {interval:.6g} | {seconds:.2f} | {heft:.6g} "
                  f"| {heft / quick - 1:.1%} | {heft / best - 1:.1%} |", flush=True)


if __name__ == "__main__":
    main()
