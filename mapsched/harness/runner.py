"""The device loops that every execution and overhead measurement runs on.

Each device's worker thread (:func:`~mapsched.harness.devices.worker`) runs its steps in
order in one loop, with no per-job hand-off through a queue or a future: a step waits
only for its producers on other devices, each of which sets an event when done. A loop
that fails sets every event, so that no other device waits for a producer that will
not come, and the first error is raised to the caller. :func:`timed` makes a step that
times its callable as every job is timed: by the host's clock, or on a GPU by CUDA
events on the device's stream.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import torch

from mapsched.errors import HarnessError
from mapsched.harness.devices import synchronize, worker

__all__ = ["Done", "Step", "launch", "timed"]


@dataclass
class Done:
    """What a timed step left: its outputs and times.

    Attributes
    ----------
    values : list
        The callable's outputs.
    start, end : float
        Seconds from the launch; on a GPU filled in from the events once the run is over.
    assembly : float
        Seconds the device's thread spent, before the callable, assembling its inputs (by
        the host's clock; on a GPU the time to queue their copies).
    event, began : torch.cuda.Event or None
        On a GPU, recorded on the device's stream after and before the callable's kernels.
    """

    values: list[Any]
    start: float
    end: float
    assembly: float = 0.0
    event: Any = None
    began: Any = None


@dataclass
class Step:
    """One job of a device's loop.

    Attributes
    ----------
    key : int
        The job; ``body``'s result is stored under it.
    waits : sequence of int
        The jobs whose results it needs (those on its own device come earlier in its loop).
    signal : bool
        Whether a job on another device waits for it.
    body : callable
        ``body(done, t0)``: runs the job, given the results so far and the launch's
        ``time.perf_counter()``, and returns its result.
    """

    key: int
    waits: Sequence[int]
    signal: bool
    body: Callable[[dict[int, Any], float], Any]


def launch(lines: dict[str, list[Step]], devices: dict[str, torch.device],
           streams: dict[str, Any]) -> tuple[dict[int, Any], float, dict[str, Any]]:
    """Run each device's ``lines`` on its worker thread, all started at once.

    Everything is queued before the clock starts; then the calling thread only waits.
    On a GPU the loop runs with the device's stream current, and the launch is marked
    on that stream by a CUDA event.

    Returns
    -------
    done : dict
        Each step's result, by key.
    wall : float
        ms from the start until every loop ended and every device synchronised.
    marks : dict
        Per GPU, the event recorded at the launch on its stream.
    """
    done: dict[int, Any] = {}
    ready = {s.key: threading.Event() for line in lines.values() for s in line if s.signal}
    go, finished, lock = threading.Event(), threading.Event(), threading.Lock()
    clock, left, errors = [0.0], [len(lines)], []
    if not lines:
        finished.set()

    def run(line: list[Step], stream: Any) -> None:
        try:
            go.wait()
            t0 = clock[0]
            with torch.inference_mode(), torch.cuda.stream(stream) if stream is not None else nullcontext():
                for step in line:
                    for src in step.waits:
                        if src not in done:
                            ready[src].wait()
                            if errors:
                                raise HarnessError("execution: a job of another device failed")
                    done[step.key] = step.body(done, t0)
                    if step.signal:
                        ready[step.key].set()
        except BaseException as exc:
            errors.append(exc)
            for event in ready.values():
                event.set()
            finished.set()
            raise
        with lock:
            left[0] -= 1
            if not left[0]:
                finished.set()

    for d in devices.values():
        synchronize(d)
    for name, line in lines.items():
        worker(name).submit(run, line, streams.get(name))
    marks = {d: torch.cuda.Event(enable_timing=True) for d, s in streams.items() if s is not None}
    for d, mark in marks.items():
        mark.record(streams[d])
    t0 = clock[0] = time.perf_counter()
    go.set()
    # One event for the whole run: waking at each device's end would make this thread
    # fight the devices' threads for the GIL.
    finished.wait()
    if errors:
        raise errors[0]
    for d in devices.values():
        synchronize(d)
    return done, 1000.0 * (time.perf_counter() - t0), marks


def timed(call: Callable[..., Sequence[Any]], inputs: Callable[[dict[int, Any]], list[Any]],
          stream: Any = None) -> Callable[[dict[int, Any], float], Done]:
    """A step's body: ``inputs(done)`` (timed apart, as :attr:`Done.assembly`), then ``call(*inputs)`` timed.

    On the host the clock brackets the call. On a GPU (``stream``) the kernels are only
    queued: the loop goes on to queue the device's next job, and two CUDA events around
    them time the kernels once the run is over (:attr:`Done.event` is what a consumer
    waits for).
    """

    def host(done: dict[int, Any], t0: float) -> Done:
        before = time.perf_counter()
        args = inputs(done)
        start = time.perf_counter()
        out = list(call(*args))
        return Done(out, start - t0, time.perf_counter() - t0, start - before)

    def gpu(done: dict[int, Any], t0: float) -> Done:
        before = time.perf_counter()
        args = inputs(done)
        queued = time.perf_counter() - before
        began, event = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        began.record(stream)
        out = list(call(*args))
        event.record(stream)
        return Done(out, math.nan, math.nan, queued, event, began)

    return host if stream is None else gpu
