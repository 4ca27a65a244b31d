"""Profile a PyTorch model task by task on every device, and measure the links.

The result is a :class:`mapsched.Problem`: the tasks of :func:`~mapsched.harness.trace`
with their measured latency per device and batch size, their weight, input and output
bytes from tensor metadata, and the links between the devices with their measured
bandwidth and latency.
"""

from __future__ import annotations

import platform
from collections.abc import Sequence

import torch
from torch import nn

from ..errors import HarnessError
from ..problem import Device, Edge, Link, Objective, Problem, System, Task
from .devices import available, memory_bytes, move, time_ms, torch_device
from .graph import CoarseGraph, _rows, trace

__all__ = ["measure_links", "profile", "profile_graph"]


def measure_links(devices: Sequence[str], sizes: tuple[int, int] = (2**12, 2**24), warmup: int = 2,
                  repeats: int = 5) -> list[Link]:
    """Directed links between every ordered pair of devices, from timed copies.

    Copies of ``sizes[0]`` and ``sizes[1]`` bytes fit ``time = latency + bytes / bandwidth``:
    the bandwidth is the slope between the two sizes and the latency what remains of
    the small copy.

    >>> [(ln.a, ln.b) for ln in measure_links(["cpu:0", "cpu:1"], sizes=(64, 4096), repeats=1)]
    [('cpu:0', 'cpu:1'), ('cpu:1', 'cpu:0')]
    """
    links = []
    for a in devices:
        for b in devices:
            if a == b:
                continue
            da, db = torch_device(a), torch_device(b)
            ms = []
            for size in sizes:
                t = torch.empty(size, dtype=torch.uint8, device=da)
                ms.append(time_ms(lambda t=t, a=a, b=b: move(t, a, b), [da, db], warmup, repeats))
            slope = (ms[1] - ms[0]) / (sizes[1] - sizes[0])
            bandwidth = 1000.0 / slope if slope > 0 else 1000.0 * sizes[1] / max(ms[1], 1e-9)
            latency = max(0.0, ms[0] - 1000.0 * sizes[0] / bandwidth)
            links.append(Link(a, b, bandwidth, latency, directed=True))
    return links


def profile_graph(graph: CoarseGraph, example: torch.Tensor | Sequence[torch.Tensor], devices: Sequence[str],
                  batch_sizes: Sequence[int] = (1,), *, warmup: int = 2, repeats: int = 5,
                  objective: Objective | None = None, name: str = "model", links: bool = True) -> Problem:
    """Profile the segments of a traced model; see :func:`profile`."""
    example = (example,) if isinstance(example, torch.Tensor) else tuple(example)
    tdev = {d: torch_device(d) for d in devices}
    on = {dev: graph.to(dev) for dev in set(tdev.values())}
    latency: list[dict[str, dict[str, float]]] = [{} for _ in graph.segments]
    with torch.inference_mode():
        for b in batch_sizes:
            values = graph.run(*[_rows(x, b) for x in example])
            for k, seg in enumerate(graph.segments):
                if not seg.nodes:
                    for d in devices:  # a model input: prefetched wherever it is first needed
                        latency[k].setdefault(d, {})[str(b)] = 0.0
                    continue
                for d in devices:
                    dev = tdev[d]
                    args = [move(values[v], "cpu", d) for v in seg.inputs]
                    mod = on[dev].module(k)
                    latency[k].setdefault(d, {})[str(b)] = time_ms(lambda m=mod, a=args: m(*a), [dev], warmup,
                                                                  repeats)
    tasks = [
        Task(seg.name, latency[k], float(graph.weight_bytes(k)),
             float(sum(graph.nbytes[v] for v in seg.inputs)),
             float(sum(graph.nbytes[v] for v in (seg.outputs or [seg.name]))))
        for k, seg in enumerate(graph.segments)
    ]
    edges = [Edge(graph.segments[i].name, graph.segments[j].name, float(sum(graph.nbytes[v] for v in vals)))
             for (i, j), vals in graph.edges().items()]
    node = platform.node() or "host0"
    system = System(tuple(Device(d, memory_bytes(d), tuple(sorted(set(batch_sizes))), node) for d in devices),
                    tuple(measure_links(devices, warmup=warmup, repeats=repeats)) if links else ())
    return Problem(tasks, edges, system, objective, name)


def profile(model: nn.Module, example: torch.Tensor | Sequence[torch.Tensor], devices: Sequence[str] | None = None,
            batch_sizes: Sequence[int] = (1,), *, cluster: bool = True, warmup: int = 2, repeats: int = 5,
            objective: Objective | None = None, name: str | None = None) -> Problem:
    """Trace ``model``, time every task on every device and batch size, and measure the links.

    Parameters
    ----------
    model : nn.Module
        A model that ``torch.fx`` can trace, on the CPU; it is copied to each GPU.
    example : Tensor or sequence of Tensors
        Example inputs; the first dimension is the batch (its first row is used).
    devices : sequence of str, optional
        Device names (``cpu``, ``cuda:I``, or emulated ``cpu:K``); default every
        device present.
    batch_sizes : sequence of int
        Batch sizes to time; they become every device's ``batch_sizes``.
    cluster : bool
        Fuse cheap ops into their producers (see :func:`~mapsched.harness.trace`).
    warmup, repeats : int
        Untimed and timed runs per measurement; the median of the timed runs is kept.
        Each timed run waits for the GPU (synchronisation), so kernels count in full.
    objective : Objective, optional
        Written into the problem; latency by default.
    name : str, optional
        Problem name; the model's class name by default.

    Returns
    -------
    Problem
        Latencies in ms per device and batch size; ``input_bytes``, ``output_bytes``
        and edge ``bytes`` are per input (batch of 1), ``weight_bytes`` counts the
        parameters and buffers a task reads. The model's inputs are tasks of their
        own that take no time on any device: an input is taken to be prefetched to
        wherever it is first needed, as a data loader does, so its transfer is not
        charged.

    Notes
    -----
    Takes ``(warmup + repeats) × tasks × devices × batch sizes`` task runs, plus two
    copies per ordered pair of devices.

    Examples
    --------
    >>> from mapsched.harness.models import transformer
    >>> m = transformer()
    >>> p = profile(m, torch.zeros(m.input_shape), ["cpu"], repeats=1, warmup=0)
    >>> p.n, p.m
    (14, 1)
    """
    example_t = (example,) if isinstance(example, torch.Tensor) else tuple(example)
    devices = list(devices) if devices else available()
    if not devices:
        raise HarnessError("devices: give at least one device, e.g. cpu")
    if len(set(devices)) != len(devices):
        raise HarnessError(f"devices: {devices} names a device twice; list each once")
    if any(int(b) < 1 for b in batch_sizes) or not batch_sizes:
        raise HarnessError(f"batch_sizes: expected positive integers, got {list(batch_sizes)}")
    for d in devices:
        torch_device(d)
    graph = trace(model, example_t, cluster)
    return profile_graph(graph, example_t, devices, [int(b) for b in batch_sizes], warmup=warmup, repeats=repeats,
                         objective=objective, name=name or type(model).__name__, links=len(devices) > 1)

