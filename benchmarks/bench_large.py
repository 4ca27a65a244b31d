"""Large graphs: every stage of a solve at 20k-37k tasks, and the memory-bound placers.

Each (problem, method) runs in a fresh process that reads the problem file, builds the
``Problem``, computes the bound that ``solve()`` adds, solves, validates and writes the
schedule, timing each stage; its peak memory is the maximum resident set the kernel
reports for the process (``os.wait4``). Prints markdown tables.

    python benchmarks/bench_large.py [--quick] [--out DIR]

Problems (traced with ``mapsched trace``, so torch is needed; ``--quick`` uses the torch-free
``generate transformer-train`` at 12 layers instead):

- ``gpt_train12`` and ``gpt_train22`` (18,951 and 34,711 tasks) and ``resnet50`` (892 tasks,
  a batch of 32) on ``4-gpu-server`` and on ``cpu-t4-a100``, and ``random_dag(36000, 4)``:
  the stage table for ``heft``, ``peft``, ``cpop``, the default pipeline (``auto``) with a
  time limit of 30 s counted from the start (as ``mapsched solve --time-limit 30`` counts
  it), the Baechi and Celeritas placers.
- The memory table: the traced models on ``4-gpu-server`` with
  each GPU's memory set to 40% of the model's (weights plus activations), so no one GPU
  holds it: placement time, step time and gap to the bound for every placer.

The bound column is the bound ``solve()`` reports (:func:`mapsched.bounds.lower_bound` within
a tenth of the time limit, or the method's own if better); the gap is makespan over it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

METHODS = ("heft", "peft", "cpop", "auto", "m-topo", "m-etf", "m-sct", "order-place", "celeritas")
TIME_LIMIT = 30.0
GPU_SHARE = 0.4


def one(path: str, method: str, out: str) -> None:
    """Run every stage once, in this process, and print their times as JSON."""
    from mapsched import Problem, solve, validate
    from mapsched.bounds import lower_bound
    from mapsched.errors import ProblemError
    from mapsched.model.jsonio import read_json
    from mapsched.solve import BOUND_SHARE

    t0 = time.perf_counter()
    data = read_json(path, ProblemError)
    t1 = time.perf_counter()
    p = Problem.from_dict(data)
    t2 = time.perf_counter()
    lower_bound(p, BOUND_SHARE * TIME_LIMIT)  # the bound solve() adds, timed on its own
    t3 = time.perf_counter()
    # As the command line counts it: the time limit runs from the start, reading included.
    s = solve(p, method, time_limit=TIME_LIMIT - (t3 - t0) if method == "auto" else None)
    t4 = time.perf_counter()
    bad = validate(p, s)
    t5 = time.perf_counter()
    s.write(out)
    t6 = time.perf_counter()
    print(json.dumps({"read": t1 - t0, "build": t2 - t1, "bound": t3 - t2, "place": (t4 - t3) - (t3 - t2),
                      "validate": t5 - t4, "write": t6 - t5, "total": t6 - t0, "makespan": s.makespan,
                      "lower_bound": s.lower_bound, "valid": not bad, "ran": s.method, "n": p.n}))


def run(path: str, method: str, tmp: str) -> dict:
    """One (problem, method) in a fresh process: its stage times and peak resident MB."""
    with open(os.path.join(tmp, "err"), "w+") as err:
        proc = subprocess.Popen([sys.executable, __file__, "--one", path, method, os.path.join(tmp, "s.json")],
                                stdout=subprocess.PIPE, stderr=err, text=True)
        out = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        if proc.returncode:
            return {"error": (err.read().strip().splitlines() or ["?"])[-1]}
    row = json.loads(out.strip().splitlines()[-1])
    row["mb"] = usage.ru_maxrss / 1024
    return row


def problems(tmp: str, quick: bool) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(stage-table problems, memory-table problems) as (label, path)."""
    from mapsched import Problem

    def sh(*args: str) -> None:
        subprocess.run([sys.executable, "-m", "mapsched", *args], check=True, capture_output=True)

    stage, tight = [], []
    models = [("gpt_train12", "gpt12")] if quick else [("gpt_train12", "gpt12"), ("gpt_train22", "gpt22"),
                                                        ("resnet50", "resnet50")]
    for system in ("4-gpu-server", "cpu-t4-a100"):
        for factory, label in models:
            path = os.path.join(tmp, f"{label}-{system}.json")
            if quick:
                sh("generate", "transformer-train", "--layers", "12", "--system", system, "-o", path)
            else:
                sh("trace", f"mapsched.harness.models:{factory}", "--system", system, "-o", path)
            stage.append((f"{label} {system}", path))
    path = os.path.join(tmp, "dag36k.json")
    sh("generate", "random-dag", "--tasks", "36000", "--devices", "4", "-o", path)
    stage.append(("random_dag 36k", path))
    for label, path in [p for p in stage if "4-gpu-server" in p[0]]:
        with open(path) as f:
            data = json.load(f)
        p = Problem.from_dict(data)
        need = float((p.weight + p.act).sum())  # what rule 6 holds of the whole model
        for d in data["devices"]:
            if d["name"].startswith("gpu"):
                d["memory"] = float(int(GPU_SHARE * need))
        tight_path = path.replace(".json", "-tight.json")
        with open(tight_path, "w") as f:
            json.dump(data, f)
        tight.append((label.split()[0], tight_path))
    return stage, tight


def _makespan(row: dict) -> str:
    """The makespan cell, marked if the validator rejected the schedule."""
    return f"{row['makespan']:.4g}" + ("" if row["valid"] else " INVALID")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--one", nargs=3, metavar=("PROBLEM", "METHOD", "OUT"), help=argparse.SUPPRESS)
    ap.add_argument("--quick", action="store_true", help="the torch-free generator, 12 layers, one model")
    a = ap.parse_args()
    if a.one:
        one(*a.one)
        return
    with tempfile.TemporaryDirectory() as tmp:
        stage, tight = problems(tmp, a.quick)
        print("| problem | tasks | method | read | build | bound | place | validate | write | total (s) "
              "| peak MB | makespan (ms) | gap to bound | vs heft |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for label, path in stage:
            heft = None
            for method in METHODS:
                r = run(path, method, tmp)
                if "error" in r:
                    print(f"| {label} | | {method} | {r['error']} |")
                    continue
                heft = heft or r["makespan"]
                print(f"| {label} | {r['n']:,} | {r['ran']} | {r['read']:.2f} | {r['build']:.2f} | {r['bound']:.2f} "
                      f"| {r['place']:.2f} | {r['validate']:.2f} | {r['write']:.2f} | {r['total']:.1f} "
                      f"| {r['mb']:.0f} | {_makespan(r)} "
                      f"| {r['makespan'] / r['lower_bound'] - 1:.1%} "
                      f"| {r['makespan'] / heft - 1:+.1%} |", flush=True)
        print(f"\nGPU memory {GPU_SHARE:.0%} of the model's:\n")
        print("| model | method | placement (s) | step time (ms) | gap to bound | vs best Baechi/Celeritas placer |")
        print("|---|---|---|---|---|---|")
        for label, path in tight:
            rows = {m: run(path, m, tmp) for m in METHODS}
            placers = [r["makespan"] for m, r in rows.items()
                       if m in ("m-topo", "m-etf", "m-sct", "celeritas") and "error" not in r]
            best = min(placers) if placers else float("nan")
            for m, r in rows.items():
                if "error" in r:
                    print(f"| {label} | {m} | {r['error']} |")
                    continue
                print(f"| {label} | {r['ran']} | {r['place']:.2f} | {_makespan(r)} "
                      f"| {r['makespan'] / r['lower_bound'] - 1:.1%} | {r['makespan'] / best - 1:+.1%} |", flush=True)


if __name__ == "__main__":
    main()
