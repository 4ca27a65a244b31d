"""Trace a PyTorch model with ``torch.fx`` and cut it into coarse tasks.

A :class:`CoarseGraph` is a partition of the fx graph's compute nodes into segments,
each of which becomes one mapsched task and one small ``fx.GraphModule`` that runs it.
Parameters and buffers (``get_attr`` nodes) belong to no segment: each segment that
reads one gets its own reference, so that they never travel along edges.
"""

from __future__ import annotations

import contextlib
import copy
import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import fx, nn
from torch.fx.passes.shape_prop import ShapeProp

from ..errors import HarnessError, first_line

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


def _check_writes(gm: fx.GraphModule) -> None:
    """Refuse, in one line, an op that writes a value in place which another op reads too:
    the task graph has no edge between the two, so a schedule may run them in either order
    (or at once, on two devices), and the model's outputs change."""
    for node in gm.graph.nodes:
        if node.op in ("call_module", "call_function", "call_method") and node.args \
                and isinstance(node.args[0], fx.Node) and _writes_in_place(gm, node):
            others = [u.name for u in node.args[0].users if u is not node]
            if others:
                raise HarnessError(f"model: {node.name} writes {node.args[0].name} in place, which {others[0]} also "
                                   "reads, and tasks run in any order their edges allow; use the out-of-place op "
                                   "(or inplace=False)")


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
        consecutive rows for each input (found by propagating shapes at batch sizes 1
        and 2; ``k`` > 1 where a model folds a mini-batch per input into the first
        dimension), 0 when it does not follow the batch. Only batched values may be
        split between jobs that hold different inputs.
    nbytes : dict
        fx value name to its size in bytes for one input (0 for non-tensors).
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
        self.nbytes, self.batched = _value_info(gm, example)
        self._modules: dict[int, fx.GraphModule] = {}
        self._lean: dict[tuple[str, int, int], Any] = {}  # see mapsched.harness.lean.prepare

    def batch_mixer(self) -> str | None:
        """The first tensor computed from the inputs whose first dimension does not follow
        the batch (a sum or mean over it, a transpose that moves it), or None: a job of part
        of a batch computes another value there than the whole batch does. O(nodes)."""
        depends = set(self.placeholders)
        for node in self.gm.graph.nodes:
            if node.op not in ("call_module", "call_function", "call_method"):
                continue
            if any(a.name in depends for a in _value_nodes(node)):
                depends.add(node.name)
                if hasattr(node.meta.get("tensor_meta"), "shape") and not self.batched.get(node.name):
                    return node.name
        return None

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


def _value_info(gm: fx.GraphModule, example: Sequence[torch.Tensor]) -> tuple[dict[str, int], dict[str, int]]:
    """Bytes per input of every value, and its rows per input (0: its first dimension does
    not follow the batch)."""
    shapes = []
    for b in (1, 2):
        try:
            with contextlib.redirect_stderr(io.StringIO()):  # ShapeProp prints a traceback, then raises
                ShapeProp(gm).propagate(*[_rows(x, b) for x in example])
        except Exception as exc:  # the user's model, failing in its own way
            if b == 1:
                raise HarnessError(f"example: the model does not run on it ({first_line(exc)}); give inputs of "
                                   "a shape it takes") from None
            shapes.append({})  # it runs on one input at a time only: no value follows the batch
            break
        shapes.append({n.name: n.meta.get("tensor_meta") for n in gm.graph.nodes})
    nbytes, batched = {}, {}
    for name, meta in shapes[0].items():
        other = shapes[1].get(name)
        follows = (hasattr(meta, "shape") and hasattr(other, "shape") and len(meta.shape) > 0
                   and meta.shape[0] > 0 and other.shape[0] == 2 * meta.shape[0])
        batched[name] = int(meta.shape[0]) if follows else 0
        nbytes[name] = _nbytes(meta)
    return nbytes, batched


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
        raise HarnessError(f"model: its input_dtype {dtype!r} is not a real torch dtype; set e.g. torch.float32 "
                           "or torch.long (token ids)")
    if dtype.is_floating_point:
        return torch.randn(tuple(shape), generator=gen, dtype=dtype)
    sizes = [m.num_embeddings for m in model.modules() if isinstance(m, nn.Embedding)]
    high = getattr(model, "input_high", None) or min(sizes, default=2)
    if isinstance(high, bool) or not isinstance(high, int) or high < 1:
        raise HarnessError(f"model: its input_high {high!r} is no positive integer; set the number of token ids")
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
    Linear in the number of fx nodes, plus two shape propagations of the model.

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
    # fx's errors for what it cannot trace: TraceError for control flow on a traced value, and
    # TypeError or NotImplementedError for calls that take no proxy
    try:
        gm = fx.symbolic_trace(model)
    except (fx.proxy.TraceError, TypeError, NotImplementedError) as exc:
        raise HarnessError(f"model: torch.fx cannot trace it ({first_line(exc)}); the harness needs a model "
                           "without control flow on its inputs' values") from None
    _check_writes(gm)
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
    return CoarseGraph(gm, groups, example)

