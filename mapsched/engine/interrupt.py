"""Stopping a solve early, on SIGINT or SIGTERM, with its best schedule so far.

An interrupt is a time limit that falls now: :class:`~mapsched.solve.SolveContext`
reports no time left once one is requested, so every method ends as it does at its
time limit and returns its best schedule. Native solvers that run without looking
at Python (CP-SAT, HiGHS) register a stop function with :func:`on_stop` while they
run, and :func:`request` calls it.

Within :func:`graceful`, the first SIGINT or SIGTERM requests the stop; a second
one ends the process at once with status 130. The signals arrive through
:func:`signal.set_wakeup_fd` on a watcher thread, because Python runs signal
handlers only between bytecodes, and a native solve holds the main thread for as
long as it runs.

Examples
--------
>>> import mapsched
>>> from mapsched.engine import interrupt
>>> p = mapsched.instances.load("topcuoglu2002")
>>> with interrupt.graceful():
...     interrupt.request()  # as a Ctrl-C would
...     r = mapsched.solve(p, "sa", time_limit=60)
...     stopped = interrupt.requested()
>>> stopped, r.solve_seconds < 60, mapsched.validate(p, r)
(True, True, [])
>>> interrupt.requested()  # the stop ended with the block: later solves run
False
"""

from __future__ import annotations

import math
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["graceful", "on_stop", "request", "requested", "seconds_left", "solving", "until"]

_requested = threading.Event()
_hooks: list[Callable[[], object]] = []
_lock = threading.Lock()


_graceful = 0  # graceful() blocks open
_solving = 0  # solve() calls running, in any thread


def requested() -> bool:
    """Whether a stop was requested and is in force: within a :func:`graceful` block, until
    the block ends; outside any block, until the last solve running ends."""
    return _requested.is_set()


def request() -> None:
    """Ask the running solves to stop and return their best schedules: within a
    :func:`graceful` block, every solve until the block ends; outside one (a service that
    cancels from another thread), the solves running now, not those started after them.
    Outside both, it stops only the native solvers running now (:func:`on_stop`)."""
    with _lock:
        if _graceful or _solving:
            _requested.set()
        hooks = list(_hooks)
    for stop in hooks:
        stop()


@contextmanager
def solving() -> Iterator[None]:
    """The block of a solve (:func:`mapsched.solve`): a request made outside any
    :func:`graceful` block ends when the last such block ends."""
    global _solving
    with _lock:
        _solving += 1
    try:
        yield
    finally:
        with _lock:
            _solving -= 1
            if not _solving and not _graceful:
                _requested.clear()


@contextmanager
def on_stop(stop: Callable[[], object]) -> Iterator[None]:
    """Call ``stop()`` (thread-safe, e.g. ``CpSolver.stop_search``) if a stop is requested
    while the block runs, or at once if one already was."""
    with _lock:
        _hooks.append(stop)
    try:
        if _requested.is_set():
            stop()
        yield
    finally:
        with _lock:
            _hooks.remove(stop)


@contextmanager
def graceful(prog: str = "mapsched") -> Iterator[None]:
    """Within the block, the first SIGINT or SIGTERM calls :func:`request`; a second one
    prints one line and exits with status 130. The request ends with the block (read
    :func:`requested` within it), so that a later solve in the process is not stopped by it.
    Only from the main thread."""
    global _graceful
    _requested.clear()
    read, write = os.pipe()
    os.set_blocking(write, False)
    signals = (signal.SIGINT, signal.SIGTERM)
    previous = {s: signal.signal(s, lambda *_: None) for s in signals}  # the watcher does the work
    previous_fd = signal.set_wakeup_fd(write, warn_on_full_buffer=False)

    def watch() -> None:
        while os.read(read, 1):  # one byte per signal; b"" once the pipe is closed
            if _requested.is_set():
                sys.stderr.write(f"{prog}: interrupted twice; stopped at once, nothing written\n")
                sys.stderr.flush()
                os._exit(130)
            request()

    watcher = threading.Thread(target=watch, daemon=True, name="mapsched-interrupt")
    with _lock:  # before the watcher reads a signal: its request is then in force
        _graceful += 1
    watcher.start()
    try:
        yield
    finally:
        with _lock:
            _graceful -= 1
        signal.set_wakeup_fd(previous_fd)
        for s, handler in previous.items():
            signal.signal(s, handler)
        os.close(write)
        watcher.join()
        os.close(read)
        _requested.clear()


_deadline: ContextVar[float] = ContextVar("mapsched_deadline", default=math.inf)


@contextmanager
def until(at: float) -> Iterator[None]:
    """Within the block, work with no best-so-far to return, and so no time limit of its own
    (the feasibility repair of a construction that dead-ended on memory or links), ends by
    ``at`` (a ``time.perf_counter()`` value) or the enclosing block's time, if earlier:
    :func:`mapsched.solve` and the bounds set it from their time limits. Threads started
    within the block do not see it."""
    token = _deadline.set(min(_deadline.get(), at))
    try:
        yield
    finally:
        _deadline.reset(token)


def seconds_left() -> float:
    """Seconds to the innermost :func:`until` block's time (infinite outside any)."""
    return _deadline.get() - time.perf_counter()
