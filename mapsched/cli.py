"""The ``mapsched`` command line.

Every user error ends with one line on stderr and exit status 2, never a
traceback; ``validate`` exits 1 for a well-formed but invalid schedule.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import IO, Any, NoReturn

from mapsched import instances
from mapsched.engine import interrupt, registry
from mapsched.errors import HarnessError, InfeasibleError, MapschedError, OptionError, ProblemError, first_line
from mapsched.learned import MAX_EDGE_HIDDEN, MAX_HIDDEN, MAX_ROUNDS
from mapsched.model import files
from mapsched.model.files import check_output, write_files
from mapsched.model.problem import COMPILE, MAX_BATCH, MAX_DEVICES, Objective, Problem
from mapsched.model.schedule import Schedule
from mapsched.model.validate import tolerance, validate
from mapsched.solve import DEFAULT_METHOD, MAX_THREADS, solve

BUILTIN = "builtin:"
MAX_RUNS = 10_000
"""Most warm-up or timed runs, retries, schedules or rounds the harness commands take: a
count past it is a typo, which would otherwise run for days."""
MAX_INT = 2**31 - 1
"""The largest batch size or shape entry: torch's C++ side overflows past it."""
MAX_TORCH_SEED = 2**63 - 1
"""The largest seed ``torch.manual_seed`` takes."""
MAX_SIZE = 10**7
"""The most tasks, modules, nodes, channels or layers ``generate`` takes: a problem of more
tasks does not fit in memory, and a larger count overflowed NumPy's array sizes."""
MAX_GENERATED = 10**6
"""The most tasks ``generate`` builds, whatever the counts that multiply to them: 100,000 took
11-23 s on this project's slowest machine, and 10^14 (each count within MAX_SIZE) ran until
memory ran out."""
DOPPLER_KINDS = ("chainmm", "ffnn", "llama-block", "llama-layer")
"""DOPPLER's workloads (``mapsched.generators.doppler``), sharded over ``--devices`` GPUs."""


def _process_age() -> float:
    """Seconds since this process started (Linux; 0 elsewhere), so that a command's time
    limit counts the interpreter's start-up and the imports too."""
    try:
        with open("/proc/self/stat", encoding="ascii") as fh:
            started = int(fh.read().rsplit(")", 1)[1].split()[19])  # field 22, clock ticks after boot
        with open("/proc/uptime", encoding="ascii") as fh:
            uptime = float(fh.read().split()[0])
        return max(0.0, uptime - started / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0


STARTED = time.perf_counter() - _process_age()
"""When this process started, on the ``time.perf_counter`` clock: a command run from the shell
owns the process, and its time limit counts from there."""


def _count(low: int, high: int | None = None) -> Any:
    """An argparse type: an integer of at least ``low`` (and at most ``high``)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = low - 1
        if value < low or (high is not None and value > high):
            span = f"of at least {low}" if high is None else f"from {low} to {high}"
            raise argparse.ArgumentTypeError(f"expected an integer {span}, got {text!r}")
        return value
    return parse


def _seconds(text: str) -> float:
    """An argparse type: a positive, finite number of seconds."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, not argparse's usage block
        raise OptionError(message.removeprefix("argument "))


def load_problem(ref: str) -> Problem:
    """A problem file, or ``builtin:NAME`` for a built-in instance."""
    if ref.startswith(BUILTIN):
        return instances.load(ref[len(BUILTIN):])
    return Problem.read(ref)


def _method_options(extra: Sequence[str]) -> dict[str, str]:
    """Turn ``--name value`` / ``--name=value`` pairs into a dict of method options."""
    opts: dict[str, str] = {}
    k = 0
    while k < len(extra):
        tok = extra[k]
        if not tok.startswith("--") or len(tok) == 2:
            raise OptionError(f"unexpected argument {tok!r}; method options are given as --name value")
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


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[str(h) for h in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[c]) for r in cells) for c in range(len(headers))]
    lines = ["  ".join(c.rjust(w) if k else c.ljust(w) for k, (c, w) in enumerate(zip(r, widths)))
             for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _fmt(x: float | None, digits: int = 4) -> str:
    return "-" if x is None else f"{x:.{digits}g}"


def _summary(r: Schedule) -> str:
    gap = "-" if r.gap is None else f"{100 * r.gap:.1f}%"
    return (f"{r.method}: makespan {_fmt(r.makespan, 6)} ms, throughput {_fmt(r.throughput)} /s, "
            f"lower bound {_fmt(r.lower_bound, 6)} (gap {gap}), {r.status}, {r.solve_seconds:.3f} s")


class ProgressBar:
    """A progress bar on a terminal for solves that last over a second.

    Used as the solve callback (it records the best makespan); a thread redraws it
    against the time limit (or just the elapsed time without one). Uses rich when
    installed (``mapsched[progress]``), else a plain one-line display.
    """

    DELAY = 1.0

    def __init__(self, method: str, time_limit: float | None, stream: IO[str] | None = None,
                 enabled: bool | None = None) -> None:
        self.method, self.time_limit = method, time_limit
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.best: float | None = None
        self.drawn = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __call__(self, seconds: float, makespan: float) -> None:
        self.best = makespan

    def __enter__(self) -> ProgressBar:
        if self.enabled:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _label(self) -> str:
        best = "-" if self.best is None else f"{self.best:.6g}"
        return f"{self.method}: {best}"

    def _run(self) -> None:
        t0 = time.perf_counter()
        if self._stop.wait(self.DELAY):
            return
        try:
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
        except ImportError:
            return self._run_plain(t0)
        cols = [TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn()]
        with Progress(*cols, console=Console(file=self.stream), transient=True) as bar:
            task = bar.add_task(self._label(), total=self.time_limit)
            self.drawn = True
            while not self._stop.wait(0.1):
                bar.update(task, description=self._label(), completed=time.perf_counter() - t0)

    def _run_plain(self, t0: float) -> None:
        while True:
            limit = f" / {self.time_limit:g}" if self.time_limit else ""
            self.stream.write(f"\r{self._label()}  {time.perf_counter() - t0:.1f}{limit} s ")
            self.stream.flush()
            self.drawn = True
            if self._stop.wait(0.1):
                self.stream.write("\r" + " " * 60 + "\r")
                return


# ---------------------------------------------------------------- commands
def _left(args: argparse.Namespace, reserve: float = 0.0) -> float | None:
    """What is left of the command's time limit: less the time since the command started and
    ``reserve`` seconds kept back for what follows."""
    if args.time_limit is None:
        return None
    return max(0.01, args.time_limit - (time.perf_counter() - args.started) - reserve)


def _solve_arguments(p: argparse.ArgumentParser) -> None:
    """The options of every command that solves: method, limits, seed, output."""
    p.add_argument("--method", "-m", default=DEFAULT_METHOD,
                   help="default: auto, a pipeline chosen by the problem's size and the time limit")
    p.add_argument("--time-limit", type=_seconds, default=None, help="seconds, start-up included")
    p.add_argument("--seed", type=_count(0), default=0)
    p.add_argument("--threads", type=_count(0, MAX_THREADS), default=None, help="solver threads (0: every core)")
    p.add_argument("--log", action="store_true", help="print the solver's log to stderr")
    p.add_argument("-o", "--output", help="schedule file to write (default: print it)")


def _dask_address(text: str) -> str:
    """An argparse type: ``tcp://HOST:PORT`` or ``local:N`` (checked here, reached later)."""
    from mapsched.engine.dask import parse_address

    try:
        parse_address(text)
    except OptionError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--dask: ")) from None
    return text


_RELOCATION_HELP = ("what moving a task costs (a mapsched.relocation/1 file: start-up ms, bytes migrated, runs to "
                    "amortise over); methods auto, sa, ea, giph minimise the makespan plus it")
_DASK_HELP = "run on a dask.distributed cluster: tcp://HOST:PORT of its scheduler, or local:N worker processes"


@contextlib.contextmanager
def _cluster(address: str | None, method: str | None = None) -> Any:
    """The executor of ``--dask ADDRESS`` (None without it), connected before any work and
    closed on exit; ``method`` must be one that takes an executor."""
    if address is None:
        yield None
        return
    if method is not None and not any(o.name == "executor" for o in registry.get(method).options):
        takes = [m.name for m in registry.all_methods() if any(o.name == "executor" for o in m.options)]
        raise OptionError(f"--dask: method {method!r} runs in this process; give -m {' or '.join(takes)}")
    from mapsched.engine.dask import connect

    with connect(address) as executor:
        yield executor


def _local_limit(args: argparse.Namespace) -> None:
    """Refuse a time limit that a ``--dask local:N`` cluster's start and close alone would pass."""
    if args.dask is not None and args.dask.startswith("local:") and args.time_limit is not None:
        from mapsched.engine.dask import LOCAL_LEAST

        if args.time_limit < LOCAL_LEAST:
            raise OptionError(f"--time-limit: {args.time_limit:g} s is less than starting and closing a local:N "
                              f"cluster may take; give at least {LOCAL_LEAST:g} s, or leave out --dask")


def _closing(address: str | None) -> float:
    """Seconds to keep back within the time limit for closing ``--dask ADDRESS``: a local
    cluster's worker processes end after the command's work."""
    if address is None or not address.startswith("local:"):
        return 0.0
    from mapsched.engine.dask import LOCAL_CLOSE

    return LOCAL_CLOSE


def _relocation(args: argparse.Namespace, options: dict[str, Any]) -> None:
    """``--relocation FILE`` into the solve's options (read before any work)."""
    if args.relocation:
        from mapsched.engine.relocation import Relocation

        options["relocation"] = Relocation.read(args.relocation)


def cmd_adapt(args: argparse.Namespace, extra: Sequence[str]) -> int:
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
        raise OptionError(f"--method: {args.method!r} does not start from a placement, so it cannot re-place the "
                          f"schedule in use; these do: {registry.taking('initial')}")
    problem = load_problem(args.problem)
    schedule = Schedule.read(args.schedule)
    like = {}
    for spec in args.add:
        new, sep, old = spec.partition("=")
        if not sep or not new or not old:
            raise OptionError(f"--add: expected NEW=OLD (a new device copying device OLD), got {spec!r}")
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
    options = _method_options(extra)
    if args.dask is not None:  # the method's options, checked before a cluster starts
        _local_limit(args)
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
    with _cluster(args.dask, args.method) as executor:
        if executor is not None:
            options["executor"] = executor
        return _solve_and_write(args, problem, options, reserve=_closing(args.dask))


def _solve_and_write(args: argparse.Namespace, problem: Problem, options: dict[str, Any],
                     problem_output: str | None = None, reserve: float = 0.0) -> int:
    """Solve with the command's method, limit (less ``reserve`` seconds kept for what follows)
    and seed; write or print the schedule, and with it, to ``problem_output``, the problem
    solved (none of them when the solve fails)."""
    with ProgressBar(args.method or "solve", args.time_limit) as bar, interrupt.graceful():
        try:
            # Kept back: writing the schedule and freeing the process's objects, 20-30 µs a job.
            result = solve(problem, args.method, _left(args, reserve + 0.05 + 3e-5 * problem.n * problem.L), args.seed,
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
        print(_summary(result))
    else:
        print(result.to_json())
        print(_summary(result), file=sys.stderr)
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


def cmd_validate(args: argparse.Namespace) -> int:
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
    from mapsched.scheduling.simulate import simulate

    check_output(args.output, [args.problem, args.schedule])
    problem = load_problem(args.problem)
    schedule = Schedule.read(args.schedule)
    result = simulate(problem, schedule.mapping(), args.noise, args.seed, args.noise_model,
                      method=f"simulate: {schedule.method or 'schedule'}")
    # The schedule's bound is this problem's only if it was solved for it, and one above the
    # timeline is false (or, with noise, bounds another timeline): kept otherwise.
    if schedule.problem == problem.name and schedule.lower_bound is not None \
            and schedule.lower_bound <= result.makespan + tolerance(result.makespan):
        result.lower_bound = schedule.lower_bound
    result.write(args.output)
    print(f"static makespan {_fmt(schedule.makespan, 6)} ms, work-conserving {_fmt(result.makespan, 6)} ms"
          f"{f' (noise {args.noise:g}, seed {args.seed}; durations drawn)' if args.noise else ''}; "
          f"wrote {args.output}")
    return 0


def cmd_convert(args: argparse.Namespace) -> int:
    from mapsched.model.convert import read_doppler

    check_output(args.output, [args.file])
    p = read_doppler(args.file, args.devices)
    p.write(args.output)
    print(f"wrote {p!r} to {args.output} (times in DOPPLER's simulator units: comp / 1e10)")
    return 0


def _noise(text: str) -> float:
    """An argparse type: a number from 0 to :data:`mapsched.scheduling.simulate.MAX_NOISE`."""
    from mapsched.scheduling.simulate import MAX_NOISE

    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 <= value <= MAX_NOISE:
        raise argparse.ArgumentTypeError(f"expected a number from 0 to {MAX_NOISE:g}, got {text!r}")
    return value


def cmd_bound(args: argparse.Namespace) -> int:
    from mapsched.bounds import lower_bound
    from mapsched.split import full_bound

    if args.fast and args.dask is not None:  # the address went unchecked and unused
        raise OptionError("--dask: the --fast bound runs in this process; leave out --dask or --fast")
    _local_limit(args)
    p = load_problem(args.problem)
    # A first Ctrl-C or SIGTERM stops the solvers (HiGHS too, whose MIP held the main thread
    # past a SIGTERM until killed) and prints the best bound proved before.
    with _cluster(args.dask) as executor, interrupt.graceful():
        b = lower_bound(p) if args.fast else full_bound(p, _left(args, _closing(args.dask)), args.window_time,
                                                        executor)
        lost, stopped = getattr(executor, "lost", False), interrupt.requested()
    if lost or stopped:
        why = "interrupted" if stopped else "the Dask scheduler was lost mid-run"
        print(f"mapsched: {why}; the bound is the best proved before", file=sys.stderr)
    if args.json:
        print(json.dumps({"lower_bound": b.value, "rule": b.rule}))
    else:
        print(f"lower bound {b.value:.6g} ms ({b.rule})")
    return 130 if stopped else 0


def cmd_methods(args: argparse.Namespace) -> int:
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


def cmd_plot(args: argparse.Namespace) -> int:
    from mapsched.plot import check_format, gantt

    check_output(args.output, [args.schedule, args.problem])
    check_format(args.output)
    gantt(load_problem(args.problem), Schedule.read(args.schedule), args.output)
    print(f"wrote {args.output}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
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
        rows.append([r.method, _fmt(r.makespan, 6), _fmt(r.lower_bound, 6), gap, r.status,
                     "yes" if not validate(problem, r) else "NO", f"{r.solve_seconds:.3f}"])
    print(_table(["method", "makespan", "own bound", "gap to best bound", "status", "valid", "seconds"], rows))
    print(f"best bound: {bound:.6g} ms")
    best = min(results, key=lambda r: (r.makespan, r.status != "optimal"))
    best.lower_bound = bound
    try:
        from mapsched.plot import gantt

        gantt(problem, best, args.output)
        print(f"wrote the Gantt chart of {best.method} to {args.output}")
    except MapschedError as exc:
        print(f"no Gantt chart: {exc}")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from mapsched.bench import sweep

    if args.suites is None:
        from mapsched.bench.suites import SUITES
    else:  # a user's file of suites is Python code, run as such: only when named
        SUITES = sweep.load_suites(args.suites)
    if args.suite not in SUITES:
        raise OptionError(f"suite: unknown suite {args.suite!r}; expected one of {sorted(SUITES)}")
    suite = SUITES[args.suite]
    if not isinstance(suite, sweep.Suite):
        raise OptionError(f"suite: SUITES[{args.suite!r}] is not a mapsched.bench.sweep.Suite")
    suite.check()
    out = f"{suite.name}.jsonl" if args.output is None else args.output
    inputs = [args.suites] if args.suites else []
    check_output(out, inputs)
    # The plot goes beside the rows, never on them; not beside a device such as /dev/null.
    plot = None if files.is_stream(out) else f"{os.path.splitext(out)[0]}-quality.png"
    if plot is not None:
        check_output(plot, [*inputs, out])
    known = registry.methods()
    objective = suite.cases[0].build().objective.kind
    methods = tuple(m for m in suite.methods
                    if m == sweep.BOUND or (m in known and objective in registry.get(m).objectives))
    if not methods:
        raise OptionError(f"suite: none of SUITES[{args.suite!r}]'s methods {list(suite.methods)} is a method for "
                          f"the {objective} objective here; see 'mapsched methods'")
    suite = sweep.Suite(suite.name, suite.cases, methods, args.time_limit or suite.time_limit, suite.options,
                        suite.description)
    if args.dask is not None and args.workers != 1:  # it was ignored without a word
        raise OptionError("--workers: the runs go to the --dask cluster's workers; leave out --workers")
    with _cluster(args.dask) as executor, \
            ProgressBar(f"bench {suite.name}, runs left", None, enabled=sys.stderr.isatty()) as bar:
        rows = sweep.run_suite(suite, out, executor, workers=args.workers, threads=args.threads,
                               progress=lambda d, t: bar(0, float(t - d)))
    rows = [r for r in rows if r["method"] in methods]
    print(f"## {suite.name}: {suite.description}\n")
    print(sweep.results_table(rows, methods, "throughput" if objective == "throughput" else "makespan"))
    if any("simulated" in r for r in rows):
        print("\n" + sweep.results_table(rows, methods, "simulated"))
    if any("slr_simulated" in r for r in rows):
        print("\n" + sweep.results_table(rows, methods, "slr_simulated"))
    if "exact" in methods and "split" in methods:
        print("\n" + sweep.runtime_table(rows))
    if plot is None:
        print(f"\nno plot beside {out}, which is no regular file")
        return 0
    try:
        sweep.plot_quality(rows, plot)
        print(f"\nwrote {plot}; raw rows in {out}")
    except MapschedError as exc:
        print(f"\nno plot: {exc}; raw rows in {out}")
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    from mapsched import generators

    check_output(args.output)
    # About how many tasks each kind builds from its counts (a layer: 12 ops of GPT-3's forward
    # pass, 1,576 of transformer-train's step).
    tasks = {"stack": (args.modules * args.nodes, "--modules x --nodes"), "random-dag": (args.tasks or 0, "--tasks"),
             "giph": (args.tasks or 0, "--tasks"), "gpt3": (12 * args.layers, "--layers"),
             "transformer-train": (1576 * args.layers, "--layers")}.get(args.kind)
    if tasks is not None and tasks[0] > MAX_GENERATED:
        raise OptionError(f"{tasks[1]}: about {tasks[0]:,} tasks; generate builds at most {MAX_GENERATED:,}, so give "
                          "smaller counts")
    objective = Objective("throughput", args.batch) if args.batch > 1 else Objective()
    if args.system is not None and args.kind in ("giph", "random-dag"):
        raise OptionError(f"--system: {args.kind} draws its own devices; leave --system out (--devices sets their "
                          "number)")
    given = generators.platform(args.system) if args.system is not None else None
    preset = given if given is not None else generators.platform("cpu-t4-a100")
    try:
        if args.kind == "giph":
            if args.batch > 1:
                raise OptionError("--batch: GiPH's workloads are latency problems (one input); leave --batch at 1")
            p = _giph(args)
        elif args.kind == "random-dag":
            p = generators.random_dag(args.tasks or 1000, args.devices or 4, args.seed, objective=objective)
        elif args.kind in ("vgg", "resnet", "inception", "transformer"):
            p = getattr(generators, args.kind)(platform=preset, objective=objective, seed=args.seed)
        elif args.kind == "transformer-train":
            if args.batch > 1:
                raise OptionError("--batch: transformer-train is one training step (latency); its batch of 8 sequences "
                                  "is inside the op shapes")
            p = generators.transformer_train(args.layers, platform=preset, seed=args.seed)
        elif args.kind in DOPPLER_KINDS:
            if args.batch > 1:
                raise OptionError(f"--batch: {args.kind} is one forward pass (latency), its batch inside the op shapes")
            p = getattr(generators, args.kind.replace("-", "_"))(args.devices or 4, platform=given, seed=args.seed)
        elif args.kind == "gpt3":
            p = generators.gpt3(args.layers, platform=given, objective=objective, seed=args.seed)
        else:
            p = generators.stack(args.modules, args.nodes, args.channels, args.variant, args.graph, args.seed,
                                 preset, objective)
    except ProblemError as exc:  # a generated problem's field, where the user gave --batch
        if args.batch > 1 and "objective.batch" in str(exc):
            raise OptionError(f"--batch: the generated devices cannot run {args.batch} inputs of every task "
                              f"({exc}); give a smaller --batch") from None
        raise
    p.write(args.output)
    print(f"wrote {p!r} to {args.output}")
    return 0


_TRAIN_ONLY = {"giph": ("suite", "variant", "mp_rounds", "giph_features", "lr", "entropy", "gamma", "eval_every",
                        "eval_cases"),
               "doppler, placeto": ("stages", "hidden", "rounds")}
"""The options of ``train`` that only some of its methods read."""
_CONFIG = {"hidden": "hidden", "rounds": "rounds", "variant": "variant", "mp_rounds": "rounds", "lr": "lr",
           "entropy": "entropy", "gamma": "gamma", "eval_every": "eval_every", "eval_cases": "eval_cases"}
"""The options of ``train`` that set a policy's config (the option's name: the config's)."""


def _resumed_config(args: argparse.Namespace, defaults: dict[str, Any], config: Any) -> None:
    """Refuse, with ``--resume``, an option given that would change the config the policy file
    keeps (its networks' sizes, its training's rates): it was set when the file was started."""
    for name, field in _CONFIG.items():
        given = getattr(args, name, None)
        if given is None or given == defaults.get(name) or not isinstance(config, dict) or field not in config:
            continue
        if given != config[field]:
            raise OptionError(f"--{name.replace('_', '-')}: {args.output} keeps {config[field]!r}, set when it was "
                              "started; leave the option out with --resume, or start a new file")


def cmd_train(args: argparse.Namespace) -> int:
    from mapsched.learned import torch_module

    defaults = vars(build_parser().parse_args(["train", args.method, "-o", "-"]))
    for methods, names in _TRAIN_ONLY.items():
        for name in names:
            if args.method not in methods and getattr(args, name) != defaults[name]:
                raise OptionError(f"--{name.replace('_', '-')}: an option of {methods} training, which "
                                  f"{args.method} does not read; leave it out")
    if args.method == "giph":
        return _train_giph(args, defaults)
    if args.problem is None or args.suite is not None:
        raise OptionError(f"problem: {args.method} trains on one problem file (no --suite); give it")
    method = args.method
    learner = torch_module(method, method)
    reinforce = torch_module("reinforce", method)
    stages = learner.parse_stages(",".join(learner.STAGES) if args.stages is None else args.stages)
    if args.resume and not os.path.isfile(args.output):
        raise OptionError(f"--resume: no policy file {args.output!r} to resume; leave out --resume to start one")
    check_output(args.output, [args.problem])
    problem = load_problem(args.problem)
    if problem.objective.kind != "latency":
        raise OptionError(f"problem: {method} trains on latency problems only; this one's objective is throughput")
    # Kept back from the time limit: the last evaluation, writing the file and the exit.
    deadline = math.inf if args.time_limit is None else args.started + args.time_limit - 0.4
    with reinforce.one_thread():
        if args.resume:
            data = reinforce.load_checkpoint(args.output, method, problem.m, flag="--resume")
            _resumed_config(args, defaults, data["config"])
            trainer = learner.Trainer.from_checkpoint(problem, data, args.seed, resume=True, flag="--resume")
        else:
            if method == "doppler" and args.hidden is not None and args.hidden > MAX_EDGE_HIDDEN:
                raise OptionError(f"--hidden: doppler's edge network has hidden^3 weights; give at most "
                                  f"{MAX_EDGE_HIDDEN}, got {args.hidden}")
            width = {k: v for k, v in (("hidden", args.hidden), ("rounds", args.rounds)) if v is not None}
            trainer = learner.Trainer(problem, learner.Config(**width), args.seed)

        def save() -> None:
            reinforce.save_checkpoint(args.output, trainer.checkpoint(stages, args.episodes))

        with ProgressBar(f"train {method}, best", args.time_limit) as bar, interrupt.graceful():
            def progress(stage: str, done: int, best: float) -> None:
                bar.method = f"train {method} {stage} {done}/{args.episodes}, best"
                if best < math.inf:
                    bar(time.perf_counter() - args.started, best)

            trainer.until = deadline  # rollouts stop there, the first evaluation's too (2,000 tasks: tens of s)
            try:
                if trainer.best_policy is None:
                    trainer.evaluate()
                if trainer.best_makespan == math.inf:  # no rollout finished: is there a mapping at all?
                    from mapsched.scheduling.construct import repaired_owner
                    from mapsched.scheduling.feasibility import NotFound

                    try:  # refused only where none exists (InfeasibleError, a proof)
                        with interrupt.until(deadline):
                            repaired_owner(problem)
                    except NotFound:  # no proof either way: the rollouts may still find one
                        pass
                trainer.run(stages, args.episodes, deadline, progress, save, args.checkpoint_every,
                            stop=interrupt.requested)
            except reinforce.Cut:  # mid-rollout at the deadline: the best policy so far stands
                pass
            except reinforce.Diverged:
                raise OptionError(f"train: {method}'s policy diverged after {sum(trainer.done.values())} episodes "
                                  "(its action probabilities are no longer finite); train again with another "
                                  "--seed") from None
            stopped = interrupt.requested()
        save()
    done = sum(trainer.done[s] for s in stages)
    note = " (interrupted)" if stopped else " (time limit)" if done < len(stages) * args.episodes else ""
    if trainer.best_policy is None:
        note += ", before its first evaluation ended: the file holds the policy as it started"
    print(f"trained {method} {', '.join(f'{s} {trainer.done[s]}/{args.episodes}' for s in stages)} episodes{note}: "
          f"greedy policy {_fmt(trainer.eval_makespan, 6)} ms, best assignment seen {_fmt(trainer.best_makespan, 6)} "
          f"ms; wrote {args.output}")
    return 130 if stopped else 0


def _train_giph(args: argparse.Namespace, defaults: dict[str, Any]) -> int:
    """``train giph``: REINFORCE on a GiPH experiment set (:mod:`mapsched.learned.giph`)."""
    from mapsched.learned import torch_module

    giph = torch_module("giph", "giph")
    reinforce = torch_module("reinforce", "giph")
    if args.problem is not None:
        raise OptionError("problem: giph trains on a GiPH experiment set, not a file; give --suite "
                          "single|multi|multi-diff instead")
    suite = args.suite or "multi-diff"
    if suite not in ("single", "multi", "multi-diff"):
        raise OptionError(f"--suite: giph trains on GiPH's sets single, multi or multi-diff, not {suite!r}")
    if args.resume and not os.path.isfile(args.output):
        raise OptionError(f"--resume: no policy file {args.output!r} to resume; leave out --resume to start one")
    check_output(args.output, [])
    deadline = math.inf if args.time_limit is None else args.started + args.time_limit - 0.4
    with reinforce.one_thread():
        if args.resume:
            data = reinforce.load_checkpoint(args.output, "giph", None, flag="--resume")
            _resumed_config(args, defaults, data["config"])
            trainer = giph.Trainer.resume(data, suite)
        else:
            cfg = giph.Config(variant=args.variant, rounds=args.mp_rounds, lr=args.lr, entropy=args.entropy,
                              gamma=args.gamma, eval_every=args.eval_every, eval_cases=args.eval_cases,
                              node_features=giph.GIPH_NODE_FEATURES if args.giph_features else giph.NODE_FEATURES)
            trainer = giph.Trainer(cfg, suite, args.seed)

        def save() -> None:
            reinforce.save_checkpoint(args.output, trainer.checkpoint())

        with ProgressBar("train giph, eval SLR", args.time_limit) as bar, interrupt.graceful():
            def progress(done: int, best: float) -> None:
                bar.method = f"train giph {done}/{args.episodes}, eval SLR"
                bar(time.perf_counter() - args.started, best)

            trainer.run(args.episodes, deadline, progress, save, args.checkpoint_every, stop=interrupt.requested)
            stopped = interrupt.requested()
        save()
    note = " (interrupted)" if stopped else " (time limit)" if trainer.done < args.episodes else ""
    cut = len(trainer.eval_specs) - trainer.evaluated
    cases = f" on {trainer.evaluated} of {len(trainer.eval_specs)} cases (the time limit)" if cut else ""
    print(f"trained giph {trainer.done}/{args.episodes} episodes on {suite}{note}: best evaluation SLR "
          f"{_fmt(trainer.eval_slr, 4)}{cases}; wrote {args.output}")
    return 130 if stopped else 0


def _giph(args: argparse.Namespace) -> Any:
    """``generate giph``: one graph on one network, or case ``--case`` of an experiment set."""
    from mapsched.generators import giph

    if args.experiment is None:
        for flag, seed in (("--seed", args.seed), ("--network-seed", args.network_seed)):
            if seed is not None and seed > giph.MAX_SEED:
                raise OptionError(f"{flag}: GiPH's generator takes a seed from 0 to {giph.MAX_SEED}, got {seed}")
        try:
            return giph.giph_instance(args.tasks or 10, args.alpha, args.conn_prob, args.seed, args.devices or 20,
                                      args.network_seed, args.type_prob)
        except OptionError as exc:  # named as its Python argument: the option given here instead
            name, _, rest = str(exc).partition(": ")
            if name in ("alpha", "conn_prob", "type_prob"):
                raise OptionError(f"--{name.replace('_', '-')}: {rest}") from None
            raise
    if args.experiment == "adapt":
        nets, _, graphs = giph.giph_adapt()
        total = len(graphs) * len(nets)
        if args.case >= total:
            raise OptionError(f"--case: adapt has {total} cases (graph x network version, graph-major); "
                              f"give 0..{total - 1}")
        g, k = divmod(args.case, len(nets))
        return giph.giph_problem(graphs[g], nets[k], name=f"giph-adapt-g{g}-v{k}")
    exp = giph.giph_experiment(args.experiment)
    graphs, nets = exp.specs(args.split, "graphs"), exp.specs(args.split, "networks")
    total = len(graphs) * len(nets)
    if args.case >= total:
        raise OptionError(f"--case: {args.experiment} {args.split} has {total} cases (graph x network, "
                          f"graph-major); give 0..{total - 1}")
    g, k = divmod(args.case, len(nets))
    return giph.giph_problem(giph.giph_graph(**graphs[g]), giph.giph_network(**nets[k]))


def _probability(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a probability in [0, 1], got {text!r}")
    return value


def _harness() -> Any:
    try:
        from mapsched import harness
    except ImportError as exc:
        raise OptionError(f"this command needs PyTorch ({exc}); pip install 'mapsched[torch]'") from None
    return harness


def _ints(text: str, flag: str, most: int = MAX_INT) -> list[int]:
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        values = []
    if not values or min(values) < 1 or max(values) > most:
        raise OptionError(f"{flag}: expected integers from 1 to {most} separated by commas, got {text!r}")
    return values


def _check_batch(devices: int, sizes: list[int], objective: Objective) -> None:
    """Refuse, before the profile's minutes rather than after them, an ``objective`` that
    ``devices`` devices running ``sizes`` cannot take: the profiled problem's own check, asked
    of a problem of one task that every device runs at every size (a split of L inputs
    takes at most L devices; a problem at most MAX_DEVICES)."""
    from mapsched.model.problem import Device, System, Task

    names = [f"d{k}" for k in range(min(devices, objective.inputs, MAX_DEVICES))]
    task = Task("t", {d: dict.fromkeys(map(str, sizes), 1.0) for d in names})
    try:
        Problem([task], [], System(tuple(Device(d, batch_sizes=tuple(sizes)) for d in names)), objective)
    except ProblemError:
        L = objective.inputs
        if L == 1:
            raise OptionError("--batch-sizes: a latency problem (--batch 1) runs each task at batch size 1; "
                              "include it, e.g. --batch-sizes 1,2,4") from None
        raise OptionError(f"--batch-sizes: no choice of one of the sizes {','.join(map(str, sorted(set(sizes))))} "
                          f"per device (or none) on {devices} device(s) adds up to --batch {L}; include {L}, e.g. "
                          f"--batch-sizes {','.join(map(str, sorted({*sizes, L})))}") from None


_SHAPE_ERRORS = (RuntimeError, ValueError, TypeError, IndexError, AssertionError, MemoryError, OverflowError)
"""What torch (and a model's own asserts) raise on an input of a shape the model does not take."""


@contextlib.contextmanager
def _model_input(shape: Sequence[int], given: bool, what: str = "runs", rows: int | None = None) -> Iterator[None]:
    """The user's model failing on its first input: one line, not torch's traceback. It names
    --input-shape where the user gave the shape (``given``) and the error is one that a shape
    causes (one the model does not take, or too large to allocate); else the model, which
    raised on its own input_shape, or raised what no shape causes (a KeyError). ``rows``,
    where the input ran with the problem's rows in place of its first dimension."""
    try:
        yield
    except MapschedError:
        raise
    except Exception as exc:
        ran = ("" if rows is None or list(shape[:1]) == [rows]
               else f" with its first dimension {rows}, the problem's inputs,")
        if given and isinstance(exc, _SHAPE_ERRORS):
            raise OptionError(f"--input-shape: the model {what} on no input of shape {list(shape)}{ran} "
                              f"({first_line(exc)}); give a shape it takes") from None
        on = f"an input of shape {list(shape)}" if given else f"its input_shape {list(shape)}"
        fix = ", or its input_shape, or give --input-shape" if isinstance(exc, _SHAPE_ERRORS) and not given else ""
        raise OptionError(f"model: {'running' if what == 'runs' else 'tracing'} it on {on}{ran.rstrip(',')} raised "
                          f"{type(exc).__name__}: {first_line(exc)}; fix the model{fix}") from None


@contextlib.contextmanager
def _model_runs(what: str) -> Iterator[None]:
    """The user's model raising where the harness runs it after its first input went through
    (a batch of another size, the schedule's jobs): one line naming the model, not a traceback."""
    try:
        yield
    except (MapschedError, MemoryError):  # ours are one line already; main reports memory
        raise
    except Exception as exc:
        raise OptionError(f"model: it raised {type(exc).__name__}: {first_line(exc)} while {what}; "
                          "fix the model") from None


def _checked_input(torch: Any, model: Any, shape: Sequence[int], seed: int, given: bool,
                   rows: int | None = None) -> Any:
    """A seeded random input of ``shape`` (with ``rows`` rows, if given) that ``model`` has run on
    once; ``given``: whether the user gave the shape (see :func:`_model_input`)."""
    import inspect
    import warnings

    from mapsched.harness.graph import check_runnable, random_input

    check_runnable(model)
    try:
        params = list(inspect.signature(model.forward).parameters.values())
    except (TypeError, ValueError):  # a forward with no signature to read: run it as it is
        params = []
    needed = [p for p in params if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if len(needed) > 1:
        raise OptionError(f"model: its forward takes {', '.join(p.name for p in params)}, and the command line "
                          "gives it one tensor; wrap it so that forward takes one tensor, or profile it from "
                          "Python with mapsched.harness.profile(model, (x, y, ...), devices)")
    with _model_input(shape, given, rows=rows):
        x = random_input(model, tuple(shape) if rows is None else (rows, *shape[1:]), seed)
        with torch.inference_mode(), warnings.catch_warnings():  # a failing model's warnings: lines before ours
            warnings.simplefilter("ignore")
            model(x)
    return x


def _from_here() -> None:
    """Let ``MODULE:FACTORY`` name a module in the current folder, as ``python -m`` does: the
    ``mapsched`` script's path starts at its own folder. Appended, so that a file there does
    not hide an installed package of the same name."""
    here = os.getcwd()
    if "" not in sys.path and here not in sys.path:
        sys.path.append(here)


def _model_files(ref: str) -> list[str]:
    """The source file of ``MODULE:FACTORY``'s module, if it is one: an input of the command,
    which its ``-o`` must not overwrite."""
    import importlib.util

    _from_here()
    try:
        spec = importlib.util.find_spec(ref.partition(":")[0])
    except Exception:  # a bad name, or a parent package failing as it runs: reported when the model is loaded
        return []
    return [spec.origin] if spec is not None and spec.origin and os.path.isfile(spec.origin) else []


def _model(ref: str, input_shape: str | None) -> tuple[Any, tuple[int, ...]]:
    """Build the model of ``MODULE:FACTORY`` and the input shape to use (batch of 1 first)."""
    import importlib

    module, _, factory = ref.partition(":")
    if not module or not factory:
        raise OptionError(f"model: expected MODULE:FACTORY (e.g. mapsched.harness.models:resnet), got {ref!r}")
    _from_here()
    try:
        build = getattr(importlib.import_module(module), factory)
    except (ImportError, AttributeError) as exc:
        raise OptionError(f"model: cannot load {ref!r} ({exc}); check the module path and factory name") from None
    except Exception as exc:  # the module's own code (a syntax error, a raise): one line, as bench --suites gives
        raise OptionError(f"model: importing {module!r} failed: {type(exc).__name__}: {first_line(exc)}") from None
    try:
        model = build()
    except Exception as exc:  # the user's code: its first line of error, as ours are
        raise OptionError(f"model: {ref}() failed: {type(exc).__name__}: {first_line(exc)}; a factory takes "
                          "no arguments and returns an nn.Module") from None
    import torch

    if not isinstance(model, torch.nn.Module):
        raise OptionError(f"model: {ref}() returned a {type(model).__name__}, not a torch.nn.Module")
    shape = _ints(input_shape, "--input-shape") if input_shape else getattr(model, "input_shape", None)
    if shape is None:
        raise OptionError("--input-shape: the model sets no input_shape; give one, e.g. --input-shape 1,3,224,224")
    if not input_shape and not (isinstance(shape, (tuple, list)) and shape
                                and all(type(v) is int and 1 <= v <= MAX_INT for v in shape)):
        raise OptionError(f"--input-shape: the model's input_shape {shape!r} is no shape of positive integers; "
                          "give one, e.g. --input-shape 1,3,224,224")
    return model, tuple(shape)


def _float(positive: bool = True, most: float = math.inf) -> Callable[[str], float]:
    """An argparse type: a finite number above 0 (``positive``) or of at least 0, at most ``most``."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not (value > 0 if positive else value >= 0) or math.isinf(value):
            least = "a positive number" if positive else "a finite number of at least 0"
            raise argparse.ArgumentTypeError(f"expected {least}, got {text!r}")
        if value > most:
            raise argparse.ArgumentTypeError(f"expected a number of at most {most:g}, got {text!r}")
        return value
    return parse


_positive_float = _float()


def _set_threads(torch: Any, args: argparse.Namespace) -> None:
    """Apply ``--threads`` and ``--interop-threads``, as profile and run both take them."""
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.interop_threads and args.interop_threads != torch.get_num_interop_threads():
        try:
            torch.set_num_interop_threads(args.interop_threads)
        except RuntimeError:  # PyTorch sets it once, before any inter-op work
            raise OptionError("--interop-threads: PyTorch can no longer change it in this process; set it "
                              "before anything runs, or leave it at its default") from None


def cmd_profile(args: argparse.Namespace) -> int:
    harness = _harness()
    import warnings

    import torch

    if args.output is None and not args.check:
        raise OptionError("-o: give the problem file to write, e.g. -o model.json, or --check to only report "
                          "how stable the measurements are")
    if args.output is not None:
        check_output(args.output, _model_files(args.model))
    devices = args.devices.split(",") if args.devices is not None else harness.available()
    if not all(devices):
        raise OptionError(f"--devices: expected device names separated by commas, got {args.devices!r}")
    if args.threads is None:  # emulated devices at PyTorch's default would each run a team on every core
        args.threads = harness.default_threads(devices)
    _set_threads(torch, args)
    sizes = _ints(args.batch_sizes, "--batch-sizes", MAX_BATCH)
    objective = Objective("throughput", args.batch) if args.batch > 1 else Objective()
    _check_batch(len(devices), sizes, objective)
    model, shape = _model(args.model, args.input_shape)
    example = _checked_input(torch, model, shape, 0, args.input_shape is not None)

    def show(message: Warning | str, category: type[Warning], *_: object, **__: object) -> None:
        print(f"mapsched: warning: {message}", file=sys.stderr, flush=True)

    with warnings.catch_warnings():
        # Re-measurements are announced as they start, one line each, as the run goes on.
        warnings.simplefilter("always", harness.NoisyMeasurementWarning)
        warnings.showwarning = show
        with _model_runs("profiling it"):
            result = harness.profile_report(model, example, devices, sizes,
                                            cluster=not args.no_cluster, warmup=args.warmup, repeats=args.repeats,
                                            objective=objective, name=args.model.partition(":")[2],
                                            max_spread=args.max_spread, retries=args.retries,
                                            overheads=not args.no_overheads, compile=args.compile)
    if args.check:
        print(result.report())
    if args.output is None:
        return 1 if result.unstable else 0
    reason = result.refusal("--max-spread", "--force")
    if reason and not args.force:
        raise HarnessError(reason)
    if reason:
        print(f"mapsched: warning: writing {len(result.unstable)} unstable measurements anyway (--force)",
              file=sys.stderr)
    problem = result.problem
    if not args.check:
        print(result.summary())
    print(f"overheads {problem.calibration.summary()}")
    if args.calibrate:
        # The profiled times miss how jobs side by side slow each other: 2-4x off on the
        # example models, against a median 5-20% once fitted (BENCHMARKS.md, fidelity).
        inputs = _inputs(torch, model, problem, shape, 0, args.input_shape is not None)
        with _model_runs("calibrating it"):
            problem, report = harness.calibrate(model, problem, inputs, cluster=not args.no_cluster,
                                                compile=args.compile)
        _report(report)
    problem.write(args.output)
    print(f"wrote {'the calibrated ' if args.calibrate else ''}{problem!r} to {args.output}")
    return 0


def cmd_trace(args: argparse.Namespace) -> int:
    harness = _harness()
    from mapsched.generators import platform

    check_output(args.output, _model_files(args.model))
    system = platform(args.system)  # an unknown preset fails before the model is built
    model, shape = _model(args.model, args.input_shape)
    if args.batch_size:
        shape = (args.batch_size, *shape[1:])
    t0 = time.perf_counter()
    with _model_input(shape, args.input_shape is not None, "traces"):
        problem = harness.trace_step(model, shape, train=args.train, platform=system,
                                     name=args.model.partition(":")[2])
    seconds = time.perf_counter() - t0
    problem.write(args.output)
    step = "training step" if args.train else "forward pass"
    print(f"wrote {problem!r} to {args.output} ({step} of a batch of shape {list(shape)}, {seconds:.1f} s)")
    return 0


def _run_setup(harness: Any, torch: Any, args: argparse.Namespace) -> tuple[Problem, Any, Any, Any]:
    """The problem, the model, its traced graph and its seeded random inputs of ``run`` and
    ``calibrate``, under the thread settings the problem was profiled with (refused before
    anything changes), the inputs of the size it was profiled at."""
    from mapsched.harness.execute import check_inputs

    problem = load_problem(args.problem)
    if args.threads is None and problem.calibration is not None:
        args.threads = problem.calibration.threads  # the profile's, unless given
    harness.check_threads(problem, "--threads N, --interop-threads N",
                          (args.threads or torch.get_num_threads(),
                           args.interop_threads or torch.get_num_interop_threads()))
    args.compile = harness.recorded_compile(problem, args.compile, "--compile")
    _set_threads(torch, args)
    model, shape = _model(args.model, args.input_shape)
    inputs = _inputs(torch, model, problem, shape, args.seed, args.input_shape is not None)
    graph = harness.trace(model, inputs[:1], not args.no_cluster)  # traced once, for the check and the runs
    check_inputs(graph, problem, "--input-shape")
    return problem, model, graph, inputs


def _inputs(torch: Any, model: Any, problem: Problem, shape: tuple[int, ...], seed: int, given: bool) -> Any:
    """The seeded random inputs of ``run`` and of calibration: one row per input of ``problem``."""
    return _checked_input(torch, model, shape, seed, given, problem.L)


def _report(report: Any) -> None:
    """A calibration's table on stdout, and its warning, if any, on stderr."""
    print(report.table())
    serial = report.serial()
    if serial:
        print(f"mapsched: warning: {serial}", file=sys.stderr)


def cmd_calibrate(args: argparse.Namespace) -> int:
    harness = _harness()
    import torch

    check_output(args.output, [args.problem, *_model_files(args.model)])
    problem, _, graph, inputs = _run_setup(harness, torch, args)
    rounds = {} if args.rounds is None else {"rounds": args.rounds}
    with _model_runs("calibrating it"):
        calibrated, report = harness.calibrate(graph, problem, inputs, count=args.schedules,
                                               cluster=not args.no_cluster, warmup=args.warmup, repeats=args.repeats,
                                               seed=args.seed, compile=args.compile, **rounds)
    _report(report)
    calibrated.write(args.output)
    print(f"wrote the calibrated {calibrated!r} to {args.output}")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    harness = _harness()
    import torch

    if args.output:
        check_output(args.output, [args.problem, args.schedule, *_model_files(args.model)])
    problem, model, graph, inputs = _run_setup(harness, torch, args)
    schedule = Schedule.read(args.schedule)
    with _model_runs("running the schedule"):
        run = harness.execute(graph, problem, schedule, inputs, cluster=not args.no_cluster, warmup=args.warmup,
                              repeats=args.repeats, compile=args.compile)
        with torch.inference_mode():
            reference = model(inputs)
    same = harness.outputs_match(run.outputs, reference, problem.device_names)
    rows = [["makespan (ms)", _fmt(run.predicted, 6), _fmt(run.makespan, 6),
             f"{run.makespan / run.predicted:.2f}" if run.predicted > 0 else "-"]]
    if problem.L > 1:
        predicted_thr = 1000.0 * problem.L / run.predicted if run.predicted > 0 else None
        rows.append(["throughput (inputs/s)", _fmt(predicted_thr, 6), _fmt(run.throughput, 6),
                     f"{run.throughput / predicted_thr:.2f}" if predicted_thr and run.throughput else "-"])
    print(_table(["", "predicted", "measured", "measured/predicted"], rows))
    spent = ", ".join(f"{d} {ms:.3f}" for d, ms in run.assembly.items())
    print(f"input assembly, on the devices' threads and in no task's time (ms): {spent}")
    print(f"outputs match the unscheduled model: {'yes' if same else 'NO'}")
    if args.output:
        run.measured.write(args.output)
        print(f"wrote the measured jobs to {args.output}")
    return 0 if same else 1


def build_parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="mapsched", description="Map and schedule DNN graphs on heterogeneous devices.")
    sub = ap.add_subparsers(dest="command", required=True, parser_class=_Parser)
    prob_help = "problem file (mapsched.problem/1), or builtin:NAME"

    # No abbreviations where method options follow: sa's --init was read as --initial.
    s = sub.add_parser("solve", help="solve a problem and write a schedule", allow_abbrev=False,
                       epilog="Method options follow as --name value; see 'mapsched methods'.")
    s.add_argument("problem", help=prob_help)
    _solve_arguments(s)
    s.add_argument("--initial", metavar="SCHEDULE", help="start from this schedule's placement (latency; "
                   "methods auto, cp-search, sa, ea, exact, split, giph)")
    s.add_argument("--relocation", metavar="FILE", help="with --initial: " + _RELOCATION_HELP)
    s.add_argument("--dask", metavar="ADDRESS", type=_dask_address, help=_DASK_HELP + " (-m split)")

    ad = sub.add_parser("adapt", help="re-place a schedule after devices are removed or added", allow_abbrev=False,
                        epilog="Method options follow as --name value; see 'mapsched methods'.")
    ad.add_argument("problem", help=prob_help)
    ad.add_argument("schedule", help="the schedule in use, placed before the change")
    ad.add_argument("--remove", action="append", default=[], metavar="DEVICE", help="a device taken away "
                    "(repeat for more)")
    ad.add_argument("--add", action="append", default=[], metavar="NEW=OLD",
                    help="a new device, a copy of device OLD (repeat for more)")
    ad.add_argument("--problem-output", metavar="FILE", help="also write the changed problem")
    ad.add_argument("--relocation", metavar="FILE", help="from the schedule in use: " + _RELOCATION_HELP)
    _solve_arguments(ad)

    v = sub.add_parser("validate", help="check a schedule against every rule")
    v.add_argument("problem", help=prob_help)
    v.add_argument("schedule")

    sm = sub.add_parser("simulate", help="re-time a schedule's mapping under the work-conserving runtime model",
                        description="Keep the schedule's mapping and re-time it as a work-conserving runtime runs "
                                    "it: each idle device starts its ready task that became ready first (ties: "
                                    "the task listed first), transfers take no resource. Latency problems only.")
    sm.add_argument("problem", help=prob_help)
    sm.add_argument("schedule")
    sm.add_argument("-o", "--output", required=True, help="schedule file to write")
    sm.add_argument("--noise", type=_noise, default=0.0,
                    help="lognormal sigma on task durations (mean 1; default 0: the latencies as given); with "
                         "--noise-model giph, the fraction s of GiPH's noise (its experiments: 0.2)")
    sm.add_argument("--noise-model", choices=("lognormal", "giph"), default="lognormal",
                    help="giph: durations U(w(1-s), w(1+s)), transfers normal(c, s c) clipped to c(1 +- s)")
    sm.add_argument("--seed", type=_count(0), default=0, help="seed of the noise")

    cv = sub.add_parser("convert", help="write the problem of another tool's graph file (DOPPLER's)",
                        description="Read a graph file of DOPPLER's public code (compute_graph/*.txt: node count, "
                                    "input ids, edge sources, edge targets, then 'comp,comm' per op) and write it "
                                    "as a problem on N identical GPUs, times and transfers as DOPPLER's simulator "
                                    "takes them (comp / 1e10, comm / 1e10).")
    cv.add_argument("file")
    cv.add_argument("--from", dest="source", choices=("doppler",), required=True, help="the file's format")
    cv.add_argument("--devices", type=_count(1, MAX_DEVICES), required=True, help="identical GPUs to run it on")
    cv.add_argument("-o", "--output", required=True, help="problem file to write")

    b = sub.add_parser("bound", help="print a proved lower bound on the makespan")
    b.add_argument("problem", help=prob_help)
    b.add_argument("--json", action="store_true")
    b.add_argument("--fast", action="store_true",
                   help="only the quick bounds: critical path, total work, load LP, and the interval load LP "
                        "(latency) or the batched relaxation's LP (throughput)")
    b.add_argument("--time-limit", type=_seconds, default=60.0,
                   help="seconds for the relaxation, module-chain and window bounds")
    b.add_argument("--window-time", type=_seconds, default=1.0,
                   help="seconds per window solve (5 raises the bound a little on large stacks, given time)")
    b.add_argument("--dask", metavar="ADDRESS", type=_dask_address, help=_DASK_HELP + " (the chain and window solves)")

    sub.add_parser("methods", help="list the methods and their options")

    p = sub.add_parser("plot", help="draw a Gantt chart")
    p.add_argument("schedule")
    p.add_argument("--problem", required=True, help=prob_help)
    p.add_argument("-o", "--output", default="gantt.png")

    g = sub.add_parser("generate", help="write a seeded synthetic problem (mapsched.problem/1)")
    g.add_argument("kind", choices=("stack", "random-dag", "vgg", "resnet", "inception", "transformer", "gpt3",
                                    "transformer-train", *DOPPLER_KINDS, "giph"))
    g.add_argument("-o", "--output", required=True)
    g.add_argument("--seed", type=_count(0), default=0)
    g.add_argument("--batch", type=_count(1), default=1, help="inputs L; above 1 the objective is throughput")
    g.add_argument("--modules", type=_count(1, MAX_SIZE), default=1, help="stack: modules")
    g.add_argument("--nodes", type=_count(1, MAX_SIZE), default=10, help="stack: nodes per module (N)")
    g.add_argument("--channels", type=_count(1, MAX_SIZE), default=1, help="stack: edges between consecutive modules")
    g.add_argument("--variant", choices=("sdep", "wdep"), default="sdep", help="stack: channel wiring")
    g.add_argument("--graph", choices=("er", "ws", "ba"), default="er", help="stack: random graph model")
    g.add_argument("--system", default=None,
                   help="system preset (default cpu-t4-a100; gpt3: multi-node unless given; chainmm, ffnn, "
                        "llama-block, llama-layer: identical GPUs unless given; not for random-dag, giph)")
    g.add_argument("--layers", type=_count(1, MAX_SIZE), default=12, help="gpt3, transformer-train: decoder layers")
    g.add_argument("--tasks", type=_count(1, MAX_SIZE), default=None,
                   help="random-dag: tasks (default 1000); giph: GiPH's size knob v (default 10), about v + "
                        "sqrt(v) / (2 alpha) + 2 tasks (18 for v = 10 at alpha 0.3, 64 for v = 50)")
    g.add_argument("--devices", type=_count(1, MAX_DEVICES), default=None,
                   help="random-dag: devices (default 4); chainmm, ffnn, llama-block, llama-layer: the GPUs they are "
                        "sharded over (identical GPUs unless --system; default 4); giph: devices (default 20)")
    g.add_argument("--alpha", type=_positive_float, default=0.3, help="giph: graph shape (0.1 deep .. 0.3 wider)")
    g.add_argument("--conn-prob", type=_probability, default=0.1, help="giph: edge probability to earlier levels")
    g.add_argument("--type-prob", type=_probability, default=0.2,
                   help="giph: probability that a device supports each of the 5 hardware types")
    g.add_argument("--network-seed", type=_count(0), default=None, help="giph: the network's seed (default --seed)")
    g.add_argument("--experiment", choices=("single", "multi", "multi-diff", "adapt"),
                   help="giph: write case --case of GiPH's experiment set (graph x network, graph-major); the "
                        "size and shape options are then the set's")
    g.add_argument("--split", choices=("train", "test"), default="test", help="giph --experiment: which split")
    g.add_argument("--case", type=_count(0), default=0, help="giph --experiment: the case's index")

    bn = sub.add_parser("bench", help="run a benchmark suite (resumable) and print its tables")
    bn.add_argument("suite")
    bn.add_argument("--suites", help="a Python file defining SUITES, run as code (default: the built-in suites)")
    bn.add_argument("-o", "--output", help="JSON Lines results (default SUITE.jsonl); rows there are kept. The "
                    "quality plot goes beside it, as NAME-quality.png")
    bn.add_argument("--workers", type=_count(0, MAX_THREADS), default=1, help="runs at once (0: one per core)")
    bn.add_argument("--threads", type=_count(0, MAX_THREADS), default=0,
                    help="solver threads per run (0: the cores shared out)")
    bn.add_argument("--time-limit", type=_seconds, default=None, help="override the suite's per-method limit")
    bn.add_argument("--dask", metavar="ADDRESS", type=_dask_address, help=_DASK_HELP + " (one run per task)")

    model_help = "MODULE:FACTORY building an nn.Module, e.g. mapsched.harness.models:resnet"
    shape_help = "input shape with a batch of 1 first, e.g. 1,3,224,224 (default: the model's input_shape)"
    pr = sub.add_parser(
        "profile", help="trace a PyTorch model and time it on the devices (needs torch)",
        description="Trace a model, time every task on every device and batch size, and write the problem. Each "
                    "measurement's spread (1.4826 x MAD / median of its timed passes, a robust coefficient of "
                    "variation) is checked: over --max-spread (and over 0.05 ms of scatter) the device and batch "
                    "size are timed again, up to --retries extra rounds, each task keeping its steadiest round, with "
                    "a warning on stderr; measurements still over it refuse the file (exit 2) unless --force. "
                    "--check prints the spreads and the worst measurements; without -o it writes nothing and exits "
                    "1 when some measurement is unstable, 0 otherwise.")
    pr.add_argument("model", help=model_help)
    pr.add_argument("--input-shape", help=shape_help)
    pr.add_argument("--devices", help="comma-separated: cpu, cuda:I, or emulated cpu:K (default: all present)")
    pr.add_argument("--batch-sizes", default="1", help="comma-separated batch sizes to time (default 1)")
    pr.add_argument("--batch", type=_count(1, MAX_BATCH), default=1,
                    help="inputs L; above 1 the objective is throughput")
    pr.add_argument("--no-cluster", action="store_true", help="one task per op (no conv-BN-ReLU fusion)")
    pr.add_argument("--warmup", type=_count(0, MAX_RUNS), default=2)
    pr.add_argument("--repeats", type=_count(1, MAX_RUNS), default=5, help="timed runs per measurement (median kept)")
    pr.add_argument("--max-spread", type=_positive_float, default=0.25,
                    help="largest spread (robust coefficient of variation) a measurement may have (default 0.25)")
    pr.add_argument("--retries", type=_count(0, MAX_RUNS), default=2,
                    help="extra rounds of --repeats runs to re-measure noisy measurements (default 2)")
    pr.add_argument("--force", action="store_true", help="write the file even with measurements over --max-spread")
    pr.add_argument("--check", action="store_true",
                    help="report how stable the measurements were; with no -o, write nothing (exit 1 if unstable)")
    pr.add_argument("--threads", type=_count(1, MAX_THREADS), default=None,
                    help="torch intra-op threads (default: PyTorch's, or with several emulated devices "
                         "cpu:K the cores shared among them); recorded, and 'run' needs the same")
    pr.add_argument("--interop-threads", type=_count(1, MAX_THREADS), default=None,
                    help="torch inter-op threads (default: PyTorch's); recorded, and 'run' needs the same")
    pr.add_argument("--no-overheads", action="store_true",
                    help="do not measure the executor's per-job and cross-device overheads into the times")
    pr.add_argument("--compile", choices=COMPILE, default="none",
                    help="how each task runs: none (fx, op by op), jit (a frozen TorchScript trace per batch "
                         "size) or cuda-graph (that trace as a CUDA graph on a GPU); recorded, and 'run' needs "
                         "the same")
    pr.add_argument("--calibrate", action=argparse.BooleanOptionalAction, default=True,
                    help="then run a few schedules for real and fit the overheads to them, as 'mapsched "
                         "calibrate' with its defaults does (default); --no-calibrate writes the profiled times")
    pr.add_argument("-o", "--output", help="the problem file to write (required unless --check)")

    tr = sub.add_parser("trace", help="trace a PyTorch model's training step op by op in fake mode (needs torch)",
                        description="Trace one training step (forward, cross-entropy loss, backward, SGD update) "
                                    "with make_fx on fake tensors, so no weights, data or memory are needed, and cost "
                                    "every aten op with the roofline of each device of the system preset.")
    tr.add_argument("model", help="MODULE:FACTORY building an nn.Module, e.g. mapsched.harness.models:gpt_train12")
    tr.add_argument("--train", action=argparse.BooleanOptionalAction, default=True,
                    help="the whole training step (default); --no-train: the forward pass alone")
    tr.add_argument("--input-shape", help="the whole batch's input shape, e.g. 8,128 (default: the model's)")
    tr.add_argument("--batch-size", type=_count(1, MAX_INT), default=None,
                    help="replace the input shape's first dimension")
    tr.add_argument("--system", default="cpu-t4-a100", help="system preset")
    tr.add_argument("-o", "--output", required=True)

    rn = sub.add_parser("run", help="execute a schedule of a profiled model for real (needs torch)")
    cb = sub.add_parser(
        "calibrate", help="fit a profiled problem's overheads to real runs of a few schedules (needs torch)",
        description="Run a handful of schedules (HEFT, each device alone, MET, CPOP, random mappings; for "
                    "throughput bheft, bmet and bgreedy in place of HEFT, MET and CPOP) for real, fit one "
                    "per-job overhead, one cross-device sync and a kernel-time factor by least squares on "
                    "their makespans, print the fit (predicted before and after, measured) and write the "
                    "problem with the fitted terms in its times.")
    for parser in (rn, cb):
        parser.add_argument("model", help=model_help)
        parser.add_argument("problem", help="the problem that 'mapsched profile' wrote")
        if parser is rn:
            parser.add_argument("schedule")
        parser.add_argument("--input-shape", help=shape_help)
        parser.add_argument("--no-cluster", action="store_true", help="as given to 'mapsched profile'")
        parser.add_argument("--seed", type=_count(0, MAX_TORCH_SEED), default=0,
                            help="seed of the random inputs (and schedules)")
        parser.add_argument("--threads", type=_count(1, MAX_THREADS), default=None,
                            help="torch intra-op threads (default: those the problem was profiled with; "
                                 "others are refused)")
        parser.add_argument("--interop-threads", type=_count(1, MAX_THREADS), default=None,
                            help="torch inter-op threads; must be those the problem was profiled with")
        parser.add_argument("--warmup", type=_count(0, MAX_RUNS), default=1)
        parser.add_argument("--repeats", type=_count(1, MAX_RUNS), default=None,
                            help="timed runs, the median used (default: at least 3, and up to 50 until they "
                                 "add up to 100 ms)")
        parser.add_argument("--compile", choices=COMPILE, default=None,
                            help="how each task runs (default: as profiled); must be the profile's")
    rn.add_argument("-o", "--output",
                    help="write the measured jobs as a schedule file: a timeline, not a valid schedule (its jobs "
                         "last what they measured, and its makespan is the run's wall time, to the last output "
                         "gathered, past the last job's end)")
    cb.add_argument("--schedules", type=_count(1, MAX_RUNS), default=6, help="schedules to run (default 6)")
    cb.add_argument("--rounds", type=_count(1, MAX_RUNS), default=None,
                    help="executions of each schedule, in rounds over all of them, the median fitted (default 3)")
    cb.add_argument("-o", "--output", required=True, help="the calibrated problem file to write")

    tn = sub.add_parser(
        "train", help="train a learned method's policy on a problem (needs torch)",
        description="Train DOPPLER's SEL/PLC policy on a problem: Stage I (il) imitates critical-path on the "
                    "learner's own rollouts, Stage II (sim) is REINFORCE against the work-conserving model's "
                    "makespan; or Placeto's policy (placeto: stage sim only). The file keeps the best policy by "
                    "evaluation (for 'solve -m METHOD --policy FILE') and the last state (for --resume); it is "
                    "written every --checkpoint-every episodes and at the end. giph: REINFORCE of GiPH's gpNet "
                    "policy over one of GiPH's experiment sets (--suite), keeping the best policy by mean SLR on "
                    "held-out cases.")
    tn.add_argument("method", choices=("doppler", "placeto", "giph"))
    tn.add_argument("problem", nargs="?", help=prob_help + " (doppler and placeto)")
    tn.add_argument("--suite", help="giph: GiPH's experiment set single, multi or multi-diff (default multi-diff)")
    tn.add_argument("--variant", default="giph", choices=("giph", "ne", "task-eft"), help="giph: GiPH, GiPH-NE or "
                    "GiPH-task-EFT")
    tn.add_argument("--mp-rounds", type=_count(0, MAX_ROUNDS), default=0,
                    help="giph: k rounds of message passing (GiPH-k); 0: over the graph's depth (GiPH)")
    tn.add_argument("--giph-features", action="store_true",
                    help="giph: the paper's 4 node features only (default adds the finish-time potential, the slack "
                         "and their rank)")
    tn.add_argument("--lr", type=_float(most=10.0), default=0.01,
                    help="giph: Adam's learning rate (default 0.01; at most 10)")
    tn.add_argument("--entropy", type=_float(positive=False, most=100.0), default=0.0,
                    help="giph: entropy bonus weight (default 0; at most 100)")
    tn.add_argument("--gamma", type=_probability, default=0.8, help="giph: the discount (default 0.8; GiPH's 0.97)")
    tn.add_argument("--eval-every", type=_count(1), default=10, help="giph: episodes between evaluations")
    tn.add_argument("--eval-cases", type=_count(1, 1000), default=20, help="giph: held-out evaluation cases")
    tn.add_argument("-o", "--output", required=True, help="policy file to write (.pt)")
    tn.add_argument("--stages", help="doppler: il, sim or il,sim (default; real: not implemented yet); placeto: sim")
    tn.add_argument("--episodes", type=_count(1), default=100,
                    help="episodes per stage (default 100); giph: episodes in all")
    tn.add_argument("--seed", type=_count(0, MAX_TORCH_SEED), default=0)
    tn.add_argument("--time-limit", type=_seconds, default=None, help="seconds, start-up included")
    tn.add_argument("--hidden", type=_count(1, MAX_HIDDEN), help="embedding width (default: doppler 128, placeto 32)")
    tn.add_argument("--rounds", type=_count(1, MAX_ROUNDS),
                    help="message-passing rounds (default: doppler 6, placeto 3)")
    tn.add_argument("--checkpoint-every", type=_count(0), default=25,
                    help="episodes between checkpoints (0: only at the end; default 25)")
    tn.add_argument("--resume", action="store_true",
                    help="continue the training saved in -o (same problem; --episodes counts from its start)")

    d = sub.add_parser("demo", help="run every method on a built-in instance")
    d.add_argument("--instance", default=instances.DEFAULT, choices=instances.names())
    d.add_argument("--time-limit", type=_seconds, default=5.0, help="seconds per method")
    d.add_argument("--seed", type=_count(0), default=0)
    d.add_argument("-o", "--output", default="mapsched-demo-gantt.png")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    """Run a command: from the shell (``argv`` None) its time limit counts from the process's
    start; called from Python with ``argv``, from this call."""
    started = STARTED if argv is None else time.perf_counter()
    parser = build_parser()
    command = None
    try:
        args, extra = parser.parse_known_args(argv)
        command = args.command
        args.started = started
        if args.command in ("solve", "adapt"):
            return (cmd_solve if args.command == "solve" else cmd_adapt)(args, extra)
        if extra:
            raise OptionError(f"unrecognized arguments: {' '.join(extra)}")
        return {
            "validate": cmd_validate, "simulate": cmd_simulate, "convert": cmd_convert, "bound": cmd_bound,
            "methods": cmd_methods,
            "plot": cmd_plot, "demo": cmd_demo, "bench": cmd_bench, "generate": cmd_generate,
            "profile": cmd_profile, "trace": cmd_trace, "run": cmd_run, "calibrate": cmd_calibrate,
            "train": cmd_train,
        }[args.command](args)
    except MapschedError as exc:
        print(f"mapsched: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("mapsched: interrupted", file=sys.stderr)
        return 130
    except MemoryError:  # files are written whole or not at all, so nothing is left half-written
        print(f"mapsched: error: out of memory in '{command}'; give a smaller problem (tasks, devices, batch) "
              "or a lighter method, or run it on a machine with more memory", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader went away (``mapsched methods | head``): not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so the exit flush cannot fail again
        return 0


def _stdout_ours() -> None:
    """Point file descriptor 1 at stderr and ``sys.stdout`` at a copy of the real standard
    output, so that it carries only what mapsched prints: native code writes to descriptor 1
    directly (HiGHS 1.12's MIP prints a debug line in some solves), and a schedule printed
    into a file must stay JSON. Nothing changes where either stream is missing."""
    try:
        sys.stdout.flush()
        real = os.dup(1)
        os.dup2(2, 1)
    except (OSError, ValueError, AttributeError):
        return
    sys.stdout = open(real, "w", encoding=sys.stdout.encoding, errors=sys.stdout.errors)  # noqa: SIM115
    files.stdout_fd = real


def run() -> NoReturn:
    """The ``mapsched`` program: :func:`main`, then an exit that skips the interpreter's
    teardown of the solver libraries (0.3 s after a CP-SAT or HiGHS solve, past the time
    limit), which holds nothing of ours: every file is written and closed by then."""
    _stdout_ours()
    if sys.argv[1:2] not in (["solve"], ["adapt"]):  # those stop their solve on it (mapsched.interrupt)
        # SIGTERM (a job scheduler's stop) ends the command as Ctrl-C does: cleaned up, what
        # it wrote kept (a sweep's rows), its worker processes stopped.
        signal.signal(signal.SIGTERM, signal.default_int_handler)
    code = main()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BrokenPipeError, ValueError):  # a reader gone, or a stream closed
            stream.flush()
    os._exit(code)
