"""The latency MILP of Ghannane & Abdelfattah (section IV-A), as a Pyomo model.

Variables
    ``x[i, u]`` binary: task i runs on device u (only where it can);
    ``s[i]`` start time; ``y[i, j]`` binary: i before j, for pairs no path orders;
    ``C`` the makespan.

Constraints
    assignment: ``sum_u x[i, u] == 1``;
    makespan: ``s[i] + D[i] <= C`` for exit tasks, with ``D[i] = sum_u t[i, u] x[i, u]``;
    precedence: with ``same[e, u] <= x[i, u], x[j, u]`` (edge e kept on device u) and
    ``cmin[e]`` its cheapest crossing, ``s[j] >= s[i] + D[i] + cmin[e] (1 - sum_u same[e, u])``;
    for each linked pair u != v dearer than ``cmin[e]``,
    ``s[j] >= s[i] + D[i] + com(e, u, v) (x[i, u] + x[j, v] - 1)``, which binds only
    when both are chosen and needs no big-M; without a link, ``x[i, u] + x[j, v] <= 1``;
    memory: ``sum_i (w[i] + a[i]) x[i, u] <= mem[u]``, in units of :func:`~mapsched.model.scales.byte_unit`;
    no overlap, for each pair (i, j) no path orders and each device u both can use::

        s[j] >= s[i] + t[i, u] - M1 (1 - y[i, j]) - M1 (2 - x[i, u] - x[j, u])
        s[i] >= s[j] + t[j, u] - M2 y[i, j]       - M2 (2 - x[i, u] - x[j, u])

    redundant: each device's load ``sum_i t[i, u] x[i, u] <= C``; where a task runs
    bounds its start and what follows it (:func:`~mapsched.bounds.cuts.device_windows`):
    ``s[i] >= sum_u head[i, u] x[i, u]`` and ``C >= s[i] + sum_u (t[i, u] + tail[i, u]) x[i, u]``;
    on request, the work between two tasks on each device and the transfers around it
    (:func:`~mapsched.bounds.cuts.load_cuts`, :class:`~mapsched.bounds.cuts.Margins`):
    ``s[k] >= s[i] + D[i] + sum_{j in B} t[j, v] x[j, v] + a (1 - x[i, v]) + b (1 - x[k, v])``.

Big-M values
    A heuristic makespan ``UB`` caps ``C`` (an optimum never exceeds it, so none is
    cut off), so jobs, transfers and windows longer than ``2 UB`` are stated as ``2 UB``
    (:func:`~.common.capped`): the optimum stays, and no coefficient dwarfs the rest.
    Then every start lies in ``[head[i], UB - tail[i] - dmin[i]]`` (see
    :func:`~mapsched.bounds.cuts.time_windows`), so ``s[i] + t[i, u] - s[j]`` never exceeds
    ``M1 = UB - tail[i] - dmin[i] + t[i, u] - head[j]``: with ``M1`` (and ``M2``
    symmetrically) a relaxed disjunct is always satisfiable, and an active one is exact.
"""

from __future__ import annotations

import logging
import math
import os
import tempfile
import time
from typing import Any

import numpy as np
import pyomo.environ as pyo

from mapsched.bounds.cuts import device_load_cuts, device_windows, time_windows
from mapsched.engine import interrupt
from mapsched.formulations.common import HIGHS_BYTES, Plugin, apply_plugins, capped, clamp_times, edge_comm, scaled
from mapsched.model.closure import Closure
from mapsched.model.problem import Problem
from mapsched.model.scales import byte_unit, highs_time_scale
from mapsched.model.schedule import Schedule
from mapsched.model.validate import floating_bound

__all__ = ["build_model", "solve_model"]


class _PyomoView:
    """The plugin view of a Pyomo model (times in milliseconds)."""

    def __init__(self, problem: Problem, model: pyo.ConcreteModel) -> None:
        self.problem, self.model = problem, model

    def use(self, i: int, u: int) -> Any:
        return self.model.x[i, u] if (i, u) in self.model.X else 0

    count = use  # one input: a task used on a device holds its only input there

    def busy(self, u: int) -> Any:
        p = self.problem
        return sum(float(p.dur[i, u]) * self.model.x[i, u] for i in range(p.n) if (i, u) in self.model.X)

    def add(self, constraint: Any) -> None:
        self.model.plugins.add(constraint)


def build_model(
    problem: Problem, upper_bound: float | None = None, plugins: tuple[Plugin, ...] = (),
    load_cut_terms: int = 0,
) -> pyo.ConcreteModel:
    """Build the latency MILP of ``problem`` from its arrays.

    Parameters
    ----------
    problem : Problem
        A latency problem.
    upper_bound : float, optional
        A makespan that some schedule reaches (default: ``heft``'s); it sets the big-Ms.
    plugins : tuple of callables
        Constraint plugins (see :class:`~.common.ModelView`).
    load_cut_terms : int
        Budget of the redundant load cuts (:func:`~mapsched.bounds.cuts.load_cuts`); 0, the default,
        leaves them out. ``exact`` states them (:data:`~.common.LOAD_CUT_TERMS`).

    Returns
    -------
    pyomo.environ.ConcreteModel
        With variables ``x``, ``s``, ``y``, ``C``; users may add constraints before
        :func:`solve_model`. Its times count in units of ``1 / model.time_scale`` ms
        (:func:`~mapsched.model.scales.highs_time_scale`; 1 below about a second);
        ``model.build_seconds`` holds the build time.

    Notes
    -----
    O(n m + E m^2 + P m) constraints for P unordered pairs (from the shared
    transitive closure).

    Examples
    --------
    >>> from mapsched import instances
    >>> m = build_model(instances.load("topcuoglu2002"))
    >>> len(m.x), len(m.y)
    (30, 21)
    """
    t0 = time.perf_counter()
    if upper_bound is None:
        from mapsched.scheduling.best_list import best_list_schedule

        upper_bound = best_list_schedule(problem).makespan
    # A hair of slack keeps the warm start inside its bounds despite float rounding.
    UB = float(upper_bound) * (1 + 1e-9) + 1e-9
    # C <= UB: jobs and transfers beyond 2 UB, shortened to it, keep the optimum and no
    # longer swamp the other coefficients (see capped); so do windows past it.
    p = capped(problem, 2 * UB)
    # Times in units of 1 / f ms (highs_time_scale): every time below, UB too, is scaled.
    f = highs_time_scale(2 * UB)
    p, UB = scaled(p, f), UB * f
    dmin, head, tail = time_windows(p)
    dur = p.dur
    runnable = [(i, u) for i in range(p.n) for u in range(p.m) if p.can_run[i, u]]
    on = [[u for u in range(p.m) if p.can_run[i, u]] for i in range(p.n)]
    pairs = [tuple(map(int, ij)) for ij in Closure(p).unordered_pairs()]

    m = pyo.ConcreteModel(name=p.name)
    m.X = pyo.Set(initialize=runnable, dimen=2)
    m.x = pyo.Var(m.X, within=pyo.Binary)
    m.s = pyo.Var(range(p.n), within=pyo.NonNegativeReals,
                  bounds=lambda _, i: (float(head[i]), max(float(head[i]), UB - float(tail[i] + dmin[i]))))
    m.C = pyo.Var(within=pyo.NonNegativeReals, bounds=(0.0, UB))
    m.P = pyo.Set(initialize=pairs, dimen=2)
    m.y = pyo.Var(m.P, within=pyo.Binary)
    D = {i: sum(float(dur[i, u]) * m.x[i, u] for u in on[i]) for i in range(p.n)}

    m.assign = pyo.Constraint(range(p.n), rule=lambda m, i: sum(m.x[i, u] for u in on[i]) == 1)
    exits = [i for i in range(p.n) if not p.succ[i]]
    m.finish = pyo.Constraint(exits, rule=lambda m, i: m.s[i] + D[i] <= m.C)
    m.device_load = pyo.Constraint(range(p.m), rule=lambda m, u: sum(
        float(dur[i, u]) * m.x[i, u] for i in range(p.n) if p.can_run[i, u]) <= m.C)
    dhead, dtail = (clamp_times(w, 2 * UB) for w in device_windows(p))
    for i, u in runnable:
        if not np.isfinite(dhead[i, u]):  # its data cannot reach u, or leave it
            m.x[i, u].fix(0)
    reach = [[u for u in on[i] if np.isfinite(dhead[i, u])] for i in range(p.n)]
    m.device_head = pyo.Constraint(range(p.n), rule=lambda m, i: m.s[i] >= sum(
        float(dhead[i, u]) * m.x[i, u] for u in reach[i]))
    m.device_tail = pyo.Constraint(range(p.n), rule=lambda m, i: m.s[i] + sum(
        float(dur[i, u] + dtail[i, u]) * m.x[i, u] for u in reach[i]) <= m.C)

    m.load_cut = pyo.ConstraintList()
    view = _PyomoView(p, m)
    for i, k, v, runs, first, last in device_load_cuts(p, load_cut_terms):
        load = sum(float(dur[j, v]) * m.x[j, v] for j in runs)
        load += first * (1 - view.use(i, v)) + last * (1 - view.use(k, v))
        if k < 0:
            m.load_cut.add(m.s[i] + D[i] + load <= m.C)
        else:
            m.load_cut.add(m.s[k] >= (m.s[i] + D[i] if i >= 0 else 0) + load)

    # same[e, u] <= x[i, u], x[j, u]: the edge stays on device u. Apart, it costs at least
    # cmin[e]; pairs of devices that cost more than cmin get their own constraint.
    cmin, extra = edge_comm(p)
    m.SAME = pyo.Set(initialize=[(e, u) for e in range(p.E) for u in range(p.m)
                                 if p.can_run[p.src[e], u] and p.can_run[p.dst[e], u]], dimen=2)
    m.same = pyo.Var(m.SAME, bounds=(0, 1))
    m.same_src = pyo.Constraint(m.SAME, rule=lambda m, e, u: m.same[e, u] <= m.x[int(p.src[e]), u])
    m.same_dst = pyo.Constraint(m.SAME, rule=lambda m, e, u: m.same[e, u] <= m.x[int(p.dst[e]), u])
    m.prec = pyo.ConstraintList()
    m.nolink = pyo.ConstraintList()
    for e in range(p.E):
        i, j = int(p.src[e]), int(p.dst[e])
        apart = 1 - sum(m.same[e, u] for u in range(p.m) if (e, u) in m.SAME)
        m.prec.add(m.s[j] >= m.s[i] + D[i] + (float(cmin[e]) * apart if math.isfinite(cmin[e]) else 0))
        for u in on[i]:
            for v in on[j]:
                if u == v:
                    continue
                if not math.isfinite(extra[e, u, v]):
                    m.nolink.add(m.x[i, u] + m.x[j, v] <= 1)
                elif extra[e, u, v] > 0:
                    m.prec.add(m.s[j] >= m.s[i] + D[i] + float(p.comm[e, u, v]) * (m.x[i, u] + m.x[j, v] - 1))

    m.memory = pyo.ConstraintList()
    for u in range(p.m):
        if not math.isfinite(p.mem[u]):
            continue
        unit = byte_unit(p.mem[u], HIGHS_BYTES)  # no task that u can run needs more than mem[u]
        terms = [float((p.weight[i] + p.act[i]) / unit) * m.x[i, u] for i in range(p.n) if p.can_run[i, u]]
        if terms:
            m.memory.add(sum(terms) <= float(p.room[u] / unit))

    m.disjunct = pyo.ConstraintList()
    for i, j in pairs:
        for u in set(on[i]) & set(on[j]):
            both = 2 - m.x[i, u] - m.x[j, u]
            m1 = UB - tail[i] - dmin[i] + dur[i, u] - head[j]
            m2 = UB - tail[j] - dmin[j] + dur[j, u] - head[i]
            m.disjunct.add(m.s[j] >= m.s[i] + float(dur[i, u]) - float(m1) * (1 - m.y[i, j]) - float(m1) * both)
            m.disjunct.add(m.s[i] >= m.s[j] + float(dur[j, u]) - float(m2) * m.y[i, j] - float(m2) * both)

    m.plugins = pyo.ConstraintList()
    apply_plugins(_PyomoView(p, m), plugins)
    m.obj = pyo.Objective(expr=m.C, sense=pyo.minimize)
    m.time_scale = f
    m.build_seconds = time.perf_counter() - t0
    return m


def set_start(model: pyo.ConcreteModel, problem: Problem, schedule: Schedule) -> None:
    """Load a schedule into the model's variables as a MIP start."""
    dev = {j.task: problem.device_index[j.device] for j in schedule.jobs}
    start = {problem.task_index[j.task]: j.start for j in schedule.jobs}
    for (i, u) in model.X:
        model.x[i, u].set_value(1 if dev[problem.task_names[i]] == u else 0)
    f = model.time_scale
    for i in range(problem.n):
        model.s[i].set_value(start[i] * f)
    for i, j in model.P:
        model.y[i, j].set_value(1 if start[i] <= start[j] else 0)
    model.C.set_value(schedule.makespan * f)


class _QuietInterrupt(logging.Filter):
    """appsi warns of HiGHS's 'interrupt' status as unknown; mapsched.engine.interrupt asked for it."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "kInterrupt" not in record.getMessage()


logging.getLogger("pyomo.contrib.appsi.solvers.highs").addFilter(_QuietInterrupt())


def run_highs(model: pyo.ConcreteModel, time_limit: float | None, threads: int, warmstart: bool,
              log: bool, detect_symmetry: bool = True) -> tuple[Any, str, bool]:
    """Solve a Pyomo model with HiGHS through appsi, without loading the solution.
    ``detect_symmetry``: HiGHS's own symmetry detection (``mip_detect_symmetry``).

    Returns the appsi results, the HiGHS log (when asked for) and whether it proved optimality.
    """
    import highspy
    from pyomo.contrib.appsi.base import TerminationCondition
    from pyomo.contrib.appsi.solvers import Highs

    # HiGHS keeps one thread pool per process, sized by the first solve; a later solve
    # with another thread count fails unless the pool is reset first.
    highspy.Highs.resetGlobalScheduler(True)
    opt = Highs()
    opt.config.load_solution = False
    opt.config.warmstart = warmstart
    opt.config.mip_gap = 1e-9
    if time_limit is not None:
        opt.config.time_limit = max(time_limit, 0.01)
    # HiGHS checks its final MIP solution against the LP's feasibility tolerance (1e-7) and
    # reports a solve error, dropping the solution and bound, when the MIP's own (1e-6 by
    # default) let it end above that: hypothesis found such a 6-task model.
    opt.highs_options = {"threads": int(threads), "random_seed": 0, "mip_detect_symmetry": bool(detect_symmetry),
                         "mip_feasibility_tolerance": 1e-7}
    logfile = None
    if log:
        fd, logfile = tempfile.mkstemp(prefix="mapsched-highs-", suffix=".log")
        os.close(fd)
        opt.config.logfile = logfile
    try:
        opt.set_instance(model)  # makes its HiGHS object now, so that an interrupt can cancel the solve
        with interrupt.on_stop(lambda: opt._solver_model.cancelSolve()):
            res = opt.solve(model)
    finally:
        text = ""
        if logfile:
            with open(logfile, encoding="utf-8", errors="replace") as fh:
                text = fh.read()
            os.unlink(logfile)
    return res, text, res.termination_condition == TerminationCondition.optimal


def proved_bound(res: Any, optimal: bool, time_scale: float = 1.0) -> float | None:
    """The lower bound a HiGHS result proves (:func:`~mapsched.model.validate.floating_bound`), in ms
    of a model that counts time in units of ``1 / time_scale`` ms. A model solved in presolve
    ends optimal with a dual bound of -inf: its objective is then the bound."""
    bound = res.best_objective_bound
    if optimal and res.best_feasible_objective is not None and (bound is None or not math.isfinite(bound)):
        bound = res.best_feasible_objective
    bound = floating_bound(bound)
    return None if bound is None else bound / time_scale


def solve_model(
    model: pyo.ConcreteModel,
    time_limit: float | None = None,
    threads: int = 1,
    warmstart: bool = True,
    log: bool = False,
    detect_symmetry: bool = True,
) -> dict[str, Any]:
    """Solve a model from :func:`build_model` with HiGHS (Pyomo's appsi interface).

    ``detect_symmetry`` turns HiGHS's own symmetry detection on or off. Returns a dict
    with ``owner`` (device per task), ``starts``, ``objective``,
    ``bound``, ``optimal`` (bool) and ``log``; ``owner`` is None if no solution was found.
    """
    res, text, optimal = run_highs(model, time_limit, threads, warmstart, log, detect_symmetry)
    f = model.time_scale  # the model's times are in units of 1 / f ms
    objective = res.best_feasible_objective
    out: dict[str, Any] = {"owner": None, "starts": None, "log": text, "optimal": optimal,
                           "objective": None if objective is None else objective / f,
                           "bound": proved_bound(res, optimal, f)}
    if res.best_feasible_objective is not None:
        res.solution_loader.load_vars()
        n = len(model.s)
        owner = np.full(n, -1, dtype=np.int64)
        for (i, u) in model.X:
            if pyo.value(model.x[i, u]) > 0.5:
                owner[i] = u
        out["owner"] = owner
        out["starts"] = np.array([pyo.value(model.s[i]) for i in range(n)]) / f
    return out
