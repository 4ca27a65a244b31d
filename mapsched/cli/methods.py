"""``methods`` and ``demo``: list the methods, and run each of them on a built-in instance."""

from __future__ import annotations

import argparse
import os
from typing import Any

from mapsched import instances
from mapsched.checks import count_arg, seconds_arg
from mapsched.cli.common import fmt, table
from mapsched.engine import registry
from mapsched.errors import MapschedError, shown
from mapsched.model.files import check_output
from mapsched.model.validate import validate
from mapsched.solve import solve


def add_methods(sub: Any) -> None:
    """The ``methods`` command's parser."""
    sub.add_parser("methods", help="list the methods and their options").set_defaults(handler=cmd_methods)


def add_demo(sub: Any) -> None:
    """The ``demo`` command's parser."""
    d = sub.add_parser("demo", help="run every method on a built-in instance, then the default on a DNN")
    d.add_argument("--instance", default=instances.DEFAULT, choices=instances.names())
    d.add_argument("--time-limit", type=seconds_arg, default=5.0, help="seconds per method")
    d.add_argument("--seed", type=count_arg(0), default=0)
    d.add_argument("-o", "--output", default="mapsched-demo-gantt.png",
                   help="the built-in instance's Gantt chart; the DNN's goes beside it, its name ending -dnn")
    d.set_defaults(handler=cmd_demo)


def cmd_methods(args: argparse.Namespace) -> int:
    """``methods``: list each method, its objectives and its options."""
    for m in registry.all_methods():
        print(f"{m.name:14s} {m.description}  [{', '.join(m.objectives)}]")
        for o in m.options:
            if not o.cli:
                print(f"{'':14s}   {o.name} (Python API only): {o.help}")
                continue
            choices = f" (one of {', '.join(map(str, o.choices))})" if o.choices else ""
            most = f"; at most {o.most:g}" if o.most is not None else ""
            print(f"{'':14s}   --{o.name.replace('_', '-')} {o.type.__name__}: {o.help}{choices};"
                  f" default {o.default}{most}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """``demo``: run every method on a built-in instance, print their table and draw the best one."""
    from mapsched.plot import check_format

    check_output(args.output)
    check_format(args.output)  # before the solves, not after them
    problem = instances.load(args.instance)
    print(f"{problem!r}")
    results = [solve(problem, m.name, args.time_limit, args.seed)
               for m in registry.all_methods() if problem.objective.kind in m.objectives and m.available()]
    # Every method's proved bound holds for all of them: report each gap to the best one.
    bound = max(r.lower_bound for r in results if r.lower_bound is not None)
    rows = []
    for r in results:
        gap = f"{100 * max(0.0, r.makespan - bound) / r.makespan:.1f}%"
        rows.append([r.method, fmt(r.makespan, 6), fmt(r.lower_bound, 6), gap, r.status,
                     "yes" if not validate(problem, r) else "NO", f"{r.solve_seconds:.3f}"])
    print(table(["method", "makespan", "own bound", "gap to best bound", "status", "valid", "seconds"], rows))
    print(f"best bound: {bound:.6g} ms")
    best = min(results, key=lambda r: (r.makespan, r.status != "optimal"))
    best.lower_bound = bound
    _chart(problem, best, args.output)
    _dnn(args)
    return 0


def _chart(problem: Any, result: Any, path: str) -> None:
    try:
        from mapsched.plot import gantt

        gantt(problem, result, path)
        print(f"wrote the Gantt chart of {result.method} to {shown(path, quote=False)}")
    except MapschedError as exc:
        print(f"no Gantt chart: {exc}")


def _dnn(args: argparse.Namespace) -> None:
    """What mapsched is for: a DNN (an Inception network) on a CPU, a T4 and an A100, solved
    by ``heft`` and by the default within the time limit, each with its proved bound and gap."""
    from mapsched.generators import cpu_t4_a100, inception

    problem = inception(platform=cpu_t4_a100())
    print(f"\n{problem!r}")
    results = [solve(problem, "heft", seed=args.seed), solve(problem, None, args.time_limit, args.seed)]
    bound = max(r.lower_bound for r in results if r.lower_bound is not None)
    rows = [[r.method, fmt(r.makespan, 6), fmt(bound, 6), f"{100 * max(0.0, r.makespan - bound) / r.makespan:.1f}%",
             r.status, "yes" if not validate(problem, r) else "NO", f"{r.solve_seconds:.3f}"] for r in results]
    print(table(["method", "makespan", "best bound", "gap", "status", "valid", "seconds"], rows))
    root, ext = os.path.splitext(args.output)
    _chart(problem, results[-1], f"{root}-dnn{ext}")
