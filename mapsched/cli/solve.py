"""``solve`` and ``adapt``: solve a problem, or re-place a schedule after its devices change,
and write the schedule."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

from mapsched.checks import count_arg, seconds_arg
from mapsched.cli.common import (
    DASK_HELP,
    PROBLEM_HELP,
    ProgressBar,
    closing,
    cluster,
    dask_address,
    left,
    load_problem,
    local_limit,
    summary,
)
from mapsched.engine import interrupt, registry
from mapsched.errors import InfeasibleError, OptionError, shown
from mapsched.model.files import check_output, write_files
from mapsched.model.problem import Problem
from mapsched.model.schedule import Schedule
from mapsched.model.validate import validate
from mapsched.solve import DEFAULT_METHOD, MAX_THREADS, solve

_RELOCATION_HELP = ("what moving a task costs (a mapsched.relocation/1 file: start-up ms, bytes migrated, runs to "
                    "amortise over); methods auto, sa, ea, giph minimise the makespan plus it")
_METHOD_EPILOG = "Method options follow as --name value; see 'mapsched methods'."


def _solve_arguments(p: argparse.ArgumentParser) -> None:
    """The options of every command that solves: method, limits, seed, output."""
    p.add_argument("--method", "-m", default=DEFAULT_METHOD,
                   help="default: auto, a pipeline chosen by the problem's size and the time limit")
    p.add_argument("--time-limit", type=seconds_arg, default=None, help="seconds, start-up included")
    p.add_argument("--seed", type=count_arg(0), default=0)
    p.add_argument("--threads", type=count_arg(0, MAX_THREADS), default=None, help="solver threads (0: every core)")
    p.add_argument("--log", action="store_true", help="print the solver's log to stderr")
    p.add_argument("-o", "--output", help="schedule file to write (default: print it)")


def add_solve(sub: Any) -> None:
    """The ``solve`` command's parser."""
    # No abbreviations where method options follow: sa's --init was read as --initial.
    s = sub.add_parser("solve", help="solve a problem and write a schedule", allow_abbrev=False,
                       epilog=_METHOD_EPILOG)
    s.add_argument("problem", help=PROBLEM_HELP)
    _solve_arguments(s)
    s.add_argument("--initial", metavar="SCHEDULE", help="start from this schedule's placement (latency; "
                   "methods auto, cp-search, sa, ea, exact, split, giph)")
    s.add_argument("--relocation", metavar="FILE", help="with --initial: " + _RELOCATION_HELP)
    s.add_argument("--dask", metavar="ADDRESS", type=dask_address, help=DASK_HELP + " (-m split)")
    s.set_defaults(handler=cmd_solve)


def add_adapt(sub: Any) -> None:
    """The ``adapt`` command's parser."""
    ad = sub.add_parser("adapt", help="re-place a schedule after devices are removed or added", allow_abbrev=False,
                        epilog=_METHOD_EPILOG)
    ad.add_argument("problem", help=PROBLEM_HELP)
    ad.add_argument("schedule", help="the schedule in use, placed before the change")
    ad.add_argument("--remove", action="append", default=[], metavar="DEVICE", help="a device taken away "
                    "(repeat for more)")
    ad.add_argument("--add", action="append", default=[], metavar="NEW=OLD",
                    help="a new device, a copy of device OLD (repeat for more)")
    ad.add_argument("--problem-output", metavar="FILE", help="also write the changed problem")
    ad.add_argument("--relocation", metavar="FILE", help="from the schedule in use: " + _RELOCATION_HELP)
    _solve_arguments(ad)
    ad.set_defaults(handler=cmd_adapt)


def _method_options(extra: Sequence[str]) -> dict[str, str]:
    """Turn ``--name value`` / ``--name=value`` pairs into a dict of method options."""
    opts: dict[str, str] = {}
    k = 0
    while k < len(extra):
        tok = extra[k]
        if not tok.startswith("--") or len(tok) == 2:
            raise OptionError(f"unexpected argument {shown(tok)}; method options are given as --name value")
        if "=" in tok:
            name, value = tok[2:].split("=", 1)
        elif k + 1 < len(extra):
            name, value = tok[2:], extra[k + 1]
            k += 1
        else:
            raise OptionError(f"{tok}: expected a value after it")
        opts[name.replace("-", "_")] = value
        k += 1
    return opts


def _relocation(args: argparse.Namespace, options: dict[str, Any]) -> None:
    """``--relocation FILE`` into the solve's options (read before any work)."""
    if args.relocation:
        from mapsched.engine.relocation import Relocation

        options["relocation"] = Relocation.read(args.relocation)


def cmd_adapt(args: argparse.Namespace, extra: Sequence[str]) -> int:
    """``adapt``: take devices away from, or add copies to, a problem and re-place its schedule in use."""
    options = _method_options(extra)
    inputs = [args.problem, args.schedule] + ([args.relocation] if args.relocation else [])
    inputs += registry.read_files(args.method, options)
    for flag, path in (("-o", args.output), ("--problem-output", args.problem_output)):
        if path is not None:
            check_output(path, inputs, flag)
    if args.output and args.problem_output and os.path.realpath(args.output) == os.path.realpath(args.problem_output):
        raise OptionError("--problem-output: the same file as -o; give two files")
    if not args.remove and not args.add:
        raise OptionError("--remove/--add: no device change given; name a device to remove or add")
    if args.method in registry.methods() and not registry.get(args.method).initial:
        raise OptionError(f"--method: {shown(args.method)} does not start from a placement, so it cannot re-place the "
                          f"schedule in use; these do: {registry.taking('initial')}")
    problem = load_problem(args.problem)
    schedule = Schedule.read(args.schedule)
    like = {}
    for spec in args.add:
        new, sep, old = spec.partition("=")
        if not sep or not new or not old:
            raise OptionError(f"--add: expected NEW=OLD (a new device copying device OLD), got {shown(spec)}")
        if new in like:
            raise OptionError(f"--add: {new} is added twice ({new}={like[new]}, {spec}); add each device once")
        if new in args.remove:  # the schedule's tasks there would count as never moved
            raise OptionError(f"--add: {new} is the name of a device --remove takes away; give the new device a "
                              "name of its own")
        like[new] = old
    # Added first, so that NEW=OLD may copy a device that is removed (a failed one replaced).
    changed = problem.with_devices(like) if like else problem
    if args.remove:
        changed = changed.without_devices(args.remove)
    options["initial"] = schedule
    _relocation(args, options)
    return _solve_and_write(args, changed, options, args.problem_output)


def cmd_solve(args: argparse.Namespace, extra: Sequence[str]) -> int:
    """``solve``: solve a problem with a method (on a ``--dask`` cluster too) and write the schedule."""
    options = _method_options(extra)
    if args.dask is not None:  # the method's options, checked before a cluster starts
        local_limit(args)
        registry.get(args.method).parse_options(options)
        if "workers" in options:  # it was ignored without a word
            raise OptionError("--workers: the subproblems run on the --dask cluster's workers; leave out --workers")
    if args.output:  # a method's policy file too: '-o' the same path wrote the schedule over it
        check_output(args.output, [args.problem] + [f for f in (args.initial, args.relocation) if f]
                     + registry.read_files(args.method, options))
    problem = load_problem(args.problem)
    if args.initial:
        options["initial"] = Schedule.read(args.initial)
    _relocation(args, options)
    with cluster(args.dask, args.method) as executor:
        if executor is not None:
            options["executor"] = executor
        return _solve_and_write(args, problem, options, reserve=closing(args.dask))


def _solve_and_write(args: argparse.Namespace, problem: Problem, options: dict[str, Any],
                     problem_output: str | None = None, reserve: float = 0.0) -> int:
    """Solve with the command's method, limit (less ``reserve`` seconds kept for what follows)
    and seed; write or print the schedule, and with it, to ``problem_output``, the problem
    solved (none of them when the solve fails)."""
    with ProgressBar(args.method or "solve", args.time_limit) as bar, interrupt.graceful():
        try:
            # Kept back: writing the schedule and freeing the process's objects, some µs a job.
            result = solve(problem, args.method, left(args, reserve + 0.05 + 3e-5 * problem.n * problem.L), args.seed,
                           threads=args.threads, log=args.log, callback=bar, **options)
        except InfeasibleError:
            if not interrupt.requested():
                raise
            print("mapsched: interrupted before a schedule was found; nothing written", file=sys.stderr)
            return 130
        stopped = interrupt.requested()
    lost = getattr(options.get("executor"), "lost", False)  # a cluster's scheduler gone mid-run
    if lost:
        result.status = "feasible"
    if stopped:
        result.status, result.interrupted = "feasible", True
        if validate(problem, result):  # never write a broken schedule, however a method was stopped
            print("mapsched: interrupted, and the schedule in hand is not valid; nothing written",
                  file=sys.stderr)
            return 130
    if args.output:  # with the changed problem, all or nothing
        write_files([(args.output, result.to_json() + "\n")]
                    + ([(problem_output, problem.to_json() + "\n")] if problem_output else []))
    elif problem_output:
        problem.write(problem_output)
    if problem_output:
        print(f"wrote the changed problem, devices {', '.join(problem.device_names)}, to {problem_output}",
              file=sys.stderr)
    if args.output:
        print(summary(result))
    else:
        print(result.to_json())
        print(summary(result), file=sys.stderr)
    if "initial" in options:  # solve() puts what became of the initial placement first in the log
        print("".join(result.log.splitlines(keepends=True)[:2 + ("relocation" in options)]), end="",
              file=sys.stdout if args.output else sys.stderr)
    if args.log and result.log:
        print(result.log, file=sys.stderr)
    if stopped or lost:
        where = args.output or "standard output"
        why = "interrupted" if stopped else "the Dask scheduler was lost mid-run"
        print(f"mapsched: {why}; wrote the best schedule found so far to {where}", file=sys.stderr)
    return 130 if stopped else 0
