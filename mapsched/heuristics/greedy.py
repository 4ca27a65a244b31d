"""``greedy`` and ``bgreedy``: each task, in topological order, goes where the
latency of everything scheduled so far grows least, communication included."""

from __future__ import annotations

from mapsched.engine.context import SolveContext
from mapsched.engine.registry import register
from mapsched.model.problem import Problem
from mapsched.model.schedule import Schedule
from mapsched.scheduling.construct import construct, finish


def _greedy(problem: Problem, ctx: SolveContext) -> Schedule:
    """O(n k) trials for k options per task."""
    s = construct(problem, problem.topo.tolist(),
                  lambda i, tried, b: min(tried, key=lambda t: (max(b.finish, finish(t[1])), finish(t[1]))),
                  insertion=False)
    ctx.improved(s.makespan)
    return s


greedy = register("greedy", "each task where the partial makespan grows least", objectives=("latency",))(_greedy)
bgreedy = register("bgreedy", "batched greedy: each task's split where the partial makespan grows least",
                   objectives=("throughput",))(_greedy)
