"""Proved lower bounds on the optimal makespan, independent of any method."""

from .chain import chain_bound, single_input_relaxation
from .load import load_bound
from .lower import Bound, lower_bound
from .simple import critical_path_bound, min_work, work_bound

__all__ = [
    "Bound", "chain_bound", "critical_path_bound", "load_bound", "lower_bound", "min_work",
    "single_input_relaxation", "work_bound",
]
