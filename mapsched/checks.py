"""Checks of the numbers that public functions, method options, the CLI and the file readers
take (limits, counts, seeds, flags): each raises a one-line :class:`~mapsched.errors.OptionError` naming the
argument, where a bad value would fail deep inside (an ``IndexError`` of NumPy, a
``TypeError`` of SciPy) or quietly mean something else (task -1 is the last task, 0.5 is
task 0, a negative time limit drops an LP).
"""

from __future__ import annotations

import math
import numbers
from typing import Any

from mapsched.errors import MapschedError, OptionError, shown

__all__ = ["count", "flag", "real", "seconds"]


def real(value: Any) -> bool:
    """Whether ``value`` is a real number (a NumPy one too), not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def seconds(value: Any, name: str, none: bool = True, err: type[MapschedError] = OptionError) -> float | None:
    """A positive number of seconds (``inf``: none), or None where ``none``; ``err`` is the
    error class raised (the harness raises its own), as in the functions below."""
    if value is None and none:
        return None
    if not (real(value) and value > 0 and not math.isnan(value)):
        raise err(f"{name}: expected a positive number of seconds{' or None' if none else ''}, got {shown(value)}")
    return float(value)


def count(value: Any, name: str, least: int = 1, none: bool = False,
          err: type[MapschedError] = OptionError) -> int | None:
    """A whole number of at least ``least`` (a NumPy integer too), or None where ``none``."""
    if value is None and none:
        return None
    if not (isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= least):
        raise err(f"{name}: expected a whole number of at least {least}{' or None' if none else ''}, "
                  f"got {shown(value)}")
    return int(value)


def flag(value: Any, name: str, err: type[MapschedError] = OptionError) -> bool:
    """``True`` or ``False`` (a NumPy bool too), not a string or a number that reads as one."""
    if type(value).__name__ not in ("bool", "bool_"):
        raise err(f"{name}: expected True or False, got {shown(value)}")
    return bool(value)
