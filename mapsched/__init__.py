"""mapsched: map and schedule deep-learning dataflow graphs onto heterogeneous
multi-device systems, and prove how good each answer is.

Examples
--------
>>> import mapsched
>>> p = mapsched.instances.load("topcuoglu2002")
>>> r = mapsched.solve(p, "random", seed=1)
>>> mapsched.validate(p, r)
[]
"""

from . import bounds, formulations, generators, heuristics, instances, split
from .bounds import lower_bound
from .decoder import decode
from .errors import HarnessError, InfeasibleError, MapschedError, OptionError, ProblemError, ScheduleError
from .problem import Device, Edge, Link, Objective, Problem, System, Task
from .registry import methods
from .schedule import Job, Result, Schedule
from .solve import solve
from .validate import Violation, validate

__version__ = "0.1.0"

__all__ = [
    "Device", "Edge", "HarnessError", "InfeasibleError", "Job", "Link", "MapschedError", "Objective",
    "OptionError", "Problem", "ProblemError", "Result", "Schedule", "ScheduleError",
    "System", "Task", "Violation", "bounds", "decode", "formulations", "generators", "heuristics",
    "instances", "lower_bound", "methods", "solve", "split", "validate",
]
