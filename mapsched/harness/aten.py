"""Trace a model's whole training step op by op, in fake mode, and cost it without running it.

``make_fx(step, tracing_mode="fake")`` records the aten ops of a step: the forward
through ``torch.func.functional_call``, a cross-entropy loss, the backward through
``torch.autograd.grad`` and a plain SGD update. Parameters, buffers and inputs are
fake tensors (shapes and dtypes, no storage), so neither weights, data nor memory
are needed, and a model built on the meta device traces as well as a real one.
Every recorded op becomes a task costed from the shapes in ``node.meta["val"]`` by
:func:`mapsched.generators.training.op_problem` (see ``docs/cost-model.md``).
"""

from __future__ import annotations

import logging
import math
import operator
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn
from torch.func import functional_call
from torch.fx.experimental.proxy_tensor import make_fx
from torch.utils.flop_counter import flop_registry

from mapsched import checks
from mapsched.errors import HarnessError, ProblemError, shown
from mapsched.generators.costs import Platform
from mapsched.generators.training import Op, op_problem
from mapsched.model.problem import Problem

__all__ = ["step_graph", "step_ops", "trace_step"]

_VIEWS = {torch.ops.aten._unsafe_view.default}
"""Ops that copy nothing although their schema does not say they alias (a reshape of a fresh tensor)."""


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _tensors(v)]
    return []


def _bytes(t: torch.Tensor) -> int:
    """Bytes a tensor addresses: an expanded (stride-0) dimension holds one copy of the data."""
    return t.element_size() * math.prod(s for s, st in zip(t.shape, t.stride()) if st != 0)


def _fresh(target: Any, value: Any) -> int:
    """Bytes of the outputs the op allocates: those its schema does not alias to an input
    (all of them for a target without a schema, such as a higher-order operator)."""
    returns = target._schema.returns if hasattr(target, "_schema") else ()
    if isinstance(value, torch.Tensor):
        value = (value,)
    if isinstance(value, (tuple, list)) and len(returns) == len(value):
        return sum(_bytes(v) for r, v in zip(returns, value) if r.alias_info is None and isinstance(v, torch.Tensor))
    return sum(_bytes(t) for t in _tensors(value))


def _is_view(target: Any) -> bool:
    if target in _VIEWS:
        return True
    rets = target._schema.returns if hasattr(target, "_schema") else ()
    return bool(rets) and all(r.alias_info is not None and not r.alias_info.is_write for r in rets)


def step_graph(model: nn.Module, input_shape: Sequence[int], input_dtype: torch.dtype | None = None, *,
               train: bool = True, lr: float = 0.01) -> torch.fx.GraphModule:
    """The aten graph of one training step (or, with ``train=False``, one forward pass) of ``model``.

    Parameters
    ----------
    model : nn.Module
        Any module, real or on the meta device; its output's last dimension is
        taken as class logits. Its training mode is set for the trace, then restored.
    input_shape : sequence of int
        The whole input batch's shape.
    input_dtype : torch.dtype, optional
        The input's dtype (``torch.long`` for token ids); the model's ``input_dtype``
        attribute, else ``float32``.
    train : bool
        Trace forward, ``cross_entropy`` of the output against integer labels of its
        shape less the last dimension, ``torch.autograd.grad`` of every parameter and
        ``p - lr * grad`` per parameter; else the forward alone under ``no_grad``.
    lr : float
        SGD learning rate (only a constant in the graph).

    Returns
    -------
    torch.fx.GraphModule
        Placeholders for the parameters, buffers, input and labels; every
        ``node.meta["val"]`` a fake tensor.

    Notes
    -----
    Runs the step once on fake tensors (plus a forward without autograd to learn the
    labels' shape): O(ops), with torch's dispatch per op.

    Examples
    --------
    >>> from mapsched.harness.models import gpt
    >>> m = gpt()
    >>> gm = step_graph(m, m.input_shape)
    >>> sum(n.op == "call_function" for n in gm.graph.nodes)
    319
    """
    dtype = input_dtype or getattr(model, "input_dtype", torch.float32)
    mode = torch._subclasses.fake_tensor.FakeTensorMode()

    def fake(shape: Sequence[int], dt: torch.dtype, stride: Sequence[int] | None = None,
             grad: bool = False) -> torch.Tensor:
        with mode:  # shapes and dtypes only: a real model's data is never read
            t = (torch.empty(shape, dtype=dt, device="cpu") if stride is None
                 else torch.empty_strided(shape, stride, dtype=dt, device="cpu"))
        return t.requires_grad_(grad)

    params = {k: fake(p.shape, p.dtype, p.stride(), train) for k, p in model.named_parameters()}
    buffers = {k: fake(b.shape, b.dtype, b.stride()) for k, b in model.named_buffers()}
    x = fake(input_shape, dtype)
    was_training = model.training
    model.train(train)
    log = logging.getLogger("torch._subclasses.fake_tensor")
    level = log.level
    log.setLevel(logging.CRITICAL)  # it logs a traceback for every failing op: ours is one line
    try:
        return _trace(model, params, buffers, x, mode, fake, train, lr)
    except HarnessError:
        raise
    except Exception as exc:  # the model's own code failed under tracing
        first = (str(exc).strip().splitlines() or [""])[0]
        raise HarnessError(f"model: make_fx could not trace it on an input of shape {list(input_shape)} "
                           f"({type(exc).__name__}: {first})") from exc
    finally:
        log.setLevel(level)
        model.train(was_training)


def _trace(model: nn.Module, params: dict, buffers: dict, x: torch.Tensor, mode: Any,
           fake: Callable[..., torch.Tensor], train: bool, lr: float) -> torch.fx.GraphModule:
    """:func:`step_graph`'s trace, on fake parameters, buffers and input made in ``mode``."""
    if not train:
        def forward(params: dict, buffers: dict, x: torch.Tensor) -> torch.Tensor:
            with torch.no_grad():
                return functional_call(model, {**params, **buffers}, (x,))
        return make_fx(forward, tracing_mode="fake")(params, buffers, x)
    with mode, torch.no_grad():  # the labels' shape is the output's less its last dimension
        out = functional_call(model, {**params, **buffers}, (x,))
    if not isinstance(out, torch.Tensor) or out.dim() < 1:
        raise HarnessError(f"model: training needs one output tensor of class logits, got {type(out).__name__}")
    labels = fake(out.shape[:-1], torch.long)
    names = list(params)

    def step(params: dict, buffers: dict, x: torch.Tensor, labels: torch.Tensor) -> list[torch.Tensor]:
        out = functional_call(model, {**params, **buffers}, (x,))
        loss = nn.functional.cross_entropy(out.flatten(0, -2), labels.flatten())
        grads = torch.autograd.grad(loss, [params[k] for k in names], allow_unused=True)
        with torch.no_grad():
            return [params[k] - lr * g for k, g in zip(names, grads) if g is not None]

    return make_fx(step, tracing_mode="fake")(params, buffers, x, labels)


def step_ops(gm: torch.fx.GraphModule) -> list[Op]:
    """One :class:`~mapsched.generators.training.Op` per aten op of a ``make_fx`` graph.

    Placeholders and constants are resident state: their bytes go to the first op that
    reads them (``weight``). ``getitem`` nodes, which pick an output of a multi-output
    op, are no ops: their readers read the producer. FLOPs come from
    ``torch.utils.flop_counter`` where it has a formula (matrix products,
    convolutions, attention), else one per element of the largest tensor touched.

    Notes
    -----
    O(nodes + uses).

    Examples
    --------
    >>> from mapsched.harness.models import gpt
    >>> m = gpt()
    >>> ops = step_ops(step_graph(m, m.input_shape))
    >>> len(ops), sum(op.view for op in ops)
    (299, 155)
    """
    ops: list[Op] = []
    where: dict[torch.fx.Node, int] = {}  # node -> the op that produces it; absent: state
    read: set[torch.fx.Node] = set()
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        if node.target is operator.getitem:
            if node.args[0] in where:
                where[node] = where[node.args[0]]
            continue
        val = node.meta.get("val")
        inputs: dict[int, float] = {}
        weight = moved = 0
        for arg in node.all_input_nodes:
            nbytes = sum(_bytes(t) for t in _tensors(arg.meta.get("val")))
            moved += nbytes
            if arg in where:
                inputs[where[arg]] = inputs.get(where[arg], 0) + nbytes
            elif arg not in read:  # a parameter, buffer, input or constant
                read.add(arg)
                weight += nbytes
        outs = _tensors(val)
        moved += sum(_bytes(t) for t in outs)
        formula = flop_registry.get(getattr(node.target, "overloadpacket", None))
        if formula is not None:
            args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), lambda n: n.meta["val"])
            flops = formula(*args, out_val=val, **kwargs)
        else:
            flops = max([t.numel() for t in (*_tensors([a.meta.get("val") for a in node.all_input_nodes]), *outs)],
                        default=0)
        view = _is_view(node.target)
        where[node] = len(ops)
        kind = node.target.overloadpacket.__name__ if hasattr(node.target, "overloadpacket") else node.name
        ops.append(Op(node.name, kind, float(flops), float(moved),
                      0.0 if view else float(_fresh(node.target, val)), view, float(weight), inputs))
    return ops


def trace_step(model: nn.Module, input_shape: Sequence[int] | None = None, *, train: bool = True,
               platform: Platform | None = None, lr: float = 0.01, name: str | None = None) -> Problem:
    """Trace one training step of ``model`` in fake mode and cost every op on ``platform``.

    Parameters
    ----------
    model : nn.Module
        See :func:`step_graph`; a meta-device model (shapes only) is enough.
    input_shape : sequence of int, optional
        The whole batch's shape; default ``model.input_shape``.
    train : bool
        The training step (default), or the forward pass alone.
    platform : Platform, optional
        Devices and links; :func:`~mapsched.generators.cpu_t4_a100` by default.
    lr : float
        SGD learning rate.
    name : str, optional
        Problem name; the model's class name by default.

    Returns
    -------
    Problem
        One task per aten op (``getitem`` folded into its producer), latency
        objective. Times follow the roofline of ``docs/cost-model.md`` with no jitter:
        the same model always gives the same problem.

    Notes
    -----
    The trace dominates (see :func:`step_graph`); costing is O(ops · devices).

    Examples
    --------
    >>> from mapsched.harness.models import gpt
    >>> p = trace_step(gpt())
    >>> p.n, p.m
    (299, 3)
    """
    if not isinstance(model, nn.Module):
        raise HarnessError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
    shape = tuple(input_shape or getattr(model, "input_shape", ()))
    if not shape:
        raise HarnessError("input_shape: the model sets no input_shape; give the batch's shape, e.g. 8,128")
    for v in shape:  # -1 failed deep in torch; 0 traced another graph, of an empty batch
        checks.count(v, "input_shape", err=HarnessError)
    checks.flag(train, "train", err=HarnessError)
    if not (checks.real(lr) and 0 < lr < math.inf):
        raise HarnessError(f"lr: expected a positive finite learning rate, got {shown(lr)}")
    if platform is not None and not isinstance(platform, Platform):
        raise HarnessError(f"platform: expected a mapsched.generators.Platform (e.g. generators.platform("
                           f"'cpu-t4-a100')), got {type(platform).__name__}")
    ops = step_ops(step_graph(model, shape, train=train, lr=lr))
    try:
        return op_problem(ops, platform, name or type(model).__name__.strip("_"))
    except ProblemError as exc:  # the step's ops at this batch fit no device
        raise HarnessError(f"input_shape: the step of a batch of shape {list(shape)} runs on no device here "
                           f"({exc}); give a smaller batch (--batch-size)") from None
