"""``auto``: the default method, a pipeline chosen by the problem's size and the time limit.

- With a time limit, on a latency problem whose memory binds (the fast devices cannot
  hold every task they run), ``relax-round`` (:mod:`mapsched.heuristics.relax_round`)
  rounds the relaxation's shares of each task on each class of devices, with at most
  :data:`ROUND_SHARE` of the limit for its programme; where it beats the list
  schedulers, the stages below start from it (``exact`` after a pass of ``cp-search``).
  The list schedulers fill the fast devices in rank order and leave the late tasks to
  the slow ones; the programme chooses which tasks leave over the whole graph.
- With a time limit, a problem of at most :data:`EXACT_JOBS` jobs (tasks times inputs)
  goes to ``exact``, which starts from the best list schedule and proves what it can; on
  a latency graph of over :data:`~mapsched.formulations.exact.STALL_TASKS` tasks, a whole
  model that stalls hands its best schedule over to ``lns`` for the rest of the time.
- Otherwise the best of the fast list schedulers (``heft``, ``peft``, ``cpop``, ``m-etf``;
  ``bheft`` for throughput) is taken, and for latency improved by the critical-path
  search of ``cp-search`` on the full graph, for ``moves`` moves without a time limit;
  it stops early where the schedule meets the proved bound, or where no move of a task
  on the critical path shortens it.
- With a time limit, ``cp-search`` gets at most :data:`CP_SEARCH_SHARE` of the time left
  (it stops sooner where no move helps), and the large-neighbourhood search of ``lns``
  (:mod:`mapsched.heuristics.lns`) the rest, until the limit or a proved optimum.
  Single moves stall where a path waits at a join for several equally late branches;
  ``lns`` re-solves whole stretches of the schedule exactly, moving and re-ordering many
  tasks at once, and keeps improving after ``cp-search`` has stopped. Its steps stay
  cheap at 40,000 tasks, so the pipeline works the whole limit at any size. Without a
  time limit ``lns`` does not run: its steps are CP-SAT solves, and a default solve stays
  quick.
- With a relocation cost (:mod:`mapsched.engine.relocation`), ``sa``, which weighs it, within
  the time limit or its iterations.
- Where transfers take turns (:mod:`mapsched.scheduling.contention`): the best of the list
  schedulers, Baechi's contiguous fills, the fused fills (``heft`` on a fusion of the graph
  into small groups that keep their copies on one device) and the contention-free pipeline's
  placement re-timed, improved by ``cp-search``, ``exact`` or ``lns`` with the turns (``sa``
  without a time limit; see :func:`_contended`).

Every stage starts from the best schedule so far, so the result is never worse than
``heft``'s (``bheft``'s). Its ``method`` names the stages that ran, as
``"auto: heft, cp-search, lns"``, and its log says what each found. With a time limit
it returns before the limit only where the schedule is proved optimal: it meets the
bound, or ``lns`` solved the whole problem exactly. When the time limit
leaves no room past the first list scheduler, that schedule is returned with status
``feasible``.

Coarsening is a stage only where transfers take turns (the fused fills of
:func:`_contended`): on traced training graphs and random DAGs without contention, ``heft``
on the co-placement quotient, expanded, ends above ``heft`` on the full graph (a group's
tasks lose the freedom to go to different devices), and ``exact`` or ``split`` on a
quotient of thousands of groups is still too large a model to find anything in the time.

Examples
--------
>>> import mapsched
>>> p = mapsched.generators.random_dag(400, 3, seed=1)
>>> s = mapsched.solve(p)  # method=None is auto
>>> s.method, s.makespan <= mapsched.solve(p, "heft").makespan
('auto: heft, cp-search', True)
>>> mapsched.solve(p, time_limit=3).method
'auto: heft, cp-search, lns'
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace

import numpy as np

from mapsched.bounds.memory import memory_binds
from mapsched.bounds.relaxation import RELAXATION_TASKS
from mapsched.engine.context import SolveContext
from mapsched.engine.registry import Option, get, register
from mapsched.errors import InfeasibleError, OptionError
from mapsched.heuristics.critical_path_search import improve
from mapsched.heuristics.heft import heft_schedule
from mapsched.heuristics.lns import improve_lns
from mapsched.heuristics.relax_round import rounded_schedule
from mapsched.model.problem import Problem
from mapsched.model.schedule import Schedule
from mapsched.scheduling.best_list import best_start
from mapsched.scheduling.coarsen import expand, fuse_intervals, quotient
from mapsched.scheduling.construct import topo_placement
from mapsched.scheduling.decoder import Decoder
from mapsched.scheduling.retime import redecoded, retimed
from mapsched.scheduling.simulate import simulate

__all__ = ["CP_SEARCH_SHARE", "EXACT_JOBS", "FREE_SHARE", "FUSED_GROUPS", "FUSED_SHARE", "LNS_DECODES",
           "RETIME_DECODES", "ROUND_SHARE"]

EXACT_JOBS = 300
"""Problems of at most this many jobs (tasks times inputs) go to ``exact`` when there is a
time limit: CP-SAT improves on the list schedulers there within seconds."""

FREE_SHARE = 0.7
"""Where transfers take turns, the share of the time left after the list schedulers that the
pipeline of the problem without contention takes, before ``exact`` (on problems of at most
:data:`EXACT_JOBS` jobs) or ``lns``, which time the transfers taking turns, get the rest (see
:func:`_contended`)."""

FUSED_GROUPS = (24, 16, 12, 8, 6, 4, 3, 2)
"""Where transfers take turns, the most tasks a group holds in each of the fused fills (coarsest,
so cheapest, first): Celeritas's fusion of a topological order into intervals that cut the
least data, ``heft`` on the quotient, expanded (:mod:`mapsched.scheduling.coarsen`). A group's
transfers stay on its device, so the copies that take turns are fewer. With every
accelerator's copies on the accelerator, the fill of pairs ends at 248.4 on ``gnmt-op`` where
the default reached 326.5 without fills (60 s), and the fill of at most 3 at 731.1 on
``resnet50-train-op`` (770.5). Which size wins varies from graph to graph and not in step with
the size (``resnet50-train-op``: 779.6, 731.1, 761.2 for 2, 3, 4), hence the many; on the
quotients of five of six real models no other list scheduler (``peft``, ``cpop``, ``m-etf``)
did better than ``heft``."""

FUSED_SHARE = 0.1
"""Where transfers take turns and there is a time limit, the most of the time left that the
fused fills take together: a fill runs only while its likely seconds (the last fill's; before
the first, four decodes': ``heft`` on the quotient and three decodes) fit in what is left of
this share. At 34,711 tasks one fill took 6 s of a 30 s limit."""

RETIME_DECODES = 9
"""Where transfers take turns, the decodes' time kept back from the contention-free pipeline's
share for re-timing its placement (about four decodes: both of
:func:`~mapsched.scheduling.retime.redecoded`'s) and simulating it (about five): at 34,711 tasks
these took 3.4 s (with one decode) and 5.0 s after the share, past a 30 s limit."""

LNS_DECODES = 4
"""Where transfers take turns, the decodes' time ``lns`` needs left to start: two of its start
(both ways of :func:`~mapsched.scheduling.retime.redecoded`), one step and its result; with
less it would only time its start, past the limit."""

ROUND_SHARE = 0.25
"""The most of the time limit that ``relax-round``'s linear programme takes, where memory binds:
on the real-model graphs of up to 1,000 tasks it is solved in a second or two."""

CP_SEARCH_SHARE = 0.1
"""The most of the time left after the list schedulers that ``cp-search`` takes before
``lns``: ``cp-search`` stops where no single move helps, and ``lns`` moves many tasks at
once, so the time is worth more to ``lns`` once the quick single moves are taken."""


@register(
    "auto",
    "the default: exact on small problems with a time limit, else the best list schedule "
    "improved by critical-path search and, with a time limit, large-neighbourhood search",
    options=(Option("moves", int, 200, "critical-path moves without a time limit"),),
    initial=True,
    relocation=True,
)
def auto(problem: Problem, ctx: SolveContext, moves: int) -> Schedule:
    """O(the list schedulers) + O(moves (n + E)), or ``exact`` or ``lns`` within the time limit."""
    p = problem
    if ctx.relocation is not None:  # of the stages, only the mapping searches weigh moves
        m = get("sa")
        s = m.fn(p, ctx, **m.parse_options({}))
        s.method = "auto: sa"
        return s
    if p.contended:
        return _contended(p, ctx, moves)
    rounded = _rounded(p, ctx)
    if ctx.time_limit is not None and p.n * p.L <= EXACT_JOBS:
        m = get("exact")
        if rounded is not None:  # exact starts from it, its critical path shortened first
            rounded = improve(p, rounded, _share(ctx, CP_SEARCH_SHARE), 2**62)
        s = m.fn(p, ctx if rounded is None else replace(ctx, initial=rounded), **m.parse_options({}))
        s.method = "auto: exact" if rounded is None else "auto: relax-round, cp-search, exact"
        return s
    s = best_start(p, ctx.initial, ctx)
    ran = [s.method]
    if rounded is not None and rounded.makespan < s.makespan:
        s, ran = rounded, ["relax-round"]
    ctx.improved(s.makespan)
    if p.L == 1:
        if ctx.expired():
            s.log += "time limit reached after the list schedulers: no critical-path search\n"
        elif ctx.time_limit is None:
            s = improve(p, s, ctx, moves)
            ran.append("cp-search")
        else:
            s = improve(p, s, _share(ctx, CP_SEARCH_SHARE), 2**62)
            ran.append("cp-search")
            if not ctx.optimal(s.makespan) and not ctx.expired():
                s = improve_lns(p, s, ctx)
                ran.append("lns")
    s.method = "auto: " + ", ".join(ran)
    return s


def _fused(p: Problem, ctx: SolveContext, decode_s: float) -> Iterator[tuple[int, Schedule]]:
    """The fused fills of :data:`FUSED_GROUPS` that fit :data:`FUSED_SHARE` of the time left
    (all of them without a time limit; a decode of ``p`` takes ``decode_s``), each with its
    most tasks a group: ``heft`` on the quotient, its mapping decoded on ``p`` both ways of
    :func:`~mapsched.scheduling.retime.redecoded`. A fusion that no device can hold, or whose
    quotient ``heft`` cannot place, gives none. O(n R + E) for each fusion of at most R tasks a
    group, then ``heft`` on the quotient and three decodes."""
    budget = None if ctx.time_limit is None else FUSED_SHARE * ctx.remaining()
    last = 4 * decode_s
    for most in FUSED_GROUPS:
        if budget is not None and last > budget:
            return
        began = time.perf_counter()
        try:
            groups = fuse_intervals(p, R=most)
            q, _ = quotient(p, groups)
            t = redecoded(p, expand(p, heft_schedule(q), groups), method="heft")
        except (InfeasibleError, OptionError):  # a group no device holds, or a quotient heft cannot place
            continue
        finally:
            last = time.perf_counter() - began
            if budget is not None:
                budget -= last
        yield most, t


def _share(ctx: SolveContext, share: float) -> SolveContext:
    """``ctx`` with its limit at ``share`` of the time it has left; it shares the clock,
    generator and history."""
    return replace(ctx, time_limit=ctx.elapsed() + share * ctx.remaining())


def _rounded(p: Problem, ctx: SolveContext) -> Schedule | None:
    """``relax-round``'s schedule (better than ``ctx.initial``, if given), where a latency
    problem's memory binds and there is a time limit, with at most :data:`ROUND_SHARE` of the
    time left for its programme; else None."""
    if ctx.time_limit is None or p.L > 1 or p.n > RELAXATION_TASKS or not memory_binds(p):
        return None
    s = rounded_schedule(p, ctx, ROUND_SHARE * ctx.remaining())
    if s is None or (ctx.initial is not None and ctx.initial.makespan <= s.makespan):
        return None
    return s


def _contended(p: Problem, ctx: SolveContext, moves: int) -> Schedule:
    """Where transfers take turns: the best of the list schedulers, the contiguous fills of
    m-TOPO (each device filled in topological order up to its memory, or to an even share; the
    devices by index, and fastest first) and the fused fills (:data:`FUSED_GROUPS`; with a time
    limit, within :data:`FUSED_SHARE` of it), all timed with contention (the fills both ways of
    :func:`~mapsched.scheduling.retime.redecoded`); then

    - with a time limit, for latency, ``cp-search`` with the turns on the best of these, for at
      most :data:`CP_SEARCH_SHARE` of the time left, where that holds two decodes;
    - with a time limit, for latency, the pipeline of the problem without contention (its
      ``lns`` and ``cp-search`` time transfers without it) for :data:`FREE_SHARE` of the time
      left after :data:`RETIME_DECODES` decodes (none where that leaves nothing); its
      placement, re-timed with transfers taking turns in its start order or run by
      ``simulate`` (whichever ends first; ``simulate`` only where half that time is left),
      is kept where it is better;
    - with a time limit, for the rest, from the best so far: ``exact`` on problems of at most
      :data:`EXACT_JOBS` jobs, whose CP-SAT model has the transfers take turns, else ``lns``,
      whose neighbourhoods' models have them take turns;
    - otherwise (no time limit, or a large throughput problem) ``sa`` with the contended
      decoder as its fitness, for ``moves`` moves."""
    s = best_start(p, ctx.initial, ctx)
    ran = [s.method]
    decode_s = 0.0  # the longest decode of a fill, with the turns
    if p.L == 1:
        work = np.where(np.isfinite(p.dur), p.dur, 0.0).sum(axis=0)
        fills = [(cap, order) for cap in ("memory", "uniform")
                 for order in (None, np.argsort(work, kind="stable").tolist())]  # by index, fastest first
        for cap, devices in fills:
            placed = topo_placement(p, cap, devices=devices)
            if (placed.owner >= 0).all():
                for send in (False, True):  # transfers reserved with their destination, or sent ahead
                    began = time.perf_counter()
                    t = Decoder(p, placed.order, insertion=True, send=send).schedule(placed.owner[:, None])
                    decode_s = max(decode_s, time.perf_counter() - began)
                    if t.makespan < s.makespan:
                        s, ran = t, [f"m-topo ({cap})"]
        for most, t in _fused(p, ctx, decode_s):
            if t.makespan < s.makespan:
                s, ran = t, [f"fused heft ({most})"]
    ctx.improved(s.makespan)
    small = p.n * p.L <= EXACT_JOBS

    def better(t: Schedule, stage: str) -> None:
        nonlocal s
        if t.makespan < s.makespan:
            s = t
            ctx.improved(s.makespan)
        ran.append(stage)

    def open_() -> bool:
        return not ctx.expired() and not ctx.optimal(s.makespan)

    if ctx.time_limit is not None and p.L == 1 and open_() and CP_SEARCH_SHARE * ctx.remaining() > 2 * decode_s:
        # Its share holds a move and the final decode (each move decodes with the turns).
        better(improve(p, s, _share(ctx, CP_SEARCH_SHARE), 2**62), "cp-search")
    reserve = RETIME_DECODES * decode_s
    if ctx.time_limit is not None and p.L == 1 and open_() and ctx.remaining() > reserve:
        # Its makespans are not this problem's: no callback, a history of its own. Its share
        # leaves the re-timing and simulation of its placement inside the limit.
        limit = ctx.elapsed() + FREE_SHARE * (ctx.remaining() - reserve)
        free = replace(ctx, time_limit=limit, initial=None, callback=None, history=[])
        found = auto(p.with_contention(), free, moves)
        t = retimed(p, found)
        if ctx.remaining() > reserve / 2:
            t = min(t, simulate(p, found.mapping(), method=found.method), key=lambda x: x.makespan)
        better(t, "without contention: " + found.method.removeprefix("auto: "))
    if ctx.time_limit is not None and p.L == 1 and not small and open_() and ctx.remaining() > LNS_DECODES * decode_s:
        better(improve_lns(p, s, ctx), "lns")
    if open_() and (ctx.time_limit is None or small or p.L > 1):
        name = "exact" if ctx.time_limit is not None and small else "sa"
        m = get(name)
        opts = m.parse_options({} if name == "exact" else {"iterations": moves})
        better(m.fn(p, replace(ctx, initial=s), **opts), name)
    s.method = "auto: " + ", ".join(ran)
    return s
