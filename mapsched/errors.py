"""Exceptions raised by mapsched.

Every error a user can cause derives from :class:`MapschedError` and carries a
one-line message that names the offending field and says what is expected, so
the command line can print it without a traceback.
"""

import reprlib

MESSAGE_LENGTH = 4000
"""The most characters of a :class:`MapschedError`'s message; a longer one is cut in the middle."""


class MapschedError(Exception):
    """Base class of every error caused by user input.

    Its message is one line that a terminal shows as it is: every user value in it is
    quoted through :func:`shown`, and, should one have been missed, a control character
    that reaches the message is escaped here (never a line break or an ANSI escape) and
    the message is cut to :data:`MESSAGE_LENGTH` characters.

    >>> str(MapschedError("name a\\nb\\x1b[2J"))
    'name a\\\\nb\\\\x1b[2J'
    """

    def __init__(self, *args: object) -> None:
        if args and isinstance(args[0], str):
            args = (_one_line(args[0]), *args[1:])
        super().__init__(*args)


def _one_line(text: str) -> str:
    """``text`` with every unprintable character escaped as ``repr`` does, cut to :data:`MESSAGE_LENGTH`."""
    if not text.isprintable():
        text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    return _cut(text, MESSAGE_LENGTH)


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


SHOWN_LENGTH = 80
"""The most characters :func:`shown` gives of one value: a longer one is cut in the middle, at ``...``."""

_SHOW = reprlib.Repr()
_SHOW.maxstring = _SHOW.maxother = SHOWN_LENGTH
_SHOW.maxlevel = 2


def _cut(text: str, most: int) -> str:
    """``text`` cut in the middle to ``most`` characters, the cut marked ``...``."""
    if len(text) <= most:
        return text
    head = (most - 3 + 1) // 2
    return text[:head] + "..." + text[len(text) - (most - 3 - head):]


def shown(value: object, quote: bool = True) -> str:
    """``value`` as a message quotes it: every name, path or value a user gave goes through this.

    Escaped as ``repr`` escapes it (a newline, an ANSI escape or a right-to-left mark shows as
    ``\\n``, ``\\x1b``, ``\\u202e``: visible, never interpreted by the terminal) and cut in the
    middle at ``...`` to :data:`SHOWN_LENGTH` characters, so that a megabyte name, a deeply
    nested list or a control character from a hostile file cannot become the message.
    ``quote=False`` leaves a string's quotes off, for a name or path that leads a message
    or joins others (``a -> b``); other values are shown as with quotes.

    >>> shown("conv1"), shown("conv1", quote=False), shown("a\\nb\\x1b[31m", quote=False)
    ("'conv1'", 'conv1', 'a\\\\nb\\\\x1b[31m')
    >>> len(shown("x" * 100_000))
    80
    """
    if isinstance(value, str):
        if len(value) > 2 * SHOWN_LENGTH:  # only its ends can show: escape no more than them
            value = value[:SHOWN_LENGTH] + value[-SHOWN_LENGTH:]
        text = repr(str(value))
        if len(text) <= SHOWN_LENGTH:
            return text if quote else text[1:-1]
        return text[0] + _cut(text[1:-1], SHOWN_LENGTH - 2) + text[-1] if quote else _cut(text[1:-1], SHOWN_LENGTH)
    return _cut(_SHOW.repr(value), SHOWN_LENGTH)


def first_line(exc: BaseException) -> str:
    """An exception's message, cut to its first line and :func:`shown` (its type if it has none).

    >>> first_line(RuntimeError("no memory\\nframe #0 ..."))
    'no memory'
    """
    text = str(exc).strip()
    return shown(text.splitlines()[0], quote=False) if text else type(exc).__name__
