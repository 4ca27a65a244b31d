"""The latency problem as an OR-Tools CP-SAT model: the same problem as :mod:`.milp`.

Each task has one start ``s[i]`` and, per device u that can run it, an optional
interval of length ``t[i, u]`` present iff ``x[i, u]``; ``AddNoOverlap`` per device
replaces the MILP's disjunctions. Communication is a precedence enforced only when
both end devices are chosen; a missing link forbids the pair; memory is a linear
constraint per device. Where transfers take turns, each is an optional interval on the
resources it uses (:meth:`CpSatModel._contention`). Redundant constraints speed up the proofs: device loads, a
cumulative of shortest jobs, device-aware time windows and, on request, the work each
device does between two tasks with the transfers around it (:func:`~mapsched.bounds.cuts.load_cuts`).

Time resolution
    CP-SAT needs integers. Times are counted in ticks of ``1 / resolution`` ms, by
    default the power of ten that puts the heuristic makespan near 10**9 ticks, so
    data given in whole (or 10^-k) milliseconds is represented exactly.

Soundness of the bound
    Jobs and transfers longer than the horizon are first shortened to one tick past
    it (:func:`~.common.capped`), which keeps the optimum. Durations and communication
    times are rounded **down** to ticks. Flooring every start of any real schedule,
    and its makespan, gives a schedule of the rounded model
    (``floor(a + b) >= floor(a) + floor(b)``), so the rounded optimum is at most the
    real one: the solver's bound, divided by the resolution, is a lower bound of the
    real, unrounded problem. Memory is counted in whole bytes (exact for integer
    sizes), or in a power-of-two unit fine enough that every mapping within a device's
    capacity stays in the model (:func:`~mapsched.model.scales.memory_row`). The solver's schedule is re-timed
    exactly by the decoder, in the solver's order.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from ortools.sat.python import cp_model

from mapsched.bounds.cuts import device_load_cuts, device_windows, time_windows
from mapsched.engine import interrupt
from mapsched.errors import OptionError
from mapsched.formulations.common import Plugin, apply_plugins, capped, edge_comm
from mapsched.model.problem import Problem
from mapsched.model.scales import default_resolution, memory_row, start_ticks
from mapsched.model.schedule import Schedule

__all__ = ["MAX_TICKS", "TRANSFER_INTERVALS", "CpSatModel", "horizon_ticks", "portfolio", "run_cpsat"]

MAX_TICKS = 2**50
"""Longest horizon of a model in ticks: a user's ``resolution`` past it is refused."""


TRANSFER_INTERVALS = 20_000
"""Most transfer intervals a model states where transfers take turns (one per edge and pair of
devices that can run its ends and whose transfers use a resource of limited capacity). Past
it CP-SAT loads the model for longer than a time limit of seconds (70,000 intervals of a
700-task graph: 5 s past a 15 s limit), so the model leaves the turns out: a relaxation, whose
bound holds, and whose schedules are re-timed with the turns."""


def _transfer_pairs(p: Problem) -> int:
    """How many transfer intervals :meth:`CpSatModel._contention` would state. O(E m^2)."""
    from mapsched.scheduling.contention import Resources

    routes = Resources(p)
    limited = np.array([[u != v and bool(routes.route(u, v)) for v in range(p.m)] for u in range(p.m)])
    pairs = p.can_run[p.src][:, :, None] & p.can_run[p.dst][:, None, :] & limited[None] & np.isfinite(p.comm)
    return int(pairs.sum())


def horizon_ticks(upper_bound: float, res: float) -> int:
    """``upper_bound`` ms in ticks of ``1 / res`` ms, rounded up; an :class:`OptionError`
    past :data:`MAX_TICKS`, where the model's sums of ticks would leave 64 bits.

    >>> horizon_ticks(80.0, 1e12)
    80000000000000
    """
    ticks = upper_bound * res
    if not ticks <= MAX_TICKS:
        raise OptionError(f"--resolution: {res:g} ticks per ms put the {upper_bound:g} ms of a first schedule at "
                          f"{ticks:.3g} ticks, past CP-SAT's {MAX_TICKS:.3g}; use at most "
                          f"{MAX_TICKS / upper_bound:.3g}, or 0 (automatic)")
    return math.ceil(ticks)


class CpSatModel:
    """The CP-SAT latency model of a problem, built once, solvable with a hint.

    Parameters
    ----------
    problem : Problem
    upper_bound : float
        A makespan some schedule reaches; it bounds every start.
    resolution : float, optional
        Ticks per millisecond (default: :func:`~mapsched.model.scales.default_resolution`).
    plugins : tuple of callables
        Constraint plugins (see :class:`~.common.ModelView`).
    load_cut_terms : int
        Budget of the redundant load cuts (:func:`~mapsched.bounds.cuts.load_cuts`); 0, the default,
        leaves them out. ``exact`` states them (:data:`~mapsched.bounds.cuts.LOAD_CUT_TERMS`).
    deadline : float
        A ``time.perf_counter()`` time: building raises ``TimeoutError`` past it. Building
        takes a good part of a second per thousand tasks, so a solve whose time limit
        counts the build must be able to stop it.
    """

    def __init__(self, problem: Problem, upper_bound: float, resolution: float | None = None,
                 plugins: tuple[Plugin, ...] = (), load_cut_terms: int = 0, deadline: float = math.inf) -> None:
        self.problem = problem
        self.deadline = deadline
        self.res = res = resolution or default_resolution(upper_bound)
        self.model = m = cp_model.CpModel()
        horizon = horizon_ticks(upper_bound, res)
        # No job or transfer past the horizon fits in a schedule of the model: shortened to
        # just beyond it, they keep the optimum and every tick count in 64 bits (see capped).
        p = capped(problem, (horizon + 2) / res)
        dmin, head, tail = time_windows(p)
        self.d = d = np.where(p.can_run, np.floor(np.where(p.can_run, p.dur, 0) * res), 0).astype(np.int64)

        self.x: dict[tuple[int, int], cp_model.IntVar] = {}
        self.s = [m.new_int_var(int(math.floor(head[i] * res)), horizon, f"s{i}") for i in range(p.n)]
        self.C = m.new_int_var(0, horizon, "C")
        self.intervals: list[list[cp_model.IntervalVar]] = [[] for _ in range(p.m)]
        self.end = []
        for i in range(p.n):
            self._check_time()
            on = np.flatnonzero(p.can_run[i]).tolist()
            for u in on:
                self.x[i, u] = m.new_bool_var(f"x{i}_{u}")
                self.intervals[u].append(
                    m.new_optional_fixed_size_interval_var(self.s[i], int(d[i, u]), self.x[i, u], f"iv{i}_{u}"))
            m.add_exactly_one(self.x[i, u] for u in on)
            self.end.append(self.s[i] + sum(int(d[i, u]) * self.x[i, u] for u in on))
            if not p.succ[i]:
                m.add(self.end[i] <= self.C)
            m.add(self.end[i] + int(math.floor(tail[i] * res)) <= self.C)
        for u in range(p.m):
            m.add_no_overlap(self.intervals[u])
            m.add(self.busy(u) <= self.C)

        # At most m tasks run at once, each for at least its shortest job: a redundant
        # cumulative that tightens the bound where the graph is wide.
        fixed = [m.new_fixed_size_interval_var(self.s[i], int(math.floor(dmin[i] * res)), f"min{i}")
                 for i in range(p.n)]
        m.add_cumulative(fixed, [1] * p.n, p.m)
        # Where a task runs bounds when it can start and how long the rest takes, with
        # transfers counted (see device_windows): redundant, and it speeds up the proofs.
        dhead, dtail = device_windows(p)
        for i in range(p.n):
            self._check_time()
            on = np.flatnonzero(np.isfinite(dhead[i])).tolist()
            for u in set(np.flatnonzero(p.can_run[i]).tolist()) - set(on):  # its data cannot reach u, or leave it
                m.add(self.x[i, u] == 0)
            m.add(self.s[i] >= sum(int(math.floor(dhead[i, u] * res)) * self.x[i, u] for u in on))
            m.add(self.end[i] + sum(int(math.floor(dtail[i, u] * res)) * self.x[i, u] for u in on) <= self.C)

        cmin, extra = edge_comm(p)
        for e in range(p.E):
            self._check_time()
            i, j = int(p.src[e]), int(p.dst[e])
            m.add(self.s[j] >= self.end[i])
            on_i, on_j = np.flatnonzero(p.can_run[i]).tolist(), np.flatnonzero(p.can_run[j]).tolist()
            # same[e] <=> both ends on one device; apart, the edge costs at least cmin.
            same = m.new_bool_var(f"same{e}")
            for u in set(on_i) | set(on_j):
                m.add(self.use(i, u) == self.use(j, u)).only_enforce_if(same)
            m.add_bool_or([self.x[i, u] for u in on_i if u in on_j] or [m.new_constant(0)]).only_enforce_if(same)
            if math.isfinite(cmin[e]) and math.floor(cmin[e] * res) > 0:
                m.add(self.s[j] >= self.end[i] + int(math.floor(cmin[e] * res))).only_enforce_if(same.Not())
            for u in on_i:
                for v in on_j:
                    if u == v:
                        continue
                    if not math.isfinite(extra[e, u, v]):
                        m.add_bool_or([self.x[i, u].Not(), self.x[j, v].Not()])
                    elif math.floor(p.comm[e, u, v] * res) > math.floor(cmin[e] * res):
                        m.add(self.s[j] >= self.end[i] + int(math.floor(p.comm[e, u, v] * res))).only_enforce_if(
                            [self.x[i, u], self.x[j, v]])

        self.transfer_start: dict[int, cp_model.IntVar] = {}  # per edge whose transfers take turns
        self.turns = p.contended and _transfer_pairs(p) <= TRANSFER_INTERVALS
        if self.turns:
            self._contention(p, horizon)

        self.load_cuts = 0  # how many were stated: the worker set-up depends on it (see solve)
        for i, k, v, runs, first, last in device_load_cuts(p, load_cut_terms):
            self._check_time()
            self.load_cuts += 1
            load = cp_model.LinearExpr.weighted_sum([self.x[j, v] for j in runs], [int(d[j, v]) for j in runs])
            load += math.floor(first * res) * (1 - self.use(i, v)) + math.floor(last * res) * (1 - self.use(k, v))
            if k < 0:
                m.add(self.end[i] + load <= self.C)
            else:
                m.add(self.s[k] >= (self.end[i] if i >= 0 else 0) + load)

        for u in range(p.m):
            if math.isfinite(p.mem[u]):
                on = [i for i in range(p.n) if (i, u) in self.x]
                need = p.weight[on] + p.act[on]
                sizes, room = memory_row(need, p.mem[u], float(need.sum()))
                m.add(cp_model.LinearExpr.weighted_sum([self.x[i, u] for i in on], sizes) <= room)
        apply_plugins(self, plugins)
        m.minimize(self.C)

    def _contention(self, p: Problem, horizon: int) -> None:
        """Transfers that take turns (:mod:`mapsched.scheduling.contention`): per edge a start
        ``ts[e]`` after its source ends, and per pair of devices whose transfers use a resource
        of limited capacity an optional interval of the pair's time from ``ts[e]``, present
        iff the ends sit on that pair, which the destination waits for; each resource takes
        its intervals with a no-overlap (capacity 1, a device's jobs included where it has no
        copy engines) or a cumulative. Times are rounded down as the jobs' are, so the
        rounded model still relaxes the real one."""
        from mapsched.scheduling.contention import Resources

        m, res = self.model, self.res
        resources = Resources(p)
        capacity = [lanes.capacity for lanes in resources.lanes]
        using: list[list[cp_model.IntervalVar]] = [[] for _ in capacity]
        for e in range(p.E):
            self._check_time()
            i, j = int(p.src[e]), int(p.dst[e])
            on_i, on_j = np.flatnonzero(p.can_run[i]).tolist(), np.flatnonzero(p.can_run[j]).tolist()
            pairs = [(u, v) for u in on_i for v in on_j
                     if u != v and resources.route(u, v) and math.isfinite(p.comm[e, u, v])]
            if not pairs:
                continue
            ts = self.transfer_start[e] = m.new_int_var(0, horizon, f"ts{e}")
            m.add(ts >= self.end[i])
            for u, v in pairs:
                on = m.new_bool_var(f"y{e}_{u}_{v}")
                m.add_bool_and([self.x[i, u], self.x[j, v]]).only_enforce_if(on)
                m.add_bool_or([self.x[i, u].Not(), self.x[j, v].Not(), on])
                dt = int(math.floor(p.comm[e, u, v] * res))
                m.add(self.s[j] >= ts + dt).only_enforce_if(on)
                interval = m.new_optional_fixed_size_interval_var(ts, dt, on, f"tr{e}_{u}_{v}")
                for r in resources.route(u, v):
                    using[r].append(interval)
        for r, intervals in enumerate(using):
            if not intervals:
                continue
            if r < p.m:  # a device without copy engines: its copies and its jobs take turns
                m.add_no_overlap(intervals + self.intervals[r])
            elif capacity[r] == 1:
                m.add_no_overlap(intervals)
            else:
                m.add_cumulative(intervals, [1] * len(intervals), capacity[r])

    def _check_time(self) -> None:
        if time.perf_counter() > self.deadline:
            raise TimeoutError(f"CpSatModel: past the deadline while building the model of {self.problem.n} tasks")

    # ModelView for plugins (times in ticks)
    def use(self, i: int, u: int) -> Any:
        return self.x.get((i, u), 0)

    count = use

    def busy(self, u: int) -> Any:
        return sum(int(self.d[i, u]) * x for (i, uu), x in self.x.items() if uu == u)

    def add(self, constraint: Any) -> None:
        self.model.add(constraint)

    def hint(self, schedule: Schedule) -> None:
        """Hint a schedule (its starts rounded down, :func:`~mapsched.model.scales.start_ticks`,
        are feasible in the rounded model)."""
        p = self.problem
        owner, starts = np.zeros(p.n, dtype=np.int64), np.zeros(p.n, dtype=np.int64)
        for j in schedule.jobs:
            i = p.task_index[j.task]
            owner[i], starts[i] = p.device_index[j.device], start_ticks(j.start, self.res)
        self.hint_ticks(owner, starts)

    def hint_ticks(self, owner: Sequence[int], starts: Sequence[int], makespan: int | None = None) -> None:
        """Hint each task's device and start (ticks), and the makespan if given."""
        m = self.model
        m.clear_hints()
        for (i, u), x in self.x.items():
            m.add_hint(x, u == owner[i])
        for i, s in enumerate(starts):
            m.add_hint(self.s[i], int(s))
        if makespan is not None:
            m.add_hint(self.C, int(makespan))

    def solve(self, time_limit: float | None, threads: int, seed: int = 0, log: bool = False,
              on_solution: Any = None, detect_symmetry: bool = True, stall: float | None = None
              ) -> dict[str, Any]:
        """Solve; returns ``owner``, ``starts`` (ms), ``bound`` (ms, sound), ``optimal`` and ``log``.

        A time limit makes :func:`portfolio` aim for the bound reached by then, unless the
        model has load cuts: with them its default search proves within a minute optima
        that the lower-bound search leaves open. ``stall`` (with ``on_solution``): see
        :func:`run_cpsat`."""
        solver, status, text = run_cpsat(self, time_limit, threads, seed, log, on_solution,
                                         deadline=time_limit is not None and not self.load_cuts,
                                         detect_symmetry=detect_symmetry, stall=stall)
        out: dict[str, Any] = {"owner": None, "starts": None, "transfer_starts": None, "log": text,
                               "optimal": status == cp_model.OPTIMAL,
                               "bound": solver.best_objective_bound / self.res}
        if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            out["owner"], out["starts"], out["transfer_starts"] = self.read(solver)
        return out

    def read(self, solver: Any) -> tuple[np.ndarray, np.ndarray, dict[int, float]]:
        """Each task's device and start (ms), and the start (ms) of each edge's transfer where
        transfers take turns."""
        owner = np.full(self.problem.n, -1, dtype=np.int64)
        for (i, u), x in self.x.items():
            if solver.boolean_value(x):
                owner[i] = u
        starts = np.array([solver.value(s) for s in self.s], dtype=float) / self.res
        return owner, starts, {e: solver.value(t) / self.res for e, t in self.transfer_start.items()}


def portfolio(params: Any, threads: int, deadline: bool = False) -> None:
    """Set CP-SAT's workers for a budget of ``threads``.

    On these models CP-SAT's search without the LP relaxation proves optima far sooner
    than its default, LP-guided search alone (on latency and batched models alike), while
    the LP gives the better bound where nothing is proved. So:

    * one thread: one worker, without the LP (deterministic for a given seed);
    * two or three: the LP-free search and the default one, with a third worker for
      large-neighbourhood search, which improves schedules on large graphs. These two
      finish proofs: on the models with load cuts they prove 32-node random-wired modules
      within a minute, where with the lower-bound search in place of the default one none is
      proved in that minute. With a ``deadline`` (a time limit stops the search on a
      graph too large to prove, so the bound reached by then is what counts), CP-SAT's
      objective lower-bound search replaces the default one: it leaves less of the gap
      after a minute on graphs beyond the load cuts' budget;
    * four or more: CP-SAT's own portfolio of that many workers (the LP-free search
      is among them).
    """
    if threads <= 1:
        params.num_workers = 1
        params.linearization_level = 0
    elif threads < 4:
        params.num_workers = 3
        params.subsolvers.extend(["no_lp", "objective_lb_search" if deadline else "default_lp"])
    else:
        params.num_workers = int(threads)


def run_cpsat(model: Any, time_limit: float | None, threads: int, seed: int, log: bool,
              on_solution: Any = None, workers: int | None = None, deadline: bool = False,
              detect_symmetry: bool = True, subsolvers: tuple[str, ...] = (),
              first_within: float | None = None, stall: float | None = None
              ) -> tuple[cp_model.CpSolver, int, str]:
    """Solve ``model.model`` with CP-SAT. ``on_solution(solution, bound)`` gets each solution as
    ``model.read`` gives it and the bound proved so far (ms), and stops the search by returning
    True. ``workers`` replaces :func:`portfolio` by CP-SAT's default search with that many
    workers; ``deadline`` is passed on to :func:`portfolio`. Returns the solver, its status and
    the log (empty unless asked for). ``detect_symmetry=False`` turns off CP-SAT's own symmetry
    detection (``symmetry_level`` 0). ``subsolvers`` (with ``workers``) names the workers.
    ``first_within`` (with ``on_solution``): seconds after which the search stops if no
    solution has come yet. ``stall`` (with ``on_solution``): seconds without a new solution
    (counted from the start, then from each solution) after which the search stops, for a
    caller that has a better use for the time left than a stalled whole model."""
    solver = cp_model.CpSolver()
    prm = solver.parameters
    if time_limit is not None:
        prm.max_time_in_seconds = max(time_limit, 0.01)
    if workers:
        prm.num_workers = workers
        prm.subsolvers.extend(subsolvers)
    else:
        portfolio(prm, threads, deadline)
    prm.random_seed = int(seed)
    # CP-SAT 9.15's presolve leads to wrong proofs: on a 25-task latency model it certified
    # 6.9255 ms optimal where the model admits 6.9120 (6 of 24 seeds with one worker, 5 of
    # 24 with three), and on a 26-task one 7.4150 for 7.4070 once presolve probing was off;
    # without presolve, 0 of 96 (google/or-tools#5293 is the same kind). A wrong proof is
    # an unsound bound, so presolve stays off (tests/formulations/test_exact.py's regression); proofs
    # took as long without it, and 20-second searches on 50-150 tasks ended 0.5-4.6% worse.
    prm.cp_model_presolve = False
    if not detect_symmetry:
        prm.symmetry_level = 0
    lines: list[str] = []
    if log:
        prm.log_search_progress = True
        prm.log_to_stdout = False
        solver.log_callback = lines.append
    prm.catch_sigint_signal = False  # mapsched.engine.interrupt stops the search, and the caller goes on from there
    callback = _Callback(model, on_solution) if on_solution is not None else None
    timer = None
    if callback is not None and first_within is not None:
        timer = threading.Timer(first_within, lambda: callback.found or solver.stop_search())
        timer.start()
    done = threading.Event()
    if callback is not None and stall is not None:
        threading.Thread(target=_watch, args=(solver, callback, stall, done), daemon=True).start()
    try:
        with interrupt.on_stop(solver.stop_search):
            status = solver.solve(model.model, callback)
    finally:
        done.set()
        if timer is not None:
            timer.cancel()
    return solver, status, "\n".join(lines)


def _watch(solver: cp_model.CpSolver, callback: _Callback, stall: float, done: threading.Event) -> None:
    """Stop ``solver`` once ``stall`` seconds pass without a new solution, until ``done``."""
    while not done.wait(min(0.05, max(stall, 0.001))):
        if time.perf_counter() - callback.last > stall:
            solver.stop_search()
            return


class _Callback(cp_model.CpSolverSolutionCallback):
    """Passes each new solution (as the model's ``read`` gives it) on with the proved bound
    (ms); stops the search when the function returns True."""

    def __init__(self, model: CpSatModel, fn: Any) -> None:
        super().__init__()
        self.model, self.fn, self.found = model, fn, False
        self.last = time.perf_counter()

    def on_solution_callback(self) -> None:
        self.found = True
        self.last = time.perf_counter()
        if self.fn(self.model.read(self), self.best_objective_bound / self.model.res):
            self.stop_search()
