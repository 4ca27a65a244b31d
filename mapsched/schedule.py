"""Schedules: which device runs each task, for which inputs, and when.

A :class:`Schedule` is what every method returns (``Result`` is the same class)
and what ``mapsched.schedule/1`` files hold.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .errors import ScheduleError
from .jsonio import dumps, loads, read_json, write_json

if TYPE_CHECKING:
    from .problem import Problem

__all__ = ["Job", "Result", "Schedule"]


@dataclass(frozen=True)
class Job:
    """One task run on one device for a batch of inputs, from ``start`` to ``end`` (ms)."""

    task: str
    device: str
    start: float
    end: float
    inputs: tuple[int, ...] = (0,)


@dataclass
class Schedule:
    """A schedule together with how it was found.

    Attributes
    ----------
    jobs : list of Job
    makespan : float
        Largest job end (ms).
    throughput : float or None
        ``1000 * L / makespan`` inputs per second.
    lower_bound : float or None
        A proved lower bound on the optimal makespan.
    status : {"optimal", "feasible"}
        ``optimal`` only when optimality was proved.
    method, solve_seconds, log
        Which method produced it, its wall time, and the solver's log if kept.
    interrupted : bool
        The solve was stopped by a signal (see :mod:`mapsched.interrupt`) before its end;
        the schedule is the best found until then.
    history : list of (seconds, makespan)
        The incumbent over time, as reported by search methods.
    """

    problem: str
    jobs: list[Job]
    makespan: float
    throughput: float | None = None
    lower_bound: float | None = None
    status: str = "feasible"
    method: str = ""
    solve_seconds: float = 0.0
    interrupted: bool = False
    log: str = field(default="", repr=False)
    history: list[tuple[float, float]] = field(default_factory=list, repr=False)

    @classmethod
    def from_jobs(cls, problem: Problem, jobs: list[Job], **kwargs: Any) -> Schedule:
        """Build a schedule of ``problem`` whose makespan and throughput follow from ``jobs``."""
        makespan = max((j.end for j in jobs), default=0.0)
        thr = 1000.0 * problem.L / makespan if makespan > 0 else None  # undefined for zero-time graphs
        return cls(problem.name, jobs, makespan, thr, **kwargs)

    @property
    def gap(self) -> float | None:
        """Relative gap ``(makespan - lower_bound) / makespan`` in [0, 1], or None."""
        if self.lower_bound is None or self.makespan <= 0:
            return None
        return max(0.0, (self.makespan - self.lower_bound) / self.makespan)

    def mapping(self) -> dict[str, dict[str, tuple[int, ...]]]:
        """Task name to {device name: inputs}."""
        out: dict[str, dict[str, tuple[int, ...]]] = {}
        for j in self.jobs:
            out.setdefault(j.task, {})[j.device] = j.inputs
        return out

    def to_dict(self) -> dict[str, Any]:
        from .formats import schedule_to_dict

        return schedule_to_dict(self)

    def to_json(self, indent: int | None = 1) -> str:
        return dumps(self.to_dict(), indent)

    def write(self, path: str) -> None:
        """Write the schedule file atomically."""
        write_json(path, self.to_dict())

    @classmethod
    def from_dict(cls, data: Any) -> Schedule:
        from .formats import schedule_from_dict

        return schedule_from_dict(data)

    @classmethod
    def from_json(cls, text: str, source: str = "schedule") -> Schedule:
        return cls.from_dict(loads(text, source, ScheduleError))

    @classmethod
    def read(cls, path: str) -> Schedule:
        return cls.from_dict(read_json(path, ScheduleError))


Result = Schedule
