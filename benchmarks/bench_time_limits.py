"""How closely the command line keeps a time limit: every latency method through
``mapsched solve`` and the full bound through ``mapsched bound``, each as its own
process, on a 2,000-task random DAG and a 20-module 4-channel sdep stack (both made with
``mapsched generate`` in a temporary folder), for each limit. With ``--tasks N``, a random DAG
of N tasks alone (large graphs: reading the file is part of the limit); with ``--initial``,
the methods that take one start from its HEFT schedule, as ``adapt`` (a method name here)
does after two devices are removed.

The table gives the wall time of the whole command, the ``solve_seconds`` its schedule
reports, the overshoot of the wall time over the limit, and what the command spent
outside the solve (wall time less ``solve_seconds``: the interpreter, the imports, reading
the problem and writing the schedule). The line above the table gives the start-up of a
command that loads no solver (``mapsched --help``, the median of three). Run it alone on
the machine: the figures are wall times.

    python benchmarks/bench_time_limits.py
    python benchmarks/bench_time_limits.py --limits 2 --methods split,exact,bound

``--throughput`` runs every throughput method and the bound instead, on a random DAG of
150 tasks on 8 devices with L=16 inputs (whose per-input CP-SAT model takes seconds to build):

    python benchmarks/bench_time_limits.py --throughput --limits 2,5

The commands run ``python -m mapsched`` from the repository root, so they use this
checkout whatever is installed.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mapsched import Problem, Schedule, validate
from mapsched.engine import registry

ROOT = Path(__file__).resolve().parents[1]
PROBLEMS = {
    "random-dag 2000x4": ["random-dag", "--tasks", "2000", "--devices", "4"],
    "stack 20x4 sdep": ["stack", "--modules", "20", "--channels", "4", "--variant", "sdep"],
}
THROUGHPUT_PROBLEMS = {"random-dag 150x8 L=16": ["random-dag", "--tasks", "150", "--devices", "8", "--batch", "16"]}
BOUND = "bound"
"""The name --methods gives ``mapsched bound --time-limit``."""
ADAPT = "adapt"
"""The name --methods gives ``mapsched adapt`` of the problem's HEFT schedule, its first two
devices removed (at 2,000 tasks and more)."""


def mapsched(*args: str) -> tuple[float, subprocess.CompletedProcess]:
    """Run ``python -m mapsched ARGS`` from the repository root; its wall time and result."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "mapsched", *args], cwd=ROOT, capture_output=True, text=True)
    return time.perf_counter() - start, done


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limits", default="2,5,10", help="time limits in seconds, comma-separated")
    ap.add_argument("--throughput", action="store_true", help="throughput methods on a batched problem")
    ap.add_argument("--methods", default=None, help=f"methods, comma-separated ({BOUND!r}: mapsched bound; "
                                                    f"{ADAPT!r}: mapsched adapt); default: all of the objective's")
    ap.add_argument("--tasks", type=int, default=None,
                    help="the random DAG alone, of this many tasks (e.g. 20000), on --devices")
    ap.add_argument("--devices", type=int, default=8, help="devices of the --tasks DAG")
    ap.add_argument("--initial", action="store_true",
                    help="methods that take an initial placement start from the problem's HEFT schedule")
    args = ap.parse_args()
    objective = "throughput" if args.throughput else "latency"
    problems = THROUGHPUT_PROBLEMS if args.throughput else PROBLEMS
    if args.tasks:
        problems = {f"random-dag {args.tasks}x{args.devices}": ["random-dag", "--tasks", str(args.tasks), "--devices",
                                                                  str(args.devices), "--seed", "4"]}
    known = [m.name for m in registry.all_methods() if objective in m.objectives and m.available()]
    limits = [float(t) for t in args.limits.split(",")]
    methods = args.methods.split(",") if args.methods else known + [BOUND]
    unknown = [m for m in methods if m not in known and m not in (BOUND, ADAPT)]
    if unknown:
        ap.error(f"--methods: unknown {unknown}; pick from {', '.join(known + [BOUND, ADAPT])}")
    startup = statistics.median(mapsched("--help")[0] for _ in range(3))
    print(f"start-up of mapsched --help: {startup:.2f} s\n")
    print("| problem | method | limit (s) | wall (s) | solve_seconds | overshoot | outside the solve (s) | valid |")
    print("|---|---|---:|---:|---:|---:|---:|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for label, spec in problems.items():
            path = str(Path(tmp) / f"{spec[0]}.json")
            _, done = mapsched("generate", *spec, "-o", path)
            if done.returncode:
                sys.exit(f"generate {label} failed:\n{done.stderr}")
            problem = Problem.read(path)
            start = str(Path(tmp) / "heft.json")
            if args.initial or ADAPT in methods:
                mapsched("solve", path, "-m", "heft", "-o", start)
            for limit in limits:
                for method in methods:
                    out, changed = str(Path(tmp) / "schedule.json"), str(Path(tmp) / "changed.json")
                    if method == BOUND:
                        wall, done = mapsched("bound", path, "--time-limit", f"{limit:g}")
                    elif method == ADAPT:
                        gone = [x for d in problem.device_names[:2] for x in ("--remove", d)]
                        wall, done = mapsched("adapt", path, start, *gone, "--time-limit", f"{limit:g}", "-o", out,
                                              "--problem-output", changed)
                    else:
                        initial = ["--initial", start] if args.initial and registry.get(method).initial else []
                        wall, done = mapsched("solve", path, "-m", method, "--time-limit", f"{limit:g}", "-o", out,
                                              *initial)
                    seconds, outside, valid = "", "", ""
                    if done.returncode:
                        valid = f"failed ({done.returncode})"
                        print(f"{label} {method} {limit:g}: {done.stderr.strip()[-500:]}", file=sys.stderr)
                    elif method != BOUND:
                        schedule = Schedule.read(out)
                        seconds = f"{schedule.solve_seconds:.2f}"
                        outside = f"{wall - schedule.solve_seconds:.2f}"
                        solved = Problem.read(changed) if method == ADAPT else problem
                        valid = "yes" if not validate(solved, schedule) else "NO"
                    over = 100 * (wall / limit - 1)
                    print(f"| {label} | {method} | {limit:g} | {wall:.2f} | {seconds} | {over:+.0f}% | {outside} "
                          f"| {valid} |", flush=True)


if __name__ == "__main__":
    main()
