"""The work-conserving runtime model: a mapping re-timed as a dynamic scheduler runs it.

mapsched's methods produce static schedules: every device runs its jobs in a fixed
order. A work-conserving runtime (DOPPLER's, issue 28) takes only the mapping and
dispatches at run time, under these rules:

- A task is *ready* once every parent has finished and its data has arrived: link
  latency plus bytes / bandwidth (FORMAT.md's comm), 0 on the same device. Sources
  are ready at 0.
- At each event time, once every finish and arrival at that time has been
  processed, each idle device starts its queued ready task with the earliest ready
  time, ties to the task listed first in the problem.
- A device runs one task at a time, to its end (non-preemptive); transfers occupy
  nothing (contention-free, any number at once), unless the problem declares contention:
  then a transfer is ready when its source ends, and ready jobs and transfers start in the
  order they became ready wherever each resource they use has room
  (:mod:`mapsched.scheduling.contention`; a transfer that cannot start does not hold up
  those behind it).

So a device never idles while a task mapped to it is ready. The result is a
:class:`~mapsched.model.schedule.Schedule` that passes the validator, since every job
starts after its data arrives and a device's jobs do not overlap (memory, rule 6,
and missing links are checked before simulating). Each job starts at
``max(ready, end of the device's previous job)``, so the decoder, given the same
mapping and the simulated start order as priority, gives the same schedule; and
mapsched's lower bound (:func:`mapsched.bounds.lower_bound`), a bound on every
schedule, bounds every work-conserving run as well.

Scoring a method's result under this model::

    simulate(problem, result.mapping()).makespan

re-times the result's mapping (the ``simulate`` command does the same for a
schedule file). Static schedules may idle a device on purpose, so the simulated
makespan can be higher or lower than the static one.

Examples
--------
>>> from mapsched import instances
>>> from mapsched.scheduling.simulate import simulate
>>> p = instances.load("topcuoglu2002")
>>> simulate(p, {t: "p3" for t in p.task_names}).makespan  # one device: the sum of its times
143.0
"""

from __future__ import annotations

import heapq
from typing import Any

import numpy as np

from mapsched.errors import InfeasibleError, OptionError, shown
from mapsched.model.problem import Problem
from mapsched.model.schedule import Schedule
from mapsched.scheduling.contention import Resources
from mapsched.scheduling.decoder import Decoder, _to_schedule, as_owner

__all__ = ["MAX_NOISE", "simulate"]

MAX_NOISE = 5.0  # the largest lognormal sigma: its median factor, exp(-12.5), is already ~0


def _owner(problem: Problem, mapping: Any) -> list[int]:
    """The device of each task, refusing in one line a mapping that leaves a task out, puts it
    where it cannot run, overflows memory or crosses a missing link."""
    p = problem
    if not isinstance(mapping, dict):  # an array: name the first task it leaves unassigned
        arr = np.asarray(mapping)
        if arr.ndim == 1 and arr.shape == (p.n,) and np.issubdtype(arr.dtype, np.integer):
            bad = np.flatnonzero((arr < 0) | (arr >= p.m))
            if len(bad):
                raise InfeasibleError(
                    f"mapping: task {shown(p.task_names[bad[0]])} is on no device (index {arr[bad[0]]} is not "
                    f"in 0..{p.m - 1}); give every task a device")
    owner = as_owner(p, mapping)
    reason = Decoder(p).infeasibility(owner)
    if reason is not None:
        raise InfeasibleError(f"mapping is infeasible: {reason}")
    return owner[:, 0].tolist()


def simulate(
    problem: Problem,
    mapping: Any,
    noise: float = 0.0,
    rng: np.random.Generator | int | None = None,
    noise_model: str = "lognormal",
    **kwargs: Any,
) -> Schedule:
    """Run a mapping under the work-conserving runtime model (module docstring).

    Parameters
    ----------
    problem : Problem
        A latency problem.
    mapping : array or dict
        The device of each task, as :func:`~mapsched.scheduling.decoder.as_owner` takes it: an array of
        device indices, shape ``(n,)``, or a dict from task name to device name (or to
        ``{device: inputs}``, as :meth:`Schedule.mapping` gives).
    noise : float
        With ``noise > 0`` each task's duration is its latency times ``exp(noise * z - noise**2 / 2)``,
        z standard normal (a lognormal factor of mean 1), drawn from ``rng``; at most
        :data:`MAX_NOISE`. Transfers keep their times. The jobs then last their drawn
        durations, so the schedule is a timeline and its makespan, not one the validator
        accepts (rule 2 checks durations).
    rng : numpy.random.Generator or int, optional
        The source of the noise (a seed is accepted); default seed 0.
    noise_model : str
        ``"lognormal"`` (above) or ``"giph"``, GiPH's simulator (its experiments use
        ``noise=0.2``): each duration ``w`` drawn from ``U(w(1 - noise), w(1 + noise))`` and
        each transfer between devices ``c`` (start-up delay included) from a normal of mean c
        and deviation ``noise c`` clipped to ``[c(1 - noise), c(1 + noise)]`` (``noise`` at most 1).
    **kwargs
        Passed on to :class:`~mapsched.model.schedule.Schedule` (``method``, ``status``...).

    Returns
    -------
    Schedule
        Jobs in the order they start (ties: the order the devices dispatched them, a
        topological order).

    Raises
    ------
    OptionError
        For a throughput problem, or a negative or non-finite ``noise``.
    InfeasibleError
        In one line naming the task, device or edge, when a task is unassigned or on a device
        that cannot run it, when a device's memory overflows (FORMAT.md rule 6) or data must
        cross devices with no link.

    Notes
    -----
    An event heap: O((n + E) log n) for n tasks and E edges.

    Examples
    --------
    Two tasks on two devices, the second waiting 1 ms for its data:

    >>> from mapsched import Device, Edge, Link, Problem, System, Task
    >>> p = Problem([Task("x", {"a": 2, "b": 2}), Task("y", {"a": 3, "b": 3})], [Edge("x", "y", 500)],
    ...             System((Device("a"), Device("b")), (Link("a", "b", 1e6, latency=0.5),)))
    >>> [(j.task, j.device, j.start, j.end) for j in simulate(p, [0, 1]).jobs]
    [('x', 'a', 0.0, 2.0), ('y', 'b', 3.0, 6.0)]
    """
    p = problem
    if p.objective.kind != "latency":
        raise OptionError("simulate: the work-conserving model runs latency problems only; "
                          "this problem's objective is throughput")
    if isinstance(noise, bool) or not isinstance(noise, (int, float, np.integer, np.floating)) \
            or not noise >= 0.0 or noise == float("inf"):
        raise OptionError(f"--noise: expected a non-negative number, got {shown(noise)}")
    if not (rng is None or isinstance(rng, np.random.Generator)
            or (isinstance(rng, (int, np.integer)) and not isinstance(rng, bool) and rng >= 0)):
        raise OptionError(f"rng: expected a numpy Generator or a seed of at least 0, got {shown(rng)}")
    if noise_model not in ("lognormal", "giph"):
        raise OptionError(f"noise_model: expected 'lognormal' or 'giph', got {shown(noise_model)}")
    if noise_model == "giph" and noise > 1:
        raise OptionError(f"--noise: GiPH's noise is a fraction of each time, at most 1; got {shown(noise)}")
    if noise > MAX_NOISE:
        raise OptionError(f"--noise: at most {MAX_NOISE:g}, got {shown(noise)}: a lognormal sigma past it draws nearly "
                          "every duration as 0 (and from about 30 they overflow)")
    dev = _owner(p, mapping)
    n = p.n
    dur = p.dur[np.arange(n), dev]
    comm = None  # per edge: a factor on its transfer time (GiPH's noise)
    if noise > 0:
        gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(0 if rng is None else rng)
        if noise_model == "giph":
            dur = dur * gen.uniform(1 - noise, 1 + noise, n)
            comm = np.clip(gen.normal(1.0, noise, p.E), 1 - noise, 1 + noise).tolist()
        else:
            dur = dur * np.exp(noise * gen.standard_normal(n) - noise * noise / 2)
    dur = dur.tolist()
    if p.contended:
        jobs, moves = _contended(p, dev, dur, comm)
        kwargs.setdefault("method", "simulate")
        return _to_schedule(p, jobs, moves, **kwargs)
    llat, mpb, nb = p.link_latency.tolist(), p.link_ms_per_byte.tolist(), p.nbytes.tolist()
    out = [[(int(p.dst[e]), e) for e in p.out_edges[i]] for i in range(n)]
    missing = np.bincount(p.dst, minlength=n).tolist()
    ready = [0.0] * n
    busy = [False] * p.m
    queue: list[list[tuple[float, int]]] = [[] for _ in range(p.m)]
    events: list[tuple[float, int]] = []  # (time, task): a finish (task >= 0) or an arrival (~task)
    for i in range(n):
        if not missing[i]:
            queue[dev[i]].append((0.0, i))
    jobs = []
    touched = {dev[i] for i in range(n) if not missing[i]}  # devices that may start a task now
    t = 0.0
    while True:
        for u in sorted(touched):  # dispatch: every idle device with a queue starts its first ready task
            q = queue[u]
            if q and not busy[u]:
                r, i = heapq.heappop(q)
                busy[u] = True
                jobs.append((i, u, t, t + dur[i], 1))
                heapq.heappush(events, (t + dur[i], i))
        if not events:
            break
        touched = set()
        t = events[0][0]
        while events and events[0][0] == t:  # every finish and arrival at time t
            _, i = heapq.heappop(events)
            if i < 0:  # the data of task ~i has all arrived
                i = ~i
                u = dev[i]
                heapq.heappush(queue[u], (t, i))
                touched.add(u)
                continue
            u = dev[i]
            busy[u] = False
            touched.add(u)
            for j, e in out[i]:
                v = dev[j]
                if v == u:
                    a = t
                elif comm is None:  # summed as the decoder sums it, so that their schedules agree bit for bit
                    a = t + llat[u][v] + nb[e] * mpb[u][v]
                else:
                    a = t + (llat[u][v] + nb[e] * mpb[u][v]) * comm[e]
                if a > ready[j]:
                    ready[j] = a
                missing[j] -= 1
                if not missing[j]:
                    if ready[j] == t:  # arrives now: queue it before dispatching
                        heapq.heappush(queue[v], (t, j))
                        touched.add(v)
                    else:
                        heapq.heappush(events, (ready[j], ~j))
    if len(jobs) != n:  # cannot happen for a DAG with a full mapping
        raise InfeasibleError("simulate: some tasks never became ready")
    kwargs.setdefault("method", "simulate")
    return _to_schedule(p, jobs, **kwargs)


def _contended(p: Problem, dev: list[int], dur: list[float], factor: list[float] | None
               ) -> tuple[list[tuple[int, int, float, float, int]], list[tuple[int, int, float, float]]]:
    """The work-conserving run where transfers take turns (:mod:`mapsched.scheduling.contention`):
    a transfer is ready when its source ends, a job when its data has arrived; at each event
    time the ready jobs and transfers start in the order they became ready (transfers first,
    then by index) wherever every resource they use has room, and the others wait, without
    blocking those behind them. O((n + E) (log n + w)) for w waiting at once."""
    res = Resources(p)
    free = [lanes.capacity for lanes in res.lanes]
    llat, mpb, nb = p.link_latency.tolist(), p.link_ms_per_byte.tolist(), p.nbytes.tolist()
    src, dst = p.src.tolist(), p.dst.tolist()
    missing = np.bincount(p.dst, minlength=p.n).tolist()
    ready = [0.0] * p.n
    waiting = [(0.0, 1, i) for i in range(p.n) if not missing[i]]  # (ready, 0 transfer / 1 job, index), sorted
    events: list[tuple[float, int, int]] = []  # (end, kind, index)
    jobs, moves = [], []
    t = 0.0
    while True:
        kept = []
        for key in waiting:  # dispatch in order of readiness; what cannot start waits
            _, kind, k = key
            rs = (dev[k],) if kind else res.route(dev[src[k]], dev[dst[k]])
            if all(free[r] for r in rs):
                for r in rs:
                    free[r] -= 1
                if kind:
                    end = t + dur[k]
                    jobs.append((k, dev[k], t, end, 1))
                else:
                    u, v = dev[src[k]], dev[dst[k]]
                    c = llat[u][v] + nb[k] * mpb[u][v]
                    end = t + (c if factor is None else c * factor[k])
                    moves.append((k, 1, t, end))
                heapq.heappush(events, (end, kind, k))
            else:
                kept.append(key)
        waiting = kept
        if not events:
            break
        t = events[0][0]
        arrived = []
        while events and events[0][0] == t:  # every end at time t
            _, kind, k = heapq.heappop(events)
            rs = (dev[k],) if kind else res.route(dev[src[k]], dev[dst[k]])
            for r in rs:
                free[r] += 1
            if not kind:
                arrived.append(dst[k])
                continue
            for e in p.out_edges[k]:
                if dev[dst[e]] == dev[k]:
                    arrived.append(dst[e])
                else:
                    waiting.append((t, 0, e))
        for j in arrived:
            ready[j] = t
            missing[j] -= 1
            if not missing[j]:
                waiting.append((t, 1, j))
        waiting.sort()
    if len(jobs) != p.n:  # cannot happen for a DAG with a full mapping
        raise InfeasibleError("simulate: some tasks never became ready")
    return jobs, moves
