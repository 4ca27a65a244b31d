"""Exact formulations: the Pyomo MILP (HiGHS) and the CP-SAT model; importing registers ``exact``.

``build_model`` and ``solve_model`` (the Pyomo MILP) load Pyomo on first use: a CP-SAT solve
never needs it, and importing it is slow enough to count against a short time limit.
"""

from typing import Any

from mapsched.formulations import exact
from mapsched.formulations.common import ModelView, Plugin

__all__ = ["ModelView", "Plugin", "build_model", "exact", "solve_model"]


def __getattr__(name: str) -> Any:
    if name in ("build_model", "solve_model"):
        from mapsched.formulations import milp

        return getattr(milp, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
