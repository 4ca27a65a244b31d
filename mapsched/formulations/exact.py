"""``exact``: a proved-optimal schedule (given time), with CP-SAT (default) or HiGHS.

Latency problems use :mod:`.milp` and :mod:`.cpsat`; throughput problems (L > 1)
use :mod:`.batched_milp` and :mod:`.batched_cpsat`. Both backends start from
``heft``'s (``bheft``'s) schedule, honour ``time_limit`` and
``threads``, and return the best schedule found with the solver's proved bound;
the status is ``optimal`` only when the schedule meets that bound. The batched models
allow one job per task and device, fewer than the format does, so for throughput their
bound is reported in the log (``batched model: optimal among ...``), not as the result's
bound. A batched CP-SAT model of more than :data:`~.batched_cpsat.SMALL_TASKS` tasks
takes the start only as its horizon and fallback, not as a hint
(:func:`~.batched_cpsat.search_form`); if CP-SAT finds no schedule of its own in the first
quarter of the time, the hinted model gets the rest. Smaller ones are solved first as
the counts relaxation (``CpSatBatched(counts=True)``), whose optimum is the model's once
realised; where it is not, the per-input model goes on from its bound.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import numpy as np

from mapsched.bounds.cuts import LOAD_CUT_TERMS
from mapsched.engine.context import SolveContext
from mapsched.engine.registry import Option, register
from mapsched.errors import InfeasibleError, OptionError
from mapsched.formulations.batched_cpsat import CpSatBatched, search_form
from mapsched.formulations.common import retime, retime_jobs
from mapsched.formulations.cpsat import TRANSFER_INTERVALS, CpSatModel
from mapsched.heuristics.lns import improve_lns
from mapsched.model.problem import Problem
from mapsched.model.scales import default_resolution
from mapsched.model.schedule import Schedule
from mapsched.model.symmetry import lex_relabelled, symmetry_plugins
from mapsched.model.validate import meets
from mapsched.scheduling.best_list import best_start

if TYPE_CHECKING:
    from mapsched.formulations.batched_milp import MilpBatched

STALL_TASKS = 60
"""Latency problems of more tasks than this, solved with a time limit, hand over from the
whole CP-SAT model to large-neighbourhood search (:mod:`mapsched.heuristics.lns`) once the
model has found no new schedule for :data:`STALL_SHARE` of the time: on graphs of a
hundred tasks and more the whole model often keeps its warm start for the whole limit,
while re-solving parts of it keeps improving. Smaller models are left to prove."""

STALL_SHARE = 0.25
"""The share of the time left after which a stalled whole model hands over (:data:`STALL_TASKS`)."""

PROBE_SHARE = 0.25
"""Share of the time left that a large batched CP-SAT model gets, built for search and not
hinted, to find a schedule of its own before the hinted model takes over (see
:func:`~.batched_cpsat.search_form`)."""


@register(
    "exact",
    "exact model (latency or batched throughput): CP-SAT (default) or a Pyomo MILP with HiGHS",
    objectives=("latency", "throughput"),
    exact=True,
    initial=True,
    options=(
        Option("backend", str, "cpsat", "solver", choices=("cpsat", "highs")),
        Option("resolution", float, 0.0, "CP-SAT ticks per ms (0: automatic)"),
        Option("symmetry", str, "auto", "break identical-device symmetry: none, lex, or task,batch,time "
               "(a comma-separated lexicographic key); auto: lex with CP-SAT, none with HiGHS"),
        Option("solver_symmetry", bool, True, "let the solver detect and break symmetries itself "
               "(CP-SAT symmetry_level, HiGHS mip_detect_symmetry)"),
        Option("load_cuts", int, LOAD_CUT_TERMS, "budget of redundant load cuts, in task-device terms: a graph "
               "gets all or none (0: none; latency only)"),
        Option("lns", bool, True, f"with a time limit, hand a latency model of over {STALL_TASKS} tasks that "
               f"finds no new schedule for {STALL_SHARE:.0%} of the time left over to large-neighbourhood search "
               "(false: the whole model to the end, for its bound)"),
        Option("plugins", tuple, (), "constraint plugins (Python API only)", cli=False),
    ),
)
def exact(problem: Problem, ctx: SolveContext, backend: str, resolution: float, symmetry: str,
          solver_symmetry: bool, load_cuts: int, lns: bool, plugins: tuple) -> Schedule:
    """Solve the latency problem exactly; see :mod:`.milp` and :mod:`.cpsat`.

    Plugins may cut off the warm start, so with plugins it is only a hint, and the
    horizon is the serial bound (every semi-active schedule ends by it) instead of
    the warm start's makespan.

    Both solvers find and break permutations of identical devices on their own
    (``solver_symmetry``); the ``symmetry`` constraints do it in the model instead, and
    so in any solver the Pyomo model is handed to, including those without symmetry handling.

    Latency models state the redundant load cuts (:func:`~mapsched.bounds.cuts.load_cuts`) where all of
    a graph's fit in ``load_cuts`` terms: they speed up proofs on small graphs and slow
    down short searches on large ones.

    ``symmetry="auto"`` (the default) is ``lex`` with CP-SAT and ``none`` with HiGHS. Without
    its presolve (off for soundness, see :func:`~.cpsat.run_cpsat`) CP-SAT no longer breaks
    identical devices well by itself, and ``lex`` in the model proves load-balancing optima
    over identical devices that ``none`` leaves open. HiGHS, which detects the symmetry
    itself, is slowed by the extra rows, so it keeps ``none``.
    """
    if backend == "highs" and problem.contended:
        raise OptionError("--backend: highs's model lets transfers overlap; where the problem declares contention "
                          "(copy_engines, concurrency) use --backend cpsat")
    if symmetry == "auto":
        symmetry = "lex" if backend == "cpsat" else "none"
    # Symmetry cuts keep an optimum (see mapsched.model.symmetry), and the warm start's makespan
    # stays a valid horizon. With lex the start is renamed into the cuts' order, so that it
    # is also a hint the model can follow; user plugins may cut anything.
    cuts = symmetry_plugins(problem, symmetry)
    start = best_start(problem, ctx.initial, ctx)  # with ctx: not all four schedulers where time is short
    hint = lex_relabelled(problem, start) if cuts and symmetry == "lex" else start
    s = improve(problem, hint, ctx, backend, resolution, tuple(plugins) + cuts,
                hint_only=bool(plugins), solver_symmetry=solver_symmetry, load_cut_terms=load_cuts, lns=lns)
    if hint is not start and not plugins and s.makespan >= start.makespan:
        s.jobs = list(start.jobs)  # unimproved: the start keeps its devices (an initial placement moves for nothing)
    if cuts:
        s.log = f"identical devices: symmetry broken by {symmetry}\n" + s.log
    return s


def improve(problem: Problem, start: Schedule, ctx: SolveContext, backend: str = "cpsat", resolution: float = 0.0,
            plugins: tuple = (), hint_only: bool = False, solver_symmetry: bool = True,
            load_cut_terms: int = 0, lns: bool = True) -> Schedule:
    """The exact model of the whole problem, started from ``start``, solved until proved or
    out of time; returns the best schedule found (``start`` itself if nothing better) with
    the solver's proved bound. ``hint_only``: the plugins may cut off ``start``, so it is
    neither kept nor used as the horizon (the serial bound is). ``solver_symmetry``: let the
    solver detect symmetries itself. ``load_cut_terms``: the budget of the latency models'
    load cuts (none by default). ``lns``: with a time limit, a CP-SAT latency model of over
    :data:`STALL_TASKS` tasks that finds no new schedule for :data:`STALL_SHARE` of the time
    hands its best schedule over to :func:`~mapsched.heuristics.lns.improve_lns` for the
    rest, keeping the bound it proved.

    CP-SAT's own solutions are not left-justified, and with fine ticks it may improve
    one by a single tick at a time; every solution is therefore re-timed as it comes,
    the best re-timed schedule is kept, and the search stops as soon as that schedule
    meets the proved bound. Building the CP-SAT model counts within the time limit: if it
    runs out first, ``start`` comes back as it is, with no bound.
    """
    if not hint_only and start.makespan <= 0.0:
        # Nothing is shorter; nor would 0 ms set a resolution (it came out at 1e18 ticks per ms,
        # and the symmetry keys' coefficients overflowed 64 bits).
        ctx.improved(0.0)
        return _finish(start, 0.0, "the start ends at 0 ms: nothing is shorter\n")
    upper = serial_bound(problem) if hint_only else start.makespan
    best: list[Schedule] = [] if hint_only else [start]
    stall = None  # seconds without a new schedule after which the whole latency model hands over to lns
    if best:
        ctx.improved(start.makespan)

    def keep(s: Schedule | None, bound: float) -> bool:
        """Record a re-timed solution (None: a solution with no schedule to keep); True once
        the best one meets the bound."""
        if s is not None:
            ctx.improved(s.makespan)
            if not best or s.makespan < best[0].makespan:
                best[:] = [s]
        return bool(best) and meets(best[0].makespan, max(bound, ctx.fast_bound))

    seed = int(ctx.rng.integers(2**31 - 1))
    if problem.L > 1:
        log = ""

        def batched(model: CpSatBatched | MilpBatched, **kw: Any) -> dict[str, Any]:
            # A counts solution that is not realised greedily comes as None (see .batched_cpsat).
            return model.solve(ctx.remaining_or_none(), ctx.threads, seed, ctx.log,
                               lambda jobs, bound: keep(None if jobs is None else retime_jobs(problem, jobs), bound),
                               solver_symmetry, **kw)

        out = None
        deadline = time.perf_counter() + ctx.remaining()
        try:
            if backend == "cpsat" and search_form(problem):
                # Large models: first built for search and not hinted (see search_form). Where CP-SAT
                # finds no schedule of its own within a quarter of the time, the hinted model has the rest.
                probe = None if ctx.time_limit is None else PROBE_SHARE * ctx.remaining()
                out = batched(CpSatBatched(problem, upper, resolution or None, plugins, input_symmetry=False,
                                           links=False, deadline=deadline), first_within=probe)
                if out["jobs"] is None and probe is not None and not ctx.expired():
                    log = f"search form: no schedule of its own within {probe:.3g} s; the hinted model for the rest\n"
                    out = None
            relaxed = 0.0
            if out is None and backend == "cpsat" and not search_form(problem):
                # The counts relaxation first (see .batched_cpsat): where its optimum is realised, it
                # is the per-input model's; where not, its bound holds for that model, which goes on.
                model_c = CpSatBatched(problem, upper, resolution or None, plugins, deadline=deadline, counts=True)
                model_c.hint(start)
                out = batched(model_c)
                if out["optimal"] and not (best and meets(best[0].makespan, out["bound"])):
                    jobs = None if ctx.expired() else model_c.realise(out["counts"], _quarter(ctx), ctx.threads, seed)
                    if jobs is None:
                        log += f"counts relaxation: optimum {out['bound']:.6g} ms not realised; the per-input model\n"
                        relaxed, out = out["bound"], None
                    else:
                        keep(retime_jobs(problem, jobs), out["bound"])
            if out is None:
                if backend == "cpsat":
                    model_b = CpSatBatched(problem, upper, resolution or None, plugins, deadline=deadline,
                                           lower_bound=relaxed)
                else:
                    from mapsched.formulations.batched_milp import (
                        MilpBatched,  # Pyomo: loaded only for HiGHS (a slow import)
                    )

                    model_b = MilpBatched(problem, upper, resolution or None, plugins)
                model_b.hint(best[0] if best else start)
                out = batched(model_b)
        except TimeoutError:
            return _out_of_time(best, log)
        log += out["log"]
        final = retime_jobs(problem, out["jobs"]) if out["jobs"] else None
    elif backend == "highs":
        from mapsched.formulations.milp import build_model, set_start, solve_model

        model = build_model(problem, upper, plugins, load_cut_terms)
        set_start(model, problem, start)
        out = solve_model(model, ctx.remaining_or_none(), ctx.threads, warmstart=True, log=ctx.log,
                          detect_symmetry=solver_symmetry)
        log = f"model built in {model.build_seconds:.3f} s\n" + out["log"]
        final = retime(problem, out["owner"][:, None], out["starts"]) if out["owner"] is not None else None
    else:
        try:
            model_c = CpSatModel(problem, upper, resolution or None, plugins, load_cut_terms,
                                 deadline=time.perf_counter() + ctx.remaining())
        except TimeoutError:
            return _out_of_time(best)
        model_c.hint(start)
        if lns and ctx.time_limit is not None and problem.n > STALL_TASKS and not hint_only:
            stall = STALL_SHARE * ctx.remaining()
        out = model_c.solve(ctx.remaining_or_none(), ctx.threads, seed, ctx.log,
                            lambda sol, bound: keep(retime(problem, sol[0][:, None], sol[1], sol[2]), bound),
                            solver_symmetry, stall=stall)
        log = f"resolution {model_c.res:g} ticks/ms\n" + out["log"]
        if problem.contended and not model_c.turns:
            log += (f"transfers take turns, but the model would need over {TRANSFER_INTERVALS:,} intervals for them: "
                    "it leaves them out (its bound holds), and its schedules are re-timed with them\n")
        final = (retime(problem, out["owner"][:, None], out["starts"], out["transfer_starts"])
                 if out["owner"] is not None else None)
    if final is not None:
        keep(final, out["bound"])
    # A best schedule that its proof does not meet, with time left to close the gap.
    short = bool(best) and not ctx.expired() and not meets(best[0].makespan, max(out["bound"], ctx.fast_bound))
    if short and out["optimal"] and backend == "cpsat" and problem.L == 1 and not resolution and not hint_only \
            and default_resolution(best[0].makespan) > model_c.res:
        # Proved in ticks sized for a far longer start: the times rounded down to them leave the
        # proof a few ticks short of the schedule found. Ticks sized for that schedule close it.
        s = improve(problem, best[0], ctx, backend, resolution, plugins, hint_only, solver_symmetry,
                    load_cut_terms, lns)
        s.log = log + s.log
        return s
    if short and stall is not None and not out["optimal"]:
        # The whole model stopped before the limit without a proof: it stalled. Large-
        # neighbourhood search re-solves parts of its best schedule for the time left.
        log += (f"whole model: no new schedule in {stall:.3g} s, at {best[0].makespan:.6g} ms; "
                f"lns for the {ctx.remaining():.3g} s left\n")
        ctx.fast_bound = max(ctx.fast_bound, out["bound"])
        best[:] = [improve_lns(problem, best[0], ctx)]
        log += best[0].log.splitlines()[-1] + "\n"
    if not best:
        raise InfeasibleError("exact: no schedule satisfies the plugins' constraints "
                              + ("(proved)" if out["optimal"] else "(none found within the time limit)"))
    if problem.L > 1:
        return _finish(best[0], None, log + batched_note(best[0].makespan, out["bound"]))
    return _finish(best[0], out["bound"], log)


def _quarter(ctx: SolveContext) -> float | None:
    """A quarter of the time left, or None without a time limit."""
    left = ctx.remaining_or_none()
    return None if left is None else left / 4


def batched_note(makespan: float, bound: float | None) -> str:
    """What the batched models prove. They run each task at most once per device (one batch
    of any size), while the format lets a task run several jobs on one device, which can be
    faster; so their bound holds only among such schedules and is not claimed as a lower
    bound (:func:`mapsched.bounds.lower_bound` gives one)."""
    if bound is None or bound != bound:
        return "batched model: no bound\n"
    among = "optimal" if meets(makespan, bound) else f"no schedule ends before {bound:.9g} ms"
    return (f"batched model: {among} among schedules with one job per task and device; several "
            "jobs per device may be faster, so it is not a lower bound\n")


def serial_bound(problem: Problem) -> float:
    """No semi-active schedule ends later than all longest jobs and transfers in a row: for
    L inputs, at most L jobs of a task (each at most its longest batch) and 2L transfers of
    an edge (each of at most L inputs' bytes)."""
    p = problem
    comm = np.where(np.isfinite(p.comm), p.comm, 0.0).max(axis=(1, 2)).sum() if p.E else 0.0
    if p.L == 1:
        return float(np.where(p.can_run, p.dur, 0).max(axis=1).sum() + comm)
    longest = np.where(np.isfinite(p.lat), p.lat, 0.0).max(axis=(1, 2)).sum()  # batch 1 may be missing
    return float(p.L * longest + 2 * p.L * p.L * comm)


def _out_of_time(best: list[Schedule], log: str = "") -> Schedule:
    """The best schedule so far, with no bound, when the time limit ran out while a CP-SAT
    model was built; without one (the plugins cut off the start), no schedule is known."""
    if not best:
        raise InfeasibleError("exact: no schedule satisfies the plugins' constraints "
                              "(no time left to build the model)") from None
    return _finish(best[0], None, log + "no time left to build the CP-SAT model: the best schedule so far is kept\n")


def _finish(s: Schedule, bound: float | None, log: str) -> Schedule:
    s.lower_bound = bound if bound is not None and bound == bound else None
    s.status = "feasible"  # solve() promotes it to optimal when it meets the bound
    s.log = log
    return s
