"""What several commands share: reading a problem, the summary lines and tables they print,
the progress bar, the time limit counted from the process's start, and ``--dask``."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import threading
import time
from collections.abc import Sequence
from typing import IO, Any, NoReturn

from mapsched import instances
from mapsched.engine import registry
from mapsched.errors import OptionError, shown
from mapsched.model.problem import Problem
from mapsched.model.schedule import Schedule

BUILTIN = "builtin:"
PROBLEM_HELP = "problem file (mapsched.problem/1), or builtin:NAME"
MAX_RUNS = 10_000
"""Most warm-up or timed runs, retries, schedules or rounds the harness commands take: a
count past it is a typo, which would otherwise run for days."""
MAX_INT = 2**31 - 1
"""The largest batch size or shape entry: torch's C++ side overflows past it."""
MAX_TORCH_SEED = 2**63 - 1
"""The largest seed ``torch.manual_seed`` takes."""


def _process_age() -> float:
    """Seconds since this process started (Linux; 0 elsewhere), so that a command's time
    limit counts the interpreter's start-up and the imports too."""
    try:
        with open("/proc/self/stat", encoding="ascii") as fh:
            started = int(fh.read().rsplit(")", 1)[1].split()[19])  # field 22, clock ticks after boot
        with open("/proc/uptime", encoding="ascii") as fh:
            uptime = float(fh.read().split()[0])
        return max(0.0, uptime - started / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0


STARTED = time.perf_counter() - _process_age()
"""When this process started, on the ``time.perf_counter`` clock: a command run from the shell
owns the process, and its time limit counts from there."""


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line (an :class:`OptionError`), not argparse's
    usage block and exit."""

    def error(self, message: str) -> NoReturn:
        raise OptionError(message.removeprefix("argument "))


def load_problem(ref: str) -> Problem:
    """A problem file, or ``builtin:NAME`` for a built-in instance."""
    if ref.startswith(BUILTIN):
        return instances.load(ref[len(BUILTIN):])
    return Problem.read(ref)


CONTENTION_HELP = ("transfers that take turns: 'none' (none), or comma-separated copy_engines=K (every device; 0: "
                   "its copies occupy it), concurrency=C (every link), duplex=true|false")


def contention_arg(text: str) -> dict[str, Any]:
    """An argparse type: ``--contention``'s value as :meth:`Problem.with_contention
    <mapsched.model.edits.Edits.with_contention>`'s arguments (``{}`` for ``none``; ``hardware``
    is ``{"hardware": True}``, which ``generate`` resolves from its preset)."""
    if text in ("none", "hardware"):
        return {} if text == "none" else {"hardware": True}
    out: dict[str, Any] = {}
    for part in text.split(","):
        key, eq, value = part.partition("=")
        key = key.strip()
        if not eq or key not in ("copy_engines", "concurrency", "duplex") or key in out:
            raise argparse.ArgumentTypeError(f"expected none, or copy_engines=K, concurrency=C and duplex=true|false "
                                             f"separated by commas (each once), got {text!r}")
        if key == "duplex":
            if value not in ("true", "false"):
                raise argparse.ArgumentTypeError(f"duplex: expected true or false, got {value!r}")
            out[key] = value == "true"
        else:
            low = 0 if key == "copy_engines" else 1
            try:
                out[key] = int(value)
            except ValueError:
                out[key] = -1
            if not low <= out[key] <= 1024:
                raise argparse.ArgumentTypeError(f"{key}: expected an integer from {low} to 1024, got {value!r}")
    return out


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain-text table: the first column left-aligned, the others right-aligned."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[c]) for r in cells) for c in range(len(headers))]
    lines = ["  ".join(c.rjust(w) if k else c.ljust(w) for k, (c, w) in enumerate(zip(r, widths)))
             for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def fmt(x: float | None, digits: int = 4) -> str:
    """``x`` to ``digits`` significant digits, ``-`` for none."""
    return "-" if x is None else f"{x:.{digits}g}"


def summary(r: Schedule) -> str:
    """One line on a solve's result: makespan, throughput, bound and gap, status, seconds."""
    gap = "-" if r.gap is None else f"{100 * r.gap:.1f}%"
    return (f"{r.method}: makespan {fmt(r.makespan, 6)} ms, throughput {fmt(r.throughput)} /s, "
            f"lower bound {fmt(r.lower_bound, 6)} (gap {gap}), {r.status}, {r.solve_seconds:.3f} s")


class ProgressBar:
    """A progress bar on a terminal for solves that last over a second.

    Used as the solve callback (it records the best makespan); a thread redraws it
    against the time limit (or just the elapsed time without one). Uses rich when
    installed (``mapsched[progress]``), else a plain one-line display.
    """

    DELAY = 1.0

    def __init__(self, method: str, time_limit: float | None, stream: IO[str] | None = None,
                 enabled: bool | None = None) -> None:
        self.method, self.time_limit = method, time_limit
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.best: float | None = None
        self.drawn = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __call__(self, seconds: float, makespan: float) -> None:
        self.best = makespan

    def __enter__(self) -> ProgressBar:
        if self.enabled:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _label(self) -> str:
        best = "-" if self.best is None else f"{self.best:.6g}"
        return f"{self.method}: {best}"

    def _run(self) -> None:
        t0 = time.perf_counter()
        if self._stop.wait(self.DELAY):
            return
        try:
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
        except ImportError:
            return self._run_plain(t0)
        cols = [TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn()]
        with Progress(*cols, console=Console(file=self.stream), transient=True) as bar:
            task = bar.add_task(self._label(), total=self.time_limit)
            self.drawn = True
            while not self._stop.wait(0.1):
                bar.update(task, description=self._label(), completed=time.perf_counter() - t0)

    def _run_plain(self, t0: float) -> None:
        while True:
            limit = f" / {self.time_limit:g}" if self.time_limit else ""
            self.stream.write(f"\r{self._label()}  {time.perf_counter() - t0:.1f}{limit} s ")
            self.stream.flush()
            self.drawn = True
            if self._stop.wait(0.1):
                self.stream.write("\r" + " " * 60 + "\r")
                return


def left(args: argparse.Namespace, reserve: float = 0.0) -> float | None:
    """What is left of the command's time limit: less the time since the command started and
    ``reserve`` seconds kept back for what follows."""
    if args.time_limit is None:
        return None
    return max(0.01, args.time_limit - (time.perf_counter() - args.started) - reserve)


# ---------------------------------------------------------------- --dask
DASK_HELP = "run on a dask.distributed cluster: tcp://HOST:PORT of its scheduler, or local:N worker processes"


def dask_address(text: str) -> str:
    """An argparse type: ``tcp://HOST:PORT`` or ``local:N`` (checked here, reached later)."""
    from mapsched.engine.dask import parse_address

    try:
        parse_address(text)
    except OptionError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--dask: ")) from None
    return text


@contextlib.contextmanager
def cluster(address: str | None, method: str | None = None) -> Any:
    """The executor of ``--dask ADDRESS`` (None without it), connected before any work and
    closed on exit; ``method`` must be one that takes an executor."""
    if address is None:
        yield None
        return
    if method is not None and not any(o.name == "executor" for o in registry.get(method).options):
        takes = [m.name for m in registry.all_methods() if any(o.name == "executor" for o in m.options)]
        raise OptionError(f"--dask: method {shown(method)} runs in this process; give -m {' or '.join(takes)}")
    from mapsched.engine.dask import connect

    with connect(address) as executor:
        yield executor


def local_limit(args: argparse.Namespace) -> None:
    """Refuse a time limit that a ``--dask local:N`` cluster's start and close alone would pass."""
    if args.dask is not None and args.dask.startswith("local:") and args.time_limit is not None:
        from mapsched.engine.dask import LOCAL_LEAST

        if args.time_limit < LOCAL_LEAST:
            raise OptionError(f"--time-limit: {args.time_limit:g} s is less than starting and closing a local:N "
                              f"cluster may take; give at least {LOCAL_LEAST:g} s, or leave out --dask")


def closing(address: str | None) -> float:
    """Seconds to keep back within the time limit for closing ``--dask ADDRESS``: a local
    cluster's worker processes end after the command's work."""
    if address is None or not address.startswith("local:"):
        return 0.0
    from mapsched.engine.dask import LOCAL_CLOSE

    return LOCAL_CLOSE
