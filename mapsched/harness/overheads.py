"""What a job costs beyond its kernels, and the thread settings the times hold for.

:func:`~mapsched.harness.profile` times each task alone, called directly, so its
latencies miss what :func:`~mapsched.harness.execute` adds around every job: handing
the job to its device's worker thread, the executor's bookkeeping, on CUDA the events
and the launch, and, where a job waits for a job of another device, the consumer's
wake-up (or its stream's wait on the producer's event). :func:`measure_overheads` times
these with empty jobs through the same machinery; :func:`fold` adds them to the
latencies and records them in the problem's :class:`~mapsched.model.problem.Calibration`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from typing import Any

import numpy as np
import torch

from mapsched.errors import HarnessError
from mapsched.harness.allocator import steady
from mapsched.harness.devices import EXCLUSIVE, pin, synchronize, torch_device
from mapsched.harness.runner import Done, Step, launch, timed
from mapsched.model.problem import Calibration, Link, Problem, Task

__all__ = ["JOBS", "check_threads", "fold", "measure_overheads", "refit", "thread_settings"]

JOBS = 200
"""Empty jobs per timed chain: a chain takes a few ms, so that the timer's resolution and
one slow wake-up weigh little."""


def thread_settings() -> tuple[int, int]:
    """The current PyTorch intra-op and inter-op thread counts."""
    return torch.get_num_threads(), torch.get_num_interop_threads()


def check_threads(problem: Problem, flag: str = "torch.set_num_threads",
                  current: tuple[int, int] | None = None) -> None:
    """Refuse to run ``problem`` under thread settings other than those it was profiled with.

    ``current`` (intra-op, inter-op) defaults to :func:`thread_settings`.

    Raises
    ------
    HarnessError
        One line naming both settings and ``flag``, the way to set them.
    """
    cal = problem.calibration
    if cal is None:
        return
    now = thread_settings() if current is None else current
    for recorded, current, what in zip((cal.threads, cal.interop_threads), now, ("intra-op", "inter-op")):
        if recorded is not None and recorded != current:
            raise HarnessError(f"threads: the problem was profiled with {recorded} torch {what} thread(s), this run "
                               f"has {current}; run with the same setting ({flag}) or profile again with this one")


def _task(stream: Any, x: torch.Tensor | None) -> Callable[[], tuple[Any, ...]]:
    """An almost empty task: nothing on the host, one tiny kernel on a GPU."""
    if stream is None:
        return tuple
    return lambda: (x.add_(1),)


def _after(k: int, stream: Any) -> Callable[[dict[int, Done]], list[Any]]:
    """Job ``k``'s inputs in a chain: none, but it follows job ``k - 1`` (on a GPU, its event)."""

    def inputs(done: dict[int, Done]) -> list[Any]:
        prev = done.get(k - 1)
        if prev is not None and prev.event is not None:
            stream.wait_event(prev.event) if stream is not None else prev.event.synchronize()
        return []

    return inputs


def _chain(names: Sequence[str], order: Sequence[int], tasks: dict[str, Callable[[], Any]],
           tdev: dict[str, torch.device], streams: dict[str, Any]) -> float:
    """Wall ms per job of a chain run as ``execute`` runs its jobs: job k on ``names[order[k]]``
    waits for job k - 1, all queued before the clock starts."""
    lines: dict[str, list[Step]] = {d: [] for d in names}
    for k, u in enumerate(order):
        d = names[u]
        handed = k + 1 < len(order) and names[order[k + 1]] != d
        lines[d].append(Step(k, [k - 1] if k else [], handed, timed(tasks[d], _after(k, streams[d]), streams[d])))
    _, wall, _ = launch(lines, tdev, streams)
    return wall / len(order)


def _direct(task: Callable[[], Any], dev: torch.device, stream: Any, n: int) -> float:
    """ms per call of ``task`` timed as ``profile`` times a task: synchronised before and after."""
    total = 0.0
    with torch.cuda.stream(stream) if stream is not None else nullcontext():
        for _ in range(n):
            synchronize(dev)
            t0 = time.perf_counter()
            task()
            synchronize(dev)
            total += time.perf_counter() - t0
    return 1000.0 * total / n


def measure_overheads(devices: Sequence[str], jobs: int = JOBS,
                      repeats: int = 3) -> tuple[dict[str, float], dict[tuple[str, str], float]]:
    """Per device, the ms a job costs in ``execute`` beyond its kernels; per device pair, a hand-off's.

    A device's overhead is the time per job of a chain of ``jobs`` almost empty jobs on its
    worker thread, each waiting for the one before and timed as ``execute`` times a job
    (:func:`~mapsched.harness.runner.timed`), less the time of the same task called
    directly as :func:`~mapsched.harness.profile` times one. A pair's sync is the time
    per job of a chain alternating between the two devices less that of a chain on one: what
    a job pays to wait for a job of another device, beyond the copy. Each figure is the
    median of ``repeats`` chains, and at least 0. About ``(m + m (m - 1) / 2) × repeats``
    chains of ``jobs`` jobs: tens of ms on the CPU.

    Returns
    -------
    overhead : dict
        Device name to ms per job.
    sync : dict
        ``(a, b)`` to ms per cross-device dependency, for every ordered pair (the same
        both ways: a chain alternates between them).

    Examples
    --------
    >>> overhead, sync = measure_overheads(["cpu:0", "cpu:1"], jobs=20, repeats=1)
    >>> sorted(overhead), sorted(sync)
    (['cpu:0', 'cpu:1'], [('cpu:0', 'cpu:1'), ('cpu:1', 'cpu:0')])
    """
    if jobs < 2 or repeats < 1:
        raise HarnessError(f"overheads: expected at least 2 jobs and 1 repeat, got {jobs} and {repeats}")
    steady()
    names = list(devices)
    tdev = {d: torch_device(d) for d in names}
    streams = {d: torch.cuda.Stream(tdev[d]) if tdev[d].type == "cuda" else None for d in names}
    scratch = {d: torch.zeros(1, device=tdev[d]) if streams[d] is not None else None for d in names}
    work = {d: _task(streams[d], scratch[d]) for d in names}
    with EXCLUSIVE:
        pin(names)
        _chain(names, [0, 0] * 4, work, tdev, streams)  # start the threads and the CUDA contexts
        per_job, overhead = {}, {}
        for u, d in enumerate(names):
            per_job[d] = float(np.median([_chain(names, [u] * jobs, work, tdev, streams) for _ in range(repeats)]))
            direct = float(np.median([_direct(work[d], tdev[d], streams[d], jobs) for _ in range(repeats)]))
            overhead[d] = max(0.0, per_job[d] - direct)
        sync = {}
        for u, a in enumerate(names):
            for v in range(u + 1, len(names)):
                b = names[v]
                hop = float(np.median([_chain(names, [u, v] * (jobs // 2), work, tdev, streams)
                                       for _ in range(repeats)]))
                sync[(a, b)] = sync[(b, a)] = max(0.0, hop - (per_job[a] + per_job[b]) / 2)
    return overhead, sync


def refit(problem: Problem, overhead: dict[str, float], sync: dict[tuple[str, str], float], scale: float = 1.0,
          *, threads: tuple[int | None, int | None] | None = None, fitted: bool = False,
          compile: str | None = None) -> Problem:
    """``problem`` with other overhead terms in its times: the recorded ones taken out, these put in.

    A task's latency on ``u`` becomes ``scale × kernel + overhead[u]`` (the kernel time being
    what the recorded calibration leaves of it), a link's latency its copy latency plus
    ``sync[(a, b)]`` (an undirected link takes the larger of its two directions). A task
    that takes no time anywhere (a model input, prefetched) stays at 0. ``threads`` and
    ``compile`` (how the tasks ran) default to the recorded settings.
    """
    old = problem.calibration or Calibration()
    tasks = []
    for t in problem.tasks:
        if any(v > 0 for table in t.latency.values() for v in table.values()):
            t = Task(t.name, {d: {b: scale * old.kernel(v, d) + overhead.get(d, 0.0) for b, v in table.items()}
                              for d, table in t.latency.items()}, t.weight_bytes, t.input_bytes, t.output_bytes)
        tasks.append(t)
    links = []
    for ln in problem.system.links:
        pairs = [(ln.a, ln.b)] if ln.directed else [(ln.a, ln.b), (ln.b, ln.a)]
        copy = min(old.copy(ln.latency, a, b) for a, b in pairs)
        links.append(Link(ln.a, ln.b, ln.bandwidth, copy + max(sync.get(p, 0.0) for p in pairs), ln.directed))
    recorded = (old.threads, old.interop_threads) if threads is None else threads
    cal = Calibration(recorded[0], recorded[1], dict(overhead), dict(sync), scale, fitted,
                      old.compile if compile is None else compile)
    return Problem(tasks, problem.edges, type(problem.system)(problem.system.devices, tuple(links)),
                   problem.objective, problem.name, cal)


def fold(problem: Problem, overhead: dict[str, float], sync: dict[tuple[str, str], float],
         compile: str = "none") -> Problem:
    """``problem``, just profiled, with measured overheads added to its times and recorded,
    with the current thread settings and ``compile``, how its tasks were run."""
    return refit(problem, overhead, sync, threads=thread_settings(), compile=compile)
