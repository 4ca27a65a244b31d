"""Proved lower bounds on the optimal makespan, independent of any method."""

from .chain import chain_bound
from .simple import Bound, critical_path_bound, lower_bound, min_work, work_bound

__all__ = ["Bound", "chain_bound", "critical_path_bound", "lower_bound", "min_work", "work_bound"]
