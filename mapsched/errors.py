"""Exceptions raised by mapsched.

Every error a user can cause derives from :class:`MapschedError` and carries a
one-line message that names the offending field and says what is expected, so
the command line can print it without a traceback.
"""

import reprlib


class MapschedError(Exception):
    """Base class of every error caused by user input."""


class ProblemError(MapschedError, ValueError):
    """A problem (task graph, system or objective) is malformed or inconsistent."""


class ScheduleError(MapschedError, ValueError):
    """A schedule file is malformed (as opposed to well-formed but invalid)."""


class InfeasibleError(MapschedError):
    """No schedule exists for a mapping, or a method found none."""


class OptionError(MapschedError, ValueError):
    """An unknown method or a bad method option."""


class HarnessError(MapschedError, ValueError):
    """A model, device or input that the measurement harness cannot use."""


_SHOW = reprlib.Repr()
_SHOW.maxstring = _SHOW.maxother = 60
_SHOW.maxlevel = 2


def shown(value: object) -> str:
    """``repr(value)`` cut to a few dozen characters, for one-line messages about file content:
    a megabyte string or a deeply nested list from a hostile file must not become the message."""
    return _SHOW.repr(value)


def first_line(exc: BaseException) -> str:
    """An exception's message, cut to its first line and 80 characters (its type if it has none).

    >>> first_line(RuntimeError("no memory\\nframe #0 ..."))
    'no memory'
    """
    text = str(exc).strip()
    return text.splitlines()[0][:80] if text else type(exc).__name__
