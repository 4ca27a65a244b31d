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

__all__ = ["as_float", "count", "flag", "integer", "number", "probability", "real", "seconds"]


def real(value: Any) -> bool:
    """Whether ``value`` is a real number (a NumPy one too), not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def as_float(value: numbers.Real) -> float:
    """``value`` as a float; an int past the float range (a Python int has none) is an
    infinity of its sign, which the caller's range check then refuses in one line.

    >>> as_float(10**400), as_float(-10**400), as_float(3)
    (inf, -inf, 3.0)
    """
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def _span(low: float, high: float, above: bool) -> str:
    """The range from ``low`` to ``high`` in words (``above``: ``low`` itself excluded)."""
    if math.isinf(low):
        return f"of at most {high:g}"
    if math.isinf(high):
        return f"above {low:g}" if above else f"of at least {low:g}"
    return f"above {low:g} and up to {high:g}" if above else f"from {low:g} to {high:g}"


def number(value: Any, name: str, low: float = -math.inf, high: float = math.inf, *, above: bool = False,
           infinite: bool = False, none: bool = False, unit: str = "",
           err: type[MapschedError] = OptionError) -> float | None:
    """A real number (a NumPy one too, not a bool) from ``low`` to ``high``, above ``low`` where
    ``above``, as a float; or None where ``none``. NaN never passes, an infinity only where
    ``infinite`` (then past ``high`` too: "unlimited"). The message names the range, with
    ``unit`` (``" ms"``) after it.

    >>> number(1e308, "memory", 0, 1e18, unit=" bytes")
    Traceback (most recent call last):
    ...
    mapsched.errors.OptionError: memory: expected a number from 0 to 1e+18 bytes, got 1e+308
    """
    if type(value) is float and math.isfinite(value) and (low < value if above else low <= value) and value <= high:
        return value  # the common case, spared the slower ABC check below (a large schedule's times)
    if value is None and none:
        return None
    if not real(value):
        raise err(f"{name}: expected a number{' or None' if none else ''}, got {shown(value)}")
    v = as_float(value)
    if math.isnan(v) or (math.isinf(v) and not infinite):
        raise err(f"{name}: expected a finite number, got {shown(value)}")
    if v < low or (above and v == low) or (v > high and not (infinite and math.isinf(v))):
        raise err(f"{name}: expected a number {_span(low, high, above)}{unit}, got {shown(value)}")
    return v


def integer(value: Any, name: str, low: int = 0, high: int | None = None, *, none: bool = False,
            err: type[MapschedError] = OptionError) -> int | None:
    """An integer (a NumPy one too, not a bool or a float that looks like one) from ``low`` to
    ``high`` (no upper end where None), as an int; or None where ``none``. Counts, indices,
    thread numbers and seeds: a fraction or a negative one would be truncated or wrap around
    somewhere deep.

    >>> integer(3, "threads", 0, 1024), integer(None, "seed", none=True)
    (3, None)
    """
    if type(value) is int and low <= value and (high is None or value <= high):
        return value  # the common case, spared the slower ABC check below (a large file's batch sizes)
    if value is None and none:
        return None
    if not (isinstance(value, numbers.Integral) and not isinstance(value, bool)
            and low <= value and (high is None or value <= high)):
        span = f"of at least {low}" if high is None else f"from {low} to {high}"
        raise err(f"{name}: expected an integer {span}{' or None' if none else ''}, got {shown(value)}")
    return int(value)


def probability(value: Any, name: str, err: type[MapschedError] = OptionError) -> float:
    """A number from 0 to 1 (a NumPy one too, not a bool), as a float.

    >>> probability(0.25, "conn_prob")
    0.25
    """
    if not (real(value) and 0 <= value <= 1):
        raise err(f"{name}: expected a probability in [0, 1], got {shown(value)}")
    return float(value)


def seconds(value: Any, name: str, none: bool = True, err: type[MapschedError] = OptionError) -> float | None:
    """A positive number of seconds (``inf``: none), or None where ``none``; ``err`` is the
    error class raised (the harness raises its own), as in the functions below."""
    if value is None and none:
        return None
    if not (real(value) and as_float(value) > 0):  # nan is not; 10**400 s is no limit, as inf
        raise err(f"{name}: expected a positive number of seconds{' or None' if none else ''}, got {shown(value)}")
    return as_float(value)


def count(value: Any, name: str, least: int = 1, none: bool = False,
          err: type[MapschedError] = OptionError) -> int | None:
    """An integer of at least ``least`` (a NumPy one too), or None where ``none``: :func:`integer`
    with no upper end."""
    return integer(value, name, least, none=none, err=err)


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
