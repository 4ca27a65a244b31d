"""Schedules: which device runs each task, for which inputs, and when.

A :class:`Schedule` is what every method returns (``Result`` is the same class)
and what ``mapsched.schedule/1`` files hold.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mapsched import checks
from mapsched.errors import ScheduleError, shown
from mapsched.model.jsonio import check_fields, check_format, check_list, dumps, loads, read_json, write_json

if TYPE_CHECKING:
    from mapsched.model.problem import Problem

__all__ = ["Job", "Result", "Schedule", "Transfer"]

SCHEDULE_FORMAT = "mapsched.schedule/1"
_SCHEDULE_KEYS = {
    "format", "problem", "method", "status", "makespan", "throughput",
    "lower_bound", "solve_seconds", "interrupted", "relocation_cost", "jobs", "transfers",
}
_JOB_KEYS = {"task", "device", "start", "end", "inputs"}
_TRANSFER_KEYS = {"src", "dst", "inputs", "start", "end"}


def _finite(value: Any, where: str, least: float = -math.inf, none: bool = False) -> float | None:
    # A schedule's numbers are finite (the writer refuses others): an infinite end would pass
    # the parse and break every reader of the times downstream. Python's own numbers only:
    # to_dict checks what it writes with this, and JSON holds no NumPy number.
    if value is not None and not isinstance(value, (int, float)):
        raise ScheduleError(f"{where}: expected a number, got {shown(value)}")
    return checks.number(value, where, least, none=none, err=ScheduleError)


@dataclass(frozen=True)
class Job:
    """One task run on one device for a batch of inputs, from ``start`` to ``end`` (ms)."""

    task: str
    device: str
    start: float
    end: float
    inputs: tuple[int, ...] = (0,)


@dataclass(frozen=True)
class Transfer:
    """The data of edge ``src -> dst`` for ``inputs`` crossing devices, from ``start`` to ``end``
    (ms): where a problem declares contention, each cross-device transfer is a job of its own,
    on the link between the devices of the two tasks' jobs holding those inputs."""

    src: str
    dst: str
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
        The solve was stopped by a signal (see :mod:`mapsched.engine.interrupt`) before its end;
        the schedule is the best found until then.
    history : list of (seconds, makespan)
        The incumbent over time, as reported by search methods (with a relocation cost,
        the makespan plus that cost).
    relocation_cost : float or None
        With ``solve(..., relocation=...)``: the cost of the tasks moved away from the
        initial placement (ms, :mod:`mapsched.engine.relocation`), which the solve minimised
        together with the makespan; None otherwise.
    transfers : list of Transfer
        Where the problem declares contention (:mod:`mapsched.scheduling.contention`), every
        transfer between devices; otherwise empty.
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
    relocation_cost: float | None = None
    transfers: list[Transfer] = field(default_factory=list)

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
        """Task name to {device name: inputs}; the jobs of a task on one device (the format
        allows several) give their inputs together, in order."""
        out: dict[str, dict[str, tuple[int, ...]]] = {}
        for j in self.jobs:
            where = out.setdefault(j.task, {})
            where[j.device] = tuple(sorted(where[j.device] + j.inputs)) if j.device in where else j.inputs
        return out

    def to_dict(self) -> dict[str, Any]:
        """The schedule as a ``mapsched.schedule/1`` dictionary; ``interrupted`` is written only
        when true and ``relocation_cost`` only when set, as version 1 readers expect.

        Raises :class:`~mapsched.errors.ScheduleError`, naming the field, where
        :meth:`from_dict` would refuse the document (a field set by hand: ``status='done'``,
        an infinite bound): nothing is written that mapsched cannot read back. O(jobs).
        """
        out = {
            "format": SCHEDULE_FORMAT,
            "problem": self.problem,
            "method": self.method,
            "status": self.status,
            "makespan": self.makespan,
            "throughput": self.throughput,
            "lower_bound": self.lower_bound,
            "solve_seconds": self.solve_seconds,
            "jobs": [
                {"task": j.task, "device": j.device, "start": j.start, "end": j.end, "inputs": list(j.inputs)}
                for j in self.jobs
            ],
        }
        if self.interrupted:
            out["interrupted"] = True
        if self.relocation_cost is not None:
            out["relocation_cost"] = self.relocation_cost
        if self.transfers:  # written only where there are: a schedule of a problem without contention reads as before
            out["transfers"] = [{"src": t.src, "dst": t.dst, "inputs": list(t.inputs), "start": t.start, "end": t.end}
                                for t in self.transfers]
        Schedule.from_dict(out)
        return out

    def to_json(self, indent: int | None = 1) -> str:
        return dumps(self.to_dict(), indent)

    def write(self, path: str) -> None:
        """Write the schedule file atomically."""
        write_json(path, self.to_dict())

    @classmethod
    def from_dict(cls, data: Any) -> Schedule:
        """Parse a ``mapsched.schedule/1`` document (``docs/format.md``). Well-formed is not
        valid: see ``validate``."""
        err = ScheduleError
        if not isinstance(data, dict):
            raise err(f"schedule: expected a JSON object, got {type(data).__name__}")
        check_format(data, SCHEDULE_FORMAT, err)
        check_fields(data, "schedule", _SCHEDULE_KEYS, ("format", "makespan", "jobs"), err)
        status = data.get("status", "feasible")
        if status not in ("optimal", "feasible"):
            raise err(f"status: expected 'optimal' or 'feasible', got {shown(status)}")
        jobs = []
        for k, j in enumerate(check_list(data["jobs"], "jobs", err)):
            j = check_fields(j, f"jobs[{k}]", _JOB_KEYS, tuple(sorted(_JOB_KEYS)), err)
            for key in ("task", "device"):
                if not isinstance(j[key], str):
                    raise err(f"jobs[{k}].{key}: expected a name, got {shown(j[key])}")
            inputs = check_list(j["inputs"], f"jobs[{k}].inputs", err)
            if any(isinstance(x, bool) or not isinstance(x, int) or x < 0 for x in inputs):
                raise err(f"jobs[{k}].inputs: expected non-negative integer input indices, got {shown(inputs)}")
            jobs.append(Job(j["task"], j["device"], _finite(j["start"], f"jobs[{k}].start"),
                            _finite(j["end"], f"jobs[{k}].end"), tuple(inputs)))
        transfers = []
        for k, t in enumerate(check_list(data.get("transfers", []), "transfers", err)):
            t = check_fields(t, f"transfers[{k}]", _TRANSFER_KEYS, tuple(sorted(_TRANSFER_KEYS)), err)
            for key in ("src", "dst"):
                if not isinstance(t[key], str):
                    raise err(f"transfers[{k}].{key}: expected a task name, got {shown(t[key])}")
            inputs = check_list(t["inputs"], f"transfers[{k}].inputs", err)
            if not inputs or any(isinstance(x, bool) or not isinstance(x, int) or x < 0 for x in inputs):
                raise err(f"transfers[{k}].inputs: expected non-negative integer input indices, got {shown(inputs)}")
            transfers.append(Transfer(t["src"], t["dst"], _finite(t["start"], f"transfers[{k}].start"),
                                      _finite(t["end"], f"transfers[{k}].end"), tuple(inputs)))
        interrupted = data.get("interrupted", False)
        if not isinstance(interrupted, bool):
            raise err(f"interrupted: expected true or false, got {shown(interrupted)}")
        if interrupted and status == "optimal":
            raise err("interrupted: a schedule stopped before its end is not proved optimal; its status is "
                      "'feasible'")
        for key in ("problem", "method"):
            if not isinstance(data.get(key, ""), str):
                raise err(f"{key}: expected a string, got {shown(data[key])}")
        return cls(
            problem=data.get("problem", ""),
            jobs=jobs,
            makespan=_finite(data["makespan"], "makespan"),
            throughput=_finite(data.get("throughput"), "throughput", none=True),
            lower_bound=_finite(data.get("lower_bound"), "lower_bound", none=True),
            status=status,
            method=data.get("method", ""),
            solve_seconds=_finite(data.get("solve_seconds", 0.0), "solve_seconds", 0.0),
            interrupted=interrupted,
            relocation_cost=_finite(data.get("relocation_cost"), "relocation_cost", 0.0, none=True),
            transfers=transfers,
        )

    @classmethod
    def from_json(cls, text: str, source: str = "schedule") -> Schedule:
        return cls.from_dict(loads(text, source, ScheduleError))

    @classmethod
    def read(cls, path: str) -> Schedule:
        return cls.from_dict(read_json(path, ScheduleError))


Result = Schedule
