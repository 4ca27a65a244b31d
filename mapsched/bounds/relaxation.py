"""The linear relaxation of the latency model, tightened by load cuts found by separation:
a lower bound that weighs precedence, transfers and device loads together.

Variables: ``x[i, u]`` in [0, 1], the share of task i on device u; ``s[i] >= 0``, its
start; ``z[e, u, v] >= 0``, the share of edge e's data sent from u to v; and the
makespan ``C``. Rows (``t`` the latency of one input, ``e[i] = s[i] + sum_u t[i, u] x[i, u]``):

* ``sum_u x[i, u] = 1``, and ``x[i, u] = 0`` where u cannot run i, hold it alone or run
  it within ``heft``'s makespan; ``z[e, u, v] = 0`` where the transfer takes longer;
* ``z`` is a transport between the ends' shares, ``sum_v z[e, u, v] = x[src, u]`` and
  ``sum_u z[e, u, v] = x[dst, v]``, so with whole tasks exactly ``z[e, dev(src), dev(dst)]``
  is 1;
* every edge e: ``s[dst] >= e[src] + sum_{u != v} comm(e, u, v) z[e, u, v]``;
* ``C >= e[i]`` for every task, ``C >= sum_i t[i, u] x[i, u]`` and the memory of every
  device;
* the load cuts of :func:`~mapsched.bounds.cuts.load_cuts` with their transfer margins
  (:class:`~mapsched.bounds.cuts.Margins`): ``s[k] >= e[i] + sum_{j in B} t[j, v] x[j, v] + ...``
  for the tasks B between i and k. There are too many to state (one per ordered pair and
  device), so only those the current solution breaks are added, the most broken first,
  and the LP is solved again until none is broken.

Every schedule that ends by ``heft``'s makespan, an optimal one among them, gives a
feasible point (its devices as ``x``, its starts, its makespan: none of its jobs or
transfers takes longer), so the optimum bounds the makespan from below; so does the LP
of any round, and so does the proved bound of the mixed-integer programme with ``x``
binary (``integral``), which rules out spreading a task thinly over slow devices. The
rows leave out that tasks on one device must not overlap except through the device loads
and the cuts, which is what keeps the programme small. On stacks of modules joined by
several strongly dependent channels this bound is the best mapsched proves: the quick
bounds see the loads or the paths, never both, and the cuts tie the two together.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from mapsched import checks
from mapsched.bounds.cuts import LoadCut, Margins
from mapsched.engine.highs import SETUP, RowProgramme
from mapsched.errors import OptionError
from mapsched.model import arguments
from mapsched.model.problem import Problem
from mapsched.model.scales import highs_time_scale
from mapsched.model.validate import floating_bound
from mapsched.scheduling.best_list import makespan_cap

__all__ = ["FOLD_LEAST", "HEAVY_SHARES", "MARGIN_TASKS", "QUOTIENT_COLUMNS", "RELAXATION_TASKS", "Folded",
           "folded_relaxation", "relaxation_bound"]

RELAXATION_TASKS = 2_000
"""Largest graph :func:`relaxation_bound` takes on: separation multiplies dense n-by-n
reachability matrices (O(n^3) per device and round)."""

QUOTIENT_COLUMNS = 40_000
"""Transfer columns (``E m^2``) past which :func:`relaxation_bound` leaves out a less folded
programme (see :data:`FOLD_LEAST`): at 700-1,000 tasks on 15-18 devices the whole one has
170,000-430,000 such columns and proves nothing in a minute; the folded one always runs."""

MIP_SPAN = 1e6
"""Largest ratio of the programme's longest time to its LP value that the integral stage
takes on (see :meth:`_Relaxation.integral_bound`)."""
FOLD_LEAST = 4
"""Classes of at most this many identical devices stay unfolded in the second stage of
:func:`relaxation_bound`: a few accelerators of little memory, whose memory apart and
transfers between them are what the folded programme misses most (on the real-model
graphs, 7-13% more proved than folded: ``resnet50-op``, ``inception-v3-op``)."""

HEAVY_SHARES = (0.05,)
"""Shares of the smallest limited memory above which a task is made binary in the first
stages of the mixed-integer bound (see :func:`_integral_stages`). A second stage at 1% cost
the last stage (all tasks) more than it gained on the real models."""
MARGIN_TASKS = 400
"""Largest graph whose cuts get transfer margins (:class:`~mapsched.bounds.cuts.Margins`: O(E m^3)
per task and device that a cut starts or ends at); above it the cuts go without, still
valid."""


class _Relaxation(RowProgramme):
    """The programme in HiGHS, with the column layout ``x | s | C | z``."""

    def __init__(self, problem: Problem, deadline: float, limit: float = math.inf,
                 mult: np.ndarray | None = None) -> None:
        super().__init__(deadline)
        highspy = self.hs
        p = self.p = problem
        n, m = p.n, p.m
        # Devices that stand for a class of identical ones (_quotient): its load and memory are
        # shared by that many devices
        self.mult = mult = np.ones(m) if mult is None else np.asarray(mult, dtype=float)
        need = p.weight + p.act
        room = p.room
        # Jobs and transfers longer than ``limit`` are left out (see relaxation_bound)
        self.ok = p.can_run & (need[:, None] <= room[None, :]) & (p.dur <= limit)
        self.t = np.where(self.ok, p.dur, 0.0)
        self.S, self.C, self.Z = n * m, n * m + n, n * m + n + 1
        comm = np.where(np.eye(m, dtype=bool)[None], 0.0, p.comm)  # [e, u, v]
        comm = np.where(comm <= limit, comm, np.inf)
        # The largest time the programme holds (see integral_bound).
        self.largest = max(float(self.t.max(initial=0.0)), float(comm[np.isfinite(comm)].max(initial=0.0)))
        # Time in units of 1 / f ms (highs_time_scale): the C and S columns, and every time below.
        self.f = highs_time_scale(self.largest)
        ts = self.t * self.f
        comm = comm * self.f
        h = self.h
        cols = self.Z + p.E * m * m
        upper = np.full(cols, highspy.kHighsInf)
        upper[: n * m] = self.ok.ravel()
        upper[self.Z:] = np.where(np.isfinite(comm), highspy.kHighsInf, 0.0).ravel()
        h.addVars(cols, np.zeros(cols), upper)
        h.changeColsCost(1, np.array([self.C], dtype=np.int32), np.array([1.0]))
        inf = highspy.kHighsInf
        for i in range(n):
            self.rows.append((1.0, 1.0, {self.x(i, u): 1.0 for u in range(m)}))
            self.rows.append((0.0, inf, {self.C: 1.0, **self.minus_end(i)}))
        for u in range(m):
            self.rows.append((0.0, inf, {self.C: float(mult[u]), **{self.x(i, u): -ts[i, u] for i in range(n)}}))
            if math.isfinite(p.mem[u]):  # in shares of the room: coefficients up to 2**40 misled the MIP too
                self.rows.append((-inf, 1.0, {self.x(i, u): float(need[i] / (mult[u] * room[u])) for i in range(n)
                                              if self.ok[i, u]}))
        for e in range(p.E):
            i, j = int(p.src[e]), int(p.dst[e])
            for u in range(m):
                self.rows.append((0.0, 0.0, {self.x(i, u): -1.0, **{self.z(e, u, v): 1.0 for v in range(m)}}))
                self.rows.append((0.0, 0.0, {self.x(j, u): -1.0, **{self.z(e, v, u): 1.0 for v in range(m)}}))
            sends = {self.z(e, u, v): -float(comm[e, u, v]) for u in range(m) for v in range(m)
                     if u != v and math.isfinite(comm[e, u, v])}
            self.rows.append((0.0, inf, {self.S + j: 1.0, **self.minus_end(i), **sends}))
        self.flush()

    def x(self, i: int, u: int) -> int:
        return i * self.p.m + u

    def z(self, e: int, u: int, v: int) -> int:
        return self.Z + (e * self.p.m + u) * self.p.m + v

    def minus_end(self, i: int) -> dict[int, float]:
        """``-e[i]`` as coefficients."""
        return {self.S + i: -1.0, **{self.x(i, u): -self.t[i, u] * self.f for u in range(self.p.m)}}

    def add_cut(self, cut: LoadCut) -> None:
        """``s[k] - e[i] - sum_B t x - first (1 - x[i, v]) - last (1 - x[k, v]) >= 0``."""
        i, k, v, runs, first, last = cut
        row: dict[int, float] = {self.S + k if k >= 0 else self.C: 1.0}
        if i >= 0:
            row.update(self.minus_end(i))
        first, last = first * self.f, last * self.f
        for j in runs:  # a class of identical devices shares the load (the margins stay: see _quotient)
            row[self.x(j, v)] = row.get(self.x(j, v), 0.0) - self.t[j, v] * self.f / self.mult[v]
        if first:
            row[self.x(i, v)] = row.get(self.x(i, v), 0.0) + first
        if last:
            row[self.x(k, v)] = row.get(self.x(k, v), 0.0) + last
        self.rows.append((first + last, self.hs.kHighsInf, row))

    def solution(self) -> tuple[np.ndarray, np.ndarray, float]:
        col = np.array(self.h.getSolution().col_value)
        n, m = self.p.n, self.p.m
        return col[: n * m].reshape(n, m).clip(0.0, 1.0), col[self.S:self.S + n] / self.f, float(col[self.C] / self.f)

    def at_least(self, value: float) -> None:
        """Give the makespan ``value`` ms, a proved bound, as its least value."""
        self.h.changeColBounds(self.C, value * self.f, self.hs.kHighsInf)

    def integral_bound(self, lp: float, tasks: np.ndarray | None = None) -> float:
        """HiGHS's proved bound of the programme with ``x`` binary for ``tasks`` (default:
        all; the others stay fractional, a relaxation of the whole), by the deadline; 0 (no
        proof) where its times span more than :data:`MIP_SPAN` of its LP's value ``lp``: with a
        transfer of 1e12 ms beside jobs of 20 ms, HiGHS 1.12 proved 110.73 ms on a problem
        whose optimum is 104.05 (the LP, right, said 104.05). Columns made binary by an
        earlier call stay so."""
        if self.largest > MIP_SPAN * max(lp, 1e-9):
            return 0.0
        h, m = self.h, self.p.m
        tasks = np.arange(self.p.n) if tasks is None else np.asarray(tasks, dtype=np.int64)
        cols = (tasks[:, None] * m + np.arange(m)[None, :]).ravel().astype(np.int32)
        h.changeColsIntegrality(len(cols), cols, np.full(len(cols), self.hs.HighsVarType.kInteger))
        # HiGHS's default MIP tolerance (1e-6) can end in a solve error (see milp.run_highs)
        h.setOptionValue("mip_feasibility_tolerance", 1e-7)
        # Kept, the LP's point becomes a MIP start that HiGHS spends seconds completing,
        # past the time limit.
        h.clearSolver()
        # HiGHS 1.12's MIP presolve can loop past its time limit (a 5-task, 3-device problem
        # ran for minutes); the bound is the dual bound at the deadline, which needs none.
        h.setOptionValue("presolve", "off")
        self.run()
        return self.dual_bound()

    def whole_tasks(self) -> np.ndarray | None:
        """The mixed-integer solve's best point's ``x`` (each task wholly on one device), where it
        found one with every task binary; else None."""
        status = self.hs.SolutionStatus.kSolutionStatusFeasible
        if self.h.getInfo().primal_solution_status != status:
            return None
        x = self.solution()[0].round()
        return x if (x.sum(axis=1) == 1).all() else None


def _quotient(p: Problem, least: int = 1) -> tuple[Problem, np.ndarray, list[list[int]]]:
    """``p`` with each class of more than ``least`` identical devices
    (:func:`~mapsched.model.symmetry.find_symmetry`) folded into its first device, each
    device's multiplicity, and the devices of ``p`` each stands for (``p`` itself where no
    class is folded). The devices of a class are
    interchangeable, so the class's load and memory are shared by its devices (the
    programme's rows divide them), and a transfer inside a class costs nothing, which
    relaxes the model further. The load cuts divide the work between two tasks over the
    class too, and keep their transfer margins, which a class member other than i's or k's
    pays at least as a device outside would. O(m^2 (n + E)) to find the classes."""
    from mapsched.model.symmetry import find_symmetry

    classes = [c for c in find_symmetry(p).devices if len(c) > max(1, least)]
    if not classes:
        return p, np.ones(p.m), [[u] for u in range(p.m)]
    mult = np.ones(p.m)
    members = {u: [u] for u in range(p.m)}
    gone: list[int] = []
    for cls in classes:
        mult[cls[0]] = len(cls)
        members[cls[0]] = sorted(cls)
        gone += cls[1:]
    keep = np.setdiff1d(np.arange(p.m), gone)
    return (p.without_devices([p.device_names[u] for u in gone]), mult[keep],
            [members[u] for u in keep.tolist()])


def _broken_cuts(p: Problem, relax: _Relaxation, margins: Margins, most: int, until: float) -> list[LoadCut]:
    """The ``most`` load cuts that the current solution breaks the most, found for every
    device by one product of reachability matrices: the work on v between i and k is
    ``(R diag(w) R)[i, k]`` with ``w = t[:, v] x[:, v]`` (R: the shared closure, whose
    diagonal is empty). Past ``until`` the cuts go without margins, which are computed per task on
    first use, and no device's product is started that would, at the pace of those before,
    end past it (each is O(n^3), so at thousands of tasks one product is a large share of a
    short limit)."""
    reach = margins.reach
    x, s, makespan = relax.solution()
    end = s + (x * relax.t).sum(axis=1)
    n = p.n
    # time between i and k (rows i, columns k); the last row is time 0, the last column C
    span = np.full((n + 1, n + 1), np.inf)  # no cut between tasks that no path orders
    span[:n, :n] = np.where(reach, s[None, :] - end[:, None], np.inf)
    span[:n, n] = makespan - end
    span[n, :n] = s
    found: list[tuple[float, int, int, int]] = []
    paths = reach.astype(float)
    started = time.perf_counter()
    for v in range(p.m):
        if v and time.perf_counter() + (time.perf_counter() - started) / v > until:
            break
        w = x[:, v] * relax.t[:, v] / relax.mult[v]
        load = np.zeros((n + 1, n + 1))
        load[:n, :n] = paths @ (w[:, None] * paths)
        load[:n, n] = paths @ w
        load[n, :n] = w @ paths
        broken = (load - span).ravel()
        flat = np.flatnonzero(broken > 1e-7 * max(1.0, makespan))
        if len(flat) > most:  # only the most broken can be kept: skip sorting the rest
            flat = flat[np.argpartition(broken[flat], -most)[-most:]]
        for a, b in zip(*np.unravel_index(flat, load.shape)):
            found.append((float(broken[a * (n + 1) + b]), int(a) if a < n else -1, int(b) if b < n else -1, v))
    found.sort(reverse=True)
    cuts = []
    for _, i, k, v in found[:most]:
        inside = (reach[i] if i >= 0 else True) & (reach[:, k] if k >= 0 else True)
        between = np.flatnonzero(inside)
        runs = [j for j in between.tolist() if relax.ok[j, v]]
        if runs:
            cuts.append(margins.cut(i, k, v, between, runs) if time.perf_counter() < until
                        else LoadCut(i, k, v, runs, 0.0, 0.0))
    return cuts


def relaxation_bound(problem: Problem, time_limit: float = 10.0, integral: bool = True,
                     cuts_per_round: int = 200) -> float:
    """Lower bound on the optimal latency makespan from the relaxation of the module docstring.

    Parameters
    ----------
    problem : Problem
        A latency problem (``L == 1``) of at most :data:`RELAXATION_TASKS` tasks.
    time_limit : float
        Seconds in all. Without ``integral`` the separation may use all of them; with it,
        half at most, and the mixed-integer solve the rest. Below
        :data:`~mapsched.engine.highs.SETUP` seconds per column nothing is tried.
    integral : bool
        Also solve the programme with whole tasks (``x`` binary) and keep its proved bound:
        first with only the tasks of the most memory binary (:data:`HEAVY_SHARES`), which
        HiGHS solves in seconds, then all of them.
    cuts_per_round : int
        Load cuts added per round, the most broken first.

    Returns
    -------
    float
        The best bound proved by the deadline, less HiGHS's relative tolerance
        (:func:`mapsched.model.validate.floating_bound`); 0 if nothing was proved.

    Notes
    -----
    The programme has ``n m + n + 1 + E m^2`` columns; each round of separation costs
    O(m n^3) in dense matrix products, and the cuts ``m n`` terms at most each. Only the
    cuts the current solution breaks are stated, so the LP converges in a few rounds with a
    small fraction of all the cuts.

    Examples
    --------
    >>> from mapsched.bounds import lower_bound
    >>> from mapsched.generators import stack
    >>> p = stack(modules=3, n=6, channels=4, variant="sdep", seed=1)
    >>> relaxation_bound(p, time_limit=10) > lower_bound(p).value
    True
    """
    p = arguments.problem(problem)
    if p.L > 1:
        raise OptionError("relaxation_bound: latency problems only (objective.batch 1)")
    if p.n > RELAXATION_TASKS:
        raise OptionError(f"relaxation_bound: {p.n} tasks, more than the {RELAXATION_TASKS} it takes on; "
                         "use mapsched.bounds.lower_bound")
    time_limit = checks.seconds(time_limit, "time_limit", none=False)
    cuts_per_round = checks.count(cuts_per_round, "cuts_per_round")
    start = time.perf_counter()
    folded = _folded(p, start, time_limit)
    if folded is None:
        return 0.0
    q, mult, _, cap = folded
    # Folded, the programme converges in a fraction of the time the whole one takes. The small
    # classes unfolded, it sees their devices' memory apart and the transfers between them.
    # Then that one, where its transfer columns fit, with the second half of the time and what
    # the folded one proved; or the whole one where no class is small. Every transfer inside a
    # large class as well (the whole programme after the middle one) proved less in a minute
    # than the middle one on the four real models measured, and took a third of the time.
    stages = [(q, mult)]
    if q is not p:
        r, rmult, _ = _quotient(p, FOLD_LEAST)
        for part, pmult in ((r, rmult), (p, np.ones(p.m))):
            if part.m > q.m and part.E * part.m * part.m <= QUOTIENT_COLUMNS:
                stages.append((part, pmult))
                break
    best = 0.0
    for k, (part, pmult) in enumerate(stages):
        began = time.perf_counter()
        until = start + time_limit * (k + 1) / len(stages)
        if k and until - began < SETUP * (part.n * part.m + part.E * part.m * part.m):
            break
        solved = _solved(part, pmult, cap, began, until, integral, cuts_per_round, best)
        best = max(best, 0.0 if solved is None else solved[1])
    return best


@dataclass(frozen=True)
class Folded:
    """The relaxation over classes of identical devices folded into one (:func:`_quotient`):
    where it puts each task, and what it proves.

    Attributes
    ----------
    classes : list of list of int
        The devices of each class, by index.
    shares : numpy.ndarray
        Shape (n, classes): the share ``x[i, c]`` of task i on class c in the first LP, with
        no cuts. It weighs memory, paths, loads and transfers together, so on memory-tight
        systems it says which tasks the fast devices should leave to the slow ones
        (:mod:`mapsched.heuristics.relax_round`).
    bound : float
        The best bound proved (0 where nothing past the first LP was asked for or proved).
    whole : numpy.ndarray or None
        Shape (n, classes), 0 or 1: the best point of the mixed-integer stage with every task
        whole, where it found one: a choice of class per task within the classes' memory.
    """

    classes: list[list[int]]
    shares: np.ndarray
    bound: float = 0.0
    whole: np.ndarray | None = None


def folded_relaxation(problem: Problem, time_limit: float, integral: bool = True,
                      unfolded: bool = True) -> Folded | None:
    """The relaxation's LP over classes of identical devices folded into one (:func:`_quotient`),
    then, with ``integral``, separated load cuts and its mixed-integer stages
    (:func:`_integral_stages`), within ``time_limit`` seconds. :func:`mapsched.solve` adds its
    bound to a latency result's in what the bound's share leaves, and ``relax-round`` rounds
    its shares and takes its whole tasks' classes. None where the first LP is not solved in
    time, for a throughput problem or one of over :data:`RELAXATION_TASKS` tasks, or, without
    ``unfolded``, where no two devices are alike (the programme is then the whole one).

    >>> from mapsched import instances
    >>> r = folded_relaxation(instances.load("real/gnmt-layer"), 10.0)
    >>> len(r.classes), r.shares.shape[1], bool(abs(r.shares.sum(axis=1) - 1).max() < 1e-6)
    (2, 2, True)
    >>> r.whole is not None and bool((r.whole.sum(axis=1) == 1).all()), r.bound > 0
    (True, True)
    """
    p = arguments.problem(problem)
    time_limit = checks.seconds(time_limit, "time_limit", none=False)
    if p.L > 1 or p.n > RELAXATION_TASKS:
        return None
    start = time.perf_counter()
    folded = _folded(p, start, time_limit, unfolded)
    if folded is None:
        return None
    q, mult, members, cap = folded
    solved = _solved(q, mult, cap, time.perf_counter(), start + time_limit, integral, 200, cuts=integral)
    return None if solved is None else Folded(members, *solved)


def _folded(p: Problem, start: float, time_limit: float, unfolded: bool = True
            ) -> tuple[Problem, np.ndarray, list[list[int]], float] | None:
    """The folded problem (:func:`_quotient`), its multiplicities and classes, and the cap on
    a job's or a transfer's time; None where ``time_limit`` from ``start`` is too short to
    build its programme, or, without ``unfolded``, where no two devices are alike (before the
    cap's list schedule). The start of :func:`relaxation_bound` and :func:`folded_relaxation`."""
    q, mult, members = _quotient(p)
    if (q is p and not unfolded) or time_limit < SETUP * (q.n * q.m + q.E * q.m * q.m):
        return None
    # No optimal schedule runs a job or sends data for longer than heft's makespan: left out,
    # they keep the optimum feasible and no longer bring in coefficients up to 1e21 ms, which
    # (a billion times the others) made HiGHS prove bounds above the optimum.
    cap = makespan_cap(p, start + time_limit)
    if time.perf_counter() >= start + time_limit:
        return None
    return q, mult, members, cap


def _solved(p: Problem, mult: np.ndarray, cap: float, start: float, deadline: float, integral: bool,
            cuts_per_round: int, proved: float = 0.0, cuts: bool = True
            ) -> tuple[np.ndarray, float, np.ndarray | None] | None:
    """The programme of ``p`` (devices of multiplicity ``mult``, jobs and transfers over ``cap``
    left out), with separated cuts (unless ``cuts`` is False), from ``start`` to ``deadline``: see
    :func:`relaxation_bound`. Each mixed-integer stage starts from the best bound proved so far
    (at least ``proved``, proved elsewhere) as the makespan's least value, so that a stage cut
    short by the deadline never proves less than the one before: an optimal schedule still
    meets the row. Returns the first LP's ``x``, the bound, and the last stage's whole tasks
    (:meth:`_Relaxation.whole_tasks`); None where the first LP is not solved in time."""
    separate_until = start + ((deadline - start) / 2 if integral else deadline - start)
    relax = _Relaxation(p, deadline, cap, mult)
    margins = Margins(p, zero=p.n > MARGIN_TASKS)
    best, first, whole = 0.0, None, None
    while relax.run():
        best = max(best, relax.value())
        if first is None:
            first = relax.solution()[0]
        if not cuts or time.perf_counter() > separate_until:
            break
        found = _broken_cuts(p, relax, margins, cuts_per_round, separate_until)
        if not found:
            break
        for cut in found:
            relax.add_cut(cut)
        relax.flush()
    if first is None:
        return None
    if integral:
        lp = best
        stages = _integral_stages(p)
        for k, tasks in enumerate(stages):
            if time.perf_counter() >= relax.deadline:
                break
            relax.at_least(floating_bound(max(best, proved)))
            best = max(best, relax.integral_bound(lp, tasks))
            if k == len(stages) - 1:
                whole = relax.whole_tasks()
    return first, max(0.0, floating_bound(best)), whole


def _integral_stages(p: Problem) -> list[np.ndarray]:
    """The tasks made binary in turn by the mixed-integer stage: first those that take at least
    each of :data:`HEAVY_SHARES` of the smallest limited memory, then all. With all binary,
    HiGHS proves little in a minute on 700-1,000 tasks; with the few heavy ones alone it
    solves in seconds, and the memory of a device whole tasks fill is what the LP misses most
    (a weight of 125 MiB cannot go half to an accelerator and half to a CPU)."""
    stages = []
    limited = p.room[np.isfinite(p.room)]
    if len(limited):
        need = p.weight + p.act
        for share in HEAVY_SHARES:
            heavy = np.flatnonzero(need >= share * limited.min())
            if 0 < len(heavy) < p.n and (not stages or len(heavy) > len(stages[-1])):
                stages.append(heavy)
    return [*stages, np.arange(p.n)]
