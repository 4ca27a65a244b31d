"""Gantt charts of schedules (needs the optional ``matplotlib``: ``pip install 'mapsched[plot]'``)."""

from __future__ import annotations

import io
import os
import shutil
from typing import Any

import numpy as np

from mapsched.errors import MapschedError, OptionError, ScheduleError, first_line, shown
from mapsched.model import arguments
from mapsched.model.files import write_file
from mapsched.model.problem import Problem
from mapsched.model.schedule import Schedule

__all__ = ["check_format", "gantt", "save"]

_MAX_ARROWS = 400  # beyond this, communication arrows hide the jobs
MAX_JOBS = 2000
"""Beyond this many jobs a chart shows each device's busy time, not each job: a bar per job
costs about a millisecond to draw, and at that density no label or arrow can be read."""
_PIXELS = 2000  # busy periods closer than makespan / _PIXELS are drawn as one


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise MapschedError("plot: matplotlib is not installed; pip install 'mapsched[plot]'") from None
    return plt


def check_format(path: str, flag: str = "-o") -> str:
    """The image format that ``path``'s extension names; an :class:`OptionError` if matplotlib
    cannot write it.

    Examples
    --------
    >>> check_format("gantt.svg")
    'svg'
    """
    _pyplot()
    import matplotlib
    from matplotlib.backend_bases import FigureCanvasBase

    ext = os.path.splitext(path)[1][1:].lower()
    formats = FigureCanvasBase.get_supported_filetypes()  # what savefig writes, with no figure made
    if ext not in formats:
        raise OptionError(f"{flag}: unknown image format {shown(ext or '(no extension)')} in {shown(path)}; "
                          f"expected one of {', '.join(sorted(formats))}")
    latex = matplotlib.rcParams["pgf.texsystem"]
    if ext == "pgf" and shutil.which(latex) is None:  # found out only when the figure is saved
        raise OptionError(f"{flag}: matplotlib writes {shown(path)} (pgf) through {latex}, which is not installed; "
                          "write .pdf, .svg or .png instead")
    return ext


def _busy(starts: np.ndarray, ends: np.ndarray, resolution: float) -> list[tuple[float, float]]:
    """Merge intervals (sorted by start) whose gaps are under ``resolution``; (start, width) pairs."""
    if not len(starts):
        return []
    reach = np.maximum.accumulate(ends)
    breaks = np.flatnonzero(starts[1:] > reach[:-1] + resolution) + 1
    first = np.concatenate(([0], breaks))
    last = np.concatenate((breaks - 1, [len(starts) - 1]))
    return [(float(starts[a]), float(reach[b] - starts[a])) for a, b in zip(first, last)]


def _summary(ax: Any, problem: Problem, schedule: Schedule, rows: dict[str, int], cmap: Any) -> None:
    """One bar per busy period of each device, and its busy share of the makespan."""
    span = max(schedule.makespan, 1e-12)
    for dev, y in rows.items():
        jobs = [j for j in schedule.jobs if j.device == dev]
        if not jobs:
            continue
        t = np.array(sorted((j.start, j.end) for j in jobs))
        ax.broken_barh(_busy(t[:, 0], t[:, 1], span / _PIXELS), (y - 0.3, 0.6), color=cmap(y % 20), lw=0)
        busy = sum(j.end - j.start for j in jobs)
        ax.text(span, y, f" {len(jobs)} jobs, busy {100 * busy / span:.0f}%", va="center", fontsize=7)


def gantt(problem: Problem, schedule: Schedule, path: str | None = None, title: str | None = None) -> Any:
    """Draw one row per device, each job labelled with its task (and inputs when
    batched), arrows for data moved between devices, and the makespan and lower
    bound as vertical lines. Past :data:`MAX_JOBS` jobs, each device's busy periods
    are drawn instead, with its job count and busy share. Saves to ``path`` if given
    (as :mod:`mapsched.model.files` writes; the extension names the format); returns the figure.

    O(J log J) for J jobs, plus drawing: a second or two for :data:`MAX_JOBS` jobs.
    """
    plt = _pyplot()
    arguments.problem(problem)
    arguments.schedule(schedule)
    if path is not None and not isinstance(path, (str, os.PathLike)):
        raise OptionError(f"path: expected a file path or None, got {type(path).__name__}")
    fmt = check_format(os.fspath(path)) if path is not None else None
    with plt.rc_context({"text.parse_math": False}):  # names are drawn as written, '$' included
        return _draw(plt, problem, schedule, path, fmt, title)


def _draw(plt: Any, problem: Problem, schedule: Schedule, path: str | None, fmt: str | None,
          title: str | None) -> Any:
    """The chart of :func:`gantt`, its arguments checked."""
    rows = {d: k for k, d in enumerate(problem.device_names)}
    for k, j in enumerate(schedule.jobs):  # such a job would be left out of the chart, unsaid
        if j.task not in problem.task_index or j.device not in rows or not all(0 <= x < problem.L for x in j.inputs):
            raise ScheduleError(f"jobs[{k}]: task {shown(j.task)}, device {shown(j.device)} or inputs "
                                f"{list(j.inputs)} are not "
                                f"this problem's ({problem.n} tasks, {problem.m} devices, {problem.L} input(s)); "
                                "plot a schedule with its own problem")
    fig, ax = plt.subplots(figsize=(10, 1.2 + 0.6 * problem.m))
    cmap = plt.get_cmap("tab20")
    holder = {}
    summarised = len(schedule.jobs) > MAX_JOBS
    if summarised:
        _summary(ax, problem, schedule, rows, cmap)
    for j in [] if summarised else schedule.jobs:
        y, ti = rows[j.device], problem.task_index[j.task]
        ax.barh(y, j.end - j.start, left=j.start, height=0.6, color=cmap(ti % 20), edgecolor="black", lw=0.5)
        label = j.task if problem.L == 1 else f"{j.task}\n{list(j.inputs)}"
        if problem.n <= 60:
            ax.text((j.start + j.end) / 2, y, label, ha="center", va="center", fontsize=7)
        for lo in j.inputs:
            holder[(j.task, lo)] = j
    arrows = 0
    for e in [] if summarised else problem.edges:
        for lo in range(problem.L):
            a, b = holder.get((e.src, lo)), holder.get((e.dst, lo))
            if a is None or b is None or a.device == b.device or arrows >= _MAX_ARROWS:
                continue
            arrows += 1
            ax.annotate("", xy=(b.start, rows[b.device]), xytext=(a.end, rows[a.device]),
                        arrowprops={"arrowstyle": "->", "color": "grey", "lw": 0.6, "alpha": 0.7})
    ax.axvline(schedule.makespan, color="red", ls="--", lw=1, label=f"makespan {schedule.makespan:.4g} ms")
    if schedule.lower_bound is not None:
        ax.axvline(schedule.lower_bound, color="green", ls=":", lw=1,
                   label=f"lower bound {schedule.lower_bound:.4g} ms")
    ax.set_yticks(range(problem.m), problem.device_names)
    ax.invert_yaxis()
    ax.set_xlabel("time (ms)")
    what = f", busy periods of {len(schedule.jobs)} jobs" if summarised else ""
    ax.set_title(title or f"{schedule.problem}: {schedule.method or 'schedule'} ({schedule.status}){what}")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    if path is not None:
        save(fig, path, fmt)
    return fig


def save(fig: Any, path: str, fmt: str | None = None, flag: str = "-o") -> None:
    """Write ``fig`` to ``path`` whole or not at all (:mod:`mapsched.model.files`), in the format its
    extension names (``fmt``, if already checked), and close it; an :class:`OptionError`
    naming ``flag`` where matplotlib cannot write that format here."""
    plt = _pyplot()
    image = io.BytesIO()
    try:
        fig.savefig(image, format=fmt or check_format(path, flag), dpi=120)
    except (RuntimeError, OSError, ValueError) as exc:  # a writer's tool missing, a backend's limit
        raise OptionError(f"{flag}: matplotlib cannot write {shown(path)} ({first_line(exc)}); write .png or .svg "
                          "instead") from None
    finally:
        plt.close(fig)
    write_file(path, image.getvalue())
