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
  (:mod:`mapsched.simulate`, the row's ``simulated``), which the bound bounds too;
* :func:`runtime_table`: two methods' times side by side with the speed-up (Table III);
* :func:`plot_quality`: best makespan against seconds, from each run's progress
  history (Fig. 7).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from .distributed import as_executor, completed
from .errors import InfeasibleError, MapschedError
from .problem import Problem

__all__ = ["BOUND", "Case", "Suite", "plot_quality", "read_rows", "results_table", "run_suite", "runtime_table"]


@dataclass(frozen=True)
class Case:
    """One instance: ``make(**kwargs)`` builds it (``make`` must be importable by name)."""

    name: str
    make: Callable[..., Problem]
    kwargs: dict[str, Any] = field(default_factory=dict)

    def build(self) -> Problem:
        return self.make(**self.kwargs)


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


def _run_one(case: Case, method: str, time_limit: float, options: dict[str, Any], threads: int = 1) -> dict[str, Any]:
    """One (instance, method) run, in a worker; every schedule is checked by the validator.
    ``threads`` 0: the worker's share (:func:`mapsched.distributed.task_threads`)."""
    import time

    from . import registry
    from .distributed import task_threads
    from .solve import solve
    from .split import full_bound
    from .validate import validate

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
        from .learned import load

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
        from .bounds import critical_path_bound
        from .simulate import simulate

        cp = critical_path_bound(p)
        row["simulated"] = simulate(p, r.mapping()).makespan
        row |= {"critical_path": cp, "slr": r.makespan / cp, "slr_simulated": row["simulated"] / cp}
    return row


_ROW_START = b'{"instance": '  # how every row begins (json.dumps of _run_one's dict)
# Fields the tables compute with: each a finite number where present.
_NUMBERS = ("tasks", "inputs", "makespan", "throughput", "lower_bound", "seconds", "simulated", "critical_path",
            "slr", "slr_simulated")


def read_rows(path: str) -> list[dict[str, Any]]:
    """The rows of a JSON Lines results file (none if it does not exist).

    A last line without its newline is a row cut short by a stopped sweep and is not
    read (:func:`run_suite` cuts it off and redoes its run); any other line that is not
    a row raises :class:`~mapsched.errors.MapschedError`, naming the file and the line.
    """
    if not os.path.exists(path):
        return []
    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().split("\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise MapschedError(f"{path}: cannot read it as results ({exc}); pass another -o/--output") from None
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
            raise MapschedError(f"{path}, line {k}: not a results row ({detail}); remove the line, or pass another "
                                "-o/--output")
        for key in _NUMBERS:
            v = row.get(key)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)):
                raise MapschedError(f"{path}, line {k}: '{key}' is {v!r}, not a finite number; remove the line, or "
                                    "pass another -o/--output")
        rows.append(row)
    return rows


def _cut_short_row(path: str) -> None:
    """Remove what follows the last newline of ``path``: the part of a row that a stopped
    sweep did not finish writing, which the next row would otherwise be appended to.
    Anything else there (another file given as the results) is refused, not cut."""
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
                raise MapschedError(f"{path}: its last line is neither a results row nor one cut short; pass "
                                    "another -o/--output")
            fh.truncate(cut)


def run_suite(suite: Suite, out: str, executor: Executor | None = None, workers: int = 1, threads: int = 0,
              progress: Callable[[int, int], None] | None = None) -> list[dict[str, Any]]:
    """Run every (instance, method) pair not yet in ``out`` and append its row there.

    Parameters
    ----------
    suite : Suite
    out : str
        JSON Lines file; existing rows are kept and their pairs skipped (resume), and a
        row cut short by a stopped sweep is removed and its run redone.
    executor : concurrent.futures.Executor or distributed.Client, optional
        Where runs go; by default a process pool of ``workers`` (0: one per core). A
        client, or a :class:`mapsched.distributed.DaskExecutor`, spreads them over a cluster; if its
        scheduler is lost, the rows written so far stay and a rerun resumes.
    workers, threads : int
        Runs at once, and solver threads per run (0: the cores shared among the
        runs; on a cluster, the worker's share of its host). By default one run at a
        time with every core, so that exact methods get the solver portfolio they would
        get alone.
    progress : callable, optional
        Called as ``progress(done, total)`` after each run.
    """
    executor = as_executor(executor)
    rows = read_rows(out)
    _cut_short_row(out)
    done = {(r["instance"], r["method"]) for r in rows}
    todo = [(c, m) for c in suite.cases for m in suite.methods if (c.name, m) not in done]
    total, finished = len(todo), 0
    if progress:
        progress(0, total)
    own = executor is None
    if own:
        from .split.milp_split import _mp_context

        executor = ProcessPoolExecutor(max_workers=workers or os.cpu_count() or 1, mp_context=_mp_context())
    if not hasattr(executor, "share"):  # off a cluster: this machine's cores shared out
        threads = threads or max(1, (os.cpu_count() or 1) // (workers or os.cpu_count() or 1))
    try:
        futures = [executor.submit(_run_one, c, m, suite.time_limit, suite.options.get(m, {}), threads)
                   for c, m in todo]
        with open(out, "a", encoding="utf-8") as fh:
            for f in completed(futures, executor=executor):
                try:
                    row = f.result() | {"suite": suite.name}
                except Exception:
                    if not getattr(executor, "lost", False):
                        raise
                    continue
                fh.write(json.dumps(row) + "\n")
                fh.flush()  # a row on disk is a row that an interrupted sweep keeps
                rows.append(row)
                finished += 1
                if progress:
                    progress(finished, total)
        if finished < total and getattr(executor, "lost", False):
            raise MapschedError(f"--dask: the scheduler was lost mid-sweep; the {finished} run(s) done are in {out}; "
                                "rerun the same command to resume")
    finally:
        if own:
            executor.shutdown(wait=True, cancel_futures=True)
    return rows


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
    mapping under the work-conserving runtime model of :mod:`mapsched.simulate`, or ``slr`` and
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
                out.append("-" if (inst, m) not in cell else "fail")
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
        bound = "-" if b is None else (f"{1000 * inputs / b:.4g}" if higher else f"{b:.4g}")
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
        lines.append(f"| {inst} | {a:.2f} | {b:.2f} | {a / b:.1f}x |")
    return "\n".join(lines)


def plot_quality(rows: Sequence[dict[str, Any]], path: str, instance: str | None = None,
                 methods: Sequence[str] | None = None) -> None:
    """Best makespan against seconds for each method on one instance (default: the first)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise MapschedError("bench: plots need matplotlib; pip install 'mapsched[plot]'") from None
    instance = instance or rows[0]["instance"]
    fig, ax = plt.subplots(figsize=(7, 4))
    by_method: dict[str, tuple[list, float]] = {}
    for r in rows:
        if r["instance"] == instance and r.get("history") and (methods is None or r["method"] in methods):
            by_method[r["method"]] = (r["history"], r.get("seconds", r["history"][-1][0]))
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
    fig.savefig(path, dpi=120)
    plt.close(fig)
