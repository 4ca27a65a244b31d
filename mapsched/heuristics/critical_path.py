"""``critical-path``: DOPPLER's Critical Path list heuristic, as the paper intends it.

The baseline, imitation teacher and fallback policy of DOPPLER (Yao et al. 2025,
after Kwok and Ahmad's critical-path list scheduling). It builds an assignment
only; the work-conserving runtime (:mod:`mapsched.scheduling.simulate`) decides the timing.

- b-level: a task's mean cost plus the longest path of mean costs and mean
  transfers to an exit (HEFT's upward rank; on DOPPLER's graphs, identical GPUs
  and a transfer cost set by the producer, exactly the paper's
  ``b(v) = comp(v) + comm(v) + max_s b(s)``).
- Selection: among the unassigned tasks whose parents are all assigned, the one of
  highest b-level, uniformly at random among ties.
- Placement: the device of earliest start, ``max(parents' ends + transfers, the
  device's last end)`` on the list schedule built so far, uniformly at random
  among ties. (The paper compares start times, not finish times: on devices of
  different speeds it ignores the speed.)
- ``runs`` randomised runs (the paper's 50); each assignment is scored by the
  work-conserving runtime model, and the best run's simulated schedule is returned.

The released code differs in two places (the notes on DOPPLER: the k-th random tie
picks the oldest candidate, and a start is the device's load, not the earliest
start); those are bugs, not reproduced here.

Memory and missing links: a device that cannot hold the task or receive its data
is not an option; when no option is left the run is finished by the feasibility
repair of :mod:`mapsched.scheduling.construct`.
"""

from __future__ import annotations

import time

from mapsched.engine.context import SolveContext
from mapsched.engine.registry import Option, register
from mapsched.model.problem import Problem
from mapsched.model.schedule import Schedule
from mapsched.scheduling.construct import construct
from mapsched.scheduling.decoder import ready_order
from mapsched.scheduling.ranks import upward_rank
from mapsched.scheduling.simulate import simulate


@register(
    "critical-path",
    "DOPPLER's Critical Path list heuristic: highest b-level ready task on its earliest-start device, "
    "random ties; best of N runs under the work-conserving runtime model",
    objectives=("latency",),
    options=(Option("runs", int, 50, "randomised runs; the best under the work-conserving model is kept",
                    positive=True),),
)
def critical_path(problem: Problem, ctx: SolveContext, runs: int) -> Schedule:
    """Best of ``runs`` randomised Critical Path assignments, simulated. O(runs (n m + E) log n).

    Examples
    --------
    >>> import mapsched
    >>> r = mapsched.solve(mapsched.instances.load("topcuoglu2002"), "critical-path", seed=0)
    >>> mapsched.validate(mapsched.instances.load("topcuoglu2002"), r)
    []
    """
    p, rng = problem, ctx.rng
    b_level = upward_rank(p)

    def earliest_start(i, tried, builder):
        starts = [trial[0][2] for _, trial in tried]
        first = min(starts)
        ties = [k for k, s in enumerate(starts) if s == first]
        return tried[ties[int(rng.integers(len(ties)))] if len(ties) > 1 else ties[0]]

    best, done, slowest = None, 0, 0.0
    while done < runs:
        done += 1
        began = time.perf_counter()
        order = ready_order(p, b_level, rng.permutation(p.n).tolist())
        static = construct(p, order, earliest_start, insertion=False)
        s = simulate(p, static.mapping())
        if best is None or s.makespan < best.makespan:
            best, best_static = s, static
            ctx.improved(s.makespan)
        slowest = max(slowest, time.perf_counter() - began)
        if ctx.expired() or (ctx.time_limit is not None and ctx.remaining() < slowest):  # no time for another
            break
    best.log += (f"best of {done} runs: work-conserving makespan {best.makespan:.6g} "
                 f"(its list schedule: {best_static.makespan:.6g})\n{best_static.log}")
    return best
