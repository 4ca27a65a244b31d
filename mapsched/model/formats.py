"""Reading and writing the ``mapsched.problem/1`` and ``mapsched.schedule/1`` formats, as functions.

``docs/format.md`` is the contract. Each format is read and written by the class
whose objects it holds: :meth:`Problem.from_dict <mapsched.Problem.from_dict>` and
:meth:`~mapsched.Problem.to_dict`, :meth:`Schedule.from_dict <mapsched.Schedule.from_dict>`
and :meth:`~mapsched.Schedule.to_dict`, over the JSON text and files of
:mod:`mapsched.model.jsonio`. This module gives them their names as functions.

Examples
--------
>>> from mapsched import instances
>>> p = instances.load("topcuoglu2002")
>>> problem_from_dict(problem_to_dict(p)) == p
True
"""

from __future__ import annotations

from mapsched.model.jsonio import dumps, loads, read_json, write_json
from mapsched.model.problem import PROBLEM_FORMAT, Problem
from mapsched.model.schedule import SCHEDULE_FORMAT, Schedule

__all__ = [
    "PROBLEM_FORMAT", "SCHEDULE_FORMAT", "dumps", "loads", "problem_from_dict", "problem_to_dict", "read_json",
    "schedule_from_dict", "schedule_to_dict", "write_json",
]

problem_from_dict = Problem.from_dict
problem_to_dict = Problem.to_dict
schedule_from_dict = Schedule.from_dict
schedule_to_dict = Schedule.to_dict
