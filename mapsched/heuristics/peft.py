"""``peft``: Predict Earliest Finish Time (Arabnejad and Barbosa, 2014).

HEFT with a look-ahead. The *optimistic cost table* ``OCT[i, u]``
(:func:`mapsched.scheduling.ranks.optimistic_cost`) is the longest path
from the end of task i on device u to an exit, when every later task runs on its best
device for that path and pays a transfer only where it changes device:

    OCT[i, u] = max over children j of min over devices v of
                (OCT[j, v] + t[j, v] + comm(i -> j, u, v)),   0 at the exits.

Ready tasks are taken by decreasing mean OCT over the devices that can run them, and
each goes to the device minimising its earliest finish time (with insertion) plus its
OCT there, so a task is not put where it finishes first but leaves its children a long
way to go (a slow device's queue, or a transfer over a slow link).

One deviation from the paper: a transfer costs its link's latency and bandwidth for that
pair of devices (``inf`` where there is no link), not the mean over all links, since
mapsched knows each link; the paper's systems have one uniform network, where the two
agree. Neither dominates: the look-ahead pays where a greedy finish leaves the rest of the
graph a slow device or link (traced training steps, networks whose links differ from pair to
pair) and costs where every device is about as good (small random DAGs), so the default
pipeline tries both.
"""

from __future__ import annotations

import numpy as np

from mapsched.engine.context import SolveContext
from mapsched.engine.registry import register
from mapsched.model.problem import Problem
from mapsched.model.schedule import Schedule
from mapsched.scheduling.construct import construct, finish
from mapsched.scheduling.decoder import ready_order
from mapsched.scheduling.ranks import optimistic_cost


@register("peft", "Predict Earliest Finish Time: HEFT with an optimistic cost look-ahead "
          "(Arabnejad and Barbosa 2014)", objectives=("latency",))
def peft(problem: Problem, ctx: SolveContext) -> Schedule:
    """O(E m^2) for the table, O(n log n + E) for the order, then O(n m) trials with
    insertion.

    Examples
    --------
    >>> import mapsched
    >>> p = mapsched.instances.load("topcuoglu2002")
    >>> s = mapsched.solve(p, "peft")
    >>> s.makespan, mapsched.validate(p, s)
    (85.0, [])
    """
    p = problem
    table = optimistic_cost(p)
    ok = np.isfinite(table) & p.can_run
    rank = np.where(ok, table, 0.0).sum(axis=1) / np.maximum(ok.sum(axis=1), 1)  # mean OCT

    def rule(i, tried, b):
        return min(tried, key=lambda tr: (finish(tr[1]) + table[i, tr[0][0][0]], finish(tr[1])))

    s = construct(p, ready_order(p, rank), rule, insertion=True)
    ctx.improved(s.makespan)
    return s
