"""The seed paper's lower bound over a chain of modules (section IV-B2), made sound in general.

Latency
    Split a task set X into M (its part in the first module, or in the first few
    consecutive ones: see ``span`` in :func:`chain_bound`) and G2 (the rest), joined
    by channel edges from outputs O in M to inputs I in G2. In any schedule:

    * let o* be the output that finishes last, at f*, feeding input w*. Every task of
      ``M_out`` (M's tasks that precede some output) ends by f*, and every task of
      ``dep(w*)`` (w* and what depends on it, in G2) starts after f*, so
      ``C >= OPT(M_out) + min_w OPT(dep(w))``;
    * let w' be the input that starts first, at s*, fed by output o'. Every task of
      ``pre(o')`` (o' and what it depends on, in M) ends by s*, and every task of
      ``G2_in`` (G2's tasks after some input) starts after s*, so
      ``C >= OPT(pre(o')) + OPT(G2_in) >= min_o OPT(pre(o)) + OPT(G2_in)``.

    On single-channel and sdep chains ``M_out = M`` and ``G2_in = G2``, which is the
    paper's statement; on wdep chains a module may end with a task no channel leaves
    from, and only the restricted sets keep the bound sound.

Throughput (L inputs)
    The same two events, now per job. Let J* be the job of an output task that ends
    last, at f*: every job of ``M_out``, for every input, ends by f*, so f* is at least
    ``OPT_L(M_out)``, the optimum of M_out with all L inputs; and each input J* holds
    still crosses the whole of ``dep(w*)`` after f*. Following one such input through
    ``dep(w*)`` gives a schedule of the *single-input relaxation*: one input, every
    task taking the shortest job any batch size gives it on each device (a job may hold
    more inputs than the one followed, and only lasts longer). Symmetrically, the
    first job J' of an input task starts at s* after one of its inputs crossed all of
    ``pre(o')``, and every job of ``G2_in`` starts after s*. So::

        C >= OPT_L(M_out) + min_w OPT_1(dep(w))
        C >= min_o OPT_1(pre(o)) + OPT_L(G2_in)

    The seed paper states a stronger form (``L - b + 1`` inputs cross the channel after
    a load of b) without proof; :func:`mapsched.bounds.two_part_bound` proves a form of it
    for every split point, which :func:`full_bound` adds.

Restricting a schedule to a subset of tasks leaves a schedule of that subset, so OPT of
a subset is bounded by the proved bound of an exact solve of it (or by the simple
bounds); the recursion runs down the chain on G2 and the dependency sets, memoised.
With L inputs, sets get :func:`mapsched.bounds.lower_bound` (the batched relaxation
included) instead of an exact solve: the batched exact models run at most one batch per
task and device, which the format does not ask (a task may run several jobs on one
device, and the validator accepts them), so their proved bound is not one of the
problem (a one-task problem whose device runs batches of 1 only at 3 ms and another a
batch of 3 at 13.7 ms: three jobs of 1 end at 8.9 ms, which ``exact`` calls below its
optimum of 13.7 ms).
"""

from __future__ import annotations

import sys
import time
from concurrent.futures import Executor, Future
from dataclasses import replace

import networkx as nx
import numpy as np

from mapsched import checks
from mapsched.bounds import Bound, SubsetBound, critical_path_bound, lower_bound, work_bound
from mapsched.bounds.batched import BATCHED_TASKS, batched_relaxation_bound, stage_bound, two_part_bound
from mapsched.bounds.memory import memory_binds
from mapsched.bounds.relaxation import RELAXATION_TASKS, relaxation_bound
from mapsched.engine import interrupt
from mapsched.engine.dask import as_executor, bound_result
from mapsched.model import arguments
from mapsched.model.problem import Objective, Problem, System, Task
from mapsched.scheduling.feasibility import NotFound
from mapsched.solve import solve
from mapsched.split.milp_split import pick_chain
from mapsched.split.windows import BOUND_SOLVE_TASKS, window_bound

__all__ = ["EXACT_BOUND_EDGES", "EXACT_BOUND_SHARE", "EXACT_BOUND_SHARE_MEMORY", "EXACT_BOUND_TASKS",
           "RELAXATION_SHARE_MEMORY", "chain_bound", "full_bound", "single_input_relaxation"]

EXACT_BOUND_TASKS = 1_000
"""Most tasks of a latency problem whose whole exact model (``exact``, CP-SAT) :func:`full_bound`
solves for its proved bound; larger ones get only the other rules."""
EXACT_BOUND_EDGES = 4_000
"""Most edges of such a problem (the model's transfer terms grow with the edges)."""
EXACT_BOUND_SHARE = 0.6
"""Share of :func:`full_bound`'s time limit that the exact model gets. Where it proves the
optimum within it, that is the bound and the other rules are skipped; where not, its proved
bound joins theirs. CP-SAT's bound grows slowly with time, so a ``bound`` of T seconds is
about as strong as a T-second ``exact`` solve's bound, and never weaker where that share
suffices to prove the optimum."""

EXACT_BOUND_SHARE_MEMORY = 0.2
""":data:`EXACT_BOUND_SHARE` where memory binds: there the relaxation, which sees memory, proves
1.1-6.3 times the exact model's bound on the real-model graphs of up to 1,000 tasks, and its
mixed-integer stages need the time (:data:`RELAXATION_SHARE_MEMORY`)."""

RELAXATION_SHARE_MEMORY = 0.75
"""Share of the time the exact model and the quick rules leave that the relaxation gets where
memory binds (the other rules share the rest): on the real-model graphs it proved the best
bound on all nine, and the others ended early."""


def single_input_relaxation(problem: Problem) -> Problem:
    """One input, each task on each device as fast as its shortest job of any batch size.

    Following one input of any throughput schedule through its jobs gives a schedule of
    this problem (shorter jobs, the same devices, no more memory), so its optimum is a
    lower bound on the time any single input takes to cross the graph.

    >>> from mapsched import Objective
    >>> from mapsched.generators import random_wired
    >>> p = random_wired(6, objective=Objective("throughput", 8))
    >>> q = single_input_relaxation(p)
    >>> q.L, q.batch_sizes.tolist(), bool(q.dur.min() == p.lat.min())
    (1, [1], True)
    """
    p = problem
    shortest = p.lat.min(axis=2)
    tasks = [Task(t.name, {p.device_names[u]: float(shortest[i, u]) for u in range(p.m) if np.isfinite(shortest[i, u])},
                  t.weight_bytes, t.input_bytes, t.output_bytes) for i, t in enumerate(p.tasks)]
    system = System(tuple(replace(d, batch_sizes=(1,)) for d in p.system.devices), p.system.links)
    return Problem(tasks, p.edges, system, Objective(), f"{p.name}[one input]")


RECURSION_MOST = 20_000
"""Deepest Python recursion :func:`chain_bound` allows itself (a few frames a module, on the
main thread's 8 MB stack); past it the chain bound gives the quick bounds."""


def _solved_bound(problem: Problem, tasks: list[int], time_limit: float) -> float:
    """The proved bound of an exact solve of ``tasks`` alone (on a worker)."""
    return float(solve(problem.restrict(tasks), "exact", time_limit=time_limit, threads=1,
                       lns=False).lower_bound)


class _Recursion:
    """The memoised recursion of one problem; ``one`` is that of its single-input relaxation.
    With an executor, the exact solves run there: each is started as soon as the recursion
    knows it needs it (:meth:`prefetch`), so the solves of the modules down the chain run
    side by side while the recursion descends, and are collected on its way back."""

    def __init__(self, problem: Problem, chain, deadline: float, module_time_limit: float,
                 one: _Recursion | None = None, executor: Executor | None = None) -> None:
        self.p, self.chain, self.deadline, self.limit = problem, chain, deadline, module_time_limit
        self.one = one or self
        self.executor, self.shared = executor, problem
        self.pending: dict[frozenset, Future] = {}
        if hasattr(executor, "share"):  # a cluster gets the problem once per worker
            try:
                self.shared = executor.share(problem)
            except Exception:
                if not getattr(executor, "lost", False):
                    raise
                self.executor = None  # the cluster is gone already: solve here
        self.span = 1
        self.module_of = {i: t for t, mod in enumerate(chain.modules) for i in mod}
        self.exact_memo: dict[frozenset, float] = {}
        self.memo: dict[tuple[frozenset, int], float] = {}
        self.simple = SubsetBound(problem)

    def exact(self, x: frozenset) -> float:
        """Proved bound of a task set: an exact solve of one input, or for sets of more
        than :data:`~mapsched.split.windows.BOUND_SOLVE_TASKS` tasks or with L inputs the
        quick bounds (see the module docstring; the simple ones only once time is out)."""
        if not x:
            return 0.0
        if x not in self.exact_memo:
            left = self.deadline - time.perf_counter()
            value = self.simple(x)
            try:
                if left > 0.05 and (len(x) > BOUND_SOLVE_TASKS or self.p.L > 1):
                    limit = left if self.p.L == 1 else min(self.limit, left)
                    value = max(value, lower_bound(self.p.restrict(sorted(x)), time_limit=limit).value)
                elif left > 0.05 and self.executor is not None:
                    self.prefetch(x)
                    value = max(value, self._collect(x))
                elif left > 0.05:
                    value = max(value, _solved_bound(self.p, sorted(x), min(self.limit, left)))
            except NotFound:  # a list schedule's repair ran out of time: the simple bounds stand
                pass
            self.exact_memo[x] = value
        return self.exact_memo[x]

    def prefetch(self, *sets: frozenset) -> None:
        """Start the exact solves of these task sets on the executor (none without one)."""
        left = self.deadline - time.perf_counter()
        if self.executor is None or left <= 0.05 or self.p.L > 1:  # throughput: no exact solves (see exact)
            return
        for x in sets:
            if x and x not in self.exact_memo and x not in self.pending and len(x) <= BOUND_SOLVE_TASKS:
                self.pending[x] = self.executor.submit(_solved_bound, self.shared, sorted(x), min(self.limit, left))

    def _collect(self, x: frozenset) -> float:
        """The bound of a started solve; 0 (no proof) if it does not come back in time (a
        solve that waited in a queue past the deadline) or the cluster is lost."""
        future = self.pending.pop(x, None)
        if future is None:
            return 0.0
        return bound_result(future, self.executor, max(0.0, self.deadline - time.perf_counter()) + self.limit)

    def bound(self, x: frozenset, s: int) -> float:
        """Lower bound of task set x, all of whose tasks lie in modules s and later."""
        if not x:
            return 0.0
        modules = self.chain.modules
        while s < len(modules) and not (x & set(modules[s])):
            s += 1
        key = (x, s)
        if key not in self.memo:
            self.memo[key] = max(self.split_after(x, s, span) for span in range(1, self.span + 1)
                                 if span == 1 or s + span - 1 < len(modules))
        return self.memo[key]

    def widen(self, span: int) -> None:
        """Let the first part span up to ``span`` modules; exact bounds found so far are kept."""
        for rec in {self, self.one}:
            rec.span, rec.memo = span, {}

    def split_after(self, x: frozenset, s: int, span: int) -> float:
        """The bound of x split into M (its part in modules s .. s+span-1) and G2 (the rest)."""
        p = self.p
        m1 = frozenset(i for i in x if s <= self.module_of[i] < s + span)
        g2 = x - m1
        if not g2:
            return self.exact(m1)
        cross = [(int(p.src[e]), int(p.dst[e])) for e in range(p.E) if int(p.src[e]) in m1 and int(p.dst[e]) in g2]
        pres = []
        if cross:
            outs, ins = {a for a, _ in cross}, {b for _, b in cross}
            sub_m, sub_g = p.graph.subgraph(m1), p.graph.subgraph(g2)
            m_out = frozenset(set().union(*(nx.ancestors(sub_m, o) | {o} for o in outs)))
            pres = [frozenset(nx.ancestors(sub_m, o) | {o}) for o in outs]
            self.prefetch(m_out)
            self.one.prefetch(*pres)
        if self.executor is None:  # the module first: where time runs out, it has had its solve
            best = max(self.exact(m1), self.bound(g2, s + span))
        else:  # its solves run while the recursion goes on down the chain
            self.prefetch(m1)
            rest = self.bound(g2, s + span)
            best = max(self.exact(m1), rest)
        if cross and time.perf_counter() < self.deadline:
            g_in = frozenset(set().union(*(nx.descendants(sub_g, w) | {w} for w in ins)))
            dep = min(self.one.bound(frozenset(nx.descendants(sub_g, w) | {w}), s + span) for w in ins)
            pre = min(self.one.exact(x) for x in pres)
            best = max(best, self.exact(m_out) + dep, self.bound(g_in, s + span) + pre)
        return best


def chain_bound(problem: Problem, chain=None, time_limit: float = 60.0, module_time_limit: float = 2.0,
                span: int = 2, executor: Executor | None = None) -> float:
    """Lower bound on the optimal makespan by the chain recursion (latency or throughput).

    Parameters
    ----------
    problem : Problem
    chain : ModuleChain, optional
        Default: the chain ``split`` would use (:func:`mapsched.split.detect_modules`).
    time_limit : float
        Seconds in all; past it, task sets get only the simple bounds (still sound).
    module_time_limit : float
        Seconds for each exact solve of a task set.
    span : int
        The first part M may hold up to this many consecutive modules. Counting how
        two modules overlap exactly loses less than bounding each alone and joining
        them by the dependency sets. The
        recursion runs with span 1 first, then wider while time is left, and the best
        result counts.
    executor : concurrent.futures.Executor or distributed.Client, optional
        Where the exact solves run (e.g. a :class:`mapsched.engine.dask.DaskExecutor`):
        those of the modules down the chain then run side by side. The bound is the same
        when every solve ends within ``module_time_limit``.

    Notes
    -----
    With span 1, at most two exact solves per module and dependency set (with L
    inputs, and with one); each wider span adds solves of task sets over that many
    modules. Throughput solves are costlier, so the time limit matters more there.
    """
    p = arguments.problem(problem)
    time_limit = checks.seconds(time_limit, "time_limit", none=False)
    checks.seconds(module_time_limit, "module_time_limit", none=False)
    span = checks.count(span, "span")
    executor = as_executor(executor)
    deadline = time.perf_counter() + time_limit
    chain = chain or pick_chain(p, 0, deadline=deadline)
    one = _Recursion(single_input_relaxation(p), chain, deadline, module_time_limit,
                     executor=executor) if p.L > 1 else None
    rec = _Recursion(p, chain, deadline, module_time_limit, one, executor)
    # The recursion goes a few frames deeper per module: 200 modules passed Python's 1,000.
    depth = sys.getrecursionlimit()
    sys.setrecursionlimit(max(depth, min(RECURSION_MOST, 20 * len(chain.modules) + 1000)))
    best = 0.0
    try:
        best = rec.bound(frozenset(range(p.n)), 0)
        for k in range(2, span + 1):
            if time.perf_counter() >= deadline:
                break
            rec.widen(k)
            best = max(best, rec.bound(frozenset(range(p.n)), 0))
    except RecursionError:  # a chain longer still: the quick bounds below stand
        pass
    finally:
        sys.setrecursionlimit(depth)
    for r in {rec, rec.one}:  # solves started for a branch that time cut short
        for future in r.pending.values():
            future.cancel()
    return max(best, critical_path_bound(p), work_bound(p))


def full_bound(problem: Problem, time_limit: float = 60.0, window_time_limit: float = 1.0,
               executor: Executor | None = None) -> Bound:
    """The best bound mapsched proves: for a latency problem of at most
    :data:`EXACT_BOUND_TASKS` tasks and :data:`EXACT_BOUND_EDGES` edges first the proved bound
    of the exact model (``exact``, given :data:`EXACT_BOUND_SHARE` of ``time_limit``, or
    :data:`EXACT_BOUND_SHARE_MEMORY` where memory binds; the
    optimum, and nothing else, where it proves it); then the fast rules of
    :func:`mapsched.bounds.lower_bound`; for latency the relaxation with separated load
    cuts (:func:`~mapsched.bounds.relaxation.relaxation_bound`, on graphs of up to
    :data:`~mapsched.bounds.relaxation.RELAXATION_TASKS` tasks), for throughput the
    batched relaxation with its mixed-integer stage
    (:func:`~mapsched.bounds.batched.batched_relaxation_bound`, up to
    :data:`~mapsched.bounds.batched.BATCHED_TASKS` tasks); the module-chain recursion
    (:func:`chain_bound`; left out where the chain is one module that it would bound by
    the quick rules again); each an equal share of the time that module detection leaves
    (the relaxation :data:`RELAXATION_SHARE_MEMORY` of it where memory binds: the only one
    of these rules that sees it), and the time left to the head-and-tail windows for latency
    (:func:`~mapsched.split.windows.window_bound`, ``window_time_limit`` seconds per
    window), or for throughput to the pipeline stages and the two-part bound over the
    chain's modules (:func:`~mapsched.bounds.batched.stage_bound`,
    :func:`~mapsched.bounds.batched.two_part_bound`); with the rule that won. The
    exact solves of the module-chain recursion and the windows run through ``executor`` if
    given (a :class:`mapsched.engine.dask.DaskExecutor` spreads them over a cluster); the
    relaxations run here.

    Notes
    -----
    What grows faster than the graph is left out of large ones: the relaxation above
    :data:`~mapsched.bounds.relaxation.RELAXATION_TASKS` tasks (O(n^3) separation),
    and exact solves of task sets above :data:`~mapsched.split.windows.BOUND_SOLVE_TASKS`
    tasks in the chain and window rules (the quick bounds stand in). Memory then stays
    within the problem's own arrays, CP-SAT models of at most that many tasks, and
    reachability bit sets of n^2 / 8 bytes: 320 MB for ``mapsched bound`` on a 10,000-task
    random DAG, against 280 MB for the quick bounds alone.

    Examples
    --------
    >>> from mapsched import solve
    >>> from mapsched.generators import stack
    >>> from mapsched.model.validate import meets
    >>> p = stack(modules=2, n=5, seed=1)
    >>> b = full_bound(p, time_limit=10)
    >>> b.rule, meets(solve(p, "exact").makespan, b.value)  # the exact model proves the optimum
    ('exact', True)
    """
    arguments.problem(problem)
    time_limit = checks.seconds(time_limit, "time_limit", none=False)
    checks.seconds(window_time_limit, "window_time_limit", none=False)
    deadline = time.perf_counter() + time_limit
    # each rule within its share; a list schedule's repair (the relaxations' caps) within the whole
    with interrupt.until(deadline):
        latency = problem.L == 1
        solved = []
        if latency and problem.n <= EXACT_BOUND_TASKS and problem.E <= EXACT_BOUND_EDGES:
            # The exact model's own proved bound (its dual bound, or the optimum it proves).
            share = EXACT_BOUND_SHARE_MEMORY if memory_binds(problem) else EXACT_BOUND_SHARE
            result = solve(problem, "exact", time_limit=share * time_limit, lns=False)
            exact = Bound(float(result.lower_bound or 0.0), "exact")
            if result.status == "optimal":  # nothing proves more
                return exact
            solved.append(exact)
        executor = as_executor(executor)  # once for both rules
        chain = pick_chain(problem, 0, deadline=deadline - time_limit * 5 / 6)  # module detection once, for every rule
        # A chain of one module whose bound is the quick bounds of the whole problem would only repeat them.
        chained = len(chain.modules) > 1 or (latency and problem.n <= BOUND_SOLVE_TASKS)
        relaxed = problem.n <= (RELAXATION_TASKS if latency else BATCHED_TASKS)
        # A share each for the relaxation, the chain and the last rules (windows, or stages and two
        # parts), of what is left when it starts (at least 0.01 s: a short limit can be spent by now).
        parts = relaxed + chained + 1

        def share_now() -> float:
            return max(0.01, (deadline - time.perf_counter()) / parts)

        # Throughput: the batched relaxation once, with its mixed-integer stage, not also in lower_bound.
        rules = [lower_bound(problem, share_now() if not latency else max(0.01, deadline - time.perf_counter()),
                             batched=latency)]
        share = share_now()
        if relaxed and latency:
            # Where memory binds the relaxation is the rule that sees it: most of what is left
            seconds = share
            if memory_binds(problem):
                seconds = max(share, RELAXATION_SHARE_MEMORY * (deadline - time.perf_counter()))
            rules.append(Bound(relaxation_bound(problem, time_limit=seconds), "relaxation"))
            share = share_now()
        elif relaxed:
            left = max(0.01, deadline - time.perf_counter() - (chained + 1) * share)
            rules.append(Bound(batched_relaxation_bound(problem, time_limit=left), "batched-relaxation"))
        if chained:
            rules.append(Bound(chain_bound(problem, chain, time_limit=max(0.01, deadline - time.perf_counter() - share),
                                           executor=executor),
                               "module-chain"))
        left = deadline - time.perf_counter()
        if latency and left > 0:
            rules.append(Bound(window_bound(problem, chain, time_limit=left, window_time_limit=window_time_limit,
                                                 executor=executor),
                               "module-windows"))
        elif not latency:
            until = time.perf_counter() + max(0.01, left)
            rules.append(Bound(stage_bound(problem, chain.modules, deadline=until), "pipeline-stages"))
            rules.append(Bound(two_part_bound(problem, chain.modules, deadline=until), "two-part"))
    return max(rules + solved, key=lambda b: b.value)
