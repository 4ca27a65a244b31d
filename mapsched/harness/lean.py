"""Lean per-task callables: what profiling times and execution runs, one per task and batch size.

A segment's ``fx.GraphModule`` runs its ops through Python, one dispatch per op. With
``compile="jit"`` each segment is instead traced with ``torch.jit.trace`` on example
inputs of the batch size it will run at, then frozen (``torch.jit.freeze``: weights
inlined as constants, conv-BN folded): the TorchScript interpreter runs the ops without
the Python interpreter and releases the GIL while it does, so emulated devices on
threads of one host stop queueing behind each other's dispatch. A trace specialises on
shapes, so there is one callable per (task, number of inputs), built before any clock
starts (:func:`prepare`) and cached on the graph.

With ``compile="cuda-graph"`` the frozen trace of a task on a GPU is moreover captured
as a CUDA graph per batch size and replayed on the device's stream, one launch per job
instead of one per kernel; on the CPU it is ``jit``. This path has not run on a GPU yet:
each callable is checked against its fx module's outputs when built, and refused if
they differ.

A segment falls back to its GraphModule where a trace would not be faithful: a value
crossing into or out of it is not a tensor (a size, say), or tracing warns that it
turned a tensor into a Python constant. ``torch.compile`` is not offered: its inductor
backend builds C++ per graph, seconds per task and batch size, which no profile of
tens of tasks at several batch sizes can afford.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch

from mapsched.errors import HarnessError, shown
from mapsched.harness.graph import CoarseGraph
from mapsched.model.problem import COMPILE, Problem

__all__ = ["COMPILE", "check_compile", "prepare", "recorded_compile"]

WARM_CALLS = 3
"""Untimed calls of each new TorchScript callable: its profiling executor optimises the
graph over the first calls."""


def check_compile(compile: str, flag: str = "compile") -> str:
    """``compile`` if it is one of :data:`COMPILE`; else a one-line :class:`HarnessError` naming ``flag``."""
    if compile not in COMPILE:
        raise HarnessError(f"{flag}: expected one of {', '.join(COMPILE)}, got {shown(compile)}")
    return compile


def recorded_compile(problem: Problem, compile: str | None = None, flag: str = "compile") -> str:
    """The setting a run of ``problem`` uses: ``compile``, by default the one it was profiled with.

    Raises
    ------
    HarnessError
        ``compile`` is not one of :data:`COMPILE`, or differs from the problem's recorded
        setting (a problem without one was profiled with ``none``): one line naming both
        and ``flag``.
    """
    cal = problem.calibration
    recorded = "none" if cal is None or cal.compile is None else cal.compile
    if compile is None:
        return recorded
    check_compile(compile, flag)
    if compile != recorded:
        raise HarnessError(f"{flag}: the problem was profiled with tasks compiled {shown(recorded)}, this run asks for "
                           f"{shown(compile)}; run with {flag} {recorded} or profile again with {compile}")
    return compile


def _tensors(values: Sequence[Any]) -> bool:
    return all(isinstance(v, torch.Tensor) for v in values)


def close(a: torch.Tensor, b: torch.Tensor, tf32: bool = False) -> bool:
    """Whether ``a`` equals ``b`` up to the reordering of floating-point operations: rtol 1e-4,
    or with ``tf32`` (a CUDA device may compute convolutions and matrix products in TF32,
    with about three decimal digits) 1% of ``b``'s largest finite magnitude, still far below
    the error of a value routed to the wrong task. NaN matches NaN, as in the model's own
    runs (:mod:`mapsched.harness.graph`): a model whose outputs are NaN computes them
    wherever it runs. Integer and bool tensors must be equal, and dtypes the same.

    >>> nan = float("nan")
    >>> close(torch.tensor([1.0, nan]), torch.tensor([1.00001, nan])), close(torch.ones(2), torch.ones(3))
    (True, False)
    """
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if not (a.is_floating_point() or a.is_complex()):
        return torch.equal(a, b)
    if tf32:
        finite = b[torch.isfinite(b)]
        scale = float(finite.abs().max()) if finite.numel() else 0.0
        return torch.allclose(a, b, rtol=1e-2, atol=1e-2 * max(scale, 1e-6), equal_nan=True)
    return torch.allclose(a, b, rtol=1e-4, atol=1e-5, equal_nan=True)


def _build(graph: CoarseGraph, k: int, args: list[Any], compile: str,
           device: torch.device) -> tuple[Callable[..., Any], Any]:
    """Segment ``k``'s callable for arguments shaped as ``args``, and its outputs on them."""
    module = graph.module(k)
    out = module(*args)
    if compile == "none" or not _tensors(args) or not _tensors(out):
        return module, out
    with warnings.catch_warnings():
        # TorchScript is deprecated in favour of torch.compile, which needs a C++ build per graph.
        warnings.simplefilter("ignore", DeprecationWarning)
        # A tensor read as a Python number would be frozen into the trace: keep fx there.
        warnings.simplefilter("error", torch.jit.TracerWarning)
        try:
            traced = torch.jit.trace(module, tuple(args), check_trace=False)
        except torch.jit.TracerWarning:
            return module, out
        fn = torch.jit.freeze(traced.eval())
    for _ in range(WARM_CALLS):
        lean = fn(*args)
    if compile == "cuda-graph" and device.type == "cuda":
        fn = _graphed(fn, args, device)
        lean = fn(*args)
    # Freezing folds BN into convs: the same values up to the order of operations.
    if len(lean) != len(out) or not all(close(a, b, a.is_cuda) for a, b in zip(lean, out)):
        raise HarnessError(f"compile: the {compile} task {graph.segments[k].name} computes other values than its "
                           f"fx module; run with compile none")
    return fn, out


def _graphed(fn: Callable[..., Any], args: list[torch.Tensor], device: torch.device) -> Callable[..., Any]:
    """``fn`` captured once as a CUDA graph and replayed on the current stream.

    A call copies its arguments into the graph's static inputs and returns copies of
    its static outputs, which the next replay overwrites while consumers on other
    devices may still read them. Captured on a side stream after warm-up calls there,
    as CUDA graphs require; each graph keeps its own memory pool. A task that launches no
    kernel (a view, a reshape) captures an empty graph: ``fn`` itself is kept then.
    """
    static = [a.clone() for a in args]
    side, main = torch.cuda.Stream(device), torch.cuda.current_stream(device)
    side.wait_stream(main)
    with torch.cuda.stream(side):
        for _ in range(WARM_CALLS):
            fn(*static)
    main.wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torch.cuda.graph(graph):
            outs = fn(*static)
    empty = [w for w in caught if "Graph is empty" in str(w.message)]
    for w in caught:  # what else the capture warned of still reaches the caller
        if w not in empty:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if empty:
        return fn

    def replay(*xs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        for dst, x in zip(static, xs):
            dst.copy_(x)
        graph.replay()
        return tuple(o.clone() for o in outs)
    return replay


def prepare(graph: CoarseGraph, inputs: Sequence[torch.Tensor], n: int, compile: str,
            tasks: set[int] | None = None) -> dict[int, Callable[..., Any]]:
    """Every segment's callable for batches of ``n`` inputs, built once and cached on ``graph``.

    Parameters
    ----------
    graph : CoarseGraph
        The traced model, with its weights on the device the callables run on.
    inputs : sequence of Tensor
        The model's inputs for ``n`` inputs, on that device: a pass over them gives every
        segment example arguments of the right shapes.
    n : int
        Number of inputs in a batch (a job's ``len(inputs)``, a profile's batch size).
    compile : str
        One of :data:`COMPILE`.
    tasks : set of int, optional
        Segments needed (default all); the pass still runs every segment.

    Returns
    -------
    dict
        Segment index to its callable: it takes the segment's inputs and returns the
        tuple of its outputs. Model inputs (segments without nodes) have none.

    Notes
    -----
    One pass over the model when nothing is cached; with ``jit`` also one trace, one
    freeze and :data:`WARM_CALLS` calls per segment not cached yet (tens of ms for the
    small example models), and with ``cuda-graph`` on a GPU one capture more. Run under
    ``torch.inference_mode``.

    Examples
    --------
    >>> from mapsched.harness import trace
    >>> from mapsched.harness.models import resnet
    >>> m = resnet()
    >>> x = torch.zeros(m.input_shape)
    >>> calls = prepare(trace(m, x), [x], 1, "jit")
    >>> isinstance(calls[1], torch.jit.ScriptModule)
    True
    """
    cache, device = graph._lean, inputs[0].device
    values: dict[str, Any] = dict(zip(graph.placeholders, inputs))
    out: dict[int, Callable[..., Any]] = {}
    with torch.inference_mode():
        for k, seg in enumerate(graph.segments):
            if not seg.nodes:
                continue
            args = [values[v] for v in seg.inputs]
            key = (compile, k, n)
            if key in cache:
                result = cache[key](*args)
            else:
                cache[key], result = _build(graph, k, args, compile, device)
            values.update(zip(seg.outputs, result))
            if tasks is None or k in tasks:
                out[k] = cache[key]
    return out
