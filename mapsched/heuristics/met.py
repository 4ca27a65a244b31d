"""``met`` and ``bmet``: Minimum Execution Time.

Each task, in topological order, goes where it runs fastest (latency: its fastest
device; throughput: the split of its inputs whose slowest batch is shortest),
among the options memory and links still allow; then it is list-scheduled.
"""

from __future__ import annotations

from mapsched.engine.context import SolveContext
from mapsched.engine.registry import register
from mapsched.model.problem import Problem
from mapsched.model.schedule import Schedule
from mapsched.scheduling.construct import construct, finish, job_time


def _met(problem: Problem, ctx: SolveContext) -> Schedule:
    """O(n k) trials for k options per task."""
    s = construct(problem, problem.topo.tolist(),
                  lambda i, tried, b: min(tried, key=lambda t: (job_time(t[1]), finish(t[1]))), insertion=False)
    ctx.improved(s.makespan)
    return s


met = register("met", "Minimum Execution Time: each task on its fastest device", objectives=("latency",))(_met)
bmet = register("bmet", "batched MET: each task's inputs split so its slowest batch is shortest",
                objectives=("throughput",))(_met)
