"""Checks of the numbers that public functions, method options, the CLI and the file readers
take (limits, counts, seeds, flags): each raises a one-line :class:`~mapsched.errors.OptionError` naming the
argument, where a bad value would fail deep inside (an ``IndexError`` of NumPy, a
``TypeError`` of SciPy) or quietly mean something else (task -1 is the last task, 0.5 is
task 0, a negative time limit drops an LP).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from typing import Any, NoReturn

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


# Command-line values: argparse types over the checks above.
# They word a refusal as the checks do, but show the text as typed (``got '-3'``): argparse
# puts the option's name in front, and the command line prints the message on one line.
__all__ += ["count_arg", "integers", "number_arg", "probability_arg", "range_arg", "seconds_arg"]


def _number(text: str) -> float:
    """``text`` read as a float; NaN, which every type below refuses, where it reads as none."""
    try:
        return float(text)
    except ValueError:
        return math.nan


def _refuse(expected: str, text: str) -> NoReturn:
    import argparse  # only where a value is refused: the library's callers never load it

    raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")


def count_arg(low: int, high: int | None = None) -> Callable[[str], int]:
    """An argparse type: an integer of at least ``low`` (and at most ``high``)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = low - 1
        if value < low or (high is not None and value > high):
            span = f"of at least {low}" if high is None else f"from {low} to {high}"
            _refuse(f"an integer {span}", text)
        return value
    return parse


def seconds_arg(text: str) -> float:
    """An argparse type: a positive, finite number of seconds (a command's limit has no ``inf``)."""
    value = _number(text)
    if not 0 < value < math.inf:
        _refuse("a positive number of seconds", text)
    return value


def number_arg(positive: bool = True, most: float = math.inf) -> Callable[[str], float]:
    """An argparse type: a finite number above 0 (``positive``) or of at least 0, at most ``most``."""
    def parse(text: str) -> float:
        value = _number(text)
        if not (value > 0 if positive else value >= 0) or math.isinf(value):
            _refuse("a positive number" if positive else "a finite number of at least 0", text)
        if value > most:
            _refuse(f"a number of at most {most:g}", text)
        return value
    return parse


def range_arg(low: float, high: float) -> Callable[[str], float]:
    """An argparse type: a number from ``low`` to ``high``."""
    def parse(text: str) -> float:
        value = _number(text)
        if not low <= value <= high:
            _refuse(f"a number from {low:g} to {high:g}", text)
        return value
    return parse


def probability_arg(text: str) -> float:
    """An argparse type: a probability, a number from 0 to 1."""
    value = _number(text)
    if not 0.0 <= value <= 1.0:
        _refuse("a probability in [0, 1]", text)
    return value


def integers(text: str, flag: str, most: int) -> list[int]:
    """The comma-separated integers from 1 to ``most`` of option ``flag``'s value (a shape, batch
    sizes), read where the command uses them."""
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        values = []
    if not values or min(values) < 1 or max(values) > most:
        raise OptionError(f"{flag}: expected integers from 1 to {most} separated by commas, got {text!r}")
    return values
