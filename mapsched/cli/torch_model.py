"""The user's PyTorch model, as the harness commands load and first run it: ``MODULE:FACTORY``
imported (from the current folder too), its input shape checked, and what it raises reported
in one line naming the model or ``--input-shape``, not in torch's traceback."""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Iterator, Sequence
from typing import Any

from mapsched.checks import integers
from mapsched.cli.common import MAX_INT
from mapsched.errors import MapschedError, OptionError, first_line, shown
from mapsched.model.problem import Problem
from mapsched.usercode import load_model as load_user_model
from mapsched.usercode import search_here, user_code


def load_harness() -> Any:
    """The harness package, or a one-line error where PyTorch is missing."""
    try:
        from mapsched import harness
    except ImportError as exc:
        raise OptionError(f"this command needs PyTorch ({exc}); pip install 'mapsched[torch]'") from None
    return harness


def model_files(ref: str) -> list[str]:
    """The source file of ``MODULE:FACTORY``'s module, if it is one: an input of the command,
    which its ``-o`` must not overwrite."""
    import importlib.util

    search_here()
    try:
        spec = importlib.util.find_spec(ref.partition(":")[0])
    except Exception:  # a bad name, or a parent package failing as it runs: reported when the model is loaded
        return []
    return [spec.origin] if spec is not None and spec.origin and os.path.isfile(spec.origin) else []


def load_model(ref: str, input_shape: str | None) -> tuple[Any, tuple[int, ...]]:
    """Build the model of ``MODULE:FACTORY`` and the input shape to use (batch of 1 first)."""
    model = load_user_model(ref)
    import torch

    if not isinstance(model, torch.nn.Module):
        raise OptionError(f"model: {ref}() returned a {type(model).__name__}, not a torch.nn.Module")
    shape = integers(input_shape, "--input-shape", MAX_INT) if input_shape else getattr(model, "input_shape", None)
    if shape is None:
        raise OptionError("--input-shape: the model sets no input_shape; give one, e.g. --input-shape 1,3,224,224")
    if not input_shape and not (isinstance(shape, (tuple, list)) and shape
                                and all(type(v) is int and 1 <= v <= MAX_INT for v in shape)):
        raise OptionError(f"--input-shape: the model's input_shape {shown(shape)} is no shape of positive integers; "
                          "give one, e.g. --input-shape 1,3,224,224")
    return model, tuple(shape)


_SHAPE_ERRORS = (RuntimeError, ValueError, TypeError, IndexError, AssertionError, MemoryError, OverflowError)
"""What torch (and a model's own asserts) raise on an input of a shape the model does not take."""


@contextlib.contextmanager
def model_input(shape: Sequence[int], given: bool, what: str = "runs", rows: int | None = None) -> Iterator[None]:
    """The user's model failing on its first input: one line, not torch's traceback. It names
    --input-shape where the user gave the shape (``given``) and the error is one that a shape
    causes (one the model does not take, or too large to allocate); else the model, which
    raised on its own input_shape, or raised what no shape causes (a KeyError). ``rows``,
    where the input ran with the problem's rows in place of its first dimension."""
    try:
        with user_code("model: running it", exits_only=True):
            yield
    except MapschedError:
        raise
    except Exception as exc:
        ran = ("" if rows is None or list(shape[:1]) == [rows]
               else f" with its first dimension {rows}, the problem's inputs,")
        if given and isinstance(exc, _SHAPE_ERRORS):
            raise OptionError(f"--input-shape: the model {what} on no input of shape {list(shape)}{ran} "
                              f"({first_line(exc)}); give a shape it takes") from None
        on = f"an input of shape {list(shape)}" if given else f"its input_shape {list(shape)}"
        fix = ", or its input_shape, or give --input-shape" if isinstance(exc, _SHAPE_ERRORS) and not given else ""
        raise OptionError(f"model: {'running' if what == 'runs' else 'tracing'} it on {on}{ran.rstrip(',')} raised "
                          f"{type(exc).__name__}: {first_line(exc)}; fix the model{fix}") from None


@contextlib.contextmanager
def model_runs(what: str) -> Iterator[None]:
    """The user's model raising where the harness runs it after its first input went through
    (a batch of another size, the schedule's jobs): one line naming the model, not a traceback."""
    try:
        with user_code("model: running it", exits_only=True):
            yield
    except (MapschedError, MemoryError):  # ours are one line already; main reports memory
        raise
    except Exception as exc:
        raise OptionError(f"model: it raised {type(exc).__name__}: {first_line(exc)} while {what}; "
                          "fix the model") from None


def checked_input(torch: Any, model: Any, shape: Sequence[int], seed: int, given: bool,
                   rows: int | None = None) -> Any:
    """A seeded random input of ``shape`` (with ``rows`` rows, if given) that ``model`` has run on
    once; ``given``: whether the user gave the shape (see :func:`model_input`)."""
    import inspect
    import warnings

    from mapsched.harness.graph import check_runnable, random_input

    check_runnable(model)
    try:
        params = list(inspect.signature(model.forward).parameters.values())
    except (TypeError, ValueError):  # a forward with no signature to read: run it as it is
        params = []
    needed = [p for p in params if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if len(needed) > 1:
        raise OptionError(f"model: its forward takes {', '.join(p.name for p in params)}, and the command line "
                          "gives it one tensor; wrap it so that forward takes one tensor, or profile it from "
                          "Python with mapsched.harness.profile(model, (x, y, ...), devices)")
    with model_input(shape, given, rows=rows):
        x = random_input(model, tuple(shape) if rows is None else (rows, *shape[1:]), seed)
        with torch.inference_mode(), warnings.catch_warnings():  # a failing model's warnings: lines before ours
            warnings.simplefilter("ignore")
            model(x)
    return x


def model_inputs(torch: Any, model: Any, problem: Problem, shape: tuple[int, ...], seed: int, given: bool) -> Any:
    """The seeded random inputs of ``run`` and of calibration: one row per input of ``problem``."""
    return checked_input(torch, model, shape, seed, given, problem.L)


def set_threads(torch: Any, args: argparse.Namespace) -> None:
    """Apply ``--threads`` and ``--interop-threads``, as profile and run both take them."""
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.interop_threads and args.interop_threads != torch.get_num_interop_threads():
        try:
            torch.set_num_interop_threads(args.interop_threads)
        except RuntimeError:  # PyTorch sets it once, before any inter-op work
            raise OptionError("--interop-threads: PyTorch can no longer change it in this process; set it "
                              "before anything runs, or leave it at its default") from None

