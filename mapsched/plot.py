"""Gantt charts of schedules (needs the optional ``matplotlib``: ``pip install 'mapsched[plot]'``)."""

from __future__ import annotations

from typing import Any

from .errors import MapschedError
from .problem import Problem
from .schedule import Schedule

__all__ = ["gantt"]

_MAX_ARROWS = 400  # beyond this, communication arrows hide the jobs


def gantt(problem: Problem, schedule: Schedule, path: str | None = None, title: str | None = None) -> Any:
    """Draw one row per device, each job labelled with its task (and inputs when
    batched), arrows for data moved between devices, and the makespan and lower
    bound as vertical lines. Saves to ``path`` if given; returns the figure.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise MapschedError("plot: matplotlib is not installed; pip install 'mapsched[plot]'") from None

    rows = {d: k for k, d in enumerate(problem.device_names)}
    fig, ax = plt.subplots(figsize=(10, 1.2 + 0.6 * problem.m))
    cmap = plt.get_cmap("tab20")
    holder = {}
    for j in schedule.jobs:
        y = rows.get(j.device)
        if y is None:
            continue
        ti = problem.task_index.get(j.task, 0)
        ax.barh(y, j.end - j.start, left=j.start, height=0.6, color=cmap(ti % 20), edgecolor="black", lw=0.5)
        label = j.task if problem.L == 1 else f"{j.task}\n{list(j.inputs)}"
        if problem.n <= 60:
            ax.text((j.start + j.end) / 2, y, label, ha="center", va="center", fontsize=7)
        for lo in j.inputs:
            holder[(j.task, lo)] = j
    arrows = 0
    for e in problem.edges:
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
    ax.set_title(title or f"{schedule.problem}: {schedule.method or 'schedule'} ({schedule.status})")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=120)
        plt.close(fig)
    return fig
