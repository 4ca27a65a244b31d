"""Benchmark sweeps: every method on every instance with a time limit, resumable,
run in parallel, reported as tables and a quality-over-time plot.

A :class:`Suite` names its instances as :class:`Case` recipes (a generator and its
arguments, so that worker processes can rebuild them) and its methods. Results are
JSON Lines, one row per (instance, method); a rerun skips the rows already there,
so an interrupted sweep resumes where it stopped.

Reports:

* :func:`results_table`: instances as rows, methods as columns (the seed paper's
  Tables I and IV), the best value in bold and the second best in italics, the best
  proved bound in its own column and every cell's gap to it; for latency, a second
  table scores every result's mapping under the work-conserving runtime model
  (:mod:`mapsched.scheduling.simulate`, the row's ``simulated``), which the bound bounds too;
* :func:`runtime_table`: two methods' times side by side with the speed-up (Table III);
* :func:`plot_quality`: best makespan against seconds, from each run's progress
  history (Fig. 7).
"""

from __future__ import annotations

import contextlib
import importlib.util
import inspect
import json
import math
import os
import pickle
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from mapsched import checks
from mapsched.engine.dask import as_executor, completed
from mapsched.errors import InfeasibleError, MapschedError, OptionError, first_line, shown
from mapsched.model.files import check_output, is_stream, names_stdout
from mapsched.model.problem import Problem
from mapsched.usercode import user_code

__all__ = ["BOUND", "Case", "Suite", "load_suites", "plot_quality", "read_rows", "results_table", "run_suite",
           "runtime_table"]


@dataclass(frozen=True)
class Case:
    """One instance: ``make(**kwargs)`` builds it. ``make`` travels to worker processes by
    name: a function at the top level of an importable module, or of a suites file read
    by :func:`load_suites` (which each worker then reads from its path)."""

    name: str
    make: Callable[..., Problem]
    kwargs: dict[str, Any] = field(default_factory=dict)

    def check(self) -> None:
        """Refuse, in one :class:`OptionError` naming the case, a keyword that ``make`` does not
        take: a misspelt option would otherwise fail in every worker, or (where ``make`` takes
        ``**kwargs`` and ignored it) build the default instance. A ``make`` that takes
        ``**kwargs`` checks them itself, as mapsched's generators do."""
        name = shown(getattr(self.make, "__name__", self.make), quote=False)
        try:
            params = inspect.signature(self.make).parameters.values()
        except (TypeError, ValueError):  # no signature to read (some builtins): make refuses as it runs
            return
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
            return
        known = [p.name for p in params if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                      inspect.Parameter.KEYWORD_ONLY)]
        for key in self.kwargs:
            if key not in known:
                raise OptionError(f"case {shown(self.name)}: {name}() takes no keyword {shown(key)}; "
                                  f"it takes {', '.join(known) or 'none'}")

    def build(self) -> Problem:
        """The instance; a :class:`MapschedError` naming the case if ``make`` fails or is
        given a keyword it does not take (:meth:`check`)."""
        self.check()
        name = shown(getattr(self.make, "__name__", self.make), quote=False)
        with user_code(f"case {shown(self.name)}: {name}(**kwargs)"):  # exits and interrupts of its own too
            try:
                p = self.make(**self.kwargs)
            except OptionError as exc:  # a keyword that make's **kwargs refused (mapsched's generators)
                raise OptionError(f"case {shown(self.name)}: {exc}") from None
        if not isinstance(p, Problem):
            raise OptionError(f"case {shown(self.name)}: its make returned a {type(p).__name__}, "
                              "not a mapsched.Problem")
        return p

    def __reduce__(self) -> tuple[Any, ...]:
        source = getattr(self.make, "__globals__", {}).get(_SOURCE)
        if source is None:
            return Case, (self.name, self.make, self.kwargs)
        return _case_from_file, (source, self.make.__qualname__, self.name, self.kwargs)


_SOURCE = "__mapsched_suites__"
"""The global of a suites file's module that holds the file's path."""
_LOADED: dict[str, Any] = {}
"""The suites files read in this process, by absolute path: each runs once a process."""


def _suites_module(path: str) -> Any:
    """The module of the suites file at ``path``, run once a process."""
    if path not in _LOADED:
        spec = importlib.util.spec_from_file_location("mapsched_suites", path)
        if spec is None or spec.loader is None:
            raise OptionError(f"--suites: {shown(path)} is not a Python file; give a .py file defining SUITES")
        module = importlib.util.module_from_spec(spec)
        setattr(module, _SOURCE, path)
        with user_code(f"--suites: running {shown(path)}"):  # its sys.exit too: one line, not our exit
            spec.loader.exec_module(module)
        _LOADED[path] = module
    return _LOADED[path]


def _case_from_file(path: str, qualname: str, name: str, kwargs: dict[str, Any]) -> Case:
    """A case whose ``make`` a suites file defines, rebuilt in a worker from the file."""
    make: Any = _suites_module(path)
    for part in qualname.split("."):
        make = getattr(make, part)
    return Case(name, make, kwargs)


def load_suites(path: str) -> dict[str, Suite]:
    """The ``SUITES`` dictionary of a Python file (``mapsched bench --suites FILE``). Its
    functions may build cases: worker processes read the file again, from its path.

    Raises :class:`OptionError` (naming ``--suites``) for a missing file, one that fails to
    run, or one that defines no ``SUITES`` dictionary.
    """
    if not os.path.isfile(path):
        raise OptionError(f"--suites: no file {shown(path)}; give the path of a Python file defining SUITES")
    suites = getattr(_suites_module(os.path.abspath(path)), "SUITES", None)
    if not isinstance(suites, dict):
        raise OptionError(f"--suites: {shown(path)} defines no SUITES dictionary")
    return suites


BOUND = "bound"
"""The pseudo-method of a suite that computes the full lower bound (the chain recursion)."""


@dataclass(frozen=True)
class Suite:
    """Instances, methods, and the time limit each method gets per instance.

    ``methods`` may include :data:`BOUND`, which runs
    ``mapsched.split.full_bound(problem, time_limit)`` (the seed paper's LBound).
    """

    name: str
    cases: tuple[Case, ...]
    methods: tuple[str, ...]
    time_limit: float
    options: dict[str, dict[str, Any]] = field(default_factory=dict)
    description: str = ""

    def check(self) -> None:
        """Refuse, in one :class:`OptionError` naming the field, what would fail in the
        workers or mix rows up: no cases or methods, cases of one name, a time limit that
        is not a positive number, options that are no mapping per method."""
        if not isinstance(self.cases, (tuple, list)) or not self.cases:
            raise OptionError(f"suite {shown(self.name)}: cases: expected a non-empty tuple of "
                              "mapsched.bench.sweep.Case")
        names: set[str] = set()
        for k, c in enumerate(self.cases):
            if not (isinstance(c, Case) and isinstance(c.name, str) and callable(c.make)
                    and isinstance(c.kwargs, dict)):
                raise OptionError(f"suite {shown(self.name)}: cases[{k}]: expected a Case(name, make, kwargs) with a "
                                  "function make and a dict kwargs")
            c.check()
            if c.name in names:
                raise OptionError(f"suite {shown(self.name)}: cases[{k}]: a second case named {shown(c.name)}, "
                                  "whose rows would be taken for the first's; give each case its own name")
            names.add(c.name)
        if not (isinstance(self.methods, (tuple, list)) and self.methods
                and all(isinstance(m, str) for m in self.methods)):
            raise OptionError(f"suite {shown(self.name)}: methods: expected a non-empty tuple of method names")
        checks.seconds(self.time_limit, f"suite {shown(self.name)}: time_limit", none=False)
        if not (isinstance(self.options, dict) and all(isinstance(v, dict) for v in self.options.values())):
            raise OptionError(f"suite {shown(self.name)}: options: expected a dict of method name to a dict of options")


def _run_one(case: Case, method: str, time_limit: float, options: dict[str, Any], threads: int = 1) -> dict[str, Any]:
    """One (instance, method) run, in a worker; every schedule is checked by the validator.
    ``threads`` 0: the worker's share (:func:`mapsched.engine.dask.task_threads`)."""
    import time

    from mapsched.engine import registry
    from mapsched.engine.dask import task_threads
    from mapsched.model.validate import validate
    from mapsched.solve import solve
    from mapsched.split import full_bound

    threads = threads or task_threads()
    p = case.build()
    row: dict[str, Any] = {"instance": case.name, "method": method, "tasks": p.n, "inputs": p.L,
                           "time_limit": time_limit}
    if method == BOUND:
        t0 = time.perf_counter()
        b = full_bound(p, time_limit)
        return row | {"lower_bound": b.value, "rule": b.rule, "seconds": time.perf_counter() - t0}
    needs = registry.get(method)
    if "torch" in needs.requires and needs.available():  # loaded once a process, not in every run's limit
        from mapsched.learned import load

        load()
    try:
        r = solve(p, method, time_limit=time_limit, seed=0, threads=threads, **options)
    except InfeasibleError as exc:
        return row | {"error": str(exc)}
    bad = validate(p, r)
    if bad:  # a bug, not a result: keep it visible in the table
        return row | {"error": f"invalid schedule: {bad[0]}"}
    row |= {"makespan": r.makespan, "throughput": r.throughput, "lower_bound": r.lower_bound,
            "status": r.status, "seconds": r.solve_seconds, "history": r.history}
    if p.objective.kind == "latency":  # the same mapping under the work-conserving runtime model
        from mapsched.bounds import critical_path_bound
        from mapsched.scheduling.simulate import simulate

        cp = critical_path_bound(p)
        row["simulated"] = simulate(p, r.mapping()).makespan
        if cp > 0:  # a graph of 0 ms tasks has no SLR
            row |= {"critical_path": cp, "slr": r.makespan / cp, "slr_simulated": row["simulated"] / cp}
    return row


_ROW_START = b'{"instance": '  # how every row begins (json.dumps of _run_one's dict)
# Fields the tables compute with: each a finite number where present.
_NUMBERS = ("tasks", "inputs", "makespan", "throughput", "lower_bound", "seconds", "simulated", "critical_path",
            "slr", "slr_simulated", "time_limit")
_REQUIRED = ("tasks", "inputs")  # in every row, an error's too


def read_rows(path: str) -> list[dict[str, Any]]:
    """The rows of a JSON Lines results file (none if it does not exist).

    A last line without its newline is a row cut short by a stopped sweep and is not
    read (:func:`run_suite` cuts it off and redoes its run); any other line that is not
    a row raises :class:`~mapsched.errors.MapschedError`, naming the file and the line.
    """
    name = shown(path, quote=False)  # as messages quote it
    if not os.path.exists(path):
        return []
    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().split("\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise MapschedError(f"{name}: cannot read it as results ({exc}); pass another -o/--output") from None
    rows = []
    for k, line in enumerate(lines[:-1], 1):  # the last piece, after the last newline, is cut short or empty
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            row, detail = None, exc.msg
        else:
            detail = "expected an object with 'instance' and 'method'"
        if not (isinstance(row, dict) and isinstance(row.get("instance"), str) and isinstance(row.get("method"), str)):
            raise MapschedError(f"{name}, line {k}: not a results row ({detail}); remove the line, or pass another "
                                "-o/--output")
        for key in _NUMBERS:
            v = row.get(key)
            if (v is None and key in _REQUIRED) or (
                    v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v))):
                what = "missing" if v is None else f"{shown(v)}, not a finite number"
                raise MapschedError(f"{name}, line {k}: '{key}' is {what}; remove the line, or pass another "
                                    "-o/--output")
        history = row.get("history")
        if history is not None and not (isinstance(history, list) and history and all(
                isinstance(h, list) and len(h) == 2 and all(
                    isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in h)
                for h in history)):
            raise MapschedError(f"{name}, line {k}: 'history' is not a list of [seconds, makespan] pairs; remove the "
                                "line, or pass another -o/--output")
        rows.append(row)
    return rows


def _cut_short_row(path: str) -> None:
    """Remove what follows the last newline of ``path``: the part of a row that a stopped
    sweep did not finish writing, which the next row would otherwise be appended to.
    Anything else there (another file given as the results) is refused, not cut."""
    name = shown(path, quote=False)  # as messages quote it
    if not os.path.exists(path) or not os.path.getsize(path):
        return
    with open(path, "rb+") as fh:
        fh.seek(-1, os.SEEK_END)
        if fh.read(1) != b"\n":  # only then is the whole file read, to find its last newline
            fh.seek(0)
            data = fh.read()
            cut = data.rfind(b"\n") + 1
            piece = data[cut:cut + len(_ROW_START)]
            if not _ROW_START.startswith(piece):
                raise MapschedError(f"{name}: its last line is neither a results row nor one cut short; pass "
                                    "another -o/--output")
            fh.truncate(cut)


def run_suite(suite: Suite, out: str, executor: Executor | None = None, workers: int = 1, threads: int = 0,
              progress: Callable[[int, int], None] | None = None) -> list[dict[str, Any]]:
    """Run every (instance, method) pair not yet in ``out`` and append its row there; return
    the suite's rows, those already there included.

    Parameters
    ----------
    suite : Suite
    out : str
        JSON Lines file; existing rows are kept and this suite's pairs among them skipped
        (resume; another suite's rows in the file are left as they are), and a row cut
        short by a stopped sweep is removed and its run redone. Standard output, a pipe or
        a device gets every row and is never read: nothing resumes there.
    executor : concurrent.futures.Executor or distributed.Client, optional
        Where runs go; by default a process pool of ``workers`` (0: one per core). A
        client, or a :class:`mapsched.engine.dask.DaskExecutor`, spreads them over a cluster; if its
        scheduler is lost, the rows written so far stay and a rerun resumes.
    workers, threads : int
        Runs at once, and solver threads per run (0: the cores shared among the
        runs; on a cluster, the worker's share of its host). By default one run at a
        time with every core, so that exact methods get the solver portfolio they would
        get alone.
    progress : callable, optional
        Called as ``progress(done, total)`` after each run.
    """
    suite.check()
    check_output(out, flag="out")
    own = executor is None  # then a process pool of this call's, made below
    checks.count(workers, "workers", least=0)
    checks.count(threads, "threads", least=0)
    executor = as_executor(executor)
    stream = is_stream(out)  # standard output, a pipe or a device: written to, never read back
    rows = [] if stream else [r for r in read_rows(out) if r.get("suite", suite.name) == suite.name]
    if not stream:
        _cut_short_row(out)
    from mapsched.engine import registry

    for m in suite.methods:  # a bad option fails before any run, not in every run of the method
        if m != BOUND:
            registry.get(m).parse_options(suite.options.get(m, {}))
    pairs = {(c.name, m) for c in suite.cases for m in suite.methods}
    for r in rows:
        if (r["instance"], r["method"]) in pairs and r.get("time_limit", suite.time_limit) != suite.time_limit:
            raise OptionError(f"{out}: its row of {shown(r['instance'])} and {shown(r['method'])} ran with a time "
                              f"limit of {r['time_limit']:g} s, not {suite.time_limit:g} s; resume with the same "
                              "time limit, or pass another -o/--output")
    done = {(r["instance"], r["method"]) for r in rows}
    todo = [(c, m) for c in suite.cases for m in suite.methods if (c.name, m) not in done]
    for c in {c.name: c for c, _ in todo}.values() if own or isinstance(executor, ProcessPoolExecutor) else ():
        try:  # an unpicklable case hangs a process pool (its feeder thread dies) rather than failing
            pickle.dumps(c)
        except Exception as exc:
            raise OptionError(f"case {shown(c.name)}: cannot be sent to worker processes ({type(exc).__name__}: "
                              f"{first_line(exc)}); build it with a function defined at the top level of a "
                              "module or of the suites file") from None
    total, finished = len(todo), 0
    if progress:
        progress(0, total)
    if own:
        from mapsched.split.milp_split import _mp_context

        executor = ProcessPoolExecutor(max_workers=workers or os.cpu_count() or 1, mp_context=_mp_context())
    if not hasattr(executor, "share"):  # off a cluster: this machine's cores shared out
        threads = threads or max(1, (os.cpu_count() or 1) // (workers or os.cpu_count() or 1))
    try:
        futures = [executor.submit(_run_one, c, m, suite.time_limit, suite.options.get(m, {}), threads)
                   for c, m in todo]
        with _appending(out) as write:
            for f in completed(futures, executor=executor):
                try:
                    row = f.result() | {"suite": suite.name}
                except Exception:
                    if not getattr(executor, "lost", False):
                        raise
                    continue
                write(json.dumps(row) + "\n")
                rows.append(row)
                finished += 1
                if progress:
                    progress(finished, total)
        if finished < total and getattr(executor, "lost", False):
            raise MapschedError(f"--dask: the scheduler was lost mid-sweep; the {finished} run(s) done are in {out}; "
                                "rerun the same command to resume")
    except BaseException:  # Ctrl-C or SIGTERM: the runs under way stop with the sweep
        if own:
            _stop_workers(executor)
        raise
    finally:
        if own:
            executor.shutdown(wait=True, cancel_futures=True)
    return rows


@contextlib.contextmanager
def _appending(path: str) -> Iterator[Callable[[str], None]]:
    """A function that appends a row to ``path`` and flushes it (a row on disk is a row an
    interrupted sweep keeps); a file that cannot be written (a full disk, ``/dev/full``)
    raises :class:`~mapsched.errors.MapschedError` in one line. Standard output is written
    through ``sys.stdout``, whose own offset a second handle's rows would be overwritten at."""
    name = shown(path, quote=False)  # as messages quote it
    def write(line: str) -> None:
        try:
            fh.write(line)
            fh.flush()
        except OSError as exc:
            raise MapschedError(f"{name}: cannot write: {exc.strerror or exc}") from None

    if names_stdout(path):
        fh = sys.stdout
    else:
        try:
            fh = open(path, "a", encoding="utf-8")  # noqa: SIM115
        except OSError as exc:
            raise MapschedError(f"{name}: cannot write: {exc.strerror or exc}") from None
    try:
        yield write
    finally:
        if fh is not sys.stdout:
            with contextlib.suppress(OSError):  # what could not be written was reported
                fh.close()


def _stop_workers(pool: ProcessPoolExecutor) -> None:
    """Terminate a process pool's workers (a SIGTERM to this process alone leaves them running
    their runs, up to a time limit each, and a Slurm job's grace period is shorter)."""
    stop = getattr(pool, "terminate_workers", None)  # Python 3.14
    if stop is not None:
        stop()
        return
    for process in list((getattr(pool, "_processes", None) or {}).values()):
        process.terminate()


def _best_bounds(rows: Iterable[dict[str, Any]]) -> dict[str, float]:
    """Per instance, the best proved lower bound over all its runs (each is a proof)."""
    best: dict[str, float] = {}
    for r in rows:
        if r.get("lower_bound") is not None:
            best[r["instance"]] = max(best.get(r["instance"], 0.0), r["lower_bound"])
    return best


def results_table(rows: Sequence[dict[str, Any]], methods: Sequence[str] | None = None,
                  objective: str = "makespan") -> str:
    """Markdown table: makespan (or throughput, or ``simulated``: the makespan of each result's
    mapping under the work-conserving runtime model of :mod:`mapsched.scheduling.simulate`, or ``slr`` and
    ``slr_simulated``: those makespans over :func:`mapsched.bounds.critical_path_bound`, GiPH's
    metric) per instance and method, best in bold, second best in italics, the best bound
    (for SLR, over the critical path too) and each cell's gap to it."""
    methods = [m for m in (methods or dict.fromkeys(r["method"] for r in rows)) if m != BOUND]
    bounds = _best_bounds(rows)
    cell: dict[tuple[str, str], dict[str, Any]] = {(r["instance"], r["method"]): r for r in rows}
    instances = list(dict.fromkeys(r["instance"] for r in rows))
    higher = objective == "throughput"
    head = "| instance | " + " | ".join(methods) + " | bound |"
    lines = [head, "|---|" + "---:|" * (len(methods) + 1)]
    for inst in instances:
        vals = {m: cell[inst, m].get(objective) for m in methods if (inst, m) in cell}
        ranked = sorted({v for v in vals.values() if v is not None}, reverse=higher)
        b = bounds.get(inst)
        out = []
        for m in methods:
            v = vals.get(m)
            if v is None:
                done = cell.get((inst, m))
                out.append("-" if done is None else "inf" if higher and done.get("makespan") == 0 else "fail")
                continue
            text = f"{v:.4g}"
            span = cell[inst, m].get("simulated" if objective in ("simulated", "slr_simulated") else "makespan")
            if b is not None and span:
                text += f" ({100 * (span - b) / span:.0f}%)"
            if ranked and v == ranked[0]:
                text = f"**{text}**"
            elif len(ranked) > 1 and v == ranked[1]:
                text = f"*{text}*"
            out.append(text)
        inputs = next(r["inputs"] for (i, _), r in cell.items() if i == inst)
        cp = next((r["critical_path"] for (i, _), r in cell.items() if i == inst and r.get("critical_path")), None)
        if objective.startswith("slr"):
            b = None if b is None or cp is None else b / cp
        bound = "-" if b is None else (f"{1000 * inputs / b:.4g}" if higher and b > 0 else "inf" if higher
                                       else f"{b:.4g}")
        lines.append(f"| {inst} | " + " | ".join(out) + f" | {bound} |")
    lines.append("")
    what = {"simulated": "makespan of each mapping run by the work-conserving runtime model",
            "slr": "SLR: makespan / critical-path bound",
            "slr_simulated": "SLR of each mapping run by the work-conserving runtime model (makespan / critical-path "
                             "bound, GiPH's metric)"}.get(objective, objective)
    lines.append(f"{what}; in brackets the gap of each makespan to the best proved lower bound "
                 "(the bound column; for throughput, the upper bound it implies). Best in bold, second in italics.")
    return "\n".join(lines)


def runtime_table(rows: Sequence[dict[str, Any]], slow: str = "exact", fast: str = "split") -> str:
    """Markdown table of two methods' solve seconds per instance and the speed-up factor."""
    cell = {(r["instance"], r["method"]): r for r in rows}
    lines = [f"| instance | {slow} (s) | {fast} (s) | factor |", "|---|---:|---:|---:|"]
    for inst in dict.fromkeys(r["instance"] for r in rows):
        a, b = cell.get((inst, slow), {}).get("seconds"), cell.get((inst, fast), {}).get("seconds")
        if a is None or b is None:
            continue
        lines.append(f"| {inst} | {a:.2f} | {b:.2f} | {f'{a / b:.1f}x' if b > 0 else '-'} |")
    return "\n".join(lines)


def plot_quality(rows: Sequence[dict[str, Any]], path: str, instance: str | None = None,
                 methods: Sequence[str] | None = None) -> None:
    """Best makespan against seconds for each method on one instance (default: the first)."""
    from mapsched.plot import _pyplot, check_format, save

    plt = _pyplot()
    fmt = check_format(path)
    if not rows:
        raise MapschedError("no rows to plot")
    instance = instance or rows[0]["instance"]
    fig, ax = plt.subplots(figsize=(7, 4))
    by_method: dict[str, tuple[list, float]] = {}
    for r in rows:
        if r["instance"] == instance and r.get("history") and (methods is None or r["method"] in methods):
            end = r.get("seconds")
            by_method[r["method"]] = (r["history"], r["history"][-1][0] if end is None else end)
    for m, (hist, end) in sorted(by_method.items()):
        # each curve runs on to the end of its method's run
        t = [max(h[0], 1e-3) for h in hist] + [max(end, hist[-1][0], 1e-3) * 1.05]
        v = [h[1] for h in hist] + [hist[-1][1]]
        ax.step(t, v, where="post", label=m)
    b = _best_bounds(rows).get(instance)
    if b is not None and not math.isnan(b):
        ax.axhline(b, color="black", ls=":", lw=1, label="best lower bound")
    ax.set_xscale("log")
    ax.set_xlabel("seconds")
    ax.set_ylabel("best makespan (ms)")
    ax.set_title(f"quality over time: {instance}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    save(fig, path, fmt)
