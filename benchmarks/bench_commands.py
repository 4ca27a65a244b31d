"""Whole commands as a user runs them: start-up, and wall time and peak memory of the heavy ones.

Each command runs in a fresh process (``python -m mapsched ...``); its wall time is the
process's, start-up included, and its peak memory the maximum resident set that the
kernel reports for it (``os.wait4``). Prints a markdown table.

    python benchmarks/bench_commands.py [--repeats 5] [--skip-large]

Rows: ``--help`` and ``validate`` (goal: under 0.5 s), ``bound --time-limit 20`` on a
10,000-task random DAG (goal: under 1 GB and within 10% of the limit), and ``plot`` of a
200,000-job schedule (``met`` on a 200,000-task random DAG, summarised per device).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time


def timed(args: list[str]) -> tuple[float, float, int, str]:
    """(wall seconds, peak resident MB, exit status, last stderr line) of ``python -m mapsched ARGS``."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "mapsched", *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_maxrss / 1024, proc.returncode, (err.strip().splitlines() or [""])[-1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5, help="runs of each quick command (the median is shown)")
    ap.add_argument("--skip-large", action="store_true", help="only the start-up rows")
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        small = os.path.join(tmp, "small.json")
        subprocess.run([sys.executable, "-m", "mapsched", "generate", "random-dag", "--tasks", "100", "-o", small],
                       check=True, capture_output=True)
        sched = os.path.join(tmp, "small-s.json")
        subprocess.run([sys.executable, "-m", "mapsched", "solve", small, "-o", sched], check=True,
                       capture_output=True)
        for label, args in (("mapsched --help", ["--help"]),
                            ("mapsched validate (100 tasks)", ["validate", small, sched]),
                            ("mapsched solve -m heft (100 tasks)", ["solve", small, "-m", "heft", "-o", sched])):
            runs = [timed(args) for _ in range(a.repeats)]
            rows.append((label, statistics.median(r[0] for r in runs), max(r[1] for r in runs), runs[0][2]))
        if not a.skip_large:
            big = os.path.join(tmp, "rd10k.json")
            subprocess.run([sys.executable, "-m", "mapsched", "generate", "random-dag", "--tasks", "10000",
                            "--devices", "4", "-o", big], check=True, capture_output=True)
            for label, args in (("bound --fast (10,000 tasks)", ["bound", big, "--fast"]),
                                ("bound --time-limit 20 (10,000 tasks)", ["bound", big, "--time-limit", "20"])):
                wall, mb, code, _ = timed(args)
                rows.append((label, wall, mb, code))
            many = os.path.join(tmp, "rd200k.json")
            subprocess.run([sys.executable, "-m", "mapsched", "generate", "random-dag", "--tasks", "200000",
                            "--devices", "4", "-o", many], check=True, capture_output=True)
            jobs = os.path.join(tmp, "rd200k-s.json")
            subprocess.run([sys.executable, "-m", "mapsched", "solve", many, "-m", "met", "-o", jobs],
                           check=True, capture_output=True)
            wall, mb, code, _ = timed(["plot", jobs, "--problem", many, "-o", os.path.join(tmp, "g.png")])
            rows.append(("plot, 200,000 jobs", wall, mb, code))
    print("| command | wall (s) | peak memory (MB) | exit |")
    print("|---|---:|---:|---:|")
    for label, wall, mb, code in rows:
        print(f"| {label} | {wall:.2f} | {mb:.0f} | {code} |")


if __name__ == "__main__":
    main()
