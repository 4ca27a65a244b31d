"""Throughput lower bounds that see pipelining: the makespan of all L inputs.

Three proved bounds, each at most the optimal makespan of a throughput problem (one
whose schedules may run several jobs of a task on one device, as the format allows);
:func:`mapsched.bounds.lower_bound` adds the first one's LP to every solve, and
:func:`mapsched.split.full_bound` (``mapsched bound``, the bench tables' bound) takes
the largest of all three with the older rules.

The batched relaxation (:func:`batched_relaxation_bound`)
    The latency relaxation of :mod:`mapsched.bounds.relaxation`, restated for the
    *average input*. For a schedule, let ``x[i, u, k]`` be the share of the L inputs that
    task i runs on device u in jobs of batch size ``b_k``, ``S[i, l]`` the start of the
    job of i that holds input l and ``a[i] = mean_l S[i, l]``. Then, for every schedule:

    * ``sum_{u,k} x[i, u, k] = 1``;
    * the mean time input l spends in task i is ``d[i] = sum_{u,k} t[i, u, k] x[i, u, k]``
      (each input waits for its whole job), so averaging ``S[j, l] >= S[i, l] +
      dur(i, l) + comm`` over the inputs gives ``a[j] >= a[i] + d[i] + sum_{u != v}
      comm(e, u, v) z[e, u, v]``, where ``z[e, u, v]`` (the share of inputs whose job of
      i is on u and of j on v) is a transport between the two tasks' shares per device;
      and ``C >= a[i] + d[i]``;
    * device u runs ``L x[i, u, k] / b_k`` jobs of size ``b_k`` of task i, one at a time:
      ``C >= sum_{i,k} (L / b_k) t[i, u, k] x[i, u, k]`` (the load);
    * memory: the inputs of i on u need ``act[i]`` bytes each and, if there is any,
      ``weight[i]`` bytes, which is at least ``weight[i]`` times their share:
      ``sum_i (L act[i] + weight[i]) sum_k x[i, u, k] <= mem[u]``;
    * *path cuts*: for every input l, the jobs holding l of the tasks on paths between
      i and k (i an ancestor of k) lie between the end of i's job and the start of k's,
      and those on device v run one at a time; averaged over the inputs,
      ``a[k] >= a[i] + d[i] + sum_{j between} sum_b t[j, v, b] x[j, v, b]`` (likewise
      from time 0 to ``a[k]`` and from ``a[i] + d[i]`` to C);
    * *window cuts* (fill, load and drain of a device): no job of task i starts before
      ``head[i]``, the least time one input takes through i's ancestors, nor ends after
      ``C - tail[i]``; so the jobs on device u of the tasks with ``head >= h`` and
      ``tail >= q`` fit in ``[h, C - q]``: ``C >= h + q + sum (L / b_k) t x`` over them.

    An optimal schedule gives a feasible point (none of its jobs or transfers lasts longer
    than a list schedule's makespan, so leaving those out keeps it), so the linear
    programme's optimum (and that of any round of cuts) bounds the optimal makespan. The
    load bound ignores that batching trades per-input cost for the time an input waits
    in its job; the averaged paths do not.

The two-part bound (:func:`two_part_bound`), a proved form of the seed paper's ``L - b + 1``
    Let A be a set of tasks closed under ancestors and D the tasks that descend from
    every sink of A. For input l let ``T_l`` be the end of its last job in A; sort the
    inputs by it. Every job of A holding one of the first k inputs ends by ``T_(k)``;
    kept to those k inputs, these jobs form a schedule of A with k inputs in which a job
    of c inputs lasts as long as the job of at least c inputs it came from. And each of
    the other ``L - k + 1`` inputs (the k-th included) left A through some sink, which
    every task of D descends from, so their jobs in D all start after ``T_(k)`` and,
    kept to those inputs, form such a schedule of D with ``L - k + 1`` inputs. Hence

        C >= LB_k(A) + LB_{L-k+1}(D)    for every k in 1 .. L,

    where ``LB_c`` bounds the optimum of c inputs when a job of c' inputs may take the
    least latency of any batch size of at least c' (the *shrunk-batch relaxation*; with
    c = L it is the problem itself). The paper states the case of a uniform batch size
    b, with ``L - b + 1`` inputs left after a load of b; the argument above proves the
    form for every split point k. Parts are bounded by the load LP, the critical path,
    and the work bound of their relaxation.

Pipeline stages (:func:`stage_bound`)
    A stage is a run X of consecutive modules. Its jobs start after the least head of
    its tasks (the fill: the shortest time one input takes to reach the stage) and end
    before C less their least tail (the drain), and the schedule kept to X is a schedule
    of X with all L inputs whatever else shares the devices, so ``C >= fill + LB_L(X) +
    drain``. Modules may share devices, so a stage is charged only its own load, never
    the sum of two stages' loads: that is what the window cuts of the relaxation add,
    per device, with the shares the LP chooses.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from mapsched import checks
from mapsched.bounds.load import load_bound
from mapsched.bounds.simple import critical_path_bound, work_bound
from mapsched.engine.highs import SETUP, RowProgramme
from mapsched.errors import OptionError
from mapsched.model import arguments
from mapsched.model.closure import Closure
from mapsched.model.problem import Objective, Problem, System, Task
from mapsched.model.scales import highs_time_scale
from mapsched.model.validate import floating_bound

__all__ = ["BATCHED_TASKS", "batched_relaxation_bound", "heads_tails", "shrunk", "shrunk_load_bound",
           "stage_bound", "two_part_bound"]

BATCHED_TASKS = 1_000
"""Largest graph :func:`batched_relaxation_bound` takes on: separation multiplies dense
n-by-n reachability matrices (O(n^3) per device and round)."""

PATTERNS = 500
"""Most job patterns per task in the mixed-integer stage of :func:`batched_relaxation_bound`
(51 with three devices, L = 16 and batches of 4, 8, 12, 16); above it that stage is skipped."""


def heads_tails(problem: Problem) -> tuple[np.ndarray, np.ndarray]:
    """Per task, the least time before any of its jobs can start (``head``) and after any
    can end (``tail``): the longest path through its ancestors (descendants) with every
    task at its shortest job, without transfers. One input must cross them, so both
    bound every schedule. O(n m nb + E)."""
    p = problem
    shortest = p.lat.min(axis=(1, 2))
    head = np.zeros(p.n)
    tail = np.zeros(p.n)
    order = p.topo.tolist()
    for i in order:
        head[i] = max((head[q] + shortest[q] for q in p.pred[i]), default=0.0)
    for i in reversed(order):
        tail[i] = max((tail[j] + shortest[j] for j in p.succ[i]), default=0.0)
    return head, tail


class _Batched(RowProgramme):
    """The programme in HiGHS, columns ``x (one per runnable task, device, batch) | a | C | z``."""

    def __init__(self, problem: Problem, deadline: float, limit: float = math.inf) -> None:
        """Jobs and transfers longer than ``limit`` are left out (see :func:`batched_relaxation_bound`)."""
        super().__init__(deadline)
        highspy = self.hs
        p = self.p = problem
        n, m = p.n, p.m
        sizes = p.batch_sizes.astype(float)
        room = p.room
        fits = np.isfinite(p.lat) & (p.lat <= limit) & (sizes[None, None, :] <= p.L) & (
            p.weight[:, None, None] + p.act[:, None, None] * sizes[None, None, :] <= room[None, :, None])
        self.ti, self.tu, self.tk = np.nonzero(fits)
        F = len(self.ti)
        self.t = p.lat[self.ti, self.tu, self.tk]  # job duration of each column
        self.jobs = p.L / sizes[self.tk]  # jobs per unit share
        self.A, self.C, self.Z = F, F + n, F + n + 1
        comm = np.where(np.eye(m, dtype=bool)[None], 0.0, p.comm)  # [e, u, v]
        self.zcols = np.flatnonzero((np.isfinite(comm) & (comm <= limit)).ravel())
        self.zcomm = comm.ravel()[self.zcols]
        # Time in units of 1 / f ms (highs_time_scale): the a and C columns, and every time (add).
        self.f = highs_time_scale(max(float(self.t.max(initial=0.0)), float(self.zcomm.max(initial=0.0))))
        h = self.h
        inf = highspy.kHighsInf
        cols = self.Z + len(self.zcols)
        upper = np.full(cols, inf)
        upper[:F] = 1.0
        h.addVars(cols, np.zeros(cols), upper)
        h.changeColsCost(1, np.array([self.C], dtype=np.int32), np.array([1.0]))
        self.by_task = [np.flatnonzero(self.ti == i) for i in range(n)]
        for i in range(n):
            self.rows.append((1.0, 1.0, dict.fromkeys(self.by_task[i].tolist(), 1.0)))
            self.add(0.0, {self.C: 1.0, **self.minus_end(i)})
        for u in range(m):
            on = np.flatnonzero(self.tu == u)
            self.add(0.0, {self.C: 1.0, **{int(c): -float(self.jobs[c] * self.t[c]) for c in on}})
            if math.isfinite(p.mem[u]):  # in shares of the room
                need = (p.L * p.act + p.weight) / room[u]
                self.rows.append((-inf, 1.0, {int(c): float(need[self.ti[c]]) for c in on}))
        ze, zu, zv = np.unravel_index(self.zcols, (p.E, m, m))
        # zcols ascend, so each edge's columns are one run
        by_edge = np.split(np.arange(len(self.zcols)), np.searchsorted(ze, np.arange(1, p.E))) if p.E else []
        for e, ks in enumerate(by_edge):
            i, j = int(p.src[e]), int(p.dst[e])
            for u in range(m):
                out = {self.Z + k: 1.0 for k in ks[zu[ks] == u].tolist()}
                inn = {self.Z + k: 1.0 for k in ks[zv[ks] == u].tolist()}
                self.rows.append((0.0, 0.0, {**out, **self.minus_share(i, u)}))
                self.rows.append((0.0, 0.0, {**inn, **self.minus_share(j, u)}))
            sends = {self.Z + k: -float(self.zcomm[k]) for k in ks.tolist() if self.zcomm[k] > 0}
            self.add(0.0, {self.A + j: 1.0, **self.minus_end(i), **sends})
        self.flush()

    def minus_share(self, i: int, u: int) -> dict[int, float]:
        """``-sum_k x[i, u, k]``."""
        return {int(c): -1.0 for c in self.by_task[i] if self.tu[c] == u}

    def minus_end(self, i: int) -> dict[int, float]:
        """``-(a[i] + d[i])``."""
        return {self.A + i: -1.0, **{int(c): -float(self.t[c]) for c in self.by_task[i]}}

    def add(self, lo: float, row: dict[int, float]) -> None:
        """The row ``lo <= row`` of times in ms, whose ``a`` and ``C`` columns (coefficient
        1) count in the programme's unit: every other coefficient and ``lo`` times ``f``."""
        f, a, c = self.f, self.A, self.C
        self.rows.append((lo * f, self.hs.kHighsInf, {k: v if a <= k <= c else v * f for k, v in row.items()}))

    def integral_bound(self, most: int) -> float:
        """HiGHS's proved bound, by the deadline, of the programme where every task runs
        one *pattern*: a multiset of jobs (device, batch size) whose sizes sum to L, with
        binary choice ``y[i, p]`` and ``x[i, u, k] = sum_p y[i, p] b_k n_p(u, k) / L``.
        Every schedule runs one pattern per task, so this restricts the shares to those of
        whole schedules (no task half at full batch on two devices), and its memory rows
        count each used device's weights in full. 0 where some task has more than
        ``most`` patterns."""
        p = self.p
        sizes = p.batch_sizes.tolist()
        inf = self.hs.kHighsInf
        per_task = []
        for i in range(p.n):
            cols = self.by_task[i].tolist()
            found = _patterns([sizes[self.tk[c]] for c in cols], p.L, most)
            if not found or len(found) > most:
                return 0.0
            per_task.append([{cols[q]: times for q, times in pattern.items()} for pattern in found])
        first = self.h.getNumCol()
        count = sum(len(f) for f in per_task)
        self.h.addVars(count, np.zeros(count), np.ones(count))
        self.h.changeColsIntegrality(count, np.arange(first, first + count, dtype=np.int32),
                                     np.full(count, self.hs.HighsVarType.kInteger))
        room = p.room
        memory = {u: {} for u in range(p.m) if math.isfinite(p.mem[u])}
        col = first
        for i, found in enumerate(per_task):
            self.rows.append((1.0, 1.0, {col + q: 1.0 for q in range(len(found))}))
            link = {int(c): {} for c in self.by_task[i]}
            for q, pattern in enumerate(found):
                used: dict[int, int] = {}
                for c, times in pattern.items():
                    link[c][col + q] = -sizes[self.tk[c]] * times / p.L
                    u = int(self.tu[c])
                    used[u] = used.get(u, 0) + sizes[self.tk[c]] * times
                for u, inputs in used.items():
                    if u in memory:
                        memory[u][col + q] = float(p.act[i] * inputs + p.weight[i])
            for c, row in link.items():
                self.rows.append((0.0, 0.0, {c: 1.0, **row}))
            col += len(found)
        for u, row in memory.items():
            self.rows.append((-inf, 1.0, {c: v / room[u] for c, v in row.items()}))
        self.flush()
        self.h.setOptionValue("mip_feasibility_tolerance", 1e-7)
        self.h.clearSolver()
        self.run()
        return self.dual_bound()

    def solution(self) -> tuple[np.ndarray, np.ndarray, float]:
        """Per column the share, per task the mean start (ms), and C (ms)."""
        col = np.array(self.h.getSolution().col_value)
        return col[:self.A].clip(0.0, 1.0), col[self.A:self.C] / self.f, float(col[self.C] / self.f)


def _patterns(sizes: list[int], total: int, most: int) -> list[dict[int, int]]:
    """The multisets of indices into ``sizes`` (as index: times) whose sizes sum to
    ``total``; stops after ``most + 1`` of them."""
    found: list[dict[int, int]] = []
    chosen: dict[int, int] = {}

    def grow(left: int, start: int) -> None:
        if len(found) > most:
            return
        if left == 0:
            found.append(dict(chosen))
            return
        for q in range(start, len(sizes)):
            if sizes[q] <= left:
                chosen[q] = chosen.get(q, 0) + 1
                grow(left - sizes[q], q)
                chosen[q] -= 1
                if not chosen[q]:
                    del chosen[q]

    grow(total, 0)
    return found


def _separate(relax: _Batched, reach: np.ndarray, head: np.ndarray, tail: np.ndarray, most: int,
              until: float) -> int:
    """Add the ``most`` most broken path cuts and, per device, the most broken window cut;
    return how many were added. Path cuts as in the latency relaxation: the mean time on
    device v between i and k is ``(R diag(w) R)[i, k]`` with ``w[j] = sum_b t x`` on v.
    Window cuts: for each head threshold h, the best tail threshold by a sweep over the
    tasks sorted by tail. O(m n^3) per round; no device's product is started that would,
    at the pace of those before, end past ``until``."""
    p = relax.p
    n = p.n
    x, a, makespan = relax.solution()
    d = np.bincount(relax.ti, weights=x * relax.t, minlength=n)
    end = a + d
    tol = 1e-7 * max(1.0, makespan)
    span = np.full((n + 1, n + 1), np.inf)
    span[:n, :n] = np.where(reach, a[None, :] - end[:, None], np.inf)
    span[:n, n] = makespan - end
    span[n, :n] = a
    paths = reach.astype(float)
    found: list[tuple[float, int, int, int]] = []
    started = time.perf_counter()
    for v in range(p.m):
        if v and time.perf_counter() + (time.perf_counter() - started) / v > until:
            break
        on = relax.tu == v
        w = np.bincount(relax.ti[on], weights=(x * relax.t)[on], minlength=n)
        load = np.zeros((n + 1, n + 1))
        load[:n, :n] = paths @ (w[:, None] * paths)
        load[:n, n] = paths @ w
        load[n, :n] = w @ paths
        broken = (load - span).ravel()
        flat = np.flatnonzero(broken > tol)
        if len(flat) > most:
            flat = flat[np.argpartition(broken[flat], -most)[-most:]]
        for f in flat.tolist():
            i, k = divmod(f, n + 1)
            found.append((float(broken[f]), i if i < n else -1, k if k < n else -1, v))
    found.sort(reverse=True)
    added = 0
    for _, i, k, v in found[:most]:
        inside = (reach[i] if i >= 0 else True) & (reach[:, k] if k >= 0 else True)
        cols = np.flatnonzero(inside[relax.ti] & (relax.tu == v))
        if not len(cols):
            continue
        row: dict[int, float] = {relax.A + k if k >= 0 else relax.C: 1.0}
        if i >= 0:
            row.update(relax.minus_end(i))
        for c in cols.tolist():
            row[c] = row.get(c, 0.0) - float(relax.t[c])
        relax.add(0.0, row)
        added += 1
    # Window cuts: device v, tasks with head >= h and tail >= q, in [h, C - q].
    for v in range(p.m):
        on = np.flatnonzero(relax.tu == v)
        work = np.bincount(relax.ti[on], weights=(relax.jobs * x * relax.t)[on], minlength=n)
        best, arg = tol, None
        by_tail = np.argsort(-tail)
        for h in np.unique(head).tolist():
            inside = head[by_tail] >= h
            load = np.cumsum(np.where(inside, work[by_tail], 0.0))  # tasks with tail >= tail of the r-th
            # q is the tail of a task in the set: h + q bounds C only if some task has both
            gain = np.where(inside, h + tail[by_tail] + load - makespan, -np.inf)
            r = int(gain.argmax())
            if gain[r] > best:
                best, arg = float(gain[r]), (h, float(tail[by_tail[r]]))
        if arg is not None:
            h, q = arg
            tasks = (head >= h) & (tail >= q)
            cols = on[tasks[relax.ti[on]]]
            relax.add(h + q, {relax.C: 1.0, **{int(c): -float(relax.jobs[c] * relax.t[c]) for c in cols}})
            added += 1
    relax.flush()
    return added


def batched_relaxation_bound(problem: Problem, time_limit: float = 10.0, integral: bool = True,
                             cuts_per_round: int = 200) -> float:
    """Lower bound on the optimal makespan of a throughput problem from the batched
    relaxation of the module docstring, tightened by path and window cuts.

    Parameters
    ----------
    problem : Problem
        Any problem of at most :data:`BATCHED_TASKS` tasks (with ``L == 1`` it is the
        latency relaxation without transfer margins, and weaker).
    time_limit : float
        Seconds in all. Without ``integral`` the separation may use all of them; with it,
        half at most, and the mixed-integer solve the rest. Below :data:`~mapsched.engine.highs.SETUP`
        seconds per column nothing is tried.
    integral : bool
        Also solve the programme with one whole pattern of jobs per task (see
        :meth:`_Batched.integral_bound`) and keep its proved bound.
    cuts_per_round : int
        Path cuts added per round, the most broken first.

    Returns
    -------
    float
        The best LP optimum proved by the deadline, less HiGHS's relative tolerance
        (:func:`mapsched.model.validate.floating_bound`); 0 if none was.

    Notes
    -----
    ``F + n + 1 + E m^2`` columns for F runnable (task, device, batch size) triples; each
    round of separation costs O(m n^3) in dense matrix products.

    Examples
    --------
    >>> from mapsched import Objective
    >>> from mapsched.bounds import load_bound
    >>> from mapsched.generators import stack
    >>> p = stack(modules=2, n=6, objective=Objective("throughput", 8), seed=1)
    >>> batched_relaxation_bound(p, time_limit=10) >= load_bound(p)
    True
    """
    p = arguments.problem(problem)
    if p.n > BATCHED_TASKS:
        raise OptionError(f"batched_relaxation_bound: {p.n} tasks, more than the {BATCHED_TASKS} it takes on")
    time_limit = checks.seconds(time_limit, "time_limit", none=False)
    integral = checks.flag(integral, "integral")
    cuts_per_round = checks.count(cuts_per_round, "cuts_per_round")
    start = time.perf_counter()
    if time_limit < SETUP * (p.n * p.m * len(p.batch_sizes) + p.E * p.m * p.m):
        return 0.0
    separate_until = start + (time_limit / 2 if integral else time_limit)
    # No optimal schedule runs a job or sends data for longer than a valid makespan: left
    # out, they keep an optimum feasible and keep huge coefficients out of HiGHS (see
    # relaxation_bound).
    from mapsched.scheduling.best_list import makespan_cap

    limit = makespan_cap(p, start + time_limit)
    if time.perf_counter() >= start + time_limit:
        return 0.0
    relax = _Batched(p, start + time_limit, limit)
    reach = Closure(p).matrix()
    head, tail = heads_tails(p)
    best = 0.0
    while relax.run():
        best = max(best, relax.value())
        if time.perf_counter() > separate_until or not _separate(relax, reach, head, tail, cuts_per_round,
                                                                 separate_until):
            break
    if integral and time.perf_counter() < relax.deadline:
        best = max(best, relax.integral_bound(PATTERNS))
    return max(0.0, floating_bound(best))


def shrunk(problem: Problem, tasks: Sequence[int], inputs: int) -> Problem:
    """The shrunk-batch relaxation of ``tasks`` with ``inputs`` inputs (module docstring).

    A job of c inputs may run on device u when some batch size ``b >= c`` (at most L)
    does and its memory holds a job of b; it then takes the least latency of those. A
    job of a schedule kept to fewer of its inputs is therefore a job of this problem no
    longer than it was, and needs no more memory. With ``inputs == L`` it is the
    problem restricted to ``tasks``. O(|tasks| m L nb).
    """
    p = problem
    keep = sorted(set(int(i) for i in tasks))
    if inputs == p.L:
        return p.restrict(keep)
    sizes = p.batch_sizes.tolist()
    room = p.room
    out = []
    for i in keep:
        lat = {}
        for u, name in enumerate(p.device_names):
            table = {}
            for c in range(1, inputs + 1):
                ok = [p.lat[i, u, k] for k, b in enumerate(sizes) if c <= b <= p.L and np.isfinite(p.lat[i, u, k])
                      and p.weight[i] + p.act[i] * b <= room[u]]
                if ok:
                    table[str(c)] = float(min(ok))
            if table:
                lat[name] = table
        t = p.tasks[i]
        out.append(Task(t.name, lat, t.weight_bytes, t.input_bytes, t.output_bytes))
    names = {p.task_names[i] for i in keep}
    every = tuple(range(1, inputs + 1))
    system = System(tuple(replace(d, batch_sizes=every) for d in p.system.devices), p.system.links)
    edges = [e for e in p.edges if e.src in names and e.dst in names]
    objective = Objective("throughput", inputs) if inputs > 1 else Objective()
    return Problem(out, edges, system, objective, f"{p.name}[{len(keep)}, {inputs} inputs]")


def shrunk_load_bound(problem: Problem, tasks: Sequence[int], inputs: int) -> float:
    """A lower bound on any schedule of ``tasks`` with ``inputs`` of the L inputs, each job
    kept to those inputs (the shrunk-batch relaxation, :func:`shrunk`): the largest of
    its load LP, critical path and work bound. 0 for no tasks or no inputs."""
    if not len(tasks) or inputs < 1:
        return 0.0
    q = shrunk(problem, tasks, inputs)
    return max(load_bound(q), critical_path_bound(q), work_bound(q))


def two_part_bound(problem: Problem, blocks: Sequence[Sequence[int]], deadline: float = math.inf) -> float:
    """The two-part bound of the module docstring, ``C >= LB_k(A) + LB_{L-k+1}(D)``, with A
    the ancestors' closure of the first t blocks (t = 1 .. len(blocks) - 1) and D the
    tasks that descend from every sink of A, for k in 1, the batch sizes up to L, and L.

    Parameters
    ----------
    problem : Problem
    blocks : sequence of task-index sequences
        Consecutive parts of the graph (a module chain, in order); any order is sound,
        since A is closed under ancestors whatever the blocks hold.
    deadline : float
        ``time.perf_counter()`` time after which no more splits are tried.

    Notes
    -----
    Two shrunk-batch load bounds (each one LP) per split point and k:
    O(len(blocks) nb) LPs.
    """
    p = arguments.problem(problem)
    blocks = arguments.blocks(p, blocks, "blocks")
    deadline = checks.seconds(deadline, "deadline", none=False)
    reach = Closure(p).matrix()
    best = 0.0
    ks = sorted({1, p.L} | {int(b) for b in p.batch_sizes.tolist() if b <= p.L})
    prefix: set[int] = set()
    for block in list(blocks)[:-1]:
        if time.perf_counter() > deadline:
            break
        for i in block:
            prefix |= {int(i)} | set(np.flatnonzero(reach[:, int(i)]).tolist())
        sinks = [i for i in prefix if not any(j in prefix for j in p.succ[i])]
        common = np.flatnonzero(reach[sinks].all(axis=0))
        if not len(common):
            continue
        for k in ks:
            best = max(best, shrunk_load_bound(p, sorted(prefix), k)
                       + shrunk_load_bound(p, common.tolist(), p.L - k + 1))
    return best


def stage_bound(problem: Problem, blocks: Sequence[Sequence[int]], deadline: float = math.inf) -> float:
    """Pipeline stages: for every run X of consecutive blocks, ``C >= min head + LB_L(X) +
    min tail`` over X's tasks (:func:`heads_tails`). Every job of X starts after the least
    head and ends before C less the least tail, and the schedule kept to X is a schedule
    of X with all L inputs, whatever other tasks share its devices; ``LB_L(X)`` is the
    largest of X's load LP, critical path and work bound. The slowest stage of a chain
    (its load) is thus charged its fill and drain.

    Notes
    -----
    One load LP per run of blocks: O(len(blocks)^2) LPs, stopped at ``deadline``.
    """
    p = arguments.problem(problem)
    blocks = [sorted(b) for b in arguments.blocks(p, blocks, "blocks")]
    deadline = checks.seconds(deadline, "deadline", none=False)
    head, tail = heads_tails(p)
    best = 0.0
    for lo in range(len(blocks)):
        tasks: list[int] = []
        for hi in range(lo, len(blocks)):
            if time.perf_counter() > deadline:
                return best
            tasks += blocks[hi]
            best = max(best, float(head[tasks].min() + tail[tasks].min()) + shrunk_load_bound(p, tasks, p.L))
    return best
