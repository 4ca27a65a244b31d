"""Profile a PyTorch model task by task on every device, and measure the links.

The result is a :class:`mapsched.Problem`: the tasks of :func:`~mapsched.harness.trace`
with their measured latency per device and batch size, their weight, input and output
bytes from tensor metadata, and the links between the devices with their measured
bandwidth and latency.
"""

from __future__ import annotations

import platform
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch
from torch import nn

from ..errors import HarnessError
from ..problem import Device, Edge, Link, Objective, Problem, System, Task
from .devices import available, memory_bytes, move, synchronize, time_ms, torch_device
from .graph import CoarseGraph, _rows, trace

__all__ = ["measure_links", "profile", "profile_graph"]


def measure_links(devices: Sequence[str], sizes: tuple[int, int] = (2**12, 2**24), warmup: int = 2,
                  repeats: int = 5) -> list[Link]:
    """Directed links between every ordered pair of devices, from timed copies.

    Copies of ``sizes[0]`` and ``sizes[1]`` bytes fit ``time = latency + bytes / bandwidth``:
    the bandwidth is the slope between the two sizes and the latency what remains of
    the small copy. Between emulated CPU devices a copy is made by another thread
    after it wakes up, as :func:`~mapsched.harness.execute` hands data over.

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
            with ThreadPoolExecutor(1, "mapsched-link", torch.set_num_threads, (torch.get_num_threads(),)) as pool:
                for size in sizes:
                    t = torch.empty(size, dtype=torch.uint8, device=da)
                    if da.type == db.type == "cpu":
                        # Emulated devices: the receiving thread wakes up and copies, as in execute().
                        def copy(t: torch.Tensor = t) -> object:
                            return pool.submit(t.clone).result()
                    else:
                        def copy(t: torch.Tensor = t, a: str = a, b: str = b) -> object:
                            return move(t, a, b)
                    ms.append(time_ms(copy, [da, db], warmup, repeats))
            slope = (ms[1] - ms[0]) / (sizes[1] - sizes[0])
            bandwidth = 1000.0 / slope if slope > 0 else 1000.0 * sizes[1] / max(ms[1], 1e-9)
            latency = max(0.0, ms[0] - 1000.0 * sizes[0] / bandwidth)
            links.append(Link(a, b, bandwidth, latency, directed=True))
    return links


def _timed_pass(graph: CoarseGraph, dev: torch.device, inputs: Sequence[torch.Tensor]) -> list[float]:
    """Run every segment in order on ``dev`` and time each (ms); model inputs take 0.

    Timing the tasks in the flow of a whole pass, rather than one task over and over,
    sees the caches as a real run leaves them.
    """
    values: dict[str, object] = dict(zip(graph.placeholders, inputs))
    times = [0.0] * len(graph.segments)
    for k, seg in enumerate(graph.segments):
        if seg.nodes:
            args = [values[v] for v in seg.inputs]
            synchronize(dev)
            t0 = time.perf_counter()
            out = graph.module(k)(*args)
            synchronize(dev)
            times[k] = 1000.0 * (time.perf_counter() - t0)
            values.update(zip(seg.outputs, out))
    return times


def profile_graph(graph: CoarseGraph, example: torch.Tensor | Sequence[torch.Tensor], devices: Sequence[str],
                  batch_sizes: Sequence[int] = (1,), *, warmup: int = 2, repeats: int = 5,
                  objective: Objective | None = None, name: str = "model", links: bool = True) -> Problem:
    """Profile the segments of a traced model; see :func:`profile`."""
    example = (example,) if isinstance(example, torch.Tensor) else tuple(example)
    tdev = {d: torch_device(d) for d in devices}
    latency: list[dict[str, dict[str, float]]] = [{} for _ in graph.segments]
    with torch.inference_mode():
        # Emulated CPU devices are one CPU: time it once, so they stay identical.
        for dev in dict.fromkeys(tdev.values()):
            on = graph.to(dev)
            for b in batch_sizes:
                inputs = [move(_rows(x, b), "cpu", str(dev)) for x in example]
                for _ in range(warmup):
                    _timed_pass(on, dev, inputs)
                ms = np.median([_timed_pass(on, dev, inputs) for _ in range(max(1, repeats))], axis=0)
                for k in range(len(graph.segments)):
                    for d in devices:
                        if tdev[d] == dev:
                            latency[k].setdefault(d, {})[str(b)] = float(ms[k])
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
        Untimed and timed passes over the whole model per device and batch size; each
        task keeps the median of its times over the timed passes. Tasks are timed one
        after another in a pass (as a real run leaves the caches), each bracketed by a
        synchronisation of the GPU, so kernels count in full. Emulated CPU devices are
        timed once, as the one CPU they are.
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
    Takes ``(warmup + repeats) × devices × batch sizes`` passes over the model, plus
    timed copies for each ordered pair of devices.

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

