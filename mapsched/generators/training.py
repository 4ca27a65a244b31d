"""Training steps op by op: the cost model of traced steps, and a generator of transformer-shaped ones.

A training step (forward, loss, backward, optimizer update) is a graph of tens of
thousands of small ops. :class:`Op` describes one by its FLOPs and bytes;
:func:`op_problem` turns a list of them into a :class:`~mapsched.Problem` with the
roofline of ``docs/cost-model.md`` on every device of a platform. The torch harness
fills :class:`Op` from a ``make_fx`` trace (``mapsched trace``);
:func:`transformer_train` builds the same graph without torch, by replaying the
aten ops that PyTorch's autograd emits for a per-head GPT decoder, so that tests and
benchmarks get 10k-40k-op training graphs anywhere.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mapsched.generators.costs import Platform, cpu_t4_a100
from mapsched.generators.networks import LAUNCH_MS, PEAK_BYTES, PEAK_FLOPS
from mapsched.model.problem import Edge, Problem, Task

__all__ = ["VIEW_MS", "Op", "op_problem", "transformer_train", "transformer_train_ops"]

VIEW_MS = 0.002
"""Time of a view-like op (view, transpose, expand, slice, detach...) on every device, in ms:
it launches no kernel, only the host's dispatch."""


@dataclass
class Op:
    """One op of a step, as :func:`op_problem` costs it.

    Attributes
    ----------
    name : str
        Unique task name.
    kind : str
        The op type (an aten op name such as ``mm`` or ``view``).
    flops : float
        Floating-point operations.
    moved : float
        Bytes read and written (every distinct input and output tensor once).
    output : float
        Bytes the op allocates: its outputs, or 0 for a view (it aliases its input).
    view : bool
        View-like: costs :data:`VIEW_MS` on every device whatever its size.
    weight : float
        Bytes of parameters, buffers and data inputs that this op is the first to read;
        they are resident where it runs.
    inputs : dict of int to float
        Producer op index (earlier in the list) -> bytes this op reads from it.
    """

    name: str
    kind: str
    flops: float
    moved: float
    output: float
    view: bool = False
    weight: float = 0.0
    inputs: dict[int, float] = field(default_factory=dict)


def op_problem(ops: Sequence[Op], platform: Platform | None = None, name: str = "step",
               seed: int | None = None) -> Problem:
    """The latency problem of running ``ops`` once, each op a task.

    An op takes ``max(flops / 19.5 TFLOP/s, moved / 1.5 TB/s) + 10 us`` on the reference
    device (an A100 in fp32), times the device's slowdown; a view takes :data:`VIEW_MS`
    everywhere. Each task's ``output_bytes`` is ``op.output``, its ``weight_bytes``
    ``op.weight`` and its ``input_bytes`` 0 (its inputs are their producers' outputs,
    already counted); an edge carries the bytes the consumer reads.

    Parameters
    ----------
    ops : sequence of Op
        In a topological order (every input index below the op's own).
    platform : Platform, optional
        Devices and links; :func:`~mapsched.generators.cpu_t4_a100` by default. The
        batching exponent does not apply: the batch is inside the ops' shapes.
    name : str
        Problem name.
    seed : int, optional
        Draw the cost model's per-(op, device type) lognormal jitter (sigma 0.15)
        from this seed; without one, times follow the roofline exactly.

    Returns
    -------
    Problem
        Latency objective, every device running batches of 1.

    Notes
    -----
    O(n·m + E) for n ops on m devices, plus the problem's own checks.

    Examples
    --------
    >>> ops = [Op("mm", "mm", 2 * 1024**3, 3 * 4 * 1024**2, 4 * 1024**2),
    ...        Op("t", "t", 0, 0, 0, view=True, inputs={0: 4 * 1024**2})]
    >>> p = op_problem(ops)
    >>> round(float(p.dur[0, 2]), 4), float(p.dur[1, 0])
    (0.1201, 0.002)
    """
    plat = platform or cpu_t4_a100()
    base = np.array([max(op.flops / PEAK_FLOPS, op.moved / PEAK_BYTES) * 1000.0 + LAUNCH_MS for op in ops])
    if seed is None:
        times = base[:, None] * np.array([d.slowdown for d in plat.devices])[None, :]
    else:
        table = plat.latencies(base, (1,), np.random.default_rng(seed))
        times = np.array([[row[d.name][1] for d in plat.devices] for row in table]).reshape(len(ops), -1)
    views = np.array([op.view for op in ops], dtype=bool)
    times[views] = VIEW_MS
    devices = [d.name for d in plat.devices]
    tasks = [Task(op.name, dict(zip(devices, map(float, times[i]))), op.weight, 0.0, op.output)
             for i, op in enumerate(ops)]
    edges = [Edge(ops[j].name, op.name, b) for op in ops for j, b in op.inputs.items()]
    return Problem(tasks, edges, plat.system((1,)), None, name)


# ------------------------------------------------------------------ the generator
@dataclass(eq=False)
class _T:
    """A tensor of the generated step: its shape, producer (-1: state) and what autograd needs."""

    shape: tuple[int, ...]
    op: int = -1
    itemsize: int = 4
    grad: bool = False
    contiguous: bool = True

    @property
    def nbytes(self) -> int:
        return self.itemsize * math.prod(self.shape)


_Rule = Callable[[list[Any]], list[Any]]
"""A backward rule: the gradients of an entry's outputs (None where an output has none) to those
of its inputs (None where an input gets none)."""


class _Step:
    """Records aten-level ops with their backward rules, then differentiates and updates.

    Each primitive emits the forward ops that ``make_fx`` records for it and returns a
    backward rule that emits the ops autograd runs for it, so that the generated graph
    has the op mix, FLOPs, bytes and dependencies of a traced step.
    """

    def __init__(self) -> None:
        self.ops: list[Op] = []
        self.counts: Counter[str] = Counter()
        self.read: set[_T] = set()
        self.params: list[_T] = []
        self.tape: list[tuple[_Rule, list[_T], list[_T]]] = []

    def state(self, shape: tuple[int, ...], itemsize: int = 4, param: bool = False) -> _T:
        t = _T(shape, -1, itemsize, grad=param)
        if param:
            self.params.append(t)
        return t

    def emit(self, kind: str, ins: Sequence[_T], shapes: Sequence[tuple[int, ...]], *, flops: float | None = None,
             view: bool = False, itemsize: int = 4, contiguous: bool = True) -> list[_T]:
        k = len(self.ops)
        outs = [_T(s, k, itemsize, contiguous=contiguous) for s in shapes]
        uniq = list(dict.fromkeys(ins))
        numel = [math.prod(t.shape) for t in (*uniq, *outs)]
        op = Op(f"{kind}_{self.counts[kind]}" if self.counts[kind] else kind, kind,
                float(max(numel) if flops is None else flops),
                float(sum(t.nbytes for t in (*uniq, *outs))), 0.0 if view else float(sum(o.nbytes for o in outs)),
                view)
        self.counts[kind] += 1
        for t in uniq:
            if t.op >= 0:
                op.inputs[t.op] = op.inputs.get(t.op, 0.0) + t.nbytes
            elif t not in self.read:
                self.read.add(t)
                op.weight += t.nbytes
        self.ops.append(op)
        return outs

    def one(self, kind: str, ins: Sequence[_T], shape: tuple[int, ...], *, flops: float | None = None,
            view: bool = False, itemsize: int = 4, contiguous: bool = True) -> _T:
        return self.emit(kind, ins, [shape], flops=flops, view=view, itemsize=itemsize, contiguous=contiguous)[0]

    def record(self, backward: _Rule, ins: list[_T], outs: list[_T]) -> None:
        if any(t.grad for t in ins):
            for o in outs:
                o.grad = True
            self.tape.append((backward, ins, outs))

    # ---------------------------------------------------------- primitives
    def view(self, x: _T, shape: tuple[int, ...], kind: str = "view") -> _T:
        y = self.one(kind, [x], shape, view=True)
        self.record(lambda g: [self.reshape(g[0], x.shape)], [x], [y])
        return y

    def reshape(self, g: _T, shape: tuple[int, ...]) -> _T:
        """``reshape``: a view where the strides allow one, else a copy and an ``_unsafe_view``."""
        if g.contiguous or g.shape == shape:
            return self.one("view", [g], shape, view=True)
        return self.one("_unsafe_view", [self.one("clone", [g], g.shape)], shape, view=True)

    def transpose(self, x: _T, kind: str = "transpose") -> _T:
        y = self.one(kind, [x], (*x.shape[:-2], x.shape[-1], x.shape[-2]), view=True, contiguous=not x.contiguous)
        self.record(lambda g: [self.transpose(g[0], kind)], [x], [y])
        return y

    def expand(self, x: _T) -> _T:
        y = self.one("expand", [x], x.shape, view=True, contiguous=x.contiguous)
        self.record(lambda g: [g[0]], [x], [y])  # same shape: nothing to sum
        return y

    def mm(self, a: _T, b: _T, bias: _T | None = None) -> _T:
        (m, k), n = a.shape, b.shape[1]
        ins = [a, b] if bias is None else [bias, a, b]
        y = self.one("mm" if bias is None else "addmm", ins, (m, n), flops=2 * m * n * k)

        def backward(g: list[_T]) -> list[_T | None]:
            (gy,) = g
            ga = self.one("mm", [gy, self.transpose(b, "t")], a.shape, flops=2 * m * n * k) if a.grad else None
            gb = None
            if b.grad:
                gbt = self.one("mm", [self.transpose(gy, "t"), a], (n, k), flops=2 * m * n * k)
                gb = self.transpose(gbt, "t")
            gbias = self.view(self.one("sum", [gy], (1, n)), (n,)) if bias is not None else None
            return [ga, gb] if bias is None else [gbias, ga, gb]

        self.record(backward, ins, [y])
        return y

    def bmm(self, a: _T, b: _T) -> _T:
        (bs, m, k), n = a.shape, b.shape[2]
        y = self.one("bmm", [a, b], (bs, m, n), flops=2 * bs * m * n * k)

        def backward(g: list[_T]) -> list[_T | None]:
            (gy,) = g
            gb = self.one("bmm", [self.transpose(a), gy], b.shape, flops=2 * bs * m * n * k)
            ga = self.one("bmm", [gy, self.transpose(b)], a.shape, flops=2 * bs * m * n * k)
            return [ga, gb]

        self.record(backward, [a, b], [y])
        return y

    def elementwise(self, kind: str, xs: list[_T], shape: tuple[int, ...],
                    backward: Callable[[_T], list[_T | None]]) -> _T:
        y = self.one(kind, xs, shape)
        self.record(lambda g: backward(g[0]), xs, [y])
        return y

    def add(self, x: _T, y: _T) -> _T:
        """``x + y``; ``y`` may broadcast over ``x``'s leading dimension (a position table)."""
        def backward(g: _T) -> list[_T | None]:
            if y.shape == x.shape or not y.grad:
                return [g, g]
            return [g, self.view(self.one("sum", [g], (1, *y.shape)), y.shape)]
        return self.elementwise("add", [x, y], x.shape, backward)

    def scale(self, x: _T) -> _T:
        """``x * c`` for a Python number ``c``; the gradient is ``g * c``."""
        return self.elementwise("mul", [x], x.shape, lambda g: [self.one("mul", [g], g.shape)])

    def softmax(self, x: _T, kind: str = "_softmax") -> _T:
        y = self.one(kind, [x], x.shape)
        saved = self.one("detach", [y], y.shape, view=True)

        def backward(g: list[_T]) -> list[_T | None]:
            again = self.one("detach", [saved], y.shape, view=True)
            return [self.one(f"{kind}_backward_data", [g[0], again], x.shape)]

        self.record(backward, [x], [y])
        return y

    def layer_norm(self, x: _T, w: _T, b: _T) -> _T:
        stat = (*x.shape[:-1], 1)
        y, mean, rstd = self.emit("native_layer_norm", [x, w, b], [x.shape, stat, stat])

        def backward(g: list[_T]) -> list[_T | None]:  # only the normalised output has a gradient
            return list(self.emit("native_layer_norm_backward", [g[0], x, mean, rstd, w, b],
                                  [x.shape, w.shape, b.shape]))

        self.record(backward, [x, w, b], [y])
        return y

    def gelu(self, x: _T) -> _T:
        return self.elementwise("gelu", [x], x.shape, lambda g: [self.one("gelu_backward", [g, x], x.shape)])

    def cat(self, xs: list[_T]) -> _T:
        y = self.one("cat", xs, (*xs[0].shape[:-1], sum(x.shape[-1] for x in xs)))
        self.record(lambda g: [self.one("slice", [g[0]], x.shape, view=True, contiguous=False) for x in xs], xs, [y])
        return y

    def embedding(self, w: _T, ids: _T) -> _T:
        return self.elementwise("embedding", [w, ids], (*ids.shape, w.shape[1]),
                                lambda g: [self.one("embedding_dense_backward", [g, ids], w.shape), None])

    # ---------------------------------------------------------- composites
    def linear(self, x: _T, w: _T, b: _T | None) -> _T:
        """``nn.Linear`` on a (batch, tokens, features) input, as aten decomposes it."""
        lead, n = x.shape[:-1], w.shape[0]
        if b is None:  # matmul: mm on the flattened input, then an _unsafe_view back
            wt = self.transpose(w, "t")
            return self.view(self.mm(self.view(x, (math.prod(lead), x.shape[-1])), wt), (*lead, n), "_unsafe_view")
        flat = self.view(x, (math.prod(lead), x.shape[-1]))
        return self.view(self.mm(flat, self.transpose(w, "t"), b), (*lead, n))

    def matmul(self, a: _T, b: _T) -> _T:
        """``a @ b`` of two 3-D tensors: expands and views around one ``bmm``."""
        a2 = self.view(self.expand(a), a.shape)
        b2 = self.view(self.expand(b), b.shape)
        y = self.bmm(a2, b2)
        return self.view(y, y.shape, "_unsafe_view")

    def backward(self, loss: _T) -> dict[_T, _T]:
        """Emit the backward pass from ``loss`` (seeded by ``ones_like``): each tape entry in
        reverse, summing (``add``) the gradients of a tensor used more than once."""
        grads = {loss: self.one("ones_like", [loss], loss.shape)}
        for rule, ins, outs in reversed(self.tape):
            gs = [grads.get(o) for o in outs]
            if all(g is None for g in gs):
                continue
            for t, g in zip(ins, rule(gs)):
                if g is None or not t.grad:
                    continue
                grads[t] = self.one("add", [grads[t], g], t.shape) if t in grads else g
        return grads

    def sgd(self, grads: dict[_T, _T]) -> None:
        """Plain SGD: ``p - lr * grad`` (a ``mul`` and a ``sub``) per parameter."""
        for p in self.params:
            self.one("sub", [p, self.one("mul", [grads[p]], p.shape)], p.shape)


def transformer_train_ops(layers: int = 12, d_model: int = 1024, heads: int = 16, ff: int = 4096,
                          vocab: int = 32000, batch: int = 8, tokens: int = 128) -> list[Op]:
    """The ops of a GPT decoder's training step, in the order of a ``make_fx`` trace.

    See :func:`transformer_train`; this is its graph before costing.

    >>> ops = transformer_train_ops(1, 32, 2, 128, 100, 2, 16)
    >>> len(ops), sum(op.kind == "bmm" for op in ops)
    (299, 12)
    """
    if d_model % heads:
        raise ValueError(f"heads: expected a divisor of d_model={d_model}, got {heads}")
    s, dh = _Step(), d_model // heads
    ids = s.state((batch, tokens), 8)
    target = s.state((batch, tokens), 8)
    p = s.state
    tok, pos = p((vocab, d_model), param=True), p((tokens, d_model), param=True)
    blocks = []
    for _ in range(layers):  # parameters in the torch model's named_parameters() order
        ln1 = p((d_model,), param=True), p((d_model,), param=True)
        qkv = [[(p((dh, d_model), param=True), p((dh,), param=True)) for _ in range(3)] for _ in range(heads)]
        proj = p((d_model, d_model), param=True), p((d_model,), param=True)
        ln2 = p((d_model,), param=True), p((d_model,), param=True)
        fc1 = p((ff, d_model), param=True), p((ff,), param=True)
        fc2 = p((d_model, ff), param=True), p((d_model,), param=True)
        blocks.append((ln1, qkv, proj, ln2, fc1, fc2, s.state((tokens, tokens))))
    ln_f = p((d_model,), param=True), p((d_model,), param=True)
    head = p((vocab, d_model), param=True)

    x = s.add(s.embedding(tok, ids), pos)
    for ln1, qkv, proj, ln2, fc1, fc2, mask in blocks:
        h = s.layer_norm(x, *ln1)
        outs = []
        for (wq, bq), (wk, bk), (wv, bv) in qkv:
            q, k, v = s.linear(h, wq, bq), s.linear(h, wk, bk), s.linear(h, wv, bv)
            att = s.softmax(s.add(s.scale(s.matmul(q, s.transpose(k))), mask))
            outs.append(s.matmul(att, v))
        x = s.add(x, s.linear(s.cat(outs), *proj))
        x = s.add(x, s.linear(s.gelu(s.linear(s.layer_norm(x, *ln2), *fc1)), *fc2))
    logits = s.linear(s.layer_norm(x, *ln_f), head, None)
    flat = s.view(logits, (batch * tokens, vocab))
    labels = s.one("view", [target], (batch * tokens,), view=True, itemsize=8)
    logp = s.softmax(flat, "_log_softmax")
    loss, total = s.emit("nll_loss_forward", [logp, labels], [(), ()])
    s.record(lambda g: [s.one("nll_loss_backward", [g[0], logp, labels, total], logp.shape)], [logp], [loss])
    s.sgd(s.backward(loss))
    return s.ops


def transformer_train(layers: int = 12, d_model: int = 1024, heads: int = 16, ff: int = 4096, vocab: int = 32000,
                      batch: int = 8, tokens: int = 128, platform: Platform | None = None, seed: int = 0,
                      name: str | None = None) -> Problem:
    """One training step of a GPT decoder, op by op, without torch.

    The model is :func:`mapsched.harness.models.gpt`'s: token and position embeddings,
    ``layers`` pre-norm blocks (attention with ``heads`` heads, each with its own Q, K
    and V ``Linear``; an output projection; a GELU MLP of width ``ff``), a final layer
    norm and a bias-free vocabulary projection, trained with cross-entropy on
    ``batch`` sequences of ``tokens`` tokens and updated by plain SGD. The ops are
    those PyTorch's ``make_fx`` records for that step (forward, ``ones_like`` seed,
    the backward in reverse with a gradient ``add`` wherever a tensor has several
    uses, then a ``mul`` and a ``sub`` per parameter), less the ``getitem`` nodes
    that select outputs of multi-output ops; costs follow :func:`op_problem`, with its
    seeded jitter.

    Parameters
    ----------
    layers, d_model, heads, ff, vocab, batch, tokens : int
        The shape; the defaults are the measured configuration of ``gpt_train12``.
    platform : Platform, optional
        Devices and links (default :func:`~mapsched.generators.cpu_t4_a100`).
    seed : int
        Seed of the per-(op, device type) jitter.
    name : str, optional
        Problem name (default ``transformer-train-{layers}l``).

    Returns
    -------
    Problem
        ``n = layers * (94 * heads + 72) + 39`` tasks: per head 29 forward, 53
        backward and 12 optimizer ops; per layer 72 more (layer norms, projection,
        MLP, residuals, their gradients and updates); 39 for the embeddings, the
        vocabulary projection and the loss. ``gpt_train12`` and ``gpt_train22`` trace
        to exactly these counts (18,951 and 34,711), kind by kind.

    Notes
    -----
    O(n) to build the ops, then :func:`op_problem`.

    Examples
    --------
    >>> p = transformer_train(layers=1, d_model=32, heads=2, ff=128, vocab=100, batch=2, tokens=16)
    >>> p.n == 1 * (94 * 2 + 72) + 39
    True
    """
    ops = transformer_train_ops(layers, d_model, heads, ff, vocab, batch, tokens)
    return op_problem(ops, platform, name or f"transformer-train-{layers}l", seed)
