"""The commands that check, re-time, convert or draw files: ``validate``, ``simulate``,
``convert`` and ``plot``."""

from __future__ import annotations

import argparse
from typing import Any

from mapsched.checks import count_arg, range_arg
from mapsched.cli.common import CONTENTION_HELP, PROBLEM_HELP, contention_arg, fmt, load_problem
from mapsched.errors import OptionError, shown
from mapsched.model.files import check_output
from mapsched.model.problem import MAX_DEVICES
from mapsched.model.schedule import Schedule
from mapsched.model.validate import tolerance, validate


def add_validate(sub: Any) -> None:
    """The ``validate`` command's parser."""
    v = sub.add_parser("validate", help="check a schedule against every rule")
    v.add_argument("problem", help=PROBLEM_HELP)
    v.add_argument("schedule")
    v.set_defaults(handler=cmd_validate)


def _noise(text: str) -> float:
    """An argparse type: a number from 0 to :data:`mapsched.scheduling.simulate.MAX_NOISE`
    (imported where a value is given: building the parser for ``--help`` loads no simulator)."""
    from mapsched.scheduling.simulate import MAX_NOISE

    return range_arg(0, MAX_NOISE)(text)


def add_simulate(sub: Any) -> None:
    """The ``simulate`` command's parser."""
    sm = sub.add_parser("simulate", help="re-time a schedule's mapping under the work-conserving runtime model",
                        description="Keep the schedule's mapping and re-time it as a work-conserving runtime runs "
                                    "it: each idle device starts its ready task that became ready first (ties: "
                                    "the task listed first), transfers take no resource unless the problem or "
                                    "--contention says they take turns. Latency problems only.")
    sm.add_argument("problem", help=PROBLEM_HELP)
    sm.add_argument("schedule")
    sm.add_argument("-o", "--output", required=True, help="schedule file to write")
    sm.add_argument("--noise", type=_noise, default=0.0,
                    help="lognormal sigma on task durations (mean 1; default 0: the latencies as given); with "
                         "--noise-model giph, the fraction s of GiPH's noise (its experiments: 0.2)")
    sm.add_argument("--noise-model", choices=("lognormal", "giph"), default="lognormal",
                    help="giph: durations U(w(1-s), w(1+s)), transfers normal(c, s c) clipped to c(1 +- s)")
    sm.add_argument("--seed", type=count_arg(0), default=0, help="seed of the noise")
    sm.add_argument("--contention", type=contention_arg, default=None,
                    help=CONTENTION_HELP + "; default: as the problem declares")
    sm.set_defaults(handler=cmd_simulate)


def add_convert(sub: Any) -> None:
    """The ``convert`` command's parser."""
    cv = sub.add_parser("convert", help="write the problem of another tool's graph file (DOPPLER's)",
                        description="Read a graph file of DOPPLER's public code (compute_graph/*.txt: node count, "
                                    "input ids, edge sources, edge targets, then 'comp,comm' per op) and write it "
                                    "as a problem on N identical GPUs, times and transfers as DOPPLER's simulator "
                                    "takes them (comp / 1e10, comm / 1e10).")
    cv.add_argument("file")
    cv.add_argument("--from", dest="source", choices=("doppler",), required=True, help="the file's format")
    cv.add_argument("--devices", type=count_arg(1, MAX_DEVICES), required=True, help="identical GPUs to run it on")
    cv.add_argument("-o", "--output", required=True, help="problem file to write")
    cv.set_defaults(handler=cmd_convert)


def add_plot(sub: Any) -> None:
    """The ``plot`` command's parser."""
    p = sub.add_parser("plot", help="draw a Gantt chart")
    p.add_argument("schedule")
    p.add_argument("--problem", required=True, help=PROBLEM_HELP)
    p.add_argument("-o", "--output", default="gantt.png")
    p.set_defaults(handler=cmd_plot)


def cmd_validate(args: argparse.Namespace) -> int:
    """``validate``: print each rule a schedule breaks; exit 1 if it breaks any."""
    problem = load_problem(args.problem)
    violations = validate(problem, Schedule.read(args.schedule))
    for v in violations:
        print(v)
    if violations:
        print(f"invalid: {len(violations)} violation(s)")
        return 1
    print("valid")
    return 0


def cmd_simulate(args: argparse.Namespace) -> int:
    """``simulate``: re-time a schedule's mapping as a work-conserving runtime runs it, noise optional."""
    from mapsched.scheduling.simulate import simulate

    check_output(args.output, [args.problem, args.schedule])
    problem = load_problem(args.problem)
    schedule = Schedule.read(args.schedule)
    if args.contention is not None:
        if args.contention.get("hardware"):
            raise OptionError("--contention: 'hardware' is generate's (a preset's own); give none or "
                              "copy_engines=K,concurrency=C")
        problem = problem.with_contention(**args.contention)
    result = simulate(problem, schedule.mapping(), args.noise, args.seed, args.noise_model,
                      method=f"simulate: {schedule.method or 'schedule'}")
    # The schedule's bound is this problem's only if it was solved for it, and one above the
    # timeline is false (or, with noise, bounds another timeline): kept otherwise.
    if schedule.problem == problem.name and schedule.lower_bound is not None \
            and schedule.lower_bound <= result.makespan + tolerance(result.makespan):
        result.lower_bound = schedule.lower_bound
    result.write(args.output)
    turns = " with transfers taking turns" if problem.contended else ""
    print(f"static makespan {fmt(schedule.makespan, 6)} ms, work-conserving{turns} {fmt(result.makespan, 6)} ms"
          f"{f' (noise {args.noise:g}, seed {args.seed}; durations drawn)' if args.noise else ''}; "
          f"wrote {args.output}")
    return 0


def cmd_convert(args: argparse.Namespace) -> int:
    """``convert``: write the problem of a DOPPLER graph file."""
    from mapsched.model.convert import read_doppler

    check_output(args.output, [args.file])
    p = read_doppler(args.file, args.devices)
    p.write(args.output)
    print(f"wrote {p!r} to {shown(args.output, quote=False)} (times in DOPPLER's simulator units: comp / 1e10)")
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    """``plot``: draw a schedule's Gantt chart."""
    from mapsched.plot import check_format, gantt

    check_output(args.output, [args.schedule, args.problem])
    check_format(args.output)
    gantt(load_problem(args.problem), Schedule.read(args.schedule), args.output)
    print(f"wrote {args.output}")
    return 0
