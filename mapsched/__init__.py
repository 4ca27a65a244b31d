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

from mapsched import _imports, instances
from mapsched.engine.registry import methods
from mapsched.errors import HarnessError, InfeasibleError, MapschedError, OptionError, ProblemError, ScheduleError
from mapsched.model.problem import Calibration, Device, Edge, Link, Objective, Problem, System, Task
from mapsched.model.schedule import Job, Result, Schedule, Transfer
from mapsched.model.validate import Violation, validate
from mapsched.scheduling.decoder import decode
from mapsched.solve import solve

_imports.install()

# The solvers (OR-Tools, Pyomo, HiGHS, SciPy) take over a second to import: they load on first
# use, so that reading, validating and ``mapsched --help`` start at once.
_LAZY = {"bounds": "bounds", "formulations": "formulations", "generators": "generators", "heuristics": "heuristics",
         "split": "split", "lower_bound": "bounds"}
# Subpackages the documentation names as mapsched.X.f (PyTorch's harness and learned methods,
# Dask's executor among them): on first use too, not in __all__, so that * imports none.
_LAZY |= {name: name for name in ("bench", "engine", "harness", "learned", "model", "plot", "scheduling")}


def __getattr__(name: str) -> Any:
    old = f"{__name__}.{name}"
    if old in _imports.MOVED:  # an old module path such as mapsched.coarsen: it warns
        value = import_module(old)
    elif name in _LAZY:
        module = import_module(f".{_LAZY[name]}", __name__)
        value = module if _LAZY[name] == name else getattr(module, name)
    else:
        raise AttributeError(f"module 'mapsched' has no attribute {name!r}")
    globals()[name] = value
    return value


__version__ = "0.1.0"

__all__ = [
    "Calibration", "Device", "Edge", "HarnessError", "InfeasibleError", "Job", "Link", "MapschedError", "Objective",
    "OptionError", "Problem", "ProblemError", "Result", "Schedule", "ScheduleError",
    "System", "Task", "Transfer", "Violation", "bounds", "decode", "formulations", "generators", "heuristics",
    "instances", "lower_bound", "methods", "solve", "split", "validate",
]
