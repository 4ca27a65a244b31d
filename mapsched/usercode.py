"""Running the user's code: model modules, their factories, suites files and case builders.

mapsched imports and runs code it did not write (``mapsched profile MODULE:FACTORY``,
``bench --suites FILE``). What that code raises must end as every other error does, in
one line and status 2 with nothing written, never as the user's own exit: a module that
runs ``sys.exit(0)`` as it is imported made ``mapsched profile`` end with status 0 and
nothing printed. :func:`user_code` turns whatever the code raises into an error of the
caller's class, :class:`SystemExit` and every other :class:`BaseException` included,
except a real interrupt (Ctrl-C or SIGTERM, which ``mapsched.cli`` turns into
:class:`KeyboardInterrupt`): that one goes on, to end the command as an interrupt does.

Examples
--------
>>> with user_code("model: importing 'q'"):
...     raise SystemExit(0)
Traceback (most recent call last):
...
mapsched.errors.OptionError: model: importing 'q' called sys.exit(0); the user's code must not end mapsched
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from mapsched.errors import MapschedError, OptionError, first_line, shown

__all__ = ["load_model", "user_code"]


@contextmanager
def _signals_seen() -> Iterator[list[int]]:
    """The interrupting signals (SIGINT, SIGTERM) that arrive within the block, noted before
    their handlers run, so that a :class:`KeyboardInterrupt` they raise can be told from one
    the user's code raises. Outside the main thread no handler can be set: nothing is noted."""
    seen: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield seen
        return
    previous: dict[int, Any] = {}
    for signum in (signal.SIGINT, signal.SIGTERM):
        handler = signal.getsignal(signum)
        if callable(handler):
            def note(num: int, frame: Any, handler: Callable[..., Any] = handler) -> Any:
                seen.append(num)
                return handler(num, frame)
            previous[signum] = handler
            signal.signal(signum, note)
    try:
        yield seen
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _origin(exc: BaseException) -> str | None:
    """The module whose code raised ``exc``: that of the innermost frame of its traceback."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return None if tb is None else tb.tb_frame.f_globals.get("__name__")


def _ended(exc: BaseException) -> str:
    """How ``exc`` ended the user's code, for a message."""
    origin = _origin(exc)
    where = f" in module {shown(origin)}" if origin and not origin.startswith("mapsched.") else ""
    if isinstance(exc, SystemExit):
        return f"called sys.exit({shown(exc.code)}){where}; the user's code must not end mapsched"
    if isinstance(exc, KeyboardInterrupt):
        return f"raised KeyboardInterrupt{where}, though no interrupt came; the user's code must not end mapsched"
    if not isinstance(exc, Exception):
        return f"raised {type(exc).__name__}{where}: {first_line(exc)}; the user's code must not end mapsched"
    return f"failed: {type(exc).__name__}: {first_line(exc)}"


@contextmanager
def user_code(what: str, err: type[MapschedError] = OptionError, exits_only: bool = False) -> Iterator[None]:
    """Run the block, the user's code: what it raises becomes a one-line ``err`` that starts
    with ``what`` (already shown, e.g. ``model: importing 'q'``); a :class:`MapschedError`
    and a :class:`MemoryError` go on as they are, and so does a :class:`KeyboardInterrupt`
    that a real interrupt raised. ``exits_only``: only what is no :class:`Exception` (its
    ``sys.exit``, its own :class:`KeyboardInterrupt`), leaving errors to the caller's own
    messages."""
    with _signals_seen() as seen:
        try:
            yield
        except (MapschedError, MemoryError):  # ours are one line already; the command reports memory
            raise
        except KeyboardInterrupt as exc:
            if seen or threading.current_thread() is not threading.main_thread():
                raise  # Ctrl-C or SIGTERM: the command's own interrupt (exit 130)
            raise err(f"{what} {_ended(exc)}") from None
        except Exception as exc:
            if exits_only:
                raise
            raise err(f"{what} {_ended(exc)}") from None
        except BaseException as exc:  # SystemExit, GeneratorExit, a class of the user's own
            raise err(f"{what} {_ended(exc)}") from None


def search_here() -> None:
    """Let ``MODULE:FACTORY`` name a module in the current folder, as ``python -m`` does: the
    ``mapsched`` script's path starts at its own folder. Appended, so that a file there does
    not hide an installed package of the same name."""
    here = os.getcwd()
    if "" not in sys.path and here not in sys.path:
        sys.path.append(here)


def load_model(ref: str) -> Any:
    """What the factory of ``MODULE:FACTORY`` returns (``mapsched profile``, ``trace``, ``run``):
    its module imported and the factory called within :func:`user_code`, so that each one's
    failure, ``sys.exit`` or stray :class:`KeyboardInterrupt` is a one-line :class:`OptionError`
    naming the module, and nothing is written. The current folder is searched for the module
    after ``sys.path``, as ``python -m`` does."""
    module, _, factory = ref.partition(":")
    if not module or not factory:
        raise OptionError(f"model: expected MODULE:FACTORY (e.g. mapsched.harness.models:resnet), got {shown(ref)}")
    search_here()
    try:
        with user_code(f"model: importing {shown(module)}", exits_only=True):
            build = getattr(importlib.import_module(module), factory)
    except MapschedError:
        raise
    except (ImportError, AttributeError) as exc:
        raise OptionError(f"model: cannot load {shown(ref)} ({first_line(exc)}); check the module path and "
                          "factory name") from None
    except Exception as exc:  # the module's own code (a syntax error, a raise): one line
        raise OptionError(f"model: importing {shown(module)} failed: {type(exc).__name__}: {first_line(exc)}") from None
    with user_code(f"model: {shown(ref, quote=False)}()", exits_only=True):
        try:
            return build()
        except Exception as exc:  # the user's code: its first line of error, as ours are
            raise OptionError(f"model: {shown(ref, quote=False)}() failed: {type(exc).__name__}: {first_line(exc)}; "
                              "a factory takes no arguments and returns an nn.Module") from None
