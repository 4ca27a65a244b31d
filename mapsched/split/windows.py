"""Head-and-tail windows down the module chain: a latency lower bound that counts how
consecutive modules overlap.

The chain's modules are merged, in order, into blocks of at least ``block`` tasks, and a
window is ``span`` consecutive blocks. In any schedule of a task set X, a task i of a
window W starts only after every task of ``anc(i) & X - W`` has ended, and every task of
``desc(i) & X - W`` runs after i ends. Restricting the schedule to those sets gives
schedules of them, so

    s_i >= OPT(anc(i) & X - W)    and    C - e_i >= OPT(desc(i) & X - W),

and the schedule restricted to W is a schedule of W alone with these release times and
tails. The optimum of that *window problem* (an exact CP-SAT solve, of which only the
proved bound is used) is therefore a lower bound of X's makespan. The releases and tails
need only be lower bounds themselves: they come from the same rule applied to the
smaller sets, recursively, forwards for releases and on the mirrored problem (every
edge and link reversed, which reverses time in every schedule) for tails.

Where the seed paper's recursion (:mod:`.bound`) adds a module's optimum to the least
optimum of what depends on one channel input, a window keeps every task's own release:
on sdep stacks with several channels, where the recursion loses most of each module behind
a channel of one input's dependants, it is the stronger bound.
"""

from __future__ import annotations

import math
import os
import threading
import time
from concurrent.futures import Executor, ThreadPoolExecutor

import numpy as np

from mapsched import checks
from mapsched.bounds import SubsetBound, lower_bound
from mapsched.engine.dask import as_executor, bound_result
from mapsched.errors import OptionError
from mapsched.formulations.cpsat import CpSatModel, run_cpsat
from mapsched.formulations.exact import serial_bound
from mapsched.model import arguments
from mapsched.model.closure import Closure
from mapsched.model.problem import Edge, Link, Problem, System
from mapsched.split.milp_split import pick_chain

__all__ = ["BOUND_SOLVE_TASKS", "mirror", "window_bound"]


def mirror(problem: Problem) -> Problem:
    """The problem with every edge and directed link reversed.

    Reversing time, ``s'_i = C - e_i``, turns every schedule of one into a schedule of the
    other with the same makespan, devices and memory, so both have the same optimum.
    Task and edge indices are kept.

    >>> from mapsched import instances
    >>> p = instances.load("topcuoglu2002")
    >>> q = mirror(p)
    >>> (int(q.src[0]), int(q.dst[0])) == (int(p.dst[0]), int(p.src[0]))
    True
    """
    p = problem
    edges = [Edge(p.task_names[int(p.dst[e])], p.task_names[int(p.src[e])], float(p.nbytes[e])) for e in range(p.E)]
    links = tuple(Link(k.b, k.a, k.bandwidth, k.latency, k.directed) for k in p.system.links)
    return Problem(p.tasks, edges, System(p.system.devices, links), p.objective, f"{p.name}[mirrored]")


BOUND_SOLVE_TASKS = 2_000
"""Most tasks in a set that the bounds of :mod:`mapsched.split` solve exactly (a window here,
a piece of a module in :func:`~mapsched.split.chain_bound`); larger sets get the quick bounds.
The CP-SAT model of 10,000 tasks is too large to build and solve within a short limit (and
too large in memory), and on random DAGs of thousands of tasks a short CP-SAT solve proves no
more than the load LP."""


def window_lower_bound(problem: Problem, tasks: frozenset, release: dict[int, float], tail: dict[int, float],
                       time_limit: float) -> float:
    """Proved lower bound of the makespan of ``tasks`` alone, task i starting no sooner
    than ``release[i]`` and followed by ``tail[i]`` (ms; absent means 0).

    The CP-SAT latency model of the subproblem with ``s_i >= r_i`` and ``e_i + q_i <= C``,
    both rounded down to ticks, which keeps its bound a bound of the real problem
    (:mod:`mapsched.formulations.cpsat`). One CP-SAT worker: windows run side by side.
    Building the model counts within ``time_limit``; 0 if it runs out first."""
    deadline = time.perf_counter() + time_limit
    idx = sorted(tasks)
    sub = problem.restrict(idx)
    r = np.array([release.get(i, 0.0) for i in idx])
    q = np.array([tail.get(i, 0.0) for i in idx])
    # A serial schedule started at the latest release meets every constraint by then.
    try:
        model = CpSatModel(sub, float(r.max() + serial_bound(sub) + q.max()), deadline=deadline)
    except TimeoutError:
        return 0.0
    res = model.res
    for k in range(sub.n):
        if r[k] > 0:
            model.add(model.s[k] >= math.floor(r[k] * res))
        if q[k] > 0:
            model.add(model.end[k] + math.floor(q[k] * res) <= model.C)
    # One worker with CP-SAT's default, LP-guided search: its LP-free one (a one-thread solve's,
    # formulations.cpsat.portfolio) proved a wrong optimum of such a window, 6.96698 ms where
    # the same model admits 6.95094 (stack(3, 4, 1, seed=64), tests/split/test_windows.py).
    solver, _, _ = run_cpsat(model, max(0.0, deadline - time.perf_counter()), 1, 0, False, workers=1)
    bound = solver.best_objective_bound / model.res
    return max(0.0, bound) if math.isfinite(bound) else 0.0


class _Heads:
    """``value(X)``: a lower bound on the makespan of task set X, by the window that ends X
    (its last ``span`` blocks), with releases from this rule on the smaller sets; memoised."""

    def __init__(self, problem: Problem, blocks: list[frozenset], span: int, limit: float, deadline: float,
                 ancestors: Closure, executor: Executor | None = None) -> None:
        """``ancestors``: the closure of the reversed graph, whose descendants of a task are
        its ancestors in ``problem``. ``executor``: where the window solves run (default here)."""
        self.p, self.span, self.limit, self.deadline = problem, span, limit, deadline
        self.executor, self.shared = executor, problem
        if hasattr(executor, "share"):  # a cluster gets the problem once per worker, not once per window
            try:
                self.shared = executor.share(problem)
            except Exception:
                if not getattr(executor, "lost", False):
                    raise
                self.executor = None  # the cluster is gone already: solve the windows here
        self.block = {i: b for b, blk in enumerate(blocks) for i in blk}
        self.ancestors = ancestors
        # Only the windows' entries need their ancestors as sets: all of them would take
        # some 80 bytes per ordered pair of tasks (3.5 GB at 10,000 random tasks).
        self.before: dict[int, frozenset] = {}
        self.memo: dict[frozenset, float] = {}
        self.lock = threading.Lock()  # windows run in threads; two may find the same set, both soundly
        self.quick = SubsetBound(problem)

    def solvable(self, tasks: frozenset) -> bool:
        """Whether a window of these tasks gets a solve: not too large, and time is left."""
        return len(tasks) <= BOUND_SOLVE_TASKS and self.deadline - time.perf_counter() >= 0.05

    def window(self, tasks: frozenset, release: dict[int, float], tail: dict[int, float]) -> float:
        left = self.deadline - time.perf_counter()
        if left < 0.05:
            return 0.0
        if self.executor is None:
            return window_lower_bound(self.p, tasks, release, tail, min(self.limit, left))
        future = self.executor.submit(window_lower_bound, self.shared, tasks, release, tail, min(self.limit, left))
        return bound_result(future, self.executor)

    def releases(self, within: frozenset, window: frozenset) -> dict[int, float]:
        """Releases of the window's entries (tasks with a parent outside it); the others
        follow from them by the precedences inside, and release 0 is always valid."""
        return {i: self.value((self.ancestors_of(i) & within) - window) for i in window
                if any(q not in window for q in self.p.pred[i])}

    def ancestors_of(self, i: int) -> frozenset:
        with self.lock:
            if i not in self.before:
                self.before[i] = frozenset(self.ancestors.descendants(i).tolist())
            return self.before[i]

    def value(self, x: frozenset) -> float:
        if not x:
            return 0.0
        with self.lock:
            if x in self.memo:
                return self.memo[x]
        last = max(self.block[i] for i in x)
        w = frozenset(i for i in x if self.block[i] > last - self.span)
        left = self.deadline - time.perf_counter()
        if left > 0:
            sub = self.p if len(x) == self.p.n else self.p.restrict(sorted(x))
            found = lower_bound(sub, time_limit=left).value
        else:  # past the deadline, the quick bounds without building the restriction (a set every 20-70 ms)
            found = self.quick(x)
        if self.solvable(w):
            found = max(found, self.window(w, self.releases(x, w), {}))
        with self.lock:
            # A subset's bound holds for every superset: restriction again.
            value = self.memo[x] = max([found] + [v for y, v in self.memo.items() if y <= x])
        return value


def blocks_of(chain, block: int) -> list[frozenset]:
    """The chain's modules merged in order until each block has ``block`` tasks or more."""
    out: list[set] = []
    for mod in chain.modules:
        if out and len(out[-1]) < block:
            out[-1] |= set(mod)
        else:
            out.append(set(mod))
    return [frozenset(b) for b in out]


def window_bound(problem: Problem, chain=None, time_limit: float = 60.0, window_time_limit: float = 1.0,
                 span: int = 2, block: int = 10, threads: int | None = None, executor: Executor | None = None) -> float:
    """Lower bound on the optimal latency makespan by head-and-tail windows (module docstring).

    Parameters
    ----------
    problem : Problem
        A latency problem (``L == 1``).
    chain : ModuleChain, optional
        Default: the chain ``split`` would use (:func:`mapsched.split.detect_modules`).
    time_limit : float
        Seconds in all; past it, sets get the quick bounds only (still sound).
    window_time_limit : float
        Seconds for each window's CP-SAT solve. Longer solves raise the bound a little on
        some stacks at a much larger total time; with one second the windows of a 20-module
        stack fit in ``mapsched bound``'s default minute.
    span : int
        Blocks per window.
    block : int
        Least number of tasks per block: chains of many small modules (k-edge
        components of wide channels) are merged so that a window spans whole layers.
    threads : int, optional
        Windows solved at once, in threads, each by one CP-SAT worker (default: every
        core; with ``executor``, its ``slots`` if it has them). The two ends of the chain run
        side by side, then the windows between.
    executor : concurrent.futures.Executor or distributed.Client, optional
        Where the window solves run (e.g. a :class:`mapsched.engine.dask.DaskExecutor`);
        the recursion that sets their releases stays here. The bound is the same.

    Returns
    -------
    float
        The best of: the window ending the graph (releases only), the window starting it
        (tails only, on the mirrored problem) and every window in between (both), and the
        quick bounds of :func:`mapsched.bounds.lower_bound`.

    Notes
    -----
    One window solve per distinct set of ancestors (and descendants) that the windows'
    entries have outside their window, plus one per window position; each is capped by
    ``window_time_limit``. Windows of many tasks make each solve weaker rather than
    longer: in trials on a 10-module 4-channel sdep stack, blocks of 22 tasks, or windows
    that also took in the ancestors not all their entries share, lowered the bound.
    Windows of more than :data:`BOUND_SOLVE_TASKS` tasks get no solve. Reachability is
    kept as bit sets, n^2 / 8 bytes each way (12.5 MB at 10,000 tasks), and only the
    windows' entries get their ancestors as sets.

    Examples
    --------
    >>> from mapsched.generators import stack
    >>> from mapsched.bounds import lower_bound
    >>> p = stack(modules=3, n=6, channels=2, variant="sdep", seed=1)
    >>> window_bound(p, time_limit=10) >= lower_bound(p).value
    True
    """
    p = arguments.problem(problem)
    if p.L > 1:
        raise OptionError("window_bound: latency problems only (objective.batch 1); "
                         "use chain_bound for throughput")
    executor = as_executor(executor)
    threads = threads or getattr(executor, "slots", None) or os.cpu_count() or 1
    span, block, threads = (checks.count(v, name) for name, v in (("span", span), ("block", block),
                                                                      ("threads", threads)))
    time_limit = checks.seconds(time_limit, "time_limit", none=False)
    checks.seconds(window_time_limit, "window_time_limit", none=False)
    deadline = time.perf_counter() + time_limit
    blocks = blocks_of(chain or pick_chain(p, 0, deadline=deadline), block)
    sizes = [len(b) for b in blocks]
    if min(sum(sizes[lo:lo + span]) for lo in range(max(1, len(blocks) - span + 1))) > BOUND_SOLVE_TASKS:
        # No window gets a solve (a graph with no module structure has one large module),
        # so only the quick bounds are left: no mirror and no closures to build.
        return lower_bound(p, time_limit=max(deadline - time.perf_counter(), 1e-3)).value
    everything = frozenset(range(p.n))
    # The mirror keeps task indices and reverses every edge: its descendants are p's ancestors.
    q = mirror(p)
    ahead = _Heads(p, blocks, span, window_time_limit, deadline, Closure(q), executor)
    behind = _Heads(q, blocks[::-1], span, window_time_limit, deadline, Closure(p), executor)

    def between(lo: int) -> float:
        w = frozenset().union(*blocks[lo:lo + span])
        if not ahead.solvable(w):
            return 0.0
        return ahead.window(w, ahead.releases(everything, w), behind.releases(everything, w))

    # CP-SAT lets go of the GIL while it solves, so threads use the cores.
    with ThreadPoolExecutor(threads) as pool:
        ends = list(pool.map(lambda h: h.value(everything), (ahead, behind)))
        middle = list(pool.map(between, range(1, len(blocks) - span)))
    return max(ends + middle)  # each end counts the quick bounds of the whole graph
