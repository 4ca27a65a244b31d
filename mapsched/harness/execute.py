"""Run a schedule for real and measure it.

Every device gets one worker thread that runs its jobs in the schedule's order, in one
loop (:func:`mapsched.harness.runner.launch`); what each job needs is worked out once
per execution, not per run. A job waits for the jobs that produce its inputs, gathers
the rows of the inputs it holds (from as many producers and devices as hold them),
copies them to its device, and runs its task's callable on that batch (see
:mod:`mapsched.harness.lean`: the segment's fx module, or a frozen TorchScript trace of
it per batch size, as the problem was profiled). On CUDA each device has its own stream:
its thread only queues kernels, a copy from another GPU waits on the stream for the
event its producer recorded, and the host waits on that event only where the CPU
consumes a GPU's output; job times on a GPU come from CUDA events. On a machine without
a GPU, emulated devices ``cpu:0``, ``cpu:1``... run on separate threads of the host (set
``torch.set_num_threads`` so that they do not fight over the cores)."""

from __future__ import annotations

import gc
import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from mapsched import checks
from mapsched.errors import HarnessError, MapschedError, first_line, shown
from mapsched.harness.allocator import steady
from mapsched.harness.devices import EXCLUSIVE, move, pin, torch_device
from mapsched.harness.graph import CoarseGraph, example_inputs, trace
from mapsched.harness.lean import close, prepare, recorded_compile
from mapsched.harness.overheads import check_threads
from mapsched.harness.runner import Done, Step, launch, timed
from mapsched.model.problem import Problem
from mapsched.model.schedule import Job, Schedule

__all__ = ["Execution", "execute", "outputs_match"]


@dataclass
class Execution:
    """What a real run of a schedule measured.

    Attributes
    ----------
    measured : Schedule
        The jobs with their measured start and end (ms from the launch); its
        ``makespan`` is the measured wall time until every device finished.
    predicted : float
        The schedule's own makespan (ms).
    outputs : Any
        The model's outputs for all inputs, on the CPU, in input order.
    assembly : dict of str to float
        Per device, the ms its thread spent in that run assembling its jobs' inputs
        before running them (slices and concatenations of batch pieces, copies from the
        other devices; on a GPU, queuing the copies): work that the problem gives no
        device, since it has no term for it.
    """

    measured: Schedule
    predicted: float
    outputs: Any
    assembly: dict[str, float] = field(default_factory=dict)

    @property
    def makespan(self) -> float:
        return self.measured.makespan

    @property
    def throughput(self) -> float | None:
        return self.measured.throughput


def outputs_match(outputs: Any, reference: Any, devices: Sequence[str]) -> bool:
    """Whether a run's outputs equal the unscheduled model's, within floating-point tolerance:
    :func:`~mapsched.harness.lean.close`'s, looser where a device is a GPU (TF32)."""
    if isinstance(reference, (tuple, list)):
        return len(outputs) == len(reference) and all(outputs_match(a, b, devices) for a, b in zip(outputs, reference))
    if isinstance(reference, dict):
        return (isinstance(outputs, dict) and outputs.keys() == reference.keys()
                and all(outputs_match(outputs[k], reference[k], devices) for k in reference))
    if not isinstance(reference, torch.Tensor):
        return outputs == reference
    return close(outputs.detach().cpu(), reference.detach().cpu(),
                 any(torch_device(d).type == "cuda" for d in devices))


def check_inputs(graph: CoarseGraph, problem: Problem, flag: str = "inputs") -> None:
    """Refuse inputs of another size than the problem was profiled at, in one line naming
    ``flag``: the problem records the bytes per input of each model input (its task's
    ``output_bytes``), not the shape, so inputs of another shape and the same size pass.
    Inputs of a task the problem lacks are left to :func:`execute`'s check of the tasks."""
    for p in graph.placeholders:
        i = problem.task_index.get(p)
        if i is not None and problem.tasks[i].output_bytes != graph.nbytes[p]:
            raise HarnessError(f"{flag}: the model's input {shown(p)} holds {graph.nbytes[p]} bytes per input here and "
                               f"{problem.tasks[i].output_bytes:.0f} in the problem; give inputs of the shape it "
                               "was profiled at")


def _check(graph: CoarseGraph, problem: Problem, schedule: Schedule) -> None:
    if sorted(graph.names) != sorted(t.name for t in problem.tasks):
        missing = sorted(set(graph.names) ^ {t.name for t in problem.tasks})[:3]
        raise HarnessError(f"problem: its tasks do not match the traced model (e.g. {missing}); "
                           "profile this model with the same cluster setting")
    check_inputs(graph, problem)
    from mapsched.model.validate import validate

    bad = validate(problem, schedule)
    if bad:
        raise HarnessError(f"schedule: not valid for this problem ({bad[0]}); run 'mapsched validate'")


def _pieces(inputs: Sequence[int], owner: dict[int, tuple[int, int]], rows: int) -> list[tuple[int, slice | None]]:
    """Where the rows of one value for ``inputs`` lie: ``(producer job, rows of its batch)``
    runs, consecutive inputs of one job merged into one slice of ``rows`` rows per input (a
    value that does not follow the batch, ``rows`` 0, is taken whole from the first producer)."""
    if not rows:
        return [(owner[inputs[0]][0], None)]
    runs: list[list[int]] = []
    for i in inputs:
        j, row = owner[i]
        if runs and runs[-1][0] == j and runs[-1][2] == row:
            runs[-1][2] += 1
        else:
            runs.append([j, row, row + 1])
    return [(j, slice(a * rows, b * rows)) for j, a, b in runs]


def _gather(pieces: list[tuple[int, slice | None]], jobs: list[Job], done: dict[int, Done], slot: int, dev: str,
            stream: Any = None) -> Any:
    """The value assembled on ``dev`` from its pieces, each copied from its producer's device
    (on CUDA after the producer's event, on ``stream``)."""
    parts = []
    for j, rows in pieces:
        d = done[j]
        if d.event is not None:  # a GPU's output: the consumer's stream (or the host) waits for it
            stream.wait_event(d.event) if stream is not None else d.event.synchronize()
        value = d.values[slot] if rows is None else _rows_of(d.values[slot], rows)
        parts.append(move(value, jobs[j].device, dev))
    if len(parts) == 1:
        return parts[0]
    if isinstance(parts[0], (tuple, list)):  # a tuple of batched tensors (chunk, split): joined element by element
        return type(parts[0])(torch.cat(column) for column in zip(*parts))
    return torch.cat(parts)


def _rows_of(value: Any, rows: slice) -> Any:
    """The rows ``rows`` of a batched value: a tensor, or each tensor of a tuple or list."""
    return type(value)(v[rows] for v in value) if isinstance(value, (tuple, list)) else value[rows]


@dataclass
class _Devices:
    """What every run of one execution shares: per device the callable of every (task,
    number of inputs) its jobs run, on the graph with its weights there (built in advance,
    as profiling built them, so that no run pays for it), and the CUDA stream."""

    calls: dict[str, dict[tuple[int, int], Callable[..., Any]]]
    streams: dict[str, Any]
    tdev: dict[str, torch.device]

    @classmethod
    def open(cls, graph: CoarseGraph, problem: Problem, jobs: Sequence[Job], batch: Sequence[torch.Tensor],
             compile: str) -> _Devices:
        names = [d.name for d in problem.system.devices]
        tdev = {d: torch_device(d) for d in names}
        graphs = {d: graph.to(tdev[d]) for d in names}
        seg_of = {s.name: k for k, s in enumerate(graph.segments)}
        calls: dict[str, dict[tuple[int, int], Callable[..., Any]]] = {d: {} for d in names}
        for d in names:
            need: dict[int, set[int]] = {}  # number of inputs to the tasks of jobs of that size
            for job in jobs:
                if job.device == d and graph.segments[seg_of[job.task]].nodes:
                    need.setdefault(len(job.inputs), set()).add(seg_of[job.task])
            for n, tasks in need.items():
                inputs = [move(x[:n], "cpu", d) for x in batch]
                calls[d].update(((k, n), fn) for k, fn in prepare(graphs[d], inputs, n, compile, tasks).items())
        streams = {d: torch.cuda.Stream(tdev[d]) if tdev[d].type == "cuda" else None for d in names}
        return cls(calls, streams, tdev)


def _body(j: int, jobs: list[Job], call: Callable[..., Any] | None,
          args: list[tuple[list[tuple[int, slice | None]], int]], stream: Any,
          staged: dict[int, Any]) -> Callable[[dict[int, Done], float], Done]:
    """Job ``j`` as its device's loop runs it: its inputs gathered, then its callable timed
    (``call`` None: a model input, taken from ``staged``, which each run refreshes). The
    model raising there is a :class:`HarnessError` naming the task and device, from the
    model's exception: raised on the device's thread, its traceback says neither."""
    dev, task = jobs[j].device, jobs[j].task

    def gather(done: dict[int, Done]) -> list[Any]:
        return [_gather(pieces, jobs, done, slot, dev, stream) for pieces, slot in args]

    run = timed(call if call is not None else lambda: (staged[j],), gather, stream)

    def body(done: dict[int, Done], t0: float) -> Done:
        try:
            return run(done, t0)
        except (MapschedError, MemoryError):
            raise
        except Exception as exc:
            raise HarnessError(f"model: its task {shown(task)} raised {type(exc).__name__}: {first_line(exc)} "
                               f"on {dev}, "
                               "running the schedule; fix the model") from exc
    return body


@dataclass
class _Plan:
    """Each device's loop of jobs, built once per execution, and the model inputs its
    runs take: per job of a model input, the input's position and rows and the device
    (:func:`_launch` slices them afresh each run into ``staged``)."""

    lines: dict[str, list[Step]]
    sources: list[tuple[int, int, list[int], str]]
    staged: dict[int, Any]


def _order(keys: dict[int, tuple], before: dict[int, list[int]]) -> list[int]:
    """The jobs by ``keys``, except that none comes before a job of ``before[j]``: a
    schedule's times, valid within floating-point tolerance, could put a job a hair
    before the zero-length job on its device that produces its input. O(n log n + E).

    >>> _order({0: (1.0, 1.0), 1: (0.9999999, 2.0), 2: (0.5, 0.6)}, {1: [0]})
    [2, 0, 1]
    """
    waiting = {j: len(before.get(j, ())) for j in keys}
    after: dict[int, list[int]] = {}
    for j, srcs in before.items():
        for src in srcs:
            after.setdefault(src, []).append(j)
    heap = [(keys[j], j) for j, n in waiting.items() if not n]
    heapq.heapify(heap)
    out = []
    while heap:
        _, j = heapq.heappop(heap)
        out.append(j)
        for k in after.get(j, ()):
            waiting[k] -= 1
            if not waiting[k]:
                heapq.heappush(heap, (keys[k], k))
    return out


def _plan(graph: CoarseGraph, jobs: list[Job], devs: _Devices) -> _Plan:
    """Each device's jobs in the schedule's order (start, end, then the graph's order; no
    job before a producer of its input on its device), with where every input of each
    comes from. O(sum of the jobs' inputs + n log n)."""
    seg_of = {s.name: k for k, s in enumerate(graph.segments)}
    # owner[segment][input] = (job index, row in that job's batch)
    owner: list[dict[int, tuple[int, int]]] = [{} for _ in graph.segments]
    for j, job in enumerate(jobs):
        for row, i in enumerate(job.inputs):
            owner[seg_of[job.task]][i] = (j, row)
    args: dict[int, list[tuple[list[tuple[int, slice | None]], int]]] = {}
    for j, job in enumerate(jobs):
        seg = graph.segments[seg_of[job.task]]
        args[j] = [(_pieces(job.inputs, owner[graph.producer[v]], graph.batched[v]),
                    graph.segments[graph.producer[v]].outputs.index(v)) for v in seg.inputs]
    waits = {j: list(dict.fromkeys(src for pieces, _ in args[j] for src, _ in pieces)) for j in args}
    signal = {src for j in waits for src in waits[j] if jobs[src].device != jobs[j].device}
    keys = {j: (job.start, job.end, seg_of[job.task]) for j, job in enumerate(jobs)}
    order = _order(keys, {j: [src for src in waits[j] if jobs[src].device == jobs[j].device] for j in waits})
    staged: dict[int, Any] = {}
    lines: dict[str, list[Step]] = {d: [] for d in devs.tdev}
    for j in order:
        job, k = jobs[j], seg_of[jobs[j].task]
        call = devs.calls[job.device][k, len(job.inputs)] if graph.segments[k].nodes else None
        body = _body(j, jobs, call, args[j], devs.streams[job.device], staged)
        lines[job.device].append(Step(j, waits[j], j in signal, body))
    sources = [(j, graph.placeholders.index(job.task), list(job.inputs), job.device) for j, job in enumerate(jobs)
               if not graph.segments[seg_of[job.task]].nodes]
    return _Plan(lines, sources, staged)


def _launch(jobs: list[Job], batch: Sequence[torch.Tensor], devs: _Devices,
            plan: _Plan) -> tuple[dict[int, Done], float]:
    """One run of ``plan`` (:func:`~mapsched.harness.runner.launch`): the jobs' times and the wall ms."""
    # Model inputs are prefetched (they take no time in the problem): slice them now.
    plan.staged.clear()
    plan.staged.update((j, move(batch[k][rows], "cpu", dev)) for j, k, rows, dev in plan.sources)
    done, wall, marks = launch(plan.lines, devs.tdev, devs.streams)
    for j, d in done.items():
        if d.event is not None:
            mark = marks[jobs[j].device]
            d.start, d.end = mark.elapsed_time(d.began) / 1000.0, mark.elapsed_time(d.event) / 1000.0
    return done, wall


REPEATS = 3
"""Fewest timed runs of :func:`execute` by default."""
TIMED_MS = 100.0
"""By default, :func:`execute`'s timed runs go on until they add up to this many ms."""
MAX_REPEATS = 50
"""Most timed runs of :func:`execute` by default."""


def _more(repeats: int | None, walls: list[float]) -> bool:
    """Whether another timed run is due after ``walls`` (ms), for ``repeats`` (None: the default rule)."""
    if repeats is not None:
        return len(walls) < max(1, repeats)
    return len(walls) < REPEATS or (sum(walls) < TIMED_MS and len(walls) < MAX_REPEATS)


def _measure(graph: CoarseGraph, devs: _Devices, jobs: list[Job], batch: Sequence[torch.Tensor], warmup: int,
             repeats: int | None) -> tuple[list[tuple[float, dict[int, tuple[float, float, float]]]], dict[int, Done]]:
    """``warmup`` untimed runs, then the timed ones (see :func:`_more`), with the garbage
    collector paused: each run's wall ms and job times (start, end, assembly; s), and the
    last run's values."""
    runs: list[tuple[float, dict[int, tuple[float, float, float]]]] = []
    walls: list[float] = []
    plan = _plan(graph, jobs, devs)
    paused = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        for _ in range(warmup):
            _launch(jobs, batch, devs, plan)
        while _more(repeats, walls):
            # The last run's values go before the next starts: runs that keep them all alive
            # make every run allocate fresh pages, where profile's timings reuse them.
            done = None
            done, wall = _launch(jobs, batch, devs, plan)
            walls.append(wall)
            runs.append((wall, {j: (d.start, d.end, d.assembly) for j, d in done.items()}))
    finally:
        if paused:
            gc.enable()
    return runs, done


def execute(model: nn.Module | CoarseGraph, problem: Problem, schedule: Schedule,
            inputs: torch.Tensor | Sequence[torch.Tensor], *, cluster: bool = True, warmup: int = 1,
            repeats: int | None = None, compile: str | None = None) -> Execution:
    """Run ``schedule`` of ``problem`` on the model, for real, and measure it.

    Parameters
    ----------
    model : nn.Module or CoarseGraph
        The profiled model (traced again here with ``cluster``), or its traced graph.
    problem : Problem
        The problem the model was profiled into (:func:`~mapsched.harness.profile`).
    schedule : Schedule
        A valid schedule of ``problem``; it is checked first, and so are the thread
        settings: those the problem was profiled with, if it records them.
    inputs : Tensor or sequence of Tensors
        The model's inputs, with ``problem.L`` rows (the inputs of the schedule).
    cluster : bool
        The clustering used when profiling, to trace ``model`` the same way.
    warmup : int
        Untimed runs first.
    repeats : int, optional
        Timed runs; the run with the median makespan is returned. By default at least
        ``REPEATS``, and more until they add up to ``TIMED_MS`` (at most ``MAX_REPEATS``):
        a model of a few ms gets tens of runs, whose median a burst of another process
        moves less. Python's garbage collector is paused during the runs, as ``timeit``
        pauses it.
    compile : str, optional
        How each task runs (see :func:`~mapsched.harness.profile`): by default as the
        problem was profiled; another setting than the recorded one is refused. The
        callables of every task and job size are built (and cached on the graph) before
        the first run.

    Returns
    -------
    Execution
        The measured jobs and makespan, the predicted makespan, and the outputs.

    Examples
    --------
    >>> import mapsched
    >>> from mapsched.harness import default_threads, profile
    >>> from mapsched.harness.models import transformer
    >>> m = transformer()
    >>> torch.set_num_threads(default_threads(["cpu:0", "cpu:1"]))  # the two devices' threads apart
    >>> p = profile(m, torch.zeros(m.input_shape), ["cpu:0", "cpu:1"], repeats=1)
    >>> x = torch.randn(m.input_shape)
    >>> run = execute(m, p, mapsched.solve(p, "heft"), x)
    >>> torch.allclose(run.outputs, m(x), atol=1e-5)
    True
    """
    if not isinstance(problem, Problem) or not isinstance(schedule, Schedule):
        raise HarnessError(f"problem, schedule: expected a mapsched.Problem and a Schedule of it (Problem.read, "
                           f"Schedule.read), got {type(problem).__name__} and {type(schedule).__name__}")
    checks.count(warmup, "warmup", least=0, err=HarnessError)
    checks.count(repeats, "repeats", none=True, err=HarnessError)
    batch = example_inputs(inputs, "inputs")
    if any(x.shape[0] != problem.L for x in batch):
        raise HarnessError(f"inputs: expected {problem.L} rows (the objective's batch) in every input, "
                           f"got {[x.shape[0] for x in batch]}")
    jobs = list(schedule.jobs)
    # One execution at a time: the worker threads are shared, and so is fx's tracer.
    with EXCLUSIVE:
        graph = model if isinstance(model, CoarseGraph) else trace(model, [x[:1] for x in batch], cluster)
        _check(graph, problem, schedule)
        check_threads(problem)
        compile = recorded_compile(problem, compile)
        steady()
        pin([d.name for d in problem.system.devices])
        runs, done = _measure(graph, _Devices.open(graph, problem, jobs, batch, compile), jobs, batch, warmup,
                              repeats)
    wall, times = runs[int(np.argsort([w for w, _ in runs])[len(runs) // 2])]
    measured = [Job(job.task, job.device, times[j][0] * 1000.0, times[j][1] * 1000.0, job.inputs)
                for j, job in enumerate(jobs)]
    assembly = dict.fromkeys(problem.device_names, 0.0)
    for j, job in enumerate(jobs):
        assembly[job.device] += times[j][2] * 1000.0
    seg_of = {s.name: k for k, s in enumerate(graph.segments)}
    owner: dict[str, dict[int, tuple[int, int]]] = {}
    for j, job in enumerate(jobs):
        k = seg_of[job.task]
        for v in graph.segments[k].outputs:
            owner.setdefault(v, {}).update((i, (j, row)) for row, i in enumerate(job.inputs))
    values = {v: _gather(_pieces(range(problem.L), own, graph.batched[v]), jobs, done,
                         graph.segments[graph.producer[v]].outputs.index(v), "cpu")
              for v, own in owner.items()}
    result = Schedule.from_jobs(problem, measured, method=f"measured:{schedule.method}")
    result.makespan = wall
    result.throughput = 1000.0 * problem.L / wall if wall > 0 else None
    return Execution(result, schedule.makespan, graph.output(values), assembly)
