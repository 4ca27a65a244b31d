"""Profile a PyTorch model task by task on every device, and measure the links.

The result is a :class:`mapsched.Problem`: the tasks of :func:`~mapsched.harness.trace`
with their measured latency per device and batch size, their weight, input and output
bytes from tensor metadata, and the links between the devices with their measured
bandwidth and latency.
"""

from __future__ import annotations

import platform
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from mapsched import checks
from mapsched.errors import HarnessError, shown
from mapsched.harness.allocator import steady
from mapsched.harness.devices import (
    available,
    default_threads,
    host_devices,
    memory_bytes,
    move,
    synchronize,
    time_ms,
    torch_device,
)
from mapsched.harness.graph import CoarseGraph, _rows, example_inputs, trace
from mapsched.harness.lean import check_compile, prepare
from mapsched.harness.overheads import fold, measure_overheads
from mapsched.model.problem import Device, Edge, Link, Objective, Problem, System, Task

__all__ = [
    "MAX_SPREAD", "RETRIES", "SPREAD_FLOOR_MS", "NoisyMeasurementWarning", "Profiled", "Spread", "measure_links",
    "profile", "profile_graph", "profile_report",
]


def measure_links(devices: Sequence[str], sizes: tuple[int, int] = (2**12, 2**24), warmup: int = 2,
                  repeats: int = 5) -> list[Link]:
    """Directed links between every ordered pair of devices, from timed copies.

    Copies of ``sizes[0]`` and ``sizes[1]`` bytes fit ``time = latency + bytes / bandwidth``:
    the bandwidth is the slope between the two sizes and the latency what remains of
    the small copy. The copy alone is timed: the wake-up of the thread that receives it
    is :func:`~mapsched.harness.measure_overheads`' sync, which :func:`profile` adds.

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

                def copy(t: torch.Tensor = t, a: str = a, b: str = b) -> object:
                    return move(t, a, b)
                ms.append(time_ms(copy, [da, db], warmup, repeats))
            slope = (ms[1] - ms[0]) / (sizes[1] - sizes[0])
            bandwidth = 1000.0 / slope if slope > 0 else 1000.0 * sizes[1] / max(ms[1], 1e-9)
            latency = max(0.0, ms[0] - 1000.0 * sizes[0] / bandwidth)
            links.append(Link(a, b, bandwidth, latency, directed=True))
    return links


def _timed_pass(graph: CoarseGraph, dev: torch.device, inputs: Sequence[torch.Tensor],
                calls: dict[int, Callable[..., Any]]) -> list[float]:
    """Run every segment in order on ``dev`` through its callable in ``calls`` (those of
    :func:`~mapsched.harness.lean.prepare`, which execution runs) and time each (ms);
    model inputs take 0.

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
            out = calls[k](*args)
            synchronize(dev)
            times[k] = 1000.0 * (time.perf_counter() - t0)
            values.update(zip(seg.outputs, out))
    return times


MAX_SPREAD = 0.25
"""Default threshold on a measurement's spread (robust coefficient of variation): a
quiet machine times a task to within a few percent; another process stealing the
cores scatters its times by tens of percent or far more."""

RETRIES = 2
"""Default number of extra rounds of ``repeats`` passes that re-measure a noisy batch."""

SPREAD_FLOOR_MS = 0.05
"""Scatter (ms) below which no measurement counts as unstable, whatever its spread: the
timer's own jitter is a large fraction of a task of a few microseconds, and so little
time cannot move a schedule."""

_MAD_TO_SD = 1.4826  # the MAD of normal samples times this is their standard deviation


class NoisyMeasurementWarning(UserWarning):
    """Some measurements scattered more than the threshold: the machine looks busy."""


@dataclass(frozen=True)
class Spread:
    """How steady one measurement was: a task on a device at a batch size.

    Attributes
    ----------
    task : str
        Task name.
    devices : str
        The device, or the comma-separated emulated CPU devices timed together as one.
    batch_size : int
        Batch size.
    median_ms : float
        The kernel time kept: the median of the timed passes of the steadiest round
        (the problem's latency adds the device's measured per-job overhead).
    spread : float
        Robust coefficient of variation of those passes: ``1.4826 × MAD / median``
        (the MAD scaled to a standard deviation, over the median); 0 with fewer than
        two passes or a task that takes no time, ``inf`` when only the median is 0.
    scatter_ms : float
        ``1.4826 × MAD`` in ms, the absolute scatter.
    rounds : int
        Rounds of passes timed for this measurement (1 when the first was steady).
    """

    task: str
    devices: str
    batch_size: int
    median_ms: float
    spread: float
    scatter_ms: float
    rounds: int

    def unstable(self, max_spread: float) -> bool:
        """Whether the spread exceeds ``max_spread`` by more than the timer's jitter."""
        return self.spread > max_spread and self.scatter_ms > SPREAD_FLOOR_MS


@dataclass(frozen=True)
class Profiled:
    """A profiled problem with the spread of every latency it holds.

    The spreads are kept here, not in the problem file: they describe one session on
    one machine, not the model, and the file format stays as it is.
    """

    problem: Problem
    spreads: tuple[Spread, ...]
    max_spread: float

    @property
    def unstable(self) -> list[Spread]:
        """The measurements over ``max_spread`` (and the jitter floor), worst first."""
        return sorted((s for s in self.spreads if s.unstable(self.max_spread)), key=lambda s: -s.spread)

    def summary(self) -> str:
        """One line: how many measurements, their median and largest spread, how many unstable."""
        if not self.spreads:
            return "spread: no measurements"
        values = np.array([s.spread for s in self.spreads])
        return (f"spread (1.4826 MAD / median) of {len(values)} measurements: median {np.median(values):.3f}, "
                f"max {values.max():.3f}; {len(self.unstable)} unstable (over {self.max_spread:g}, with over "
                f"{SPREAD_FLOOR_MS:g} ms of scatter)")

    def report(self, worst: int = 5) -> str:
        """:meth:`summary` and a table of the ``worst`` measurements by spread."""
        rows = sorted(self.spreads, key=lambda s: -s.spread)[:worst]
        lines = [self.summary(), f"{'task':<24} {'devices':<16} {'batch':>5} {'median ms':>10} {'spread':>7} "
                                 f"{'rounds':>6}"]
        for s in rows:
            flag = "  unstable" if s.unstable(self.max_spread) else ""
            lines.append(f"{s.task[:24]:<24} {s.devices[:16]:<16} {s.batch_size:>5} {s.median_ms:>10.4f} "
                         f"{s.spread:>7.3f} {s.rounds:>6}{flag}")
        return "\n".join(lines)

    def refusal(self, max_flag: str = "max_spread", force_flag: str = "force=True") -> str | None:
        """The one-line reason to refuse these figures, or None when every measurement is steady."""
        bad = self.unstable
        if not bad:
            return None
        w = bad[0]
        return (f"{max_flag}: {len(bad)} of {len(self.spreads)} measurements still vary by more than "
                f"{self.max_spread:g} after re-measuring (worst: {w.task} on {w.devices} at batch "
                f"{w.batch_size}, spread {w.spread:.2f}); the machine looks busy: profile again when it is "
                f"quiet, or raise {max_flag}, or pass {force_flag} to keep these figures")


def _spread(samples: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Median, robust coefficient of variation and scatter of each column of ``samples`` (passes × tasks)."""
    med = np.median(samples, axis=0)
    scatter = _MAD_TO_SD * np.median(np.abs(samples - med), axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        cv = np.where(scatter == 0, 0.0, scatter / med)
    return med, np.where(np.isnan(cv), np.inf, cv), scatter


def _measure(graph: CoarseGraph, dev: torch.device, inputs: Sequence[torch.Tensor],
             calls: dict[int, Callable[..., Any]], label: str, batch: int, repeats: int, max_spread: float,
             retries: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Time ``repeats`` passes, then re-time the batch while some task is unstable.

    Returns the median, spread, scatter and rounds per task; each task keeps its
    steadiest round. A whole pass is re-run, not the noisy tasks alone, so they are
    timed in the same flow (caches, interleaving) as the first time.
    """
    med, cv, scatter = _spread(np.array([_timed_pass(graph, dev, inputs, calls) for _ in range(repeats)]))
    rounds = np.ones(len(med), dtype=int)
    for r in range(retries):
        bad = (cv > max_spread) & (scatter > SPREAD_FLOOR_MS)
        if not bad.any():
            break
        warnings.warn(f"{int(bad.sum())} measurement(s) on {label} at batch {batch} vary by more than {max_spread:g} "
                      f"(worst spread {cv[bad].max():.2f}): the machine looks busy; re-measuring "
                      f"(round {r + 2} of {retries + 1})", NoisyMeasurementWarning, stacklevel=4)
        m2, cv2, s2 = _spread(np.array([_timed_pass(graph, dev, inputs, calls) for _ in range(repeats)]))
        rounds[bad] += 1
        better = bad & (cv2 < cv)  # a round another process disturbed less
        med, cv, scatter = np.where(better, m2, med), np.where(better, cv2, cv), np.where(better, s2, scatter)
    return med, cv, scatter, rounds


def profile_graph(graph: CoarseGraph, example: torch.Tensor | Sequence[torch.Tensor], devices: Sequence[str],
                  batch_sizes: Sequence[int] = (1,), *, warmup: int = 2, repeats: int = 5,
                  objective: Objective | None = None, name: str = "model", links: bool = True,
                  max_spread: float = MAX_SPREAD, retries: int = RETRIES, overheads: bool = True,
                  compile: str = "none") -> Profiled:
    """Profile the segments of a traced model, with the spread of every latency; see :func:`profile`.

    Never refuses: the caller decides what to do with :attr:`Profiled.unstable`.
    """
    checks.count(warmup, "warmup", least=0, err=HarnessError)
    checks.count(repeats, "repeats", err=HarnessError)
    checks.count(retries, "retries", least=0, err=HarnessError)
    if not (checks.real(max_spread) and max_spread > 0):
        raise HarnessError(f"max_spread: expected a positive number (0.25: a quarter), got {shown(max_spread)}")
    check_compile(compile)
    tdev = {d: torch_device(d) for d in devices}
    shared = default_threads(devices)
    if shared is not None and torch.get_num_threads() > shared:
        # Measured and then run so, the devices would slow each other.
        warnings.warn(f"threads: {torch.get_num_threads()} torch intra-op threads on each of the emulated "
                      f"devices {', '.join(host_devices(devices))} put their thread teams "
                      f"on the same cores; use {shared} (torch.set_num_threads({shared}), or mapsched profile's "
                      "default for --threads)", stacklevel=2)
    steady()
    example = example_inputs(example)
    latency: list[dict[str, dict[str, float]]] = [{} for _ in graph.segments]
    spreads: list[Spread] = []
    with torch.inference_mode():
        # Emulated CPU devices are one CPU: time it once, so they stay identical.
        for dev in dict.fromkeys(tdev.values()):
            on = graph.to(dev)
            names = [d for d in devices if tdev[d] == dev]
            label = ",".join(names)
            for b in batch_sizes:
                inputs = [move(_rows(x, b), "cpu", str(dev)) for x in example]
                calls = prepare(on, inputs, b, compile)
                for _ in range(warmup):
                    _timed_pass(on, dev, inputs, calls)
                # Each pass times every task once, in order, so a task's repeats are interleaved
                # with all the others: a burst of load spreads over many tasks' samples rather
                # than landing on all the repeats of one.
                med, cv, scatter, rounds = _measure(on, dev, inputs, calls, label, b, max(1, repeats), max_spread,
                                                    retries)
                for k, seg in enumerate(graph.segments):
                    for d in names:
                        latency[k].setdefault(d, {})[str(b)] = float(med[k])
                    if seg.nodes:  # the model's inputs are not timed
                        spreads.append(Spread(seg.name, label, b, float(med[k]), float(cv[k]), float(scatter[k]),
                                              int(rounds[k])))
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
    problem = Problem(tasks, edges, system, objective, name)
    # The thread settings are recorded even without overheads: the times hold for them alone.
    overhead, sync = measure_overheads(devices, repeats=max(1, min(repeats, 3))) if overheads else ({}, {})
    return Profiled(fold(problem, overhead, sync, compile), tuple(spreads), max_spread)


def profile_report(model: nn.Module, example: torch.Tensor | Sequence[torch.Tensor],
                   devices: Sequence[str] | None = None, batch_sizes: Sequence[int] = (1,), *, cluster: bool = True,
                   warmup: int = 2, repeats: int = 5, objective: Objective | None = None, name: str | None = None,
                   max_spread: float = MAX_SPREAD, retries: int = RETRIES, overheads: bool = True,
                   compile: str = "none") -> Profiled:
    """:func:`profile`, returning the problem with the spread of every measurement, never refusing.

    Examples
    --------
    >>> from mapsched.harness.models import transformer
    >>> m = transformer()
    >>> r = profile_report(m, torch.zeros(m.input_shape), ["cpu"], repeats=3, warmup=0)
    >>> len(r.spreads) == r.problem.n - 1  # every task but the model's input
    True
    """
    example_t = example_inputs(example)
    if isinstance(devices, str) or not (devices is None or isinstance(devices, Sequence)):
        raise HarnessError(f"devices: expected a list of device names, e.g. ['cpu:0', 'cpu:1'], got {shown(devices)}")
    devices = list(devices) if devices else available()
    if not all(isinstance(d, str) for d in devices):
        raise HarnessError(f"devices: expected device names, got {shown(devices)}")
    # cuda and cuda:0 are one GPU; the emulated cpu:K devices are distinct by design
    same = [str(torch_device(d)) if d.startswith("cuda") else d for d in devices]
    if len(set(same)) != len(same):
        raise HarnessError(f"devices: {devices} names a device twice; list each once")
    if isinstance(batch_sizes, (str, bytes)) or not isinstance(batch_sizes, Sequence) or not batch_sizes:
        raise HarnessError(f"batch_sizes: expected a list of positive integers, got {shown(batch_sizes)}")
    batch_sizes = [checks.count(b, "batch_sizes", err=HarnessError) for b in batch_sizes]
    if objective is not None and not isinstance(objective, Objective):
        raise HarnessError(f"objective: expected a mapsched.Objective, e.g. Objective('throughput', 8), "
                           f"got {shown(objective)}")
    graph = trace(model, example_t, cluster)
    if objective is not None and objective.inputs > 1 and graph.unbatched is not None:
        raise HarnessError(f"objective: the model does not run on a batch of two inputs ({graph.unbatched}); "
                           "profile it for latency (--batch 1)")
    if objective is not None and objective.inputs > 1 and (mixer := graph.batch_mixer()) is not None:
        raise HarnessError(f"objective: {mixer} mixes the inputs of a batch (its value for a batch is not its "
                           "values for each input, row after row: an op over the batch, or the batch size as a "
                           "number), so jobs of part of the batch compute another value; profile it for latency "
                           "(--batch 1)")
    return profile_graph(graph, example_t, devices, batch_sizes, warmup=warmup, repeats=repeats,
                         objective=objective, name=name or type(model).__name__, links=len(devices) > 1,
                         max_spread=max_spread, retries=retries, overheads=overheads, compile=compile)


def profile(model: nn.Module, example: torch.Tensor | Sequence[torch.Tensor], devices: Sequence[str] | None = None,
            batch_sizes: Sequence[int] = (1,), *, cluster: bool = True, warmup: int = 2, repeats: int = 5,
            objective: Objective | None = None, name: str | None = None, max_spread: float = MAX_SPREAD,
            retries: int = RETRIES, force: bool = False, overheads: bool = True, compile: str = "none") -> Problem:
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
    max_spread : float
        Threshold on a measurement's spread, the robust coefficient of variation
        ``1.4826 × MAD / median`` of its timed passes (see :class:`Spread`); scatter
        under ``SPREAD_FLOOR_MS`` never counts. Needs ``repeats`` ≥ 3 to mean much.
    retries : int
        Extra rounds of ``repeats`` passes for a device and batch size with a
        measurement over ``max_spread``; each task keeps its steadiest round. Each
        re-measurement issues a :class:`NoisyMeasurementWarning`.
    force : bool
        Return the problem even when measurements stay over ``max_spread`` (with a
        warning) instead of raising.
    overheads : bool
        Measure what a job costs in :func:`~mapsched.harness.execute` beyond its
        kernels, per device, and what waiting for another device's job costs beyond
        the copy, per pair (:func:`~mapsched.harness.measure_overheads`), and add them
        to every task's latency on that device and to the link's latency. Either way
        the problem's ``calibration`` records the terms and the current thread settings
        (``torch.get_num_threads()``, ``torch.get_num_interop_threads()``), which
        :func:`~mapsched.harness.execute` then requires. Set them first: on several
        emulated devices ``cpu:K``, :func:`~mapsched.harness.default_threads` (what
        ``mapsched profile`` sets), as PyTorch's default puts every device's thread
        team on every core.
    compile : str
        How each task runs, in the timings and then in :func:`~mapsched.harness.execute`
        (recorded in the problem's ``calibration``, which ``execute`` then requires):
        ``none``, its fx module, op by op from Python; ``jit``, a frozen TorchScript
        trace of it per batch size (see :mod:`mapsched.harness.lean`), built before the
        timed passes.
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

    Raises
    ------
    HarnessError
        A bad device or batch size; or, unless ``force``, measurements that still vary
        by more than ``max_spread`` after ``retries`` re-measurements (one line: how many,
        the worst, and how to force).

    Notes
    -----
    Takes ``(warmup + repeats) × devices × batch sizes`` passes over the model, up to
    ``retries × repeats`` more per device and batch size on a noisy machine, plus timed
    copies for each ordered pair of devices (whose spread is not checked), and a few
    chains of empty jobs for the overheads (tens of ms on the CPU).
    :func:`profile_report` returns the spreads as well.

    Examples
    --------
    >>> from mapsched.harness.models import transformer
    >>> m = transformer()
    >>> p = profile(m, torch.zeros(m.input_shape), ["cpu"], repeats=1, warmup=0)
    >>> p.n, p.m
    (14, 1)
    """
    result = profile_report(model, example, devices, batch_sizes, cluster=cluster, warmup=warmup, repeats=repeats,
                            objective=objective, name=name, max_spread=max_spread, retries=retries,
                            overheads=overheads, compile=compile)
    reason = result.refusal()
    if reason and not force:
        raise HarnessError(reason)
    if reason:
        warnings.warn(f"kept {len(result.unstable)} unstable measurements (force=True)", NoisyMeasurementWarning,
                      stacklevel=2)
    return result.problem
