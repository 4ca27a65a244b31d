"""Batched throughput: the chain walked module by module, so that modules pipeline.

``split``'s recursion over (input device, output device) adds module makespans: it
holds each channel end as one batch of all L inputs, so module t + 1 cannot start
before module t has finished every input. Here the state that pipelining needs is
carried from one module to the next instead, as the latency rolling stitching
(:mod:`.rolling`) does:

* when each device is busy: every job placed so far is a fixed interval in its
  device's no-overlap constraint (finer than a time at which the device is free:
  later modules may fill its gaps);
* the release profile: for every edge from a placed task to the module, input l
  reaches a batch of the receiving task on device v at the end of the placed job
  that holds l, plus the transfer from that job's device to v. These are per-input
  release times in the module's batched model (:meth:`~mapsched.formulations.
  batched_cpsat.CpSatBatched.release`), so a module's first batches start on the
  inputs that the previous module has finished while it works on the others;
* the memory the placed jobs hold, taken off each device.

Step t solves modules t .. t + window - 1 with the batched CP-SAT model under that
state, keeps module t, and left-justifies the kept jobs (re-timed in the solver's
order), so that the next module sees the earliest release profile of that order. The
last step minimises the makespan; the others minimise the makespan plus the window's
*priced work*, its load weighted by the load LP's device prices (summing to 1;
:meth:`~mapsched.formulations.batched_cpsat.CpSatBatched.minimize_with_priced_work`).
The makespan alone is indifferent to how much device time a window uses before its
end, and its steps cut tasks into small batches over every fast device, which costs
each later module of the chain the time those devices lost to small batches; the
priced work is what the window adds to the load bound, so minimising it beside the
makespan keeps a window from spending device time the later modules need.

All times are in ticks of one resolution for the whole walk, rounded down as in the
exact models; the result is re-timed exactly at the end.

What is exact, what is heuristic
    Every step is the exact batched model (one batch per task and device, as
    ``exact``) of its window *given* the jobs placed before it: every schedule of the
    window that agrees with them is a solution of the step, and conversely. Hence:

    * with ``window`` at least the number of modules there is a single step, which is
      the exact batched model of the whole graph: the walk is exact (when the step is
      proved optimal);
    * the last step, whose window reaches the end of the chain and is kept whole,
      returns an optimal completion of the modules placed before it (when proved).

    The final re-timing keeps every device's job order and only moves jobs earlier, so
    it never ends later than the steps' schedule, up to the rounding of ticks.

    Otherwise the walk is a heuristic: step t commits module t to the schedule that
    minimises the window's makespan plus its priced work, with no view of the modules
    after the window but the prices, and a release profile that ends later but releases
    most inputs earlier may serve them better. Unlike the (u, v) recursion it never
    serialises modules: a step may always start a batch as soon as its inputs are
    released and its device is free. ``split`` adds the walk as one more candidate:
    without a time limit it computes every other candidate as before, so it is never
    worse than without the walk; with one, a second walk hinted with the first and the
    polish after them take the module recursion's time.

Inputs in groups (``group``)
    When every batch size that fits in L, and L, are multiples of g > 1, inputs
    l g .. l g + g - 1 can be made to travel together: the walk then runs on the
    problem of L / g groups (batch sizes, and activation bytes per group, scaled by g;
    transfers unchanged), whose models are g times smaller, and the schedule found is
    expanded to the inputs. That keeps every schedule valid but restricts the search
    (a batch can no longer mix parts of two groups), so it is a heuristic even for a
    single window; ``split`` uses it, where a step has a second or two.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace

import numpy as np
from ortools.sat.python import cp_model

from mapsched.engine.context import SolveContext
from mapsched.formulations.batched_cpsat import CpSatBatched, group_size, grouped
from mapsched.formulations.common import retime_jobs
from mapsched.formulations.cpsat import MAX_TICKS, run_cpsat
from mapsched.formulations.exact import improve
from mapsched.model.problem import Problem
from mapsched.model.scales import default_resolution, start_ticks
from mapsched.model.schedule import Schedule
from mapsched.split.modules import ModuleChain, step_problem

__all__ = ["grouped_improve", "pipeline"]


def pipeline(problem: Problem, chain: ModuleChain, window: int, upper: float, step_time_limit: float,
             ctx: SolveContext, hint: Schedule | None = None, until: float | None = None,
             group: bool = False) -> Schedule | None:
    """Walk the chain as described in the module docstring (throughput problems, ``L > 1``).

    Parameters
    ----------
    upper : float
        The makespan of some schedule of the whole problem; it sets the resolution.
    step_time_limit : float
        Seconds per step's solve at most; with a time limit, each step gets at most its
        share of what is left until ``until`` (``ctx.elapsed()`` seconds) among the steps left.
    hint : Schedule, optional
        A schedule whose jobs of each window are hinted to its step.
    group : bool
        Walk with inputs in groups (module docstring).

    Returns
    -------
    Schedule or None
        None when a step finds no schedule (memory left too tight, or no time), and when
        ``upper`` is 0 ms, which no schedule improves (nor could it set a resolution).

    Notes
    -----
    One batched exact solve of at most ``window`` modules per module up to the one
    whose window reaches the end of the chain, one after another,
    and a re-timing of the placed jobs after each: O(T (model + n L)) besides the solves.
    """
    if upper <= 0.0 or ctx.expired():  # nor is there time to build the grouped problem (seconds on a large graph)
        return None
    g = group_size(problem) if group else 1
    if g > 1 and (p := grouped(problem, g)) is not None:
        if hint is not None:  # kept if its jobs hold whole groups
            whole = all(set(j.inputs) == {lo // g * g + r for lo in j.inputs for r in range(g)} for j in hint.jobs)
            hint = replace(hint, jobs=[replace(j, inputs=tuple(sorted({lo // g for lo in j.inputs})))
                                       for j in hint.jobs]) if whole else None
        s = pipeline(p, chain, window, upper, step_time_limit, ctx, hint, until)
        if s is None:
            return None
        return retime_jobs(problem, [(problem.task_index[j.task], problem.device_index[j.device],
                                      sum(((1 << g) - 1) << (lo * g) for lo in j.inputs), j.start) for j in s.jobs])
    p = problem
    res = default_resolution(2.0 * upper)
    T = len(chain.modules)
    placed: list[tuple[int, int, int, int, int]] = []  # (task, device, input mask, start, length) in ticks
    used = np.zeros(p.m)  # bytes held on each device by the placed jobs
    end = np.zeros((p.n, p.L), dtype=np.int64)  # ticks at which each placed task ends each input
    where = np.full((p.n, p.L), -1, dtype=np.int64)  # the device of that job
    for t in range(T):
        if ctx.expired():
            return None
        tasks = sorted(i for mod in chain.modules[t:t + window] for i in mod)
        left = (until if until is not None else math.inf) - ctx.elapsed()
        limit = min(step_time_limit, left / (T - t))
        if limit <= 0.05:
            return None
        jobs = _step(p, tasks, placed, used, end, where, res, limit, ctx, hint, last=t + window >= T)
        if jobs is None:
            return None
        if t + window >= T:  # the window reaches the end of the chain: keep all of it
            return retime_jobs(p, [(i, u, mask, s) for i, u, mask, s, _ in placed] + jobs)
        keep = [j for j in jobs if j[0] in chain.modules[t]]
        placed = _left_justify(p, res, [j[:4] for j in placed] + keep)
        for i, u, mask, s, d in placed:
            ins = [lo for lo in range(p.L) if mask >> lo & 1]
            end[i, ins], where[i, ins] = s + d, u
        for i, u, mask, _ in keep:
            used[u] += p.weight[i] + p.act[i] * bin(mask).count("1")
    return retime_jobs(p, [(i, u, mask, s) for i, u, mask, s, _ in placed])


def grouped_improve(problem: Problem, s: Schedule, ctx: SolveContext, seconds: float) -> Schedule:
    """``s`` improved for ``seconds`` by the exact batched model of the problem with inputs in
    groups (module docstring), started from ``s``; ``s`` itself when its jobs do not hold
    whole groups, when there are no groups, or when nothing better is found. The grouped
    model is g times smaller than the whole problem's, so it often improves a schedule the
    full model cannot in the same time; its bound holds only for grouped schedules and is
    dropped. Two re-timings, O(n L) jobs, besides the solve."""
    g = group_size(problem)
    if g == 1 or seconds <= 0 or any(min(j.inputs) % g or len(j.inputs) % g
                                     or j.inputs != tuple(range(min(j.inputs), min(j.inputs) + len(j.inputs)))
                                     for j in s.jobs):
        return s
    p, q = problem, grouped(problem, g)
    if q is None:
        return s
    start = retime_jobs(q, [(p.task_index[j.task], p.device_index[j.device],
                             sum(1 << (lo // g) for lo in j.inputs if lo % g == 0), j.start) for j in s.jobs])
    sub = SolveContext(time_limit=seconds, rng=ctx.rng, threads=ctx.threads)
    out = improve(q, start, sub)
    back = retime_jobs(p, [(p.task_index[j.task], p.device_index[j.device],
                            sum(((1 << g) - 1) << (lo * g) for lo in j.inputs), j.start) for j in out.jobs])
    return back if back.makespan < s.makespan else s


def _left_justify(p: Problem, res: float, jobs: list[tuple[int, int, int, int]]
                  ) -> list[tuple[int, int, int, int, int]]:
    """Jobs ``(task, device, mask, key)`` re-timed exactly in the order of their keys, as
    ``(task, device, mask, start, length)`` in ticks rounded down (so that they never
    overlap, and release their inputs no later than the true times do)."""
    tasks = sorted({i for i, *_ in jobs})
    index = {i: k for k, i in enumerate(tasks)}
    sub = p.restrict(tasks)
    s = retime_jobs(sub, [(index[i], u, mask, start) for i, u, mask, start in jobs])
    out = []
    for j in s.jobs:
        i, u = p.task_index[j.task], p.device_index[j.device]
        a = start_ticks(j.start, res)
        out.append((i, u, sum(1 << lo for lo in j.inputs), a, start_ticks(j.end, res) - a))
    return out


def _step(p: Problem, tasks: list[int], placed: list[tuple[int, int, int, int, int]], used: np.ndarray,
          end: np.ndarray, where: np.ndarray, res: float, limit: float, ctx: SolveContext,
          hint: Schedule | None, last: bool) -> list[tuple[int, int, int, int]] | None:
    """Solve ``tasks`` in the context of the placed jobs: their jobs (task, device, mask, start)
    in ticks, or None (also when building the model takes all of ``limit``). The ``last``
    step minimises the makespan, the others it plus the priced work (module docstring)."""
    deadline = time.perf_counter() + limit
    sub = step_problem(p, tasks, used)
    if sub is None:
        return None
    inside = set(tasks)
    # Release of each input at each receiving batch, from the edges out of placed tasks.
    release = np.zeros((len(tasks), p.m, p.L), dtype=np.int64)  # -1: no link from the sender's device
    for k, i in enumerate(tasks):
        for e in p.in_edges[i]:
            a = int(p.src[e])
            if a in inside:
                continue
            for v in range(p.m):
                for lo in range(p.L):
                    u = int(where[a, lo])
                    c = 0.0 if u == v else float(p.comm[e, u, v])
                    r = int(end[a, lo]) + math.floor(c * res) if math.isfinite(c) else -1
                    if release[k, v, lo] >= 0:
                        release[k, v, lo] = -1 if r < 0 else max(release[k, v, lo], r)
    latest = max([s + d for *_, s, d in placed] + [int(release.max(initial=0))])
    finite = np.where(np.isfinite(sub.lat), sub.lat, 0.0)
    comm = np.where(np.isfinite(sub.comm), sub.comm, 0.0)
    # A schedule of the window exists within this horizon: after everything placed, task
    # after task, each of its batches after the other.
    horizon = latest / res + float(finite.max(axis=2).sum() + (comm.max(axis=(1, 2)).sum() if sub.E else 0.0))
    # At a resolution set by a short makespan (a batch of 3 in 4e-8 ms beside a batch of 1 in
    # 16 ms), that horizon can pass what CP-SAT counts: the step then looks within the most
    # it can, and where no schedule is found there, the walk gives way as it does at its limit.
    horizon = min(horizon, MAX_TICKS * (1 - 1e-9) / res)
    busy = [[] for _ in range(p.m)]
    for _, u, _, s, d in placed:
        busy[u].append((s, d))
    try:
        model = CpSatBatched(sub, horizon, res, input_symmetry=False, busy=busy, deadline=deadline)
    except TimeoutError:
        return None
    if not last:
        model.minimize_with_priced_work()
    for k in range(len(tasks)):
        for v in range(p.m):
            for lo in range(p.L):
                if release[k, v, lo]:
                    model.release(k, v, lo, int(release[k, v, lo]))
    if hint is not None:  # the hint's jobs of the window, in its order after everything placed
        after = latest + 1
        ours = [(p.task_index[j.task], p.device_index[j.device], sum(1 << lo for lo in j.inputs),
                 after + start_ticks(j.start, res)) for j in hint.jobs if p.task_index[j.task] in inside]
        index = {i: k for k, i in enumerate(tasks)}
        try:
            appended = _left_justify(p, res, [j[:4] for j in placed] + ours)
        except (TypeError, ValueError):  # a job of the hint that cannot follow the placed ones (no link)
            appended = []
        model.hint_jobs([(index[i], u, mask, s) for i, u, mask, s, _ in appended if i in inside])
    solver, status, _ = run_cpsat(model, max(0.01, deadline - time.perf_counter()), ctx.threads,
                                  int(ctx.rng.integers(2**31 - 1)), False)
    if status not in (cp_model.FEASIBLE, cp_model.OPTIMAL):
        return None
    return [(tasks[k], u, mask, round(start * res)) for k, u, mask, start in model.read(solver)]  # ms to ticks
