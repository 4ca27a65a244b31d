"""Batched throughput (section IV-A with batching) as a CP-SAT model.

One model in one module (its variables, cuts, hints and the greedy realisation of an
answer read the same tables), kept whole although it passes 600 lines.

For each task i and device u there is at most one batch: ``b[i, u, k]`` chooses its
size k among the sizes u runs (memory allowing), ``y[i, u, l]`` says input l is in
it, and an optional interval of variable length ``sum_k t[i, u, k] b[i, u, k]``
starting at ``s[i, u]`` runs it. Each input of each task is on exactly one device,
and ``sum_l y[i, u, l] == sum_k k b[i, u, k]``, so the batch size is the number of
inputs. Memory counts activations per input and weights once per device used.
``AddNoOverlap`` per device.

Precedences through links
    Per edge e = (i, j) and devices (u, v), one literal ``z[e, u, v]`` says some
    input goes from batch (i, u) to batch (j, v): ``y[i, u, l] and y[j, v, l] =>
    z[e, u, v]`` for every l (clauses), and ``z[e, u, v] => s[j, v] >= end[i, u] +
    com(e, u, v)`` (``z`` false where no link joins u and v). Setting ``z`` where no
    input passes only adds a constraint, so the optimum is that of the per-input
    form ``y[i, u, l] and y[j, v, l] => s[j, v] >= ...``; the model states E m^2
    enforced linear constraints instead of E m^2 L.

Symmetry between inputs
    Relabelling the inputs by one permutation, applied to every task at once, maps
    a schedule to one with the same batches, starts and makespan (every rule treats
    inputs alike; batches, starts, memory and the device plugins of
    :mod:`mapsched.model.symmetry`, which read only per-(task, device) counts, uses and
    loads, do not change). Sorting the inputs by their *signature*, the devices of
    their jobs task after task in topological order, is such a relabelling, so some
    optimum has signatures in lexicographic order: ``sig(l) <=_lex sig(l + 1)``
    (``input_symmetry``, on by default). This breaks every input permutation that
    changes a schedule; inputs of equal signature stay interchangeable, but then any
    order of them is the same schedule. The plugins' device relabellings commute with
    input relabellings, so both orders can be imposed at once: make a device plugin
    hold, then sort the inputs, which changes nothing the plugin reads.

Counts in place of inputs (``counts=True``): a relaxation, then a check
    Replacing the ``y`` by per-edge flows, ``f[e, u, v]`` inputs going from batch (i, u)
    to batch (j, v) with ``sum_v f[e, u, v] == n[i, u]`` and ``sum_u f[e, u, v] == n[j, v]``,
    and ``z[e, u, v] <=> f[e, u, v] > 0``, is exact on trees. A task with two parents
    needs per-input agreement between the two edges' flows (a joint distribution with
    given pairwise marginals), which counts cannot express on graphs with reconvergent
    paths, such as every random-wired module. Every per-input schedule gives flows, so
    the counts model is a relaxation: its optimum is a lower bound on the per-input one,
    and where its optimal solution can be *realised*, inputs given to batches with those
    counts and starts so that every input's transfers are among those the starts allow,
    that realisation is optimal too. The flows only matter through their support, so they
    are counted in groups of :func:`group_size` inputs: a transportation problem whose
    margins are multiples of g that has a solution on a support has one in multiples of g
    on it (its polytope's vertices are integral after dividing by g). The model has no
    inputs to order, and O(E m^2) flows in place of O(n m L + E m^2 L) literals and clauses,
    so its proofs have a smaller tree to exhaust.
    :meth:`read` realises each solution greedily, task by task in topological order, as a
    matching of the inputs (in classes of equal devices so far) to the task's batches;
    :meth:`realise` is the exact check (the per-input model with the counts and starts
    fixed). ``exact`` uses the relaxation for small models and falls back to the per-input
    model where the check fails (:mod:`.exact`).

Redundant constraints (load cuts for batches)
    Per task and device, ``head[i, u]``: the earliest start of a batch of i on u,
    and ``tail[i, u]``: the least time the rest of the graph needs after it, both with
    each task's shortest batch on each device and the transfers between devices.
    Every input of batch (i, u) passes each ancestor of i on some device, so
    ``s[i, u] >= head[i, u]``, and ``C >= end[i, u] + tail[i, u]`` when the batch
    exists. Per device, if it runs any batch, its batches fit between the earliest
    head and the makespan less the least tail of the tasks it can run:
    ``sum_i dur[i, u] <= C - min_i head[i, u] - min_i tail[i, u]``, and, whether used
    or not, ``sum_i dur[i, u] <= C`` (which the LP relaxation sees in full); and all
    devices' work fits in m makespans. These are the latency model's device windows and load
    cuts taken over the whole graph (the latency cuts between two tasks do not carry
    over: a task's batches on several devices have no single start and end).

    *Priced work.* The load LP's optimal dual prices the devices, ``lam[u] >= 0`` summing to
    1 (:func:`mapsched.bounds.load.device_prices`), and every schedule has ``C >= sum_u
    lam[u] load[u]``. Per task, its priced work ``sum_u lam[u] dur[i, u]`` is at least that
    of its cheapest *pattern*, one batch size (or none) per device summing to L. Stated with
    each task's priced work as a variable whose lower bound is that pattern's, the sum gives
    the LP-free search the load bound from the root, and raises it as batches are chosen;
    the per-device cuts above see a device's load only once its batches are, so without it
    the LP-free search, which does the proving, sees the load bound only deep in its tree.

Times are integer ticks rounded down, and jobs and transfers past the horizon are
shortened to just beyond it, as in :mod:`.cpsat`, so the bound is sound.

Context (the pipelined walk of ``split``)
    ``busy`` adds fixed intervals to the devices' no-overlap constraints (jobs placed
    already), and :meth:`CpSatBatched.release` adds per-input release times; inputs
    are then not interchangeable, and the caller passes ``input_symmetry=False``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import networkx as nx
import numpy as np
from ortools.sat.python import cp_model

from mapsched.bounds.load import device_prices
from mapsched.errors import ProblemError
from mapsched.formulations.common import Plugin, apply_plugins, capped
from mapsched.formulations.cpsat import horizon_ticks, run_cpsat
from mapsched.model.owners import batch_options
from mapsched.model.problem import Edge, Objective, Problem, System, Task
from mapsched.model.scales import default_resolution, memory_row, start_ticks
from mapsched.model.schedule import Schedule

__all__ = ["CpSatBatched", "group_size", "grouped", "realise_greedily", "search_form"]


PRICE_SCALE = 1000
"""Integer scale of the device prices in :meth:`CpSatBatched._priced_work`; any non-negative
weights keep the constraint valid, so rounding them loses nothing but a little strength."""

_NO_PATTERN = np.iinfo(np.int64).max // 4
"""No pattern holds that many inputs (in :meth:`CpSatBatched._priced_work`)."""

SMALL_TASKS = 40
"""Tasks up to which :meth:`CpSatBatched.solve` runs two workers on two or three threads,
and above which ``exact`` builds the search form (:func:`search_form`)."""


def search_form(problem: Problem) -> bool:
    """Whether ``exact`` builds the model for search rather than proof: above
    :data:`SMALL_TASKS` tasks, no link literals (``links=False``), no signature order
    (``input_symmetry=False``) and no hint of the start schedule. O(1).

    On a stack of a hundred tasks, a complete hint of ``bheft``'s schedule keeps CP-SAT at
    that schedule (its improvements are single ticks of rounding slack), while CP-SAT's own
    first solutions, found by its LP-guided workers, lead its neighbourhood searches far
    beyond it; the link literals and the signature order each delay those first solutions
    and so end the search lower. Small models keep all three:
    they are proved, and the hint's incumbent and the smaller symmetric model serve that.
    """
    return problem.n > SMALL_TASKS


class CpSatBatched:
    """The CP-SAT model of a throughput problem (``problem.L > 1``).

    Parameters
    ----------
    input_symmetry : bool
        Order the inputs' signatures (see the module docstring); only where inputs are
        interchangeable (no :meth:`release` times).
    busy : list of list of (int, int), optional
        Per device, fixed ``(start, length)`` intervals in ticks that its jobs avoid.
    links : bool
        State precedences through one link literal per (edge, device pair) (see the module
        docstring); False states them per input, as two-literal enforced constraints.
    deadline : float
        A ``time.perf_counter()`` time: building raises ``TimeoutError`` past it. The
        per-input form of a 73-task model on 30 devices with L=16 (1.5 million enforced
        constraints) takes longer to build than a time limit may have left.
    counts : bool
        The counts relaxation (module docstring): per-edge flows in place of per-input
        literals, no signature order, no :meth:`release`.
    lower_bound : float
        A makespan (ms) that no schedule of the model beats, such as the counts relaxation's.

    Notes
    -----
    O(n m (|sizes| + L) + E m^2 L) variables and constraints, O(E m^2) of them linear
    (O(E m^2 L) with ``links=False``); O(n m |sizes| + E m^2) with ``counts``.

    Link literals and signature order serve proofs on small models, but on large ones,
    where the search is for schedules, they slowed CP-SAT's first LP-guided solutions
    (see :func:`search_form`).
    """

    def __init__(self, problem: Problem, upper_bound: float, resolution: float | None = None,
                 plugins: tuple[Plugin, ...] = (), input_symmetry: bool = True,
                 busy: Sequence[Sequence[tuple[int, int]]] | None = None, links: bool = True,
                 deadline: float = math.inf, counts: bool = False, lower_bound: float = 0.0) -> None:
        self.problem = problem

        def on_time() -> None:
            if time.perf_counter() > deadline:
                raise TimeoutError(f"CpSatBatched: past the deadline while building the model of {problem.n} tasks")

        self.res = res = resolution or default_resolution(upper_bound)
        self.model = m = cp_model.CpModel()
        self.horizon = horizon = horizon_ticks(upper_bound, res)
        # Jobs and transfers past the horizon shortened to just beyond it, as in CpSatModel.
        p = capped(problem, (horizon + 2) / res)
        L = p.L
        self.C = m.new_int_var(min(math.floor(lower_bound * res), horizon), horizon, "C")
        self.b: dict[tuple[int, int, int], Any] = {}
        self.x: dict[tuple[int, int], Any] = {}
        self.n: dict[tuple[int, int], Any] = {}
        self.dur: dict[tuple[int, int], Any] = {}
        self.s: dict[tuple[int, int], Any] = {}
        self.end: dict[tuple[int, int], Any] = {}
        self.y: dict[tuple[int, int, int], Any] = {}
        self.present: dict[tuple[int, int], Any] = {}
        self.z: dict[tuple[int, int, int], Any] = {}
        self.f: dict[tuple[int, int, int], Any] = {}
        self.counts = counts
        self.eq: dict[tuple[int, int], Any] = {}
        self.ticks: dict[tuple[int, int], dict[int, int]] = {}
        self.size: dict[tuple[int, int], tuple[Any, Any]] = {}
        self.used: dict[int, Any] = {}
        self.earliest: dict[tuple[int, int], int] = {}
        intervals: list[list[Any]] = [[] for _ in range(p.m)]
        options: dict[tuple[int, int], list[int]] = {}
        head, tail = _windows(p, res)
        for i in range(p.n):
            on_time()
            for u in range(p.m):
                sizes = batch_options(p, i, u)
                if not sizes:
                    continue
                options[i, u] = sizes
                bs = {k: m.new_bool_var(f"b{i}_{u}_{k}") for k in sizes}
                self.b.update({(i, u, k): v for k, v in bs.items()})
                m.add_at_most_one(bs.values())
                x = self.x[i, u] = sum(bs.values())
                self.n[i, u] = sum(k * v for k, v in bs.items())
                ticks = self.ticks[i, u] = {k: int(math.floor(p.lat[i, u, p.batch_pos[k]] * res)) for k in sizes}
                self.dur[i, u] = sum(ticks[k] * v for k, v in bs.items())
                reach = bool(np.isfinite(head[i, u]) and np.isfinite(tail[i, u]))
                self.earliest[i, u] = min(int(head[i, u]), horizon) if reach else 0
                s = self.s[i, u] = m.new_int_var(self.earliest[i, u], horizon, f"s{i}_{u}")
                present = self.present[i, u] = m.new_bool_var(f"on{i}_{u}")
                m.add(x == present)
                if not reach:  # no input can reach u, or leave it, for this task
                    m.add(present == 0)
                size = m.new_int_var(0, max(ticks.values()), f"d{i}_{u}")
                m.add(size == self.dur[i, u])
                end = m.new_int_var(0, horizon + max(ticks.values()), f"e{i}_{u}")
                self.size[i, u] = (size, end)
                # The interval's end variable, not s + dur: precedences between two variables are
                # what CP-SAT's scheduling propagators take up, so the proofs are shorter.
                self.end[i, u] = end
                intervals[u].append(m.new_optional_interval_var(s, size, end, present, f"iv{i}_{u}"))
                m.add(end + (int(tail[i, u]) if reach else 0) <= self.C).only_enforce_if(present)
                if counts:
                    continue
                for lo in range(L):
                    self.y[i, u, lo] = m.new_bool_var(f"y{i}_{u}_{lo}")
                    m.add_implication(self.y[i, u, lo], present)
                m.add(sum(self.y[i, u, lo] for lo in range(L)) == self.n[i, u])
            if counts:
                m.add(sum(self.n[i, u] for u in range(p.m) if (i, u) in self.x) == L)
                continue
            for lo in range(L):
                m.add_exactly_one(self.y[i, u, lo] for u in range(p.m) if (i, u) in self.x)
        self.intervals = intervals
        for u in range(p.m):
            fixed = [m.new_fixed_size_interval_var(a, d, f"busy{u}_{k}")
                     for k, (a, d) in enumerate((busy or [[]] * p.m)[u]) if d > 0]
            m.add_no_overlap(intervals[u] + fixed)
            on = [i for i in range(p.n) if (i, u) in self.x]
            ok = [i for i in on if np.isfinite(head[i, u]) and np.isfinite(tail[i, u])]
            # Unconditional, so the LP relaxation sees it (the enforced cut below is only big-M
            # there): without it CP-SAT's LP-guided first solutions came far later on 102 tasks.
            m.add(sum(self.dur[i, u] for i in on) <= self.C)
            if ok:  # a used device's batches lie between the earliest head and the makespan less the least tail
                used = self.used[u] = m.new_bool_var(f"used{u}")
                for i in on:
                    m.add_implication(self.present[i, u], used)
                room = min(int(head[i, u]) for i in ok) + min(int(tail[i, u]) for i in ok)
                m.add(sum(self.dur[i, u] for i in on) + room <= self.C).only_enforce_if(used)
            if math.isfinite(p.mem[u]):
                # CP-SAT sums the row over every batch-size literal
                most = sum(p.act[i] * k + p.weight[i] for i in on for k in options[i, u])
                # each input's activation is one term: L per task at most, and the weights
                sizes, room = memory_row(np.concatenate([p.act[on], p.weight[on]]), p.mem[u], most,
                                         (p.L + 1) * len(on))
                m.add(cp_model.LinearExpr.weighted_sum([self.n[i, u] for i in on] + [self.x[i, u] for i in on],
                                                       sizes) <= room)

        # All devices together: their work fits in m makespans.
        m.add(sum(self.dur.values()) <= p.m * self.C)

        g = group_size(p)
        for e in range(p.E):
            on_time()
            i, j = int(p.src[e]), int(p.dst[e])
            if counts:
                self._flows(p, e, i, j, res, g)
                continue
            for u in range(p.m):
                for v in range(p.m):
                    if (i, u) not in self.x or (j, v) not in self.x:
                        continue
                    c = p.comm[e, u, v]
                    if not links:  # per input: y[i, u, l] and y[j, v, l] => s[j, v] >= end[i, u] + com
                        for lo in range(L):
                            both = [self.y[i, u, lo], self.y[j, v, lo]]
                            if not math.isfinite(c):
                                m.add_bool_or([both[0].Not(), both[1].Not()])
                            else:
                                m.add(self.s[j, v] >= self.end[i, u] + int(math.floor(c * res))).only_enforce_if(both)
                        continue
                    z = self.z[e, u, v] = m.new_bool_var(f"z{e}_{u}_{v}")  # some input goes from batch (i, u) to (j, v)
                    for lo in range(L):
                        m.add_bool_or([self.y[i, u, lo].Not(), self.y[j, v, lo].Not(), z])
                    if not math.isfinite(c):
                        m.add(z == 0)
                    else:
                        m.add(self.s[j, v] >= self.end[i, u] + int(math.floor(c * res))).only_enforce_if(z)

        on_time()
        # Tasks that only one device runs have the same owner for every input: left out.
        self.order = [int(t) for t in p.topo if sum((int(t), u) in self.x for u in range(p.m)) > 1]
        self.sorted_inputs = input_symmetry and not counts
        if self.sorted_inputs:
            self._sort_inputs()
        apply_plugins(self, plugins)
        self.priced = self._priced_work(p)
        m.minimize(self.C)

    def _priced_work(self, p: Problem) -> list[tuple[Any, dict[int, int]]]:
        """The load LP's bound, stated for the LP-free search (module docstring): per task,
        ``W[i] = sum_u w[u] dur[i, u]`` for the LP's device prices w (scaled to integers), no
        less than its cheapest pattern (a batch size per device, summing to L), and
        ``sum_i W[i] <= (sum_u w[u]) C``. Returns each task's ``(W[i], w on its devices)``.
        O(n m L |sizes|) for the patterns, by a knapsack over the devices."""
        m = self.model
        # The prices of the problem as given: its capped times (``p``) make a slow device look
        # more useful than it is, and such prices slow the proofs.
        w = np.round(PRICE_SCALE * device_prices(self.problem)).astype(np.int64).tolist()
        out = []
        for i in range(p.n):
            on = {u: w[u] for u in range(p.m) if (i, u) in self.x}
            # Least priced work holding c inputs on the devices so far, in exact integers (floats
            # would round sums past 2**53 ticks, upwards too); _NO_PATTERN plus costs stays in range.
            cheapest = np.full(p.L + 1, _NO_PATTERN, dtype=np.int64)
            cheapest[0] = 0
            for u in on:
                was = cheapest.copy()
                for k, t in self.ticks[i, u].items():
                    np.minimum(cheapest[k:], was[:p.L + 1 - k] + on[u] * t, out=cheapest[k:])
            most = sum(on[u] * max(self.ticks[i, u].values()) for u in on)
            least = int(cheapest[p.L]) if cheapest[p.L] < _NO_PATTERN else 0
            priced = m.new_int_var(min(least, most), most, f"W{i}")
            m.add(priced == sum(on[u] * self.dur[i, u] for u in on))
            out.append((priced, on))
        m.add(sum(v for v, _ in out) <= sum(w) * self.C)
        return out

    def _flows(self, p: Problem, e: int, i: int, j: int, res: float, g: int) -> None:
        """Edge e = (i, j) in the counts relaxation: flows in groups of ``g`` inputs
        (:func:`group_size`) between the two tasks' batches, and the link literal of each flow
        that carries any. ``p``: the problem with times capped, as the model states them. O(m^2)."""
        m = self.model
        out: dict[int, list[Any]] = {}
        into: dict[int, list[Any]] = {}
        for u in range(p.m):
            for v in range(p.m):
                c = p.comm[e, u, v]
                if (i, u) not in self.x or (j, v) not in self.x or not math.isfinite(c):
                    continue
                f = self.f[e, u, v] = m.new_int_var(0, p.L // g, f"f{e}_{u}_{v}")
                z = self.z[e, u, v] = m.new_bool_var(f"z{e}_{u}_{v}")
                m.add(f <= p.L // g * z)
                m.add(f >= z)
                m.add(self.s[j, v] >= self.end[i, u] + int(math.floor(c * res))).only_enforce_if(z)
                out.setdefault(u, []).append(f)
                into.setdefault(v, []).append(f)
        for u in range(p.m):
            if (i, u) in self.x:
                m.add(g * sum(out.get(u, [])) == self.n[i, u])
        for v in range(p.m):
            if (j, v) in self.x:
                m.add(g * sum(into.get(v, [])) == self.n[j, v])

    def _owner(self, i: int, lo: int) -> Any:
        return sum(u * self.y[i, u, lo] for u in range(self.problem.m) if (i, u) in self.x)

    def _sort_inputs(self) -> None:
        """``sig(l) <=_lex sig(l + 1)`` over the tasks in topological order (module docstring):
        ``eq[l, k]`` says the signatures of l and l + 1 agree on the first k + 1 tasks.
        O(n L) literals and O(n L m) constraint terms."""
        m, p = self.model, self.problem
        if not self.order:
            return
        for lo in range(p.L - 1):
            prev = None  # agreement so far (None: the empty prefix, true)
            for k, i in enumerate(self.order):
                a, b = self._owner(i, lo), self._owner(i, lo + 1)
                if k == len(self.order) - 1:
                    m.add(a <= b).only_enforce_if(*([prev] if prev is not None else []))
                    break
                eq = self.eq[lo, k] = m.new_bool_var(f"eq{lo}_{k}")
                lits = [prev] if prev is not None else []
                m.add(a <= b).only_enforce_if(lits)
                m.add(a < b).only_enforce_if([*lits, eq.Not()])
                m.add(a == b).only_enforce_if(eq)
                if prev is not None:
                    m.add_implication(eq, prev)
                prev = eq

    def release(self, i: int, u: int, lo: int, ticks: int) -> None:
        """Input ``lo`` reaches batch (i, u) at ``ticks`` at the earliest (negative: never)."""
        if self.counts:
            raise ValueError("CpSatBatched.release: the counts relaxation has no inputs to release")
        if (i, u) not in self.x:
            return
        if ticks < 0:
            self.model.add(self.y[i, u, lo] == 0)
        else:
            self.model.add(self.s[i, u] >= ticks).only_enforce_if(self.y[i, u, lo])

    def minimize_with_priced_work(self) -> None:
        """Minimise the makespan plus the priced work, ``C + sum_u lam[u] load[u]`` (``lam`` the
        load LP's device prices, summing to 1), in place of the makespan alone: among windows
        that end alike, the one that leaves the devices less of the load bound to carry.
        The pipelined walk's steps use it for the modules they commit (:mod:`mapsched.split.pipeline`)."""
        self.model.minimize(PRICE_SCALE * self.C + sum(v for v, _ in self.priced))

    # ModelView for plugins (times in ticks)
    def use(self, i: int, u: int) -> Any:
        return self.x.get((i, u), 0)

    def count(self, i: int, u: int) -> Any:
        return self.n.get((i, u), 0)

    def busy(self, u: int) -> Any:
        return sum(d for (i, uu), d in self.dur.items() if uu == u)

    def add(self, constraint: Any) -> None:
        self.model.add(constraint)

    def hint(self, schedule: Schedule) -> None:
        """Hint a schedule, its inputs relabelled in signature order when the model orders
        them, so that the hint satisfies it."""
        p = self.problem
        self.hint_jobs([(p.task_index[j.task], p.device_index[j.device], sum(1 << lo for lo in j.inputs),
                         start_ticks(j.start, self.res)) for j in schedule.jobs])

    def hint_jobs(self, jobs: list[tuple[int, int, int, int]]) -> None:
        """Hint jobs ``(task, device, input mask, start in ticks)``, as :meth:`hint`: every
        variable, the link literals and the signature agreements included, so that CP-SAT
        finds the hint complete and starts from it (a partial hint of this model left it
        stuck at the start on 102-task stacks). O(E m^2 L + n m L + L log L n)."""
        p, m = self.problem, self.model
        m.clear_hints()
        # A job of a size the model has no option for (hypothesis found one in a pipelined step's
        # model) is left out: a hint is no constraint, and CP-SAT takes part of one.
        at = {(i, u): (mask, s) for i, u, mask, s in jobs if mask.bit_count() in self.ticks.get((i, u), ())}
        label = list(range(p.L))
        owner = np.zeros((p.n, p.L), dtype=np.int64)
        for (i, u), (mask, _) in at.items():
            owner[i, [lo for lo in range(p.L) if mask >> lo & 1]] = u
        if self.sorted_inputs:
            rank = sorted(range(p.L), key=lambda lo: tuple(owner[self.order, lo].tolist()))
            for new, old in enumerate(rank):
                label[old] = new
            owner[:, label] = owner.copy()
        held = {(i, u, label[lo]) for (i, u), (mask, _) in at.items() for lo in range(p.L) if mask >> lo & 1}
        for (i, u, k), var in self.b.items():
            m.add_hint(var, (i, u) in at and at[i, u][0].bit_count() == k)
        for (i, u, lo), var in self.y.items():
            m.add_hint(var, (i, u, lo) in held)
        length = {k: self.ticks[k][at[k][0].bit_count()] for k in self.s if k in at}  # ticks of each hinted batch
        for (i, u), s in self.s.items():
            on = (i, u) in at
            m.add_hint(self.present[i, u], on)
            start = at[i, u][1] if on else self.earliest[i, u]
            m.add_hint(s, start)
            m.add_hint(self.size[i, u][0], length.get((i, u), 0))
            m.add_hint(self.size[i, u][1], start + length.get((i, u), 0))
        for (e, u, v), z in self.z.items():
            i, j = int(p.src[e]), int(p.dst[e])
            m.add_hint(z, any((i, u, lo) in held and (j, v, lo) in held for lo in range(p.L)))
        g = group_size(p)
        for (e, u, v), f in self.f.items():  # exact where the hinted jobs hold whole groups
            i, j = int(p.src[e]), int(p.dst[e])
            m.add_hint(f, sum((i, u, lo) in held and (j, v, lo) in held for lo in range(p.L)) // g)
        for (lo, k), eq in self.eq.items():
            tasks = self.order[:k + 1]
            m.add_hint(eq, bool(np.array_equal(owner[tasks, lo], owner[tasks, lo + 1])))
        for u, used in self.used.items():
            m.add_hint(used, any(uu == u for _, uu in at))
        for i, (priced, on) in enumerate(self.priced):
            m.add_hint(priced, sum(w * length.get((i, u), 0) for u, w in on.items()))
        m.add_hint(self.C, self.horizon)

    def solve(self, time_limit: float | None, threads: int, seed: int = 0, log: bool = False,
              on_solution: Any = None, detect_symmetry: bool = True,
              first_within: float | None = None) -> dict[str, Any]:
        """Solve; returns ``jobs`` [(task, device, mask, start ms)], ``bound`` (ms), ``optimal``, ``log``,
        and with ``counts`` the ``counts`` solution (batch sizes and starts, for :meth:`realise`).
        ``first_within`` (with ``on_solution``): give up after that many seconds without a solution.

        With two or three threads, a model of at most :data:`SMALL_TASKS` tasks runs two
        workers instead of the portfolio's three: the LP-free search, which proves, and the
        thread CP-SAT keeps for first solutions and neighbourhood searches: on models this
        small the LP-free search proves sooner with a core of its own. The LP-guided search
        of the portfolio proves the load LP's bound but not the optimum, and as a second full
        worker it did not shorten the proofs."""
        small = 2 <= threads < 4 and self.problem.n <= SMALL_TASKS
        solver, status, text = run_cpsat(self, time_limit, threads, seed, log, on_solution,
                                         detect_symmetry=detect_symmetry, workers=2 if small else None,
                                         subsolvers=("no_lp",) if small else (), first_within=first_within)
        out: dict[str, Any] = {"jobs": None, "log": text, "optimal": status == cp_model.OPTIMAL,
                               "bound": solver.best_objective_bound / self.res}
        if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            out["jobs"] = self.read(solver)
            if self.counts:
                out["counts"] = self._counts(solver)
        return out

    def realise(self, counts: tuple[dict[tuple[int, int], int], dict[tuple[int, int], int]],
                time_limit: float | None, threads: int, seed: int = 0) -> list[tuple[int, int, int, float]] | None:
        """The exact check of a counts solution (``solve()["counts"]``): the per-input model with
        its batch sizes and starts fixed, so that only the inputs are free. Its jobs, or None
        where no realisation exists or none is found in ``time_limit``. O(model size) to
        build; the solve is a feasibility search."""
        sizes, starts = counts
        full = CpSatBatched(self.problem, self.horizon / self.res, self.res)
        for (i, u), n in full.n.items():
            full.model.add(n == sizes.get((i, u), 0))
            if (i, u) in sizes:
                full.model.add(full.s[i, u] == starts[i, u])
        return full.solve(time_limit, threads, seed)["jobs"]

    def _counts(self, solver: Any) -> tuple[dict[tuple[int, int], int], dict[tuple[int, int], int]]:
        """A counts solution's batch sizes and starts (ticks), per (task, device) that runs."""
        sizes = {k: solver.value(v) for k, v in self.n.items() if solver.value(v)}
        return sizes, {k: solver.value(self.s[k]) for k in sizes}

    def read(self, solver: Any) -> list[tuple[int, int, int, float]] | None:
        """The solution's jobs ``(task, device, mask, start ms)``; with ``counts``, its greedy
        realisation (:func:`realise_greedily`), or None where that fails."""
        if self.counts:
            sizes, starts = self._counts(solver)
            ends = {k: solver.value(self.end[k]) for k in sizes}
            masks = realise_greedily(self.problem, sizes, starts, ends, self.res)
            return None if masks is None else [(i, u, mask, starts[i, u] / self.res) for (i, u), mask in masks.items()]
        jobs = []
        for (i, u) in self.x:
            mask = sum(1 << lo for lo in range(self.problem.L) if solver.boolean_value(self.y[i, u, lo]))
            if mask:
                jobs.append((i, u, mask, solver.value(self.s[i, u]) / self.res))
        return jobs


def realise_greedily(p: Problem, sizes: dict[tuple[int, int], int], starts: dict[tuple[int, int], int],
                     ends: dict[tuple[int, int], int], res: float) -> dict[tuple[int, int], int] | None:
    """Inputs for the batches of a counts solution (module docstring): per batch (task,
    device) with ``sizes`` inputs, starting and ending at ``starts`` and ``ends`` (ticks), an
    input mask such that every input's transfer from each parent's batch to the task's
    arrives in time (in ticks, as the model states it); or None where this greedy fails.

    Task by task in topological order, the inputs, in classes of equal devices so far, are
    matched to the task's batches by a maximum flow (class to batch where every parent's
    batch of the class reaches it in time; batch capacities the sizes). A failure does not
    show that no realisation exists: earlier tasks' choices are not revisited.
    O(n (n L + m^2 L)) besides the flows on O(L + m) nodes (an input's class is its devices
    for all n tasks)."""
    owner = np.full((p.n, p.L), -1, dtype=np.int64)
    by_task: dict[int, dict[int, int]] = {}
    for (t, u), k in sizes.items():
        by_task.setdefault(t, {})[u] = k
    for i in p.topo.tolist():
        batches = by_task.get(i, {})
        parents = [(e, int(p.src[e])) for e in p.in_edges[i]]
        classes: dict[tuple[int, ...], list[int]] = {}
        for lo in range(p.L):
            classes.setdefault(tuple(owner[:, lo].tolist()), []).append(lo)
        g = nx.DiGraph()
        for c, (sig, members) in enumerate(classes.items()):
            g.add_edge("s", ("c", c), capacity=len(members))
            for v in batches:
                if all(math.isfinite(p.comm[e, sig[q], v])
                       and starts[i, v] >= ends[q, sig[q]] + math.floor(float(p.comm[e, sig[q], v]) * res)
                       for e, q in parents):
                    g.add_edge(("c", c), ("b", v), capacity=p.L)
        for v, k in batches.items():
            g.add_edge(("b", v), "t", capacity=k)
        value, flow = nx.maximum_flow(g, "s", "t")
        if value < p.L:
            return None
        for c, members in enumerate(classes.values()):
            rest = iter(members)
            for (_, v), amount in flow[("c", c)].items():
                for _ in range(int(amount)):
                    owner[i, next(rest)] = v
    return {(i, u): sum(1 << lo for lo in range(p.L) if owner[i, lo] == u) for (i, u) in sizes}


def _windows(p: Problem, res: float) -> tuple[np.ndarray, np.ndarray]:
    """Per task and device, in ticks (rounded down as the model's data are): ``head[i, u]``,
    the earliest start of a batch of i on u, and ``tail[i, u]``, the least time after it
    ends, with each task's shortest batch per device and the transfers; ``inf`` where no
    input can take that way. O(E m^2 + n m |sizes|)."""
    with np.errstate(invalid="ignore"):
        short = np.floor(np.where(np.isfinite(p.lat), p.lat, np.inf).min(axis=2) * res)  # (n, m)
        hop = np.where(np.eye(p.m, dtype=bool)[None], 0.0, np.floor(p.comm * res))  # (E, u, v)
    head = np.zeros((p.n, p.m))
    tail = np.zeros((p.n, p.m))
    for i in p.topo.tolist():
        for e in p.in_edges[i]:
            q = int(p.src[e])
            head[i] = np.maximum(head[i], np.min((head[q] + short[q])[:, None] + hop[e], axis=0))
    for i in reversed(p.topo.tolist()):
        for e in p.out_edges[i]:
            j = int(p.dst[e])
            tail[i] = np.maximum(tail[i], np.min(hop[e] + (short[j] + tail[j])[None, :], axis=1))
    return head, tail


def group_size(p: Problem) -> int:
    """The largest g dividing L and every batch size up to L. O(m |sizes|)."""
    return math.gcd(p.L, *(b for d in p.system.devices for b in d.batch_sizes if b <= p.L))


def grouped(p: Problem, g: int) -> Problem | None:
    """``p`` with L / g inputs, each a group of g of ``p``'s (inputs l g .. l g + g - 1):
    batch sizes and activation bytes scaled by g, transfers unchanged; or None where that
    is no problem (a device with no batch size up to L). Every schedule of it is one of
    ``p`` once each group is expanded. O(n m |sizes| + E)."""
    devices = tuple(replace(d, batch_sizes=tuple(b // g for b in d.batch_sizes if b <= p.L and b % g == 0))
                    for d in p.system.devices)
    tasks = []
    for i, t in enumerate(p.tasks):
        lat = {}
        for u, d in enumerate(p.system.devices):
            times = {b // g: float(p.lat[i, u, p.batch_pos[b]]) for b in d.batch_sizes
                     if b <= p.L and b % g == 0 and math.isfinite(p.lat[i, u, p.batch_pos[b]])}
            if times:
                lat[d.name] = times
        tasks.append(Task(t.name, lat, t.weight_bytes, t.input_bytes * g, t.output_bytes * g))
    out = {t.name: t.output_bytes for t in p.tasks}
    edges = [Edge(e.src, e.dst, out[e.src] if e.bytes is None else e.bytes) for e in p.edges]
    try:
        return Problem(tasks, edges, System(devices, p.system.links), Objective(p.objective.kind, p.L // g),
                       f"{p.name}/{g}")
    except ProblemError:
        return None
