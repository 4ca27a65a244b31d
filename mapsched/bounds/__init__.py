"""Proved lower bounds on the optimal makespan, independent of any method."""

from .simple import Bound, critical_path_bound, lower_bound, min_work, work_bound

__all__ = ["Bound", "critical_path_bound", "lower_bound", "min_work", "work_bound"]
