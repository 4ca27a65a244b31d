"""``split``: MILP-SPLIT (Ghannane & Abdelfattah, section IV-B).

One algorithm in one module (the module solves, the dynamic programme and the stitching
share the module chain's tables), kept whole although it passes 600 lines.

Every module of the chain (see :mod:`.modules`) is solved exactly for every pair
``(u, v)`` of devices holding its input and its output, and the module solutions
are combined by dynamic programming::

    dp(M_t, u, v) = min_{u', v'} [dp(M_{t-1}, u', v') + com(t, v', u)] + OPT(M_t, u, v)

The chosen module schedules are stitched into one mapping and one priority order
(module after module), and the whole graph is re-timed by the decoder, so the
result always passes the validator (jobs of consecutive modules may then overlap,
which only helps).

When it is exact
    With one channel between consecutive modules, every task of module t
    (t > 0) a descendant of the module's input and every task of module t
    (t < last) an ancestor of its output, module t cannot start before module
    t - 1 ends, and the recursion is exact when the modules are solved exactly.
    Random-wired modules, with one input and one output node and every task on a
    path between them, satisfy this. The same recursion over the modules' proved
    bounds then gives a proved lower bound. Memory is a global sum over modules: if
    the stitched mapping overflows a device it is repaired (and no longer exact).
    With several channels all channel ends of a module are held on one device for
    the recursion, which makes it a heuristic, with no bound of its own; each module
    is then also solved with its channel ends free, those schedules are stitched
    too, and the better of the two stitchings wins.

Batched throughput
    The same decomposition with the batched exact model per module; a module's
    input and output tasks then run all L inputs as one batch on their device. Held
    that way, a channel end is a barrier (no input leaves module t before all have),
    so the recursion adds module makespans although consecutive modules may pipeline
    inputs: it is a heuristic there, and the re-timing recovers only part of the
    overlap. So first (with ``pipeline`` > 0 and CP-SAT, in at most half of a time
    limit) the chain is walked module by module with the state pipelining needs,
    device occupancy and the per-input release profile (:mod:`.pipeline`, whose
    docstring says where that walk is exact). Under a time limit, the exact model of
    the whole graph then gets a few seconds from the walk's schedule (``PROBE_SECONDS``):
    where it gains over ``PROBE_GAIN`` by itself, the polish below gets the time of a
    second walk; otherwise the chain is walked again in at most half of what is left,
    each step hinted with the first walk's jobs. The best of these is one more
    candidate. Without a time limit the module recursion runs as well, so
    ``split`` is never worse than without the walk; with one, the recursion is left
    out once a walk has a schedule, and the rest of the time goes to the whole-graph
    polish below, first on the model with inputs in groups, then on the full one. On
    identical servers, another candidate cuts the chain into one stage per server
    (:mod:`.stages`), solved first with half of what is left of a time limit.

Whatever the recursion gives, ``split`` returns its warm start (``heft``, or
``bheft`` for throughput) instead when that is better.

With a time limit, the time left once the schedule is stitched goes to the exact
model of the whole graph, started from that schedule (:func:`~mapsched.formulations.
exact.improve`): on a few modules it often finds a better schedule, and its proved
bound joins the result's. A schedule that split's own recursion proved optimal is
returned as it is.

Subproblems are independent. By default they are solved one after another in this
process, each by CP-SAT over all the threads, or for latency one below four (on eight
cores or more, by a pool of one process per four cores); any
``concurrent.futures.Executor`` works as well (those of dask.distributed and Ray
included) if it can pickle a :class:`Problem`. A
:class:`mapsched.engine.dask.DaskExecutor` (``--dask``) gets the problem once per
worker and builds the subproblems there; if its scheduler is lost,
split returns the best schedule of the subproblems solved by then. Through any executor,
a task carries as many subproblems as take ``chunk_seconds`` at their mean time so far
(one while none is back, and the last few one a task), so that the milliseconds a
cluster spends per task stay a small share of subproblems of tens of milliseconds; the
solutions are those of one subproblem a task.
"""

from __future__ import annotations

import itertools
import math
import multiprocessing
import os
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass

import networkx as nx
import numpy as np

from mapsched.bounds import critical_path_bound, lower_bound, work_bound
from mapsched.engine import registry
from mapsched.engine.dask import as_executor, task_threads
from mapsched.engine.registry import Option, register
from mapsched.errors import InfeasibleError, ProblemError
from mapsched.formulations.common import retime_jobs
from mapsched.formulations.exact import improve
from mapsched.model.owners import batch_options, owner_from_counts
from mapsched.model.problem import Edge, Problem, Task
from mapsched.model.schedule import Schedule
from mapsched.model.symmetry import find_symmetry, symmetry_plugins
from mapsched.model.validate import meets
from mapsched.scheduling.best_list import LIST_SECONDS, best_start, seconds_per_pass
from mapsched.scheduling.decoder import Decoder, owner_counts
from mapsched.scheduling.feasibility import NotFound, feasible_counts
from mapsched.solve import BOUND_SHARE, MAX_THREADS, SolveContext, solve
from mapsched.split.modules import ModuleChain, detect_modules
from mapsched.split.pipeline import grouped_improve
from mapsched.split.pipeline import pipeline as pipelined
from mapsched.split.rolling import rolling
from mapsched.split.stages import server_stages

__all__ = ["solve_module", "split"]


@dataclass(frozen=True)
class ModuleSolution:
    makespan: float
    bound: float
    jobs: tuple[tuple[str, str, tuple[int, ...], float], ...]  # (task, device, inputs, start)


def solve_module(sub: Problem, backend: str, time_limit: float | None, symmetry: str = "none",
                 threads: int = 1, until: float | None = None) -> ModuleSolution | None:
    """Solve one module subproblem exactly (in a worker, or here); None if it has no schedule,
    or if ``until`` (a ``time.time()``, which unlike ``perf_counter`` other machines share)
    has passed. A solve started late gets only the time left until then. ``threads`` 0: the
    task's share of its worker (:func:`mapsched.engine.dask.task_threads`; 1 elsewhere)."""
    threads = threads or task_threads()
    if until is not None:
        left = until - time.time()
        if left <= 0:
            return None
        time_limit = left if time_limit is None else min(time_limit, left)
    options = {"backend": backend, "symmetry": symmetry}
    try:
        if sub.L > 1:
            # Batched models prove no bound of their own (see mapsched.formulations.exact), so
            # solve()'s batched relaxation, first, is what can stop the search early.
            r = solve(sub, "exact", time_limit=time_limit, threads=threads, **options)
            return ModuleSolution(r.makespan, float(r.lower_bound or 0.0), _jobs(r))
        # A latency module goes to exact itself: solve()'s bound LPs, first, cost more than
        # CP-SAT's proof of a module this small. Here the LPs run
        # only where the solver leaves the module unproved, in the share of the time limit
        # that solve() gives them, and add to its bound as there.
        method = registry.get("exact")
        ctx = SolveContext(None if time_limit is None else (1 - BOUND_SHARE) * time_limit,
                           np.random.default_rng(0), threads, fast_bound=max(critical_path_bound(sub), work_bound(sub)))
        r = method.fn(sub, ctx, **method.parse_options(options))
    except InfeasibleError:
        return None
    bound = max(r.lower_bound or 0.0, ctx.fast_bound)
    if not meets(r.makespan, bound):
        bound = max(bound, lower_bound(sub, None if time_limit is None else BOUND_SHARE * time_limit).value)
    return ModuleSolution(r.makespan, float(bound), _jobs(r))


def _jobs(r: Schedule) -> tuple[tuple[str, str, tuple[int, ...], float], ...]:
    return tuple((j.task, j.device, j.inputs, j.start) for j in r.jobs)


def _holds(p: Problem, i: int, u: int) -> bool:
    """Whether device u can run all of task i's inputs as one job (a held channel end)."""
    return bool(p.can_run[i, u]) if p.L == 1 else p.L in batch_options(p, i, u)


def _ruled_out(p: Problem, chain: ModuleChain, t: int, u: int | None, v: int | None) -> bool:
    """Whether module t has no schedule with its inputs held on device u and outputs on v
    (None: free) for a reason seen without building the subproblem: a held task or node
    channel that device cannot run, or a task both input and output held on two devices.
    O(module) against the milliseconds of a build, or of a cluster's task."""
    tasks = set(chain.modules[t])
    ins = chain.inputs(p, t) if t > 0 and u is not None else []
    outs = chain.outputs(p, t) if v is not None else []
    if any(i in tasks and not _holds(p, i, u) for i in ins) or any(not _holds(p, i, v) for i in outs):
        return True
    node = chain.nodes[t - 1] if t > 0 else None
    return bool(set(ins) & set(outs) and u != v) or (node is not None and u is not None and not _holds(p, node, u))


def _ends(key: tuple) -> tuple[int, int | None, int | None]:
    """A subproblem key ``(t, u, v)`` as module and held devices; ``(t, "free", None)``: none held."""
    t, u, v = key
    return (t, None, None) if u == "free" else (t, u, v)


def _subproblem(p: Problem, chain: ModuleChain, t: int, u: int | None, v: int | None) -> Problem | None:
    """Module t with its inputs held on device u and outputs on v (None: free)."""
    if _ruled_out(p, chain, t, u, v):
        return None
    tasks = list(chain.modules[t])
    ins = chain.inputs(p, t) if t > 0 and u is not None else []
    outs = chain.outputs(p, t) if v is not None else []
    fix = {i: u for i in ins if i in tasks} | {i: v for i in outs}
    try:
        sub = p.restrict(tasks, fix, name=f"{p.name}.M{t}")
    except ProblemError:  # e.g. a held task cannot take all L inputs on that device
        return None
    node = chain.nodes[t - 1] if t > 0 else None
    if node is None or u is None:
        return sub
    # A node channel opens this module with a zero-time copy of the articulation point.
    name = f"{p.task_names[node]}~copy"
    copy = Task(name, {p.device_names[u]: {b: 0.0 for b in p.tasks[node].latency[p.device_names[u]]}})
    edges = [Edge(name, e.dst, e.bytes) for e in p.edges if e.src == p.task_names[node]
             and p.task_index[e.dst] in chain.modules[t]]
    try:
        return Problem((copy, *sub.tasks), (*edges, *sub.edges), sub.system, sub.objective, sub.name)
    except ProblemError:  # the copy cannot take all L inputs on that device
        return None


def _is_exact(p: Problem, chain: ModuleChain) -> bool:
    """One channel, and within each module every task after its input and before its output."""
    if p.L > 1 or chain.width > 1 or any(len(c) > 1 for c in chain.channels):
        return False
    for t, mod in enumerate(chain.modules):
        g = p.graph.subgraph(mod)
        if t > 0:
            (i,) = chain.inputs(p, t)
            below = nx.descendants(p.graph if chain.nodes[t - 1] is not None else g, i) | {i}
            if not set(mod) <= below:
                return False
        if t < len(chain.modules) - 1:
            (o,) = chain.outputs(p, t)
            if set(nx.ancestors(g, o)) | {o} != set(mod):
                return False
    return True


def _com(p: Problem, chain: ModuleChain, t: int, v_prev: int, u: int) -> float:
    """Cost of moving from module t-1's outputs on v_prev to module t's inputs on u."""
    if chain.nodes[t - 1] is not None:
        return 0.0 if u == v_prev else math.inf
    return max(float(p.comm[e, v_prev, u]) for e in chain.channels[t - 1])


@register(
    "split",
    "MILP-SPLIT: exact module solves combined by dynamic programming",
    objectives=("latency", "throughput"),
    exact=True,
    initial=True,
    options=(
        Option("channels", int, 0, "most edges between consecutive modules (0: the fewest that leave no "
               "module too large for a quick exact solve)"),
        Option("backend", str, "cpsat", "exact solver for the modules", choices=("cpsat", "highs")),
        Option("module_time_limit", float, 10.0, "seconds per module subproblem", positive=True),
        Option("symmetry", str, "none", "symmetry breaking in the module solves (see exact)"),
        Option("orbits", bool, True, "solve one (input, output) device pair per orbit of identical devices"),
        Option("workers", int, 0, "processes for the subproblems (0: one per 4 cores; 1: in this process)"),
        Option("executor", object, None, "a concurrent.futures.Executor or a distributed.Client for the "
               "subproblems", cli=False),
        Option("chunk_seconds", float, 0.2, "through an executor: worker seconds a task of several "
               "subproblems aims at, sized by the subproblems' times so far (0: one subproblem a task, all "
               "submitted at once)", most=1e6),
        Option("module_threads", int, 0, "solver threads per subproblem (0: the threads shared among the "
               "processes, for latency one where that is two or three; with an executor, 1, or on a Dask "
               "cluster the worker's share of its host)", most=MAX_THREADS),
        Option("window", int, 2, "latency with several channels: modules solved at once in the rolling "
               "stitching (0: the seed paper's independent module solves)"),
        Option("step_time_limit", float, 0.5, "rolling stitching: seconds per step (its solves rarely "
               "improve after half a second)", positive=True),
        Option("pipeline", int, 1, "throughput: modules solved at once in the pipelined walk, which carries "
               "device occupancy and per-input release times from module to module (0: no walk)"),
        Option("pipeline_step_limit", float, 2.0, "pipelined walk: seconds per step", positive=True),
    ),
)
def split(problem: Problem, ctx: SolveContext, channels: int, backend: str, module_time_limit: float,
          symmetry: str, orbits: bool, workers: int, executor: Executor | None, chunk_seconds: float,
          module_threads: int, window: int, step_time_limit: float, pipeline: int,
          pipeline_step_limit: float) -> Schedule:
    """MILP-SPLIT; see the module docstring. O(T m^2) module solves (fewer with
    identical devices: one per orbit) and O(T m^3) DP steps; with the rolling
    stitching, T solves of ``window`` modules instead."""
    p = problem
    executor = as_executor(executor)
    # Never worse than the heuristic it starts from: the heuristic recursion can be far
    # off (batched modules are added, not pipelined), time may run out before the table
    # fills, and holding channel ends on one device can rule out every combination. A solve's
    # initial placement is that start when it is better.
    start = best_start(p, ctx.initial, ctx)  # with ctx: not all four schedulers where time is short
    if ctx.expired():  # the start took it all (bheft alone on 5,000 tasks and 16 inputs)
        start.log += "split: the time limit was reached by the warm start, which is returned\n"
        return start
    chain = pick_chain(p, channels, deadline=time.perf_counter() + ctx.remaining() / 4)
    exact_chain = _is_exact(p, chain)
    # A pass over the whole graph (one of the warm start's list schedulers): what a
    # stitching's re-timing, or the set-up of a subproblem as large, takes again. Where none
    # ran (no time for one), HEFT's time as LIST_SECONDS estimates it (a quarter of its allowance).
    one_pass = seconds_per_pass(p)
    if one_pass is None:
        one_pass = LIST_SECONDS * p.n * p.m / 4
    if not exact_chain and p.L == 1 and window > 0 and backend == "cpsat":
        s = rolling(p, chain, window, start.makespan, step_time_limit, ctx)
        if s is not None:
            s = min(s, start, key=lambda c: c.makespan)
            ctx.improved(s.makespan)
            s.log += f"rolling stitching, {window} module(s) per step\n{chain.describe(p)}\n"
            return _polish(p, s, backend, ctx)
    sym = find_symmetry(p)
    symmetry_plugins(problem, symmetry)  # reject a bad criterion before any work
    walked = None
    if p.L > 1 and pipeline > 0 and backend == "cpsat":  # half of the time limit at most
        until = None if ctx.time_limit is None else ctx.elapsed() + ctx.remaining() / 2
        walked = pipelined(p, chain, pipeline, start.makespan, pipeline_step_limit, ctx, start, until, group=True)
        if walked is not None:
            ctx.improved(walked.makespan)
            log = f"pipelined walk, {pipeline} module(s) per step: makespan {walked.makespan:.9g}\n"
            # A second walk gets half of what is left now: the probe's time comes from the polish.
            half = None if ctx.time_limit is None else ctx.remaining() / 2
            began = ctx.elapsed()
            probed = _probe(p, walked, backend, ctx)
            if probed.makespan < walked.makespan:
                log += (f"a {ctx.elapsed() - began:.1f} s probe of the whole graph's model: "
                        f"makespan {probed.makespan:.9g}\n")
                ctx.improved(probed.makespan)
            if probed.makespan < (1.0 - PROBE_GAIN) * walked.makespan:
                # The whole graph's model improves on the walk by itself (the wdep stacks): a second
                # walk would take its time and gain less, so the polish gets that time.
                walked = probed
                log += "its polish gets the time of a second walk\n"
            else:
                walked = min(walked, probed, key=lambda c: c.makespan)
                # Again, hinted with the first walk, steps half as long: each step starts from the
                # first walk's jobs under the release profile of the second.
                until = None if half is None else ctx.elapsed() + min(half, ctx.remaining())
                again = pipelined(p, chain, pipeline, walked.makespan, pipeline_step_limit / 2, ctx, walked, until,
                                  group=True)
                if again is not None:
                    log += f"second walk, hinted with the first: makespan {again.makespan:.9g}\n"
                    if again.makespan < walked.makespan:
                        walked = again
                        ctx.improved(walked.makespan)
            walked.log += log
    staged = None
    if p.L > 1:  # first: on servers that each hold a share of the model, often the best candidate
        stages = server_stages(p, chain, sym, lambda sub, limit: solve_module(sub, backend, limit, symmetry,
                                                                             ctx.threads), module_time_limit, ctx)
        if stages is not None:
            staged = _stitch(p, *stages, ctx)
            if staged is not None:
                staged.log += f"{len(stages[0])} stage(s) over identical servers\n"
    T, m = len(chain.modules), p.m
    ins_dev = [[None] if t == 0 else list(range(m)) for t in range(T)]
    out_dev = [[None] if t == T - 1 else list(range(m)) for t in range(T)]
    # Identical devices make OPT(M_t, u, v) = OPT(M_t, g u, g v) for every symmetry g:
    # solve one pair per orbit and relabel its schedule for the others.
    pairs = [(u, v) for t in range(T) for u in ins_dev[t] for v in out_dev[t]]
    orbit = sym.orbits(pairs, m) if orbits else {q: (q, np.arange(m)) for q in pairs}
    keys = [(t, u, v) for t in range(T) for u in ins_dev[t] for v in out_dev[t] if orbit[u, v][0] == (u, v)]
    if not exact_chain:  # each module with free channel ends too, first: together they always stitch
        keys = [(t, "free", None) for t in range(T)] + keys
    if walked is not None and ctx.time_limit is not None:
        # The recursion's time goes to the walks and the polish: its candidates add module
        # makespans, which a pipelined walk overlaps, so they do not beat the walk.
        keys = []
    # Subproblems are built as they are handed out: on many devices building them all
    # takes longer than a time limit allows.
    jobs = _Subproblems(p, chain, keys)
    # Small subproblems are solved fastest by CP-SAT with a few workers each (see
    # mapsched.formulations.cpsat.portfolio), so by default a process per four cores.
    width = 1
    if executor is not None:  # a cluster's task slots (see mapsched.engine.dask), or this machine's cores
        width = getattr(executor, "slots", None) or os.cpu_count() or 1
    elif len(jobs) > 1:
        width = workers or max(1, (os.cpu_count() or 1) // 4)
    # 0 through an executor: each task's share of the worker it lands on (1 off a cluster).
    threads = module_threads or (0 if executor is not None else max(1, ctx.threads // width))
    if not module_threads and 1 < threads < 4 and p.L == 1:
        # Two or three threads share the cores among the portfolio's workers, of which only
        # the LP-free one proves a latency module this small (mapsched.formulations.cpsat.
        # portfolio), so alone, at full speed, it proves them sooner; multi-channel stacks,
        # whose rolling steps dominate, gain nothing either way. Batched modules keep the two
        # workers CpSatBatched.solve picked for their proofs (one was not tried there).
        threads = 1
    limit = module_time_limit
    if ctx.time_limit is not None:  # share what is left among the subproblems, so the table fills in time
        limit = min(module_time_limit, max(0.2, 0.8 * ctx.remaining() * width / max(1, len(jobs))))
    # Kept back: the last subproblem's set-up, which may run past its limit, and two stitchings.
    results, complete = _run(jobs, backend, limit, symmetry, threads, width, executor, ctx, 3 * one_pass,
                             chunk_seconds)
    solved = len(results)
    for t in range(T):
        for u in ins_dev[t]:
            for v in out_dev[t]:
                rep, g = orbit[u, v]
                if rep != (u, v) and (t, *rep) in results:
                    results[t, u, v] = _relabel(p, results[(t, *rep)], g)

    # Dynamic programming over (input device, output device) of each module.
    value, bound, back = {}, {}, {}
    for t in range(T):
        prev = [(uu, vv) for uu in ins_dev[t - 1] for vv in out_dev[t - 1] if (t - 1, uu, vv) in value] if t else []
        for u in ins_dev[t]:
            # The best way into module t on u does not depend on v: O(m^2) per u.
            best, best_b, arg = (0.0, 0.0, None) if t == 0 else (math.inf, math.inf, None)
            for uu, vv in prev:
                c = _com(p, chain, t, vv, u)
                if value[t - 1, uu, vv] + c < best:
                    best, arg = value[t - 1, uu, vv] + c, (uu, vv)
                best_b = min(best_b, bound[t - 1, uu, vv] + c)
            if t > 0 and arg is None:
                continue
            for v in out_dev[t]:
                if (r := results.get((t, u, v))) is not None:
                    value[t, u, v], bound[t, u, v], back[t, u, v] = best + r.makespan, best_b + r.bound, arg
    finals = {k: val for k, val in value.items() if k[0] == T - 1}
    free = [results.get((t, "free", None)) for t in range(T)]
    candidates = []
    if finals:
        key = min(finals, key=finals.get)
        chosen = []
        t, (u, v) = T - 1, key[1:]
        while True:
            chosen.append((t, u, v))
            if back[t, u, v] is None:
                break
            u, v = back[t, u, v]
            t -= 1
        # A bound over a partial table would miss the combinations it lacks: none then.
        dp = _stitch(p, chain.modules, [results[k] for k in reversed(chosen)], ctx,
                     min(bound[k] for k in finals) if exact_chain and complete else None)
        if dp is not None:
            candidates.append(dp)
    if not exact_chain and all(free) and (stitched := _stitch(p, chain.modules, free, ctx)) is not None:
        stitched.log += "modules solved with free channel ends, stitched\n"
        candidates.append(stitched)
    if staged is not None:
        candidates.append(staged)
    if walked is not None:
        candidates.append(walked)
    schedule = min([*candidates, start], key=lambda c: c.makespan)
    if schedule is start:
        schedule.log += "split: returned the warm start, which no combination of module schedules beat\n"
    if finals:
        schedule.log += f"DP value {finals[key]:.6g}; {'exact' if exact_chain else 'heuristic'} recursion\n"
    if staged is not None:
        schedule.log += f"server stages: makespan {staged.makespan:.9g}\n"
    if walked is not None and schedule is not walked:
        schedule.log += f"pipelined walk: makespan {walked.makespan:.9g}\n"
    schedule.log += f"{chain.describe(p)}\n{solved} module subproblems solved\n"
    if getattr(executor, "lost", False):
        schedule.log += "split: the cluster's scheduler was lost mid-run; the best schedule of what was solved\n"
        return schedule
    if walked is not None and ctx.time_limit is not None and ctx.remaining() >= 2 * _POLISH_MIN:
        # Half of the polish on the model with inputs in groups, g times smaller (see .pipeline).
        left, log = ctx.remaining(), schedule.log
        better = grouped_improve(p, schedule, ctx, left / 2)
        if better is not schedule:
            ctx.improved(better.makespan)
            better.log = log + f"improved with inputs in groups for {left / 2:.1f} s: {better.makespan:.9g}\n"
            schedule = better
    return _polish(p, schedule, backend, ctx)


PROBE_SECONDS = 8.0
"""Seconds of the exact model of the whole graph from the first walk's schedule under a time
limit (a quarter of what is left at most): where channels depend weakly, the whole graph's
model finds in a few seconds what the walk's module-by-module view misses; where they
depend strongly it finds little, and :data:`PROBE_GAIN` then hands the time back."""

PROBE_GAIN = 0.01
"""Share of the walk's makespan the probe must gain for the polish to get the second walk's time."""


def _probe(p: Problem, s: Schedule, backend: str, ctx: SolveContext) -> Schedule:
    """``s`` improved by the exact model of the whole graph for ``PROBE_SECONDS`` (a quarter of
    what is left at most); ``s`` itself without a time limit or when nothing better is found."""
    if ctx.time_limit is None or ctx.remaining() < 4 * _POLISH_MIN:
        return s
    sub = SolveContext(time_limit=min(PROBE_SECONDS, ctx.remaining() / 4), rng=ctx.rng, threads=ctx.threads)
    out = improve(p, s, sub, backend)
    return out if out.makespan < s.makespan else s


_POLISH_MIN = 1.0
"""Seconds below which a whole-graph solve is not started: building and presolving
the model of a few hundred tasks takes a good part of a second by itself."""


def _polish(p: Problem, s: Schedule, backend: str, ctx: SolveContext) -> Schedule:
    """Spend the rest of a time limit on the exact model of the whole graph, from ``s``."""
    proved = s.lower_bound is not None and meets(s.makespan, s.lower_bound)
    if ctx.time_limit is None or ctx.remaining() < _POLISH_MIN or proved:
        return s
    log, bound, left = s.log, s.lower_bound, ctx.remaining()
    out = improve(p, s, ctx, backend)
    out.lower_bound = max(b for b in (bound, out.lower_bound, 0.0) if b is not None)
    out.log = log + f"then the exact model of the whole graph, for the {left:.1f} s left:\n" + out.log
    return out


class _Subproblems:
    """The subproblem of each key ``(t, u, v)``, built on demand (None: no schedule); keys
    :func:`_ruled_out` are left out from the start (on a cluster, each would cost a task)."""

    def __init__(self, p: Problem, chain: ModuleChain, keys: list[tuple]):
        self.p, self.chain = p, chain
        self.keys = [k for k in keys if not _ruled_out(p, chain, *_ends(k))]

    def __len__(self) -> int:
        return len(self.keys)

    def items(self, expired: Callable[[], bool]) -> Iterator[tuple[tuple, Problem | None]]:
        """Each key and its subproblem, none once ``expired()``: building one of a thousand
        tasks takes a tenth of a second."""
        for k in self.keys:
            if expired():
                return
            yield k, _subproblem(self.p, self.chain, *_ends(k))


def _relabel(p: Problem, sol: ModuleSolution, g: np.ndarray) -> ModuleSolution:
    """A module solution moved by the device permutation ``g`` (a symmetry of ``p``)."""
    names = p.device_names
    return ModuleSolution(sol.makespan, sol.bound, tuple((task, names[g[p.device_index[dev]]], inputs, start)
                                                         for task, dev, inputs, start in sol.jobs))


EXACT_SIZE = 40
"""Tasks an exact solve of one module handles in seconds: beyond it, a module's exact model
is not proved within a subproblem's share of the time."""


def pick_chain(p: Problem, channels: int, deadline: float = math.inf) -> ModuleChain:
    """The requested chain, or (channels=0) the fewest channels, 1 to 4, whose largest module
    has at most ``max(EXACT_SIZE, n / 4)`` tasks; failing that, the chain of smallest largest
    module. A chain whose largest module is most of the graph saves nothing over a full
    exact solve. Past ``deadline`` (a ``time.perf_counter()`` time) no more channel counts
    are tried; the single-channel chain, O(n + E), is always found.
    """
    if channels > 0:
        return detect_modules(p, channels)
    chains = []
    for k in range(1, 5):  # k-edge components cost max-flow computations: stop at the first good one
        if k > 1 and time.perf_counter() > deadline:
            break
        try:
            chains.append(detect_modules(p, k, deadline=deadline))
        except TimeoutError:
            break
        if max(map(len, chains[-1].modules)) <= max(EXACT_SIZE, p.n // 4):
            return chains[-1]
    return min(chains, key=lambda c: max(map(len, c.modules)))


def _run(jobs: _Subproblems, backend: str, limit: float | None, symmetry: str, threads: int, width: int,
         executor: Executor | None, ctx: SolveContext, reserve: float,
         chunk_seconds: float = 0.0) -> tuple[dict[tuple, ModuleSolution], bool]:
    """Solve every subproblem: through the executor, a pool of ``width`` processes, or here.
    With a time limit, ``reserve`` seconds of it are kept back for what follows, and each
    subproblem gets at most what is left before them when it starts. Returns the solutions
    and whether every subproblem was solved to the end (none cut off by the time limit, an
    interrupt or a lost cluster).

    An executor with a ``share`` method (:class:`mapsched.engine.dask.DaskExecutor`) gets
    the problem once per worker, and the workers build the subproblems; others get each
    subproblem, built here. With ``chunk_seconds`` > 0, tasks are sized as they are
    submitted (:func:`_chunk_size`), a few in flight per task slot."""
    if not jobs.keys:  # nothing to send (a cluster would still get the problem)
        return {}, True
    until = None if ctx.time_limit is None else time.time() + ctx.remaining() - reserve

    def expired() -> bool:  # ctx.expired() also says when an interrupt stops the solve
        return ctx.expired() or (until is not None and time.time() >= until)

    if executor is None and width == 1:
        out, seen = {}, 0
        for k, sub in jobs.items(expired):
            seen += 1
            if sub is not None and (r := solve_module(sub, backend, limit, symmetry, threads, until)) is not None:
                out[k] = r
        # Past the deadline a solve may have been skipped (None): count the table as partial.
        return out, seen == len(jobs) and not expired()
    own = executor is None
    pool = executor or ProcessPoolExecutor(max_workers=width, mp_context=_mp_context())
    try:
        shared = None
        if hasattr(pool, "share"):
            try:
                shared = pool.share((jobs.p, jobs.chain))
            except Exception:
                if not getattr(pool, "lost", False):
                    raise
                return {}, False
            items = ((k, k) for k in jobs.keys if not expired())
        else:
            items = ((k, sub) for k, sub in jobs.items(expired) if sub is not None)
        args = (backend, limit, symmetry, threads, until)
        # Without chunks, every task at once: the scheduler's queue, not this loop, feeds the workers.
        depth = 4 * width if chunk_seconds > 0 else math.inf
        deadline = None if ctx.time_limit is None else time.monotonic() + ctx.remaining()
        flying: dict[Future, list[tuple]] = {}
        out, complete, drained, sent, spent, back = {}, True, False, 0, 0.0, 0
        while True:
            while len(flying) < depth and not drained:
                size = _chunk_size(chunk_seconds, spent, back, len(jobs) - sent, width) if chunk_seconds > 0 else 1
                chunk = list(itertools.islice(items, size))
                drained = len(chunk) < size
                if not chunk:
                    break
                sent += len(chunk)
                flying[pool.submit(_solve_chunk, shared, [x for _, x in chunk], *args)] = [k for k, _ in chunk]
            if not flying:
                break
            left = _POLL if deadline is None else min(_POLL, deadline - time.monotonic())
            if left <= 0:
                break
            done, _ = wait(flying, timeout=left, return_when=FIRST_COMPLETED)
            for f in done:
                keys = flying.pop(f)
                try:
                    solutions, seconds = f.result()
                except Exception:
                    if not getattr(pool, "lost", False):  # a real failure, not the cluster gone
                        raise
                    complete = False
                    continue
                out.update((k, r) for k, r in zip(keys, solutions) if r is not None)
                spent, back = spent + sum(seconds), back + len(keys)
            if getattr(pool, "lost", False):  # results on their way may never come; no more tasks
                break
        for f in flying:
            f.cancel()
        return out, complete and drained and not flying and not expired()
    finally:
        if own:
            pool.shutdown(wait=True, cancel_futures=True)


_POLL = 0.2
"""Seconds between checks of the deadline and of a lost cluster while tasks are in flight."""


def _chunk_size(target: float, spent: float, back: int, left: int, width: int) -> int:
    """Subproblems for the next task: as many as take ``target`` seconds at the mean time
    of the ``back`` subproblems solved so far (``spent`` seconds on the workers), one until
    some are back; at most a quarter of the ``left`` ones per task slot, so that the last
    tasks keep every slot busy to the end (guided self-scheduling), but never less than a
    quarter of ``target`` while each slot still has that much left. A task on a cluster
    costs a few milliseconds of the scheduler's, the client's and the worker's time
    (``benchmarks/bench_dask.py``), which on a small cluster come out of the workers'
    cores: short subproblems go in chunks, long ones one a task.

    >>> _chunk_size(0.2, 0.5, 50, 200, 2), _chunk_size(0.2, 0.5, 50, 40, 2), _chunk_size(0.2, 5.0, 10, 200, 2)
    (20, 5, 1)
    >>> _chunk_size(0.2, 0.5, 50, 12, 2), _chunk_size(0.2, 0.5, 50, 3, 2)  # 10 ms each: 50 ms a task at the end
    (5, 1)
    """
    if back == 0:
        return 1
    each = max(spent, 1e-9) / back
    return max(1, min(int(target / each), left // (4 * width)), min(int(target / 4 / each), left // width))


def _solve_chunk(shared: tuple[Problem, ModuleChain] | None, items: list, backend: str, limit: float | None,
                 symmetry: str, threads: int, until: float | None) -> tuple[list[ModuleSolution | None], list[float]]:
    """Solve each subproblem of ``items`` in turn: keys to build from the ``shared`` problem
    and chain (on a worker), or subproblems. Their solutions, and the seconds each took."""
    solutions, seconds = [], []
    for x in items:
        began = time.perf_counter()
        if shared is not None:
            x = _subproblem(*shared, *_ends(x))
        solutions.append(None if x is None else solve_module(x, backend, limit, symmetry, threads, until))
        seconds.append(time.perf_counter() - began)
    return solutions, seconds


def _mp_context() -> multiprocessing.context.BaseContext:
    """Worker processes that do not inherit this one's threads: forking after the
    solvers have started their thread pools can deadlock a child on a held lock."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(["mapsched"])
        return ctx
    return multiprocessing.get_context("spawn")


def _stitch(p: Problem, groups: Sequence[Collection[int]], parts: list[ModuleSolution],
            ctx: SolveContext, bound: float | None = None) -> Schedule | None:
    """One schedule from the schedules of task groups (modules, or stages of modules): their
    jobs, group after group and each group's in its solver's order, re-timed exactly over
    the whole graph; None where its mapping overflows memory and no repair is found in time.
    ``bound`` (the exact DP's) is its lower bound where the modules' mapping is kept, not
    where a repair changed it."""
    jobs = []
    for t, part in enumerate(parts):
        for task, dev, inputs, start in part.jobs:
            i = p.task_index.get(task)
            if i is not None and i in groups[t]:  # node-channel copies are not tasks
                mask = sum(1 << lo for lo in inputs)
                jobs.append((i, p.device_index[dev], mask, (t, start)))
    owner = np.zeros((p.n, p.L), dtype=np.int64)
    for i, u, mask, _ in jobs:
        owner[i, [lo for lo in range(p.L) if mask >> lo & 1]] = u
    if Decoder(p).infeasibility(owner) is None:
        s = retime_jobs(p, jobs)
        s.lower_bound = bound
    else:  # the modules' memory adds up past a device's capacity
        try:
            s = Decoder(p).schedule(owner_from_counts(feasible_counts(p, owner_counts(p, owner))))
        except NotFound:  # no repair within the time limit: this candidate is dropped
            return None
        s.log += "stitched mapping overflowed memory; finished by a feasibility repair\n"
    ctx.improved(s.makespan)
    return s

