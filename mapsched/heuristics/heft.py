"""``heft`` and ``bheft``: insertion-based Heterogeneous Earliest Finish Time
(Topcuoglu, Hariri and Wu, 2002).

Tasks go in decreasing upward rank (mean cost over the devices that can run the
task, mean communication over the links); each goes to the option with the
earliest finish time, inserted into idle gaps where it fits. The batched form
ranks with mean batch times and chooses among input splits.
"""

from __future__ import annotations

from mapsched.engine.context import SolveContext
from mapsched.engine.registry import register
from mapsched.model.problem import Problem
from mapsched.model.schedule import Schedule
from mapsched.scheduling.construct import construct, earliest_finish
from mapsched.scheduling.ranks import rank_order, upward_rank


def heft_schedule(problem: Problem) -> Schedule:
    """HEFT's schedule alone (no bound, no validation): O(n log n + E) for the ranks, then
    O(n k) trials with insertion.

    Examples
    --------
    >>> import mapsched
    >>> heft_schedule(mapsched.instances.load("topcuoglu2002")).makespan
    80.0
    """
    return construct(problem, rank_order(problem, upward_rank(problem)), earliest_finish, insertion=True)


def _heft(problem: Problem, ctx: SolveContext) -> Schedule:
    """:func:`heft_schedule`.

    Examples
    --------
    >>> import mapsched
    >>> mapsched.solve(mapsched.instances.load("topcuoglu2002"), "heft").makespan
    80.0
    """
    s = heft_schedule(problem)
    ctx.improved(s.makespan)
    return s


heft = register("heft", "insertion-based HEFT (Topcuoglu et al. 2002)", objectives=("latency",))(_heft)
bheft = register("bheft", "batched HEFT: earliest-finishing input split, by upward rank",
                 objectives=("throughput",))(_heft)
