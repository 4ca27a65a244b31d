"""Starting a solve from an existing placement (``solve(..., initial=...)``, ``--initial``).

The placement may come from another version of the problem: a schedule made before a
device was removed, or a mapping written by hand. Its tasks keep their devices where
the device still exists and can still run them; the others, and tasks it does not
mention, are *placed afresh*: in upward-rank order, each goes where it finishes first
beside the kept ones, as HEFT would place it (when memory or links leave a task
nowhere, the feasibility repair finishes the placement, moving as few kept tasks as
it can). The result is
re-timed by insertion in upward-rank order (a valid schedule of this very problem keeps
its own timing when that is better), a valid schedule that a search method can start
from.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from mapsched.errors import OptionError, shown
from mapsched.model.problem import Problem
from mapsched.model.schedule import Schedule
from mapsched.model.validate import validate
from mapsched.scheduling.decoder import Decoder, as_owner
from mapsched.scheduling.ranks import rank_order, upward_rank

__all__ = ["Initial", "initial_schedule", "moved"]


class Initial:
    """An initial placement made valid for a problem.

    Attributes
    ----------
    schedule : Schedule
        Its re-timed schedule.
    afresh : int
        Tasks placed afresh: unmentioned, or on a device that is gone or cannot run them.
    repaired : int
        Further tasks the feasibility repair moved to fit memory or links.
    origin : dict
        Task name -> device name as given (devices perhaps gone), which relocation costs
        count moves from (:mod:`mapsched.engine.relocation`).
    """

    def __init__(self, schedule: Schedule, afresh: int, repaired: int, origin: dict[str, str]) -> None:
        self.schedule, self.afresh, self.repaired, self.origin = schedule, afresh, repaired, origin

    def describe(self) -> str:
        return (f"initial placement: {self.afresh} task(s) placed afresh, {self.repaired} moved to fit "
                f"memory or links; it ends at {self.schedule.makespan:.6g}\n")


def _devices(problem: Problem, initial: Any) -> dict[str, str]:
    """Task name -> device name of a Schedule or a mapping; unknown tasks refused in one line."""
    if isinstance(initial, Schedule):
        mapping = {j.task: j.device for j in initial.jobs}
        if len(mapping) < len(initial.jobs) or any(j.inputs != (0,) for j in initial.jobs):
            # Each task went to the device of its last job, in silence.
            raise OptionError("initial: a throughput schedule (several inputs or jobs per task); give a latency "
                              "schedule, one job per task, or a mapping of tasks to devices")
    elif isinstance(initial, Mapping):
        mapping = {str(t): str(d) for t, d in initial.items()}
    else:
        raise OptionError(f"initial: expected a schedule or a mapping of tasks to devices, got "
                          f"{type(initial).__name__}")
    known = problem.task_index
    for t in mapping:
        if t not in known:
            raise OptionError(f"initial: task {shown(t)} is not in problem {shown(problem.name)}; give a schedule "
                              "of this problem (or of an earlier version of it)")
    return mapping


def initial_schedule(problem: Problem, initial: Any) -> Initial:
    """The valid schedule of ``initial`` (a Schedule or a mapping of task names to device
    names) on ``problem``; see the module docstring.

    Raises
    ------
    OptionError
        On a throughput problem, or a task that ``problem`` does not have.

    Notes
    -----
    O(n m + E) and one decode; the repair (CP-SAT) only when memory or links require it.

    Examples
    --------
    >>> import mapsched
    >>> p = mapsched.instances.load("topcuoglu2002")
    >>> start = initial_schedule(p, {"t1": "p3", "t2": "gone"})
    >>> start.afresh, mapsched.validate(p, start.schedule)
    (9, [])
    """
    from mapsched.scheduling.construct import construct, earliest_finish

    p = problem
    if p.L != 1:
        raise OptionError("initial: a placement to start from (solve --initial, adapt's SCHEDULE) is for latency "
                          "problems only (a throughput placement splits inputs)")
    mapping = _devices(p, initial)
    owner = np.full(p.n, -1, dtype=np.int64)
    for t, d in mapping.items():
        i, u = p.task_index[t], p.device_index.get(d, -1)
        if u >= 0 and p.can_run[i, u]:
            owner[i] = u
    afresh = int((owner < 0).sum())
    order = rank_order(p, upward_rank(p))
    decoder = Decoder(p, order, insertion=True)
    if afresh == 0 and decoder.infeasibility(owner[:, None]) is None:
        s = decoder.schedule(owner[:, None])
        # A valid schedule of this very problem keeps its own timing when that is better; a copy,
        # since methods may return it and solve() fills in the result's fields. Not its bound
        # or status: valid here, it may have been solved for another problem (before devices
        # were added), whose bound need not hold for this one.
        if isinstance(initial, Schedule) and initial.makespan < s.makespan and not validate(p, initial):
            s = replace(initial, jobs=list(initial.jobs), history=list(initial.history), lower_bound=None,
                        status="feasible")
        return Initial(s, 0, 0, mapping)
    # The others go where they finish first among the kept ones, as HEFT would place them
    # (the construction falls back to the feasibility repair if memory or links dead-end).
    kept = np.flatnonzero(owner >= 0)
    dev = owner.tolist()

    def rule(i: int, tried: list, b: Any) -> Any:
        return next((t for t in tried if t[0][0][0] == dev[i]), None) or earliest_finish(i, tried, b)

    s = construct(p, order, rule, insertion=True)
    now = as_owner(p, s.mapping())[:, 0]
    return Initial(s, afresh, int((now[kept] != owner[kept]).sum()), mapping)


def moved(problem: Problem, start: Schedule, result: Schedule) -> int:
    """How many tasks ``result`` runs on another device than ``start`` (latency)."""
    a = as_owner(problem, start.mapping())[:, 0]
    b = as_owner(problem, result.mapping())[:, 0]
    return int((a != b).sum())
