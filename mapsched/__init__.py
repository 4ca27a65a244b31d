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

from importlib import import_module
from typing import Any

from . import instances
from .decoder import decode
from .errors import HarnessError, InfeasibleError, MapschedError, OptionError, ProblemError, ScheduleError
from .problem import Calibration, Device, Edge, Link, Objective, Problem, System, Task
from .registry import methods
from .schedule import Job, Result, Schedule
from .solve import solve
from .validate import Violation, validate

# The solvers (OR-Tools, Pyomo, HiGHS, SciPy) take over a second to import: they load on first
# use, so that reading, validating and ``mapsched --help`` start at once.
_LAZY = {"bounds": "bounds", "coarsen": "coarsen", "formulations": "formulations", "generators": "generators",
         "heuristics": "heuristics", "split": "split", "lower_bound": "bounds"}
# Submodules the documentation names as mapsched.X.f (PyTorch's harness and learned methods,
# Dask's executor among them): on first use too, not in __all__, so that * imports none.
_LAZY |= {name: name for name in ("bench", "convert", "distributed", "harness", "interrupt", "learned", "plot",
                                  "relocation", "simulate", "suites", "symmetry")}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'mapsched' has no attribute {name!r}")
    module = import_module(f".{_LAZY[name]}", __name__)
    value = module if _LAZY[name] == name else getattr(module, name)
    globals()[name] = value
    return value


__version__ = "0.1.0"

__all__ = [
    "Calibration", "Device", "Edge", "HarnessError", "InfeasibleError", "Job", "Link", "MapschedError", "Objective",
    "OptionError", "Problem", "ProblemError", "Result", "Schedule", "ScheduleError",
    "System", "Task", "Violation", "bounds", "coarsen", "decode", "formulations", "generators", "heuristics",
    "instances", "lower_bound", "methods", "solve", "split", "validate",
]
