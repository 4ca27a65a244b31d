"""Checks of the arguments that are model objects: a problem, a schedule, task indices of a
problem. Each raises a one-line :class:`~mapsched.errors.OptionError` naming the argument,
where a bad value would fail deep inside (an ``IndexError`` of NumPy) or quietly mean
something else (task -1 is the last task, 0.5 is task 0).

Examples
--------
>>> from mapsched import instances
>>> p = instances.load("topcuoglu2002")
>>> from mapsched.model.arguments import tasks
>>> tasks(p, [0, 3], "tasks")
[0, 3]
>>> tasks(p, [0, -1], "tasks")
Traceback (most recent call last):
...
mapsched.errors.OptionError: tasks: expected task indices from 0 to 9, got -1
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable
from typing import Any

from mapsched.errors import OptionError, shown
from mapsched.model.problem import Problem
from mapsched.model.schedule import Schedule

__all__ = ["blocks", "problem", "schedule", "tasks"]


def problem(value: Any) -> Problem:
    """``value``, a :class:`~mapsched.model.problem.Problem`."""
    if not isinstance(value, Problem):
        raise OptionError(f"problem: expected a mapsched.Problem, got {type(value).__name__}; read a file with "
                          "Problem.read(path)")
    return value


def schedule(value: Any) -> Schedule:
    """``value``, a :class:`~mapsched.model.schedule.Schedule`."""
    if not isinstance(value, Schedule):
        raise OptionError(f"schedule: expected a mapsched.Schedule, got {type(value).__name__}; read a file with "
                          "Schedule.read(path)")
    return value


def tasks(p: Problem, value: Any, name: str) -> list[int]:
    """A non-empty collection of task indices of ``p``, as a list. O(len(value))."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise OptionError(f"{name}: expected a collection of task indices, got {shown(value)}")
    out = list(value)
    if not out:
        raise OptionError(f"{name}: expected at least one task index, got none")
    for i in out:
        if not (isinstance(i, numbers.Integral) and not isinstance(i, bool) and 0 <= i < p.n):
            raise OptionError(f"{name}: expected task indices from 0 to {p.n - 1}, got {shown(i)}")
    return [int(i) for i in out]


def blocks(p: Problem, value: Any, name: str) -> list[list[int]]:
    """A sequence of non-empty collections of task indices of ``p`` (a module chain's
    modules), as lists. O(total size)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise OptionError(f"{name}: expected a sequence of task-index collections, got {shown(value)}")
    return [tasks(p, b, f"{name}[{k}]") for k, b in enumerate(value)]
