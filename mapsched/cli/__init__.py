"""The ``mapsched`` command line.

Every user error ends with one line on stderr and exit status 2, never a
traceback; ``validate`` exits 1 for a well-formed but invalid schedule.

Each command lives in a module of this package with its parser (``add_NAME``, which
sets the handler as the parser's default) and its handler (``cmd_NAME``); this module
assembles the parser and runs a command. The modules import torch, the solvers and
the harness inside their handlers, so that ``--help`` stays quick.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import time
from collections.abc import Sequence
from typing import NoReturn

from mapsched.cli import bench, bound, files, generate, harness, methods, solve, train
from mapsched.cli.common import STARTED, Parser, ProgressBar, load_problem
from mapsched.errors import MapschedError, OptionError
from mapsched.model import files as model_files

__all__ = ["ProgressBar", "build_parser", "load_problem", "main", "run"]

_COMMANDS = (solve.add_solve, solve.add_adapt, files.add_validate, files.add_simulate, files.add_convert,
             bound.add_bound, methods.add_methods, files.add_plot, generate.add_generate, bench.add_bench,
             harness.add_profile, harness.add_trace, harness.add_run, harness.add_calibrate, train.add_train,
             methods.add_demo)
"""Each command's parser, in the order ``--help`` lists them."""
_METHOD_OPTIONS = ("solve", "adapt")
"""The commands that take a method's options after their own (``--name value``)."""


def build_parser() -> argparse.ArgumentParser:
    """The parser of every command; each parsed command carries its handler as ``handler``."""
    ap = Parser(prog="mapsched", description="Map and schedule DNN graphs on heterogeneous devices.")
    sub = ap.add_subparsers(dest="command", required=True, parser_class=Parser)
    for add in _COMMANDS:
        add(sub)
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    """Run a command: from the shell (``argv`` None) its time limit counts from the process's
    start; called from Python with ``argv``, from this call."""
    started = STARTED if argv is None else time.perf_counter()
    parser = build_parser()
    command = None
    try:
        args, extra = parser.parse_known_args(argv)
        command = args.command
        args.started = started
        if args.command in _METHOD_OPTIONS:
            return args.handler(args, extra)
        if extra:
            raise OptionError(f"unrecognized arguments: {' '.join(extra)}")
        return args.handler(args)
    except MapschedError as exc:
        print(f"mapsched: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("mapsched: interrupted", file=sys.stderr)
        return 130
    except MemoryError:  # files are written whole or not at all, so nothing is left half-written
        print(f"mapsched: error: out of memory in '{command}'; give a smaller problem (tasks, devices, batch) "
              "or a lighter method, or run it on a machine with more memory", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader went away (``mapsched methods | head``): not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so the exit flush cannot fail again
        return 0


def _stdout_ours() -> None:
    """Point file descriptor 1 at stderr and ``sys.stdout`` at a copy of the real standard
    output, so that it carries only what mapsched prints: native code writes to descriptor 1
    directly (HiGHS 1.12's MIP prints a debug line in some solves), and a schedule printed
    into a file must stay JSON. Nothing changes where either stream is missing."""
    try:
        sys.stdout.flush()
        real = os.dup(1)
        os.dup2(2, 1)
    except (OSError, ValueError, AttributeError):
        return
    sys.stdout = open(real, "w", encoding=sys.stdout.encoding, errors=sys.stdout.errors)  # noqa: SIM115
    model_files.stdout_fd = real


def run() -> NoReturn:
    """The ``mapsched`` program: :func:`main`, then an exit that skips the interpreter's
    teardown of the solver libraries (noticeable after a CP-SAT or HiGHS solve, and past
    the time limit), which holds nothing of ours: every file is written and closed by then."""
    _stdout_ours()
    if sys.argv[1:2] not in (["solve"], ["adapt"]):  # those stop their solve on it (mapsched.interrupt)
        # SIGTERM (a job scheduler's stop) ends the command as Ctrl-C does: cleaned up, what
        # it wrote kept (a sweep's rows), its worker processes stopped.
        signal.signal(signal.SIGTERM, signal.default_int_handler)
    code = main()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BrokenPipeError, ValueError):  # a reader gone, or a stream closed
            stream.flush()
    os._exit(code)
