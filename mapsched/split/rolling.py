"""Rolling stitching: modules solved exactly in the context of those already placed.

Where MILP-SPLIT's recursion is only a heuristic (several channels between modules),
solving each module alone ignores when its inputs really arrive and how busy the
devices already are, and consecutive modules cannot overlap in time. Here the chain
is instead walked module by module: step t solves modules t .. t + window - 1
exactly (CP-SAT), with

* the jobs placed so far fixed on their devices (fixed intervals in each device's
  no-overlap constraint),
* every edge from a placed task as a release time that depends on the device the
  receiving task takes (the transfer from the sender's device),
* the memory the placed tasks hold taken off each device,

minimising the window's makespan, and keeps module t. The window looks ahead so that
module t leaves its channel ends where the next module wants them. All times are in
ticks of one resolution for the whole walk, so that fixed intervals never overlap by
a rounding; the result is re-timed exactly at the end, in the solver's job order.
"""

from __future__ import annotations

import math
import time

import numpy as np
from ortools.sat.python import cp_model

from mapsched.engine.context import SolveContext
from mapsched.formulations.common import capped, retime_jobs
from mapsched.formulations.cpsat import CpSatModel, run_cpsat
from mapsched.formulations.exact import serial_bound
from mapsched.model.problem import Problem
from mapsched.model.scales import default_resolution
from mapsched.model.schedule import Schedule
from mapsched.split.modules import ModuleChain, step_problem

__all__ = ["rolling"]


def rolling(problem: Problem, chain: ModuleChain, window: int, upper: float, step_time_limit: float,
            ctx: SolveContext) -> Schedule | None:
    """Walk the chain as described in the module docstring (latency problems).

    Parameters
    ----------
    upper : float
        The makespan of some schedule of the whole problem; it sets the resolution, and
        jobs and transfers are shortened to ``2 upper`` at most
        (:func:`~mapsched.formulations.common.capped`): a walk that takes a longer one
        ends past ``upper``, and ``split`` keeps the schedule of ``upper`` instead.
    step_time_limit : float
        Seconds per step's solve at most; with a time limit on the solve, what is left
        once the step's model is built is shared among the remaining steps.

    Returns
    -------
    Schedule or None
        None when a step finds no schedule (memory left too tight, or no time).

    Notes
    -----
    One exact solve of at most ``window`` modules per module of the chain, one after
    another (each needs the ones before it).
    """
    if upper <= 0.0:  # nothing is shorter, and 0 ms sets no resolution (1e18 ticks per ms overflowed)
        return None
    cap = 2.0 * upper
    p = capped(problem, cap)
    res = default_resolution(cap)
    T = len(chain.modules)
    owner = np.full(p.n, -1, dtype=np.int64)
    start = np.zeros(p.n, dtype=np.int64)  # ticks
    length = np.zeros(p.n, dtype=np.int64)
    used = np.zeros(p.m)  # bytes held on each device by the placed tasks
    for t in range(T):
        if ctx.expired():
            return None
        tasks = sorted(i for mod in chain.modules[t:t + window] for i in mod)
        placed = _step(p, tasks, owner, start, length, used, res, cap, step_time_limit, T - t, ctx)
        if placed is None:
            return None
        for i, (u, s, d) in placed.items():
            if i in chain.modules[t]:
                owner[i], start[i], length[i] = u, s, d
                used[u] += p.weight[i] + p.act[i]
    return retime_jobs(problem, [(i, int(owner[i]), 1, int(start[i])) for i in range(p.n)])


def _step(p: Problem, tasks: list[int], owner: np.ndarray, start: np.ndarray, length: np.ndarray,
          used: np.ndarray, res: float, cap: float, step_time_limit: float, steps: int,
          ctx: SolveContext) -> dict[int, tuple[int, int, int]] | None:
    """Solve ``tasks`` in the context of the placed ones: task -> (device, start, length) in ticks.
    ``p`` is capped at ``cap`` (ms), and so is the step's subproblem. The solve gets
    ``step_time_limit`` seconds at most, and its share of what is left of the time limit among
    ``steps`` steps once the model is built: on thousands of tasks building takes as long as a
    step's solve."""
    sub = step_problem(p, tasks, used)
    if sub is None:
        return None
    sub = capped(sub, cap)  # built from the tasks, it has their true times
    done = np.flatnonzero(owner >= 0)
    ends = start + length
    # Edges from placed tasks: release times of their receivers, per receiving device.
    release: list[tuple[int, int, int]] = []  # (task in sub, device, earliest start in ticks)
    for k, i in enumerate(tasks):
        for e in p.in_edges[i]:
            a = int(p.src[e])
            if owner[a] < 0:
                continue
            for v in range(p.m):
                c = 0.0 if v == owner[a] else float(p.comm[e, owner[a], v])
                release.append((k, v, int(ends[a]) + math.floor(c * res) if math.isfinite(c) else -1))
    latest = max([int(ends[done].max()) if len(done) else 0] + [r for _, _, r in release])
    hint = _append_schedule(sub, release, owner, ends, res)
    try:
        model = CpSatModel(sub, max(latest / res + serial_bound(sub), hint[2] / res if hint else 0) + 1.0 / res, res,
                           deadline=time.perf_counter() + ctx.remaining())
    except TimeoutError:
        return None
    if hint:  # without it, a one-worker search can spend its whole limit on the bound
        model.hint_ticks(*hint)
    m = model.model
    for k, v, r in release:
        if (k, v) in model.x:
            if r < 0:  # no link from the sender's device
                m.add(model.x[k, v] == 0)
            else:
                m.add(model.s[k] >= r).only_enforce_if(model.x[k, v])
    for u in range(p.m):
        fixed = [m.new_fixed_size_interval_var(int(start[i]), int(length[i]), f"placed{i}")
                 for i in done if owner[i] == u and length[i] > 0]
        if fixed:
            m.add_no_overlap(model.intervals[u] + fixed)
    limit = min(step_time_limit, ctx.remaining() / steps)
    solver, status, _ = run_cpsat(model, max(limit, 0.05), ctx.threads, int(ctx.rng.integers(2**31 - 1)), False)
    if status not in (cp_model.FEASIBLE, cp_model.OPTIMAL):
        return None
    out = {}
    for (k, u), x in model.x.items():
        if solver.boolean_value(x):
            out[tasks[k]] = (u, int(solver.value(model.s[k])), int(model.d[k, u]))
    return out


def _append_schedule(sub: Problem, release: list[tuple[int, int, int]], owner: np.ndarray, ends: np.ndarray,
                     res: float) -> tuple[list[int], list[int], int] | None:
    """A schedule of ``sub`` after everything placed, in ticks: each task, in topological
    order, appended to the device where it ends first. Durations and transfers are rounded
    up, so it satisfies the step's model (whose data are rounded down) and its redundant
    constraints. Returns owners, starts and makespan, or None when some task fits nowhere
    (memory, or no link for its data)."""
    free = np.zeros(sub.m, dtype=np.int64)
    for u in range(sub.m):
        free[u] = int(ends[owner == u].max(initial=0))
    ready = np.zeros((sub.n, sub.m), dtype=np.int64)  # -1: no link from a placed sender
    for k, v, r in release:
        ready[k, v] = -1 if r < 0 or ready[k, v] < 0 else max(ready[k, v], r)
    dur = np.ceil(np.where(sub.can_run, sub.dur, 0) * res).astype(np.int64)
    left = sub.mem.copy()
    dev, beg, end = [0] * sub.n, [0] * sub.n, np.zeros(sub.n, dtype=np.int64)
    for k in sub.topo:
        best = None
        for v in np.flatnonzero(sub.can_run[k] & (left >= sub.weight[k] + sub.act[k]) & (ready[k] >= 0)):
            c = [0.0 if dev[sub.src[e]] == v else float(sub.comm[e, dev[sub.src[e]], v]) for e in sub.in_edges[k]]
            if all(map(math.isfinite, c)):
                s = max([int(free[v]), int(ready[k, v])]
                        + [int(end[sub.src[e]]) + math.ceil(ce * res) for e, ce in zip(sub.in_edges[k], c)])
                if best is None or s + dur[k, v] < best[1] + dur[k, best[0]]:
                    best = (int(v), s)
        if best is None:
            return None
        dev[k], beg[k] = best
        end[k] = free[best[0]] = best[1] + dur[k, best[0]]
        left[best[0]] -= sub.weight[k] + sub.act[k]
    return dev, beg, int(end.max(initial=0))
