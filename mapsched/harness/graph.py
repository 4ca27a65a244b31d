"""Trace a PyTorch model with ``torch.fx`` and cut it into coarse tasks.

A :class:`CoarseGraph` is a partition of the fx graph's compute nodes into segments,
each of which becomes one mapsched task and one small ``fx.GraphModule`` that runs it.
Parameters and buffers (``get_attr`` nodes) belong to no segment: each segment that
reads one gets its own reference, so that they never travel along edges.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import fx, nn
from torch.fx.passes.shape_prop import ShapeProp

from mapsched.errors import HarnessError, first_line, shown

__all__ = ["CoarseGraph", "Segment", "check_runnable", "example_inputs", "trace"]

# Module types and function names cheap enough to ride along with their producer.
_LIGHT_MODULES = (
    nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.ReLU, nn.ReLU6, nn.GELU, nn.SiLU, nn.Sigmoid, nn.Tanh,
    nn.LeakyReLU, nn.Hardswish, nn.Dropout, nn.Identity,
)
_LIGHT_FUNCTIONS = {
    "add", "sub", "mul", "truediv", "neg", "relu", "relu_", "gelu", "silu", "sigmoid", "tanh", "dropout",
    "flatten", "unflatten", "view", "reshape", "permute", "transpose", "contiguous", "size", "getitem",
    "getattr", "squeeze", "unsqueeze",
}


@dataclass
class Segment:
    """One coarse task: fx nodes run in order, with the values it reads and writes.

    Attributes
    ----------
    name : str
        The task name: the fx name of its first node.
    nodes : list of str
        The fx nodes it covers, in topological order.
    inputs, outputs : list of str
        fx values it reads from other segments (or the model inputs), and values it
        produces that other segments or the model output use.
    params : list of str
        ``get_attr`` nodes it reads (parameters, buffers, constants).
    """

    name: str
    nodes: list[str]
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    params: list[str] = field(default_factory=list)


def _light(gm: fx.GraphModule, node: fx.Node) -> bool:
    if node.op == "call_module":
        return isinstance(gm.get_submodule(node.target), _LIGHT_MODULES)
    if node.op in ("call_function", "call_method"):
        name = node.target if isinstance(node.target, str) else getattr(node.target, "__name__", "")
        return name in _LIGHT_FUNCTIONS
    return False


_IN_PLACE_OPERATORS = {"iadd", "iand", "ifloordiv", "ilshift", "imatmul", "imod", "imul", "ior", "ipow", "irshift",
                       "isub", "itruediv", "ixor", "setitem"}


def _writes_in_place(gm: fx.GraphModule, node: fx.Node) -> bool:
    """Whether ``node`` writes its first input in place: a tensor method or torch function
    named with a trailing underscore (``mul_``, ``relu_``), an in-place operator (``+=``,
    ``x[i] = v``), or an op or module given ``inplace=True``."""
    if node.kwargs.get("inplace") is True:
        return True
    if node.op == "call_module":
        return getattr(gm.get_submodule(node.target), "inplace", False) is True
    name = node.target if isinstance(node.target, str) else getattr(node.target, "__name__", "")
    if node.op == "call_function" and getattr(node.target, "__module__", "") == "_operator":
        return name in _IN_PLACE_OPERATORS
    return name.endswith("_") and not name.endswith("__")


def _check_writes(gm: fx.GraphModule, storage: dict[str, set[int]]) -> None:
    """Refuse, in one line, an op that writes a value in place which another op reads too,
    directly or through a view (``storage``: the storages each value holds, from
    :func:`_value_info`), unless that op runs before the write (the writer depends on it).
    Otherwise nothing orders the two, or the reader takes the value as it was produced: a
    job on another device gets a copy the write never reaches. So the model's outputs
    would change with the schedule. Reading the writer's own result, or views of it, is
    fine. O(nodes) per op that writes in place."""
    nodes = list(gm.graph.nodes)
    for node in nodes:
        if not (node.op in ("call_module", "call_function", "call_method") and node.args
                and isinstance(node.args[0], fx.Node) and _writes_in_place(gm, node)):
            continue
        written = storage.get(node.args[0].name, set()) - {0}
        before = _reach(node, lambda n: _value_nodes(n)) | {node}
        after = _reach(node, lambda n: list(n.users))
        for value in nodes:
            if value is node or value in after or not written & storage.get(value.name, set()):
                continue
            for user in value.users:
                if user not in before:
                    through = "" if value is node.args[0] else f" through {value.name}"
                    raise HarnessError(f"model: {node.name} writes {node.args[0].name} in place, which {user.name} "
                                       f"also reads{through}: a schedule may run that before the write, or on a "
                                       "copy the write never reaches; use the out-of-place op (or inplace=False)")


def _reach(node: fx.Node, step: Callable[[fx.Node], list[fx.Node]]) -> set[fx.Node]:
    """The nodes reached from ``node`` by ``step`` (its inputs: ancestors; its users: descendants)."""
    seen: set[fx.Node] = set()
    todo = step(node)
    while todo:
        n = todo.pop()
        if n not in seen:
            seen.add(n)
            todo.extend(step(n))
    return seen


def _value_nodes(node: fx.Node) -> list[fx.Node]:
    seen: list[fx.Node] = []
    fx.node.map_arg((node.args, node.kwargs), lambda a: seen.append(a) if a not in seen else None)
    return seen


class CoarseGraph:
    """A traced model cut into segments (tasks) in a topological order.

    Build one with :func:`trace`. ``segments[k]`` only reads values of segments
    before it, so the list order is topological.

    Attributes
    ----------
    gm : torch.fx.GraphModule
    segments : list of Segment
    placeholders : list of str
        The model's inputs, in call order; each is a segment of its own with no nodes.
    producer : dict
        fx value name to the index of the segment that produces it.
    batched : dict
        fx value name to its rows per input: ``k`` when its first dimension holds ``k``
        consecutive rows for each input (a tensor, or each tensor of a tuple or list;
        found by running the model on two inputs apart and as one batch: see
        :func:`_value_info`; ``k`` > 1 where a model folds a mini-batch per input into the
        first dimension), 0 when it does not follow the batch. Only batched values may
        be split between jobs that hold different inputs.
    nbytes : dict
        fx value name to its size in bytes for one input (0 for non-tensors).
    unbatched : str or None
        Why the model does not run on a batch of two inputs (then it is profiled for
        latency only), or None.
    """

    def __init__(self, gm: fx.GraphModule, groups: list[list[fx.Node]], example: Sequence[torch.Tensor]):
        self.gm = gm
        self._by_name = nodes = {n.name: n for n in gm.graph.nodes}
        self.placeholders = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
        self._output = next(n for n in gm.graph.nodes if n.op == "output")
        self.segments = [Segment(p, []) for p in self.placeholders] + [Segment(g[0].name, [n.name for n in g])
                                                                       for g in groups]
        self.producer = {p: k for k, p in enumerate(self.placeholders)}
        for k, seg in enumerate(self.segments):
            self.producer.update((n, k) for n in seg.nodes)
        used_outside: dict[str, list[int]] = {}
        for k, seg in enumerate(self.segments):
            for name in seg.nodes:
                for a in _value_nodes(nodes[name]):
                    if a.op == "get_attr":
                        if a.name not in seg.params:
                            seg.params.append(a.name)
                    elif self.producer[a.name] != k and a.name not in seg.inputs:
                        seg.inputs.append(a.name)
                        used_outside.setdefault(a.name, []).append(k)
        final = [a.name for a in _value_nodes(self._output) if a.op != "get_attr"]
        for name in final:
            used_outside.setdefault(name, []).append(-1)
        for seg in self.segments:
            seg.outputs = [n for n in (seg.nodes or [seg.name]) if n in used_outside]
        self._crossing = set(used_outside)  # what jobs hand on: the values a schedule may split
        self.nbytes, self.batched, self._mixers, self._storage, self.unbatched = _value_info(gm, example)
        self._modules: dict[int, fx.GraphModule] = {}
        self._lean: dict[tuple[str, int, int], Any] = {}  # see mapsched.harness.lean.prepare

    def batch_mixer(self) -> str | None:
        """The first value handed from one task to another (or out of the model) that,
        computed from the inputs, neither follows the batch row by row nor is the same for
        every input (a sum, softmax or concatenation over the batch, a transpose that moves
        it, the batch size as a number), or None: a job of part of a batch computes another
        value there than the whole batch does, or hands a job of another size what fits
        its own (see :func:`_value_info`). Within a task such values are harmless: a job
        computes them for its own inputs. O(values)."""
        crossing = next((name for name in self._mixers if name in self._crossing), None)
        if crossing is None:
            return None
        # named by where the mixing starts: back from the crossing value through mixing values
        mixing = set(self._mixers)
        found = _reach(self._node(crossing), lambda n: [a for a in _value_nodes(n) if a.name in mixing])
        return next(name for name in self._mixers if name == crossing or self._node(name) in found)

    @property
    def names(self) -> list[str]:
        """Task names, in segment order."""
        return [s.name for s in self.segments]

    def edges(self) -> dict[tuple[int, int], list[str]]:
        """(producer, consumer) segment indices to the values that cross between them."""
        out: dict[tuple[int, int], list[str]] = {}
        for k, seg in enumerate(self.segments):
            for v in seg.inputs:
                out.setdefault((self.producer[v], k), []).append(v)
        return out

    def weight_bytes(self, k: int) -> int:
        """Bytes of the parameters and buffers that segment ``k`` reads."""
        total, seen = 0, set()
        for name in self.segments[k].nodes:
            node = self._node(name)
            tensors: list[torch.Tensor] = []
            if node.op == "call_module":
                mod = self.gm.get_submodule(node.target)
                tensors = [*mod.parameters(), *mod.buffers()]
            for a in _value_nodes(node):
                if a.op == "get_attr":
                    obj = _fetch(self.gm, a.target)
                    tensors += [obj] if isinstance(obj, torch.Tensor) else []
            for t in tensors:
                if id(t) not in seen:
                    seen.add(id(t))
                    total += t.numel() * t.element_size()
        return total

    def _node(self, name: str) -> fx.Node:
        return self._by_name[name]

    def module(self, k: int) -> fx.GraphModule:
        """A GraphModule that runs segment ``k``: it takes ``inputs`` in order and returns
        the tuple of ``outputs``. Parameters are shared with the traced model."""
        if k not in self._modules:
            seg = self.segments[k]
            g = fx.Graph()
            env: dict[str, fx.Node] = {}
            for name in seg.inputs:
                env[name] = g.placeholder(name)
            for name in seg.params:
                env[name] = g.node_copy(self._node(name))
            for name in seg.nodes:
                env[name] = g.node_copy(self._node(name), lambda a: env[a.name])
            if not seg.nodes:  # a model input passes through
                env[seg.name] = g.placeholder(seg.name)
            g.output(tuple(env[o] for o in seg.outputs))
            self._modules[k] = fx.GraphModule(self.gm, g, class_name=f"Task_{seg.name}")
        return self._modules[k]

    def to(self, device: torch.device | str) -> CoarseGraph:
        """This graph with its parameters on ``device``: itself for the CPU, else a copy."""
        if torch.device(device).type == "cpu":
            return self
        other = copy.copy(self)
        other.gm = copy.deepcopy(self.gm).to(device)
        other._by_name = {n.name: n for n in other.gm.graph.nodes}
        other._output = other._by_name[self._output.name]
        other._modules, other._lean = {}, {}
        return other

    def output(self, values: dict[str, Any]) -> Any:
        """The model's output, rebuilt from the computed fx values."""
        return fx.node.map_arg(self._output.args[0], lambda a: values[a.name] if a.op != "get_attr"
                               else _fetch(self.gm, a.target))

    def run(self, *inputs: torch.Tensor) -> dict[str, Any]:
        """Run every segment in order on the inputs' device; return every crossing value."""
        values: dict[str, Any] = dict(zip(self.placeholders, inputs))
        for k, seg in enumerate(self.segments):
            if seg.nodes:
                values.update(zip(seg.outputs, self.module(k)(*[values[i] for i in seg.inputs])))
        return values


def _fetch(gm: nn.Module, target: str) -> Any:
    obj: Any = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def _nbytes(meta: Any) -> int:
    if meta is None:
        return 0
    if hasattr(meta, "shape") and hasattr(meta, "dtype"):
        return int(torch.Size(meta.shape).numel()) * torch.empty((), dtype=meta.dtype).element_size()
    if isinstance(meta, (list, tuple)):
        return sum(_nbytes(m) for m in meta)
    if isinstance(meta, dict):
        return sum(_nbytes(m) for m in meta.values())
    return 0


def _value_info(gm: fx.GraphModule, example: Sequence[torch.Tensor]
                ) -> tuple[dict[str, int], dict[str, int], list[str], dict[str, set[int]], str | None]:
    """Bytes per input of every value; its rows per input; the values that mix the inputs
    of a batch; the storages each value's tensors hold; and why the model does not run on
    a batch of two inputs (None where it does: then no value follows the batch).

    Shapes come from propagating one input (``ShapeProp``). How a value follows the batch
    comes from running the model, op by op, on the example's first row (``x0``), on a
    second input unlike it (``x1``: :func:`_variant`) and on the two as one batch: a value
    holds ``k`` rows per input (a tensor, or a tuple or list of tensors, split alike)
    where the batch's value is ``x0``'s ``k`` rows then ``x1``'s; it is shared (0 rows) where
    all three are the same (a constant, a position index). Any other value computed from
    the inputs mixes them: a sum or softmax over the batch, a ``torch.cat`` of two halves
    along it, the batch size as a number (``x.size(0)``), random draws. The storages, from
    ``x0``'s run, show which values alias one another (views) for :func:`_check_writes`.
    """
    try:
        with contextlib.redirect_stderr(io.StringIO()):  # ShapeProp prints a traceback, then raises
            ShapeProp(gm).propagate(*[_rows(x, 1) for x in example])
    except Exception as exc:  # the user's model, failing in its own way
        raise HarnessError(f"example: the model does not run on it ({_cause(exc)}); give inputs of "
                           "a shape it takes") from None
    nbytes = {n.name: _nbytes(n.meta.get("tensor_meta")) for n in gm.graph.nodes}
    x0 = [x[:1] for x in example]
    x1 = [_variant(x) for x in x0]
    runs = [fx.Interpreter(gm) for _ in range(3)]
    for run, args in zip(runs, ([torch.cat(pair) for pair in zip(x0, x1)], x0, x1)):
        run.args_iter, run.env = iter(args), {}
    batched: dict[str, int] = {}
    mixers: list[str] = []
    storage: dict[str, set[int]] = {}
    depends: set[str] = set()
    unbatched = None  # why the model does not run on a batch of two, if it does not
    with torch.inference_mode():
        for node in gm.graph.nodes:
            if node.op == "output":
                break
            try:
                one, other = (run.env.setdefault(node, run.run_node(node)) for run in runs[1:])
            except Exception as exc:  # the user's model, failing in its own way
                raise HarnessError(f"example: the model does not run on it ({_cause(exc)}); give inputs of "
                                   "a shape it takes") from None
            if unbatched is None:
                try:
                    both = runs[0].env.setdefault(node, runs[0].run_node(node))
                except Exception as exc:  # it runs on one input at a time only: for latency
                    unbatched = _cause(exc)
            storage[node.name] = {t.untyped_storage().data_ptr() for t in _tensors(one)}
            if node.op == "placeholder" or any(a.name in depends for a in _value_nodes(node)):
                depends.add(node.name)
            k = 0 if unbatched is not None else _rows_per_input(both, one, other)
            batched[node.name] = k
            if not k and node.name in depends and not (unbatched is None and _same(both, one) and _same(one, other)):
                mixers.append(node.name)
    return nbytes, batched, mixers, storage, unbatched


def _cause(exc: BaseException) -> str:
    """The first line of what went wrong inside ``exc`` (ShapeProp wraps the model's error
    in one naming the node)."""
    return first_line(exc.__cause__ or exc)


def _variant(x: torch.Tensor) -> torch.Tensor:
    """A second input of ``x``'s shape, dtype and range, unlike it: ``x`` reversed along its
    last dimension, or where that changes nothing, ``~x`` (bool), ``x + 1`` (floating),
    one id away (integer)."""
    y = x.flip(-1) if x.dim() > 1 else x.clone()
    if not torch.equal(y, x):
        return y
    if x.dtype == torch.bool:
        return ~x
    if x.is_floating_point() or x.is_complex():
        return x + 1
    return torch.where(x > 0, x - 1, x + 1)


def _tensors(value: Any) -> list[torch.Tensor]:
    """The tensors in ``value`` (nested in tuples, lists and dicts)."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors(v)]
    return []


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal within what a kernel run at another batch size changes (rounding)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if not (a.is_floating_point() or a.is_complex()):
        return torch.equal(a, b)
    scale = float(b.abs().max()) if b.numel() else 0.0
    return torch.allclose(a, b, rtol=1e-4, atol=1e-6 * max(1.0, scale), equal_nan=True)


def _same(a: Any, b: Any) -> bool:
    """Whether two values of the model are the same (tensors within :func:`_close`)."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and _close(a, b)
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    try:
        return bool(a == b)
    except Exception:  # a value that cannot be compared: not known to be the same
        return False


def _rows_per_input(both: Any, one: Any, other: Any) -> int:
    """``k`` where ``both`` (the value of a batch of the two inputs) is ``one``'s ``k`` rows,
    then ``other``'s, as a tensor or element by element of a tuple or list; else 0."""
    if isinstance(both, (tuple, list)):
        if not (type(both) is type(one) is type(other) and both and len(both) == len(one) == len(other)):
            return 0
        ks = {_rows_per_input(a, b, c) for a, b, c in zip(both, one, other)}
        return ks.pop() if len(ks) == 1 else 0
    if not all(isinstance(v, torch.Tensor) and v.dim() > 0 for v in (both, one, other)):
        return 0
    k = one.shape[0]
    if not (k > 0 and other.shape[0] == k and both.shape[0] == 2 * k):
        return 0
    return k if _close(both[:k], one) and _close(both[k:], other) else 0


def _rows(x: torch.Tensor, b: int) -> torch.Tensor:
    """The first row of ``x`` repeated ``b`` times: an input batch of size ``b``."""
    return x[:1].expand(b, *x.shape[1:]).contiguous()


def example_inputs(example: Any, name: str = "example") -> tuple[torch.Tensor, ...]:
    """``example`` as a tuple of tensors (one tensor, or a sequence of them), each with a
    first dimension, the batch, of at least one row; an :class:`HarnessError` naming
    ``name`` otherwise."""
    batch = (example,) if isinstance(example, torch.Tensor) else example
    if not (isinstance(batch, (tuple, list)) and batch
            and all(isinstance(x, torch.Tensor) and x.dim() >= 1 and x.shape[0] >= 1 for x in batch)):
        raise HarnessError(f"{name}: expected a tensor whose first dimension is the batch, or a list of them, "
                           f"got {type(example).__name__}")
    return tuple(batch)


def random_input(model: nn.Module, shape: Sequence[int], seed: int) -> torch.Tensor:
    """A seeded random input of ``shape`` for ``model``, of the dtype its ``input_dtype``
    names (float32 without one): normal values for a floating dtype; for an integer one
    (token ids), ids below the model's ``input_high``, or else below its smallest
    ``nn.Embedding``'s size, or else 0 and 1.

    Examples
    --------
    >>> from mapsched.harness import models
    >>> m = models.resnet()
    >>> random_input(m, m.input_shape, seed=0).dtype
    torch.float32
    """
    dtype = getattr(model, "input_dtype", torch.float32)
    gen = torch.Generator().manual_seed(seed)
    if not isinstance(dtype, torch.dtype) or dtype.is_complex:
        raise HarnessError(f"model: its input_dtype {shown(dtype)} is not a real torch dtype; set e.g. torch.float32 "
                           "or torch.long (token ids)")
    if dtype.is_floating_point:
        return torch.randn(tuple(shape), generator=gen, dtype=dtype)
    sizes = [m.num_embeddings for m in model.modules() if isinstance(m, nn.Embedding)]
    high = getattr(model, "input_high", None) or min(sizes, default=2)
    if isinstance(high, bool) or not isinstance(high, int) or high < 1:
        raise HarnessError(f"model: its input_high {shown(high)} is no positive integer; set the number of token ids")
    return torch.randint(0, 2 if dtype == torch.bool else high, tuple(shape), generator=gen).to(dtype)


def check_runnable(model: nn.Module) -> None:
    """Refuse, in one line, a model that is no module, one on the meta device (shapes, no
    weights), which cannot run, and one whose dropout or batch norm is in training mode,
    whose outputs are then random or follow the batch (no schedule would match the model)."""
    if not isinstance(model, nn.Module):
        raise HarnessError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
    if any(t.is_meta for t in (*model.parameters(), *model.buffers())):
        raise HarnessError("model: it is on the meta device (shapes, no weights) and cannot run; "
                           "cost its training step with 'mapsched trace' instead")
    for name, sub in model.named_modules():
        if sub.training and isinstance(sub, (nn.modules.dropout._DropoutNd, nn.modules.batchnorm._BatchNorm)):
            raise HarnessError(f"model: {name or 'it'} ({type(sub).__name__}) is in training mode, where its "
                               "outputs are random or follow the batch; call model.eval() in the factory")


def trace(model: nn.Module, example: torch.Tensor | Sequence[torch.Tensor], cluster: bool = True) -> CoarseGraph:
    """Trace ``model`` with ``torch.fx`` and group its ops into tasks.

    Parameters
    ----------
    model : nn.Module
        A model that ``torch.fx.symbolic_trace`` can trace.
    example : Tensor or sequence of Tensors
        Example inputs whose first dimension is the batch.
    cluster : bool
        Fuse cheap ops into their producer: batch-norm and activations after a conv
        (conv-BN-ReLU chains), and runs of elementwise and shape ops. A node joins its
        producer's segment only when that producer is the segment's last node and has
        no other user, and when the node's other inputs come from earlier segments;
        so the segments stay in topological order and the task graph stays acyclic.
        Without clustering every op is a task.

    Returns
    -------
    CoarseGraph

    Notes
    -----
    Linear in the number of fx nodes, plus a shape propagation and three runs of the model
    (two inputs apart and together), op by op, holding every value.

    Examples
    --------
    >>> from mapsched.harness.models import resnet
    >>> m = resnet()
    >>> g = trace(m, torch.zeros(m.input_shape))
    >>> g.segments[1].nodes
    ['_0', '_1', '_2']
    """
    example = example_inputs(example)
    check_runnable(model)
    try:  # arguments left to their defaults are traced as those constants (if x is None: ...)
        params = list(inspect.signature(model.forward).parameters.values())[len(example):]
        fixed = {p.name: p.default for p in params if p.default is not p.empty}
    except (TypeError, ValueError):  # no signature to read
        fixed = {}
    try:
        gm = fx.symbolic_trace(model, concrete_args=fixed or None)
    except Exception as exc:  # fx's TraceError, TypeError, RuntimeError...: what it cannot follow
        raise HarnessError(f"model: torch.fx cannot trace it ({type(exc).__name__}: {first_line(exc)}); the "
                           "harness needs a model that fx traces: no control flow on its inputs' values, "
                           "and only calls that take fx's proxies") from None
    inputs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for p in inputs[len(example):]:  # arguments with defaults, not given: their defaults, as constants
        if not p.args:
            raise HarnessError(f"example: the model's forward takes {len(inputs)} inputs "
                               f"({', '.join(n.name for n in inputs)}) and {len(example)} tensor(s) were given; "
                               "give one tensor for each")
        for user in list(p.users):
            user.args, user.kwargs = fx.node.map_arg((user.args, user.kwargs), lambda a, p=p: p.args[0] if a is p
                                                     else a)
        gm.graph.erase_node(p)
    gm.recompile()
    groups: list[list[fx.Node]] = []
    where: dict[str, int] = {}  # node name to group index; placeholders are not grouped
    for node in gm.graph.nodes:
        if node.op not in ("call_module", "call_function", "call_method"):
            continue
        inputs = [a for a in _value_nodes(node) if a.op != "get_attr"]
        home = None
        if cluster and inputs and _light(gm, node):
            p = max(inputs, key=lambda a: where.get(a.name, -1))
            k = where.get(p.name)
            if (k is not None and groups[k][-1] is p and len(p.users) == 1
                    and all(where.get(a.name, -1) < k for a in inputs if a is not p)):
                home = k
        if home is None:
            groups.append([node])
            where[node.name] = len(groups) - 1
        else:
            groups[home].append(node)
            where[node.name] = home
    graph = CoarseGraph(gm, groups, example)
    _check_writes(gm, graph._storage)
    return graph

