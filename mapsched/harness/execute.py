"""Run a schedule for real and measure it.

Every device gets one worker thread that runs its jobs in the schedule's order. A job
waits for the jobs that produce its inputs, gathers the rows of the inputs it holds,
copies them to its device, and runs its task's segment on that batch. On CUDA each
device runs on its own stream, and a copy from another device waits for the event
its producer recorded, so devices overlap as the schedule intends. On a machine
without a GPU, emulated devices ``cpu:0``, ``cpu:1``... run on separate threads of the
host (set ``torch.set_num_threads`` so that they do not fight over the cores).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from ..errors import HarnessError
from ..problem import Problem
from ..schedule import Job, Schedule
from .devices import move, synchronize, torch_device
from .graph import CoarseGraph, trace

__all__ = ["Execution", "execute"]


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
    """

    measured: Schedule
    predicted: float
    outputs: Any

    @property
    def makespan(self) -> float:
        return self.measured.makespan

    @property
    def throughput(self) -> float | None:
        return self.measured.throughput


@dataclass
class _Done:
    values: list[Any]  # the segment's outputs, batched over the job's inputs
    event: Any  # a CUDA event recorded after the job, or None
    start: float
    end: float


def _check(graph: CoarseGraph, problem: Problem, schedule: Schedule) -> None:
    if sorted(graph.names) != sorted(t.name for t in problem.tasks):
        missing = sorted(set(graph.names) ^ {t.name for t in problem.tasks})[:3]
        raise HarnessError(f"problem: its tasks do not match the traced model (e.g. {missing}); "
                           "profile this model with the same cluster setting")
    from ..validate import validate

    bad = validate(problem, schedule)
    if bad:
        raise HarnessError(f"schedule: not valid for this problem ({bad[0]}); run 'mapsched validate'")


def _gather(name: str, inputs: Sequence[int], owner: dict[int, tuple[int, int]], done: dict[int, _Done],
            slot: int, batched: bool) -> tuple[Any, int]:
    """The rows of value ``name`` for ``inputs``, and the job they come from (the first)."""
    first = owner[inputs[0]][0]
    if not batched:
        return done[first].values[slot], first
    parts, run = [], None  # consecutive rows of one producer job become one slice
    for i in inputs:
        j, row = owner[i]
        if run and run[0] == j and run[2] == row:
            run[2] += 1
        else:
            if run:
                parts.append(done[run[0]].values[slot][run[1]:run[2]])
            run = [j, row, row + 1]
    parts.append(done[run[0]].values[slot][run[1]:run[2]])
    return (parts[0] if len(parts) == 1 else torch.cat(parts)), first


def _launch(graph: CoarseGraph, problem: Problem, jobs: list[Job], batch: Sequence[torch.Tensor],
            pools: dict[str, ThreadPoolExecutor]) -> tuple[dict[int, _Done], float]:
    names = [d.name for d in problem.system.devices]
    tdev = {d: torch_device(d) for d in names}
    graphs = {d: graph.to(tdev[d]) for d in names}
    streams = {d: torch.cuda.Stream(tdev[d]) if tdev[d].type == "cuda" else None for d in names}
    seg_of = {s.name: k for k, s in enumerate(graph.segments)}
    # owner[segment][input] = (job index, row in that job's batch)
    owner: list[dict[int, tuple[int, int]]] = [{} for _ in graph.segments]
    for j, job in enumerate(jobs):
        for row, i in enumerate(job.inputs):
            owner[seg_of[job.task]][i] = (j, row)
    done: dict[int, _Done] = {}
    futures: dict[int, Future] = {}
    # Model inputs are prefetched (they take no time in the problem): slice them now.
    staged = {j: move(batch[graph.placeholders.index(job.task)][list(job.inputs)], "cpu", job.device)
              for j, job in enumerate(jobs) if not graph.segments[seg_of[job.task]].nodes}
    go, clock, finished, left, lock, errors = threading.Event(), [0.0], threading.Event(), [len(jobs)], \
        threading.Lock(), []

    def run(j: int) -> None:
        try:
            _run(j)
        except BaseException as exc:
            errors.append(exc)
            finished.set()
            raise
        with lock:
            left[0] -= 1
            if not left[0]:
                finished.set()

    def _run(j: int) -> None:
        go.wait()
        t0 = clock[0]
        job, k = jobs[j], seg_of[jobs[j].task]
        seg, dev, stream = graph.segments[k], job.device, streams[job.device]
        with torch.inference_mode(), torch.cuda.stream(stream) if stream is not None else nullcontext():
            args = []
            for v in seg.inputs:
                p = graph.producer[v]
                for i in job.inputs:
                    futures[owner[p][i][0]].result()
                slot = graph.segments[p].outputs.index(v)
                value, src = _gather(v, job.inputs, owner[p], done, slot, graph.batched[v])
                if done[src].event is not None and stream is not None:
                    stream.wait_event(done[src].event)
                args.append(move(value, jobs[src].device, dev))
            start = time.perf_counter() - t0
            values = list(graphs[dev].module(k)(*args)) if seg.nodes else [staged[j]]
            event = None
            if stream is not None:
                event = torch.cuda.Event()
                event.record(stream)
                event.synchronize()  # so that the measured end is the kernels' end
            done[j] = _Done(values, event, start, time.perf_counter() - t0)

    order = sorted(range(len(jobs)), key=lambda j: (jobs[j].start, jobs[j].end, seg_of[jobs[j].task]))
    for d in names:
        synchronize(tdev[d])
    for j in order:  # everything queued before the clock starts: the main thread then only waits
        futures[j] = pools[jobs[j].device].submit(run, j)
    t0 = clock[0] = time.perf_counter()
    go.set()
    # Wait on one event, not on each future: waking at every job would make this thread
    # fight the devices' threads for the GIL.
    finished.wait()
    if errors:
        raise errors[0]
    for d in names:
        synchronize(tdev[d])
    return done, 1000.0 * (time.perf_counter() - t0)


def execute(model: nn.Module | CoarseGraph, problem: Problem, schedule: Schedule,
            inputs: torch.Tensor | Sequence[torch.Tensor], *, cluster: bool = True, warmup: int = 1,
            repeats: int = 1) -> Execution:
    """Run ``schedule`` of ``problem`` on the model, for real, and measure it.

    Parameters
    ----------
    model : nn.Module or CoarseGraph
        The profiled model (traced again here with ``cluster``), or its traced graph.
    problem : Problem
        The problem the model was profiled into (:func:`~mapsched.harness.profile`).
    schedule : Schedule
        A valid schedule of ``problem``; it is checked first.
    inputs : Tensor or sequence of Tensors
        The model's inputs, with ``problem.L`` rows (the inputs of the schedule).
    cluster : bool
        The clustering used when profiling, to trace ``model`` the same way.
    warmup, repeats : int
        Untimed runs, then timed runs; the run with the median makespan is returned.

    Returns
    -------
    Execution
        The measured jobs and makespan, the predicted makespan, and the outputs.

    Examples
    --------
    >>> import mapsched
    >>> from mapsched.harness import profile
    >>> from mapsched.harness.models import transformer
    >>> m = transformer()
    >>> p = profile(m, torch.zeros(m.input_shape), ["cpu:0", "cpu:1"], repeats=1)
    >>> x = torch.randn(m.input_shape)
    >>> run = execute(m, p, mapsched.solve(p, "heft"), x)
    >>> torch.allclose(run.outputs, m(x), atol=1e-5)
    True
    """
    batch = (inputs,) if isinstance(inputs, torch.Tensor) else tuple(inputs)
    if any(x.shape[0] != problem.L for x in batch):
        raise HarnessError(f"inputs: expected {problem.L} rows (the objective's batch) in every input, "
                           f"got {[x.shape[0] for x in batch]}")
    graph = model if isinstance(model, CoarseGraph) else trace(model, [x[:1] for x in batch], cluster)
    _check(graph, problem, schedule)
    jobs = list(schedule.jobs)
    runs = []
    # One long-lived thread per device, with the caller's intra-op thread count: a fresh
    # thread would start its own OpenMP team at the default size, on every run.
    threads = torch.get_num_threads()
    pools = {d.name: ThreadPoolExecutor(1, f"mapsched-{d.name}", torch.set_num_threads, (threads,))
             for d in problem.system.devices}
    try:
        for r in range(warmup + max(1, repeats)):
            done, wall = _launch(graph, problem, jobs, batch, pools)
            if r >= warmup:
                runs.append((wall, done))
    finally:
        for pool in pools.values():
            pool.shutdown(wait=True)
    wall, done = runs[int(np.argsort([w for w, _ in runs])[len(runs) // 2])]
    measured = [Job(job.task, job.device, done[j].start * 1000.0, done[j].end * 1000.0, job.inputs)
                for j, job in enumerate(jobs)]
    seg_of = {s.name: k for k, s in enumerate(graph.segments)}
    owner: dict[str, dict[int, tuple[int, int]]] = {}
    for j, job in enumerate(jobs):
        k = seg_of[job.task]
        for v in graph.segments[k].outputs:
            owner.setdefault(v, {}).update((i, (j, row)) for row, i in enumerate(job.inputs))
    values = {}
    for v, own in owner.items():
        slot = graph.segments[graph.producer[v]].outputs.index(v)
        value, src = _gather(v, range(problem.L), own, done, slot, graph.batched[v])
        values[v] = move(value, jobs[src].device, "cpu") if not jobs[src].device.startswith("cpu") else value
    result = Schedule.from_jobs(problem, measured, method=f"measured:{schedule.method}")
    result.makespan = wall
    result.throughput = 1000.0 * problem.L / wall if wall > 0 else None
    return Execution(result, schedule.makespan, graph.output(values))
