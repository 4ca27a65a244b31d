"""PEFT: the optimistic cost table against its definition, the look-ahead it buys, and its
place among the default pipeline's list schedulers."""

import math

from hypothesis import given
from strategies import problems

from mapsched import Device, Edge, Link, Problem, System, Task, solve, validate
from mapsched.scheduling.best_list import best_list_schedule
from mapsched.scheduling.ranks import optimistic_cost


def reference_table(p: Problem) -> dict[tuple[int, int], float]:
    """OCT by memoised recursion over the task names, straight from the paper's formula."""
    memo: dict[tuple[int, int], float] = {}

    def time(j, v):
        return p.dur[j, v] if p.can_run[j, v] else math.inf

    def oct_(i, u):
        if (i, u) not in memo:
            memo[i, u] = max((min(oct_(p.dst[e], v) + time(p.dst[e], v)
                                  + (0.0 if u == v else p.device_comm(p.nbytes[e], u, v))
                                  for v in range(p.m))
                              for e in p.out_edges[i]), default=0.0)
        return memo[i, u]

    return {(i, u): oct_(i, u) for i in range(p.n) for u in range(p.m)}


@given(problems(max_tasks=9, max_devices=4))
def test_table_follows_its_definition(p):
    table = optimistic_cost(p)
    for (i, u), value in reference_table(p).items():
        assert table[i, u] == value or math.isclose(table[i, u], value, rel_tol=1e-12)


def trap() -> Problem:
    """a finishes first on d0, but b is ten times slower there and the link is slow."""
    tasks = [Task("a", {"d0": 1.0, "d1": 2.0}), Task("b", {"d0": 10.0, "d1": 1.0})]
    system = System((Device("d0"), Device("d1")), (Link("d0", "d1", bandwidth=1000.0),))
    return Problem(tasks, [Edge("a", "b", bytes=5.0)], system)  # 5 ms from d0 to d1


def test_look_ahead_avoids_the_earliest_finish_trap():
    p = trap()
    heft, peft = solve(p, "heft"), solve(p, "peft")
    assert validate(p, peft) == []
    assert heft.makespan == 7.0  # a on d0 (1), its data to d1 (5), b there (1)
    assert peft.makespan == 3.0  # a on d1 (2), b after it (1)
    assert {j.task: j.device for j in peft.jobs} == {"a": "d1", "b": "d1"}


def test_default_pipeline_tries_peft():
    p = trap()
    s = best_list_schedule(p)
    assert s.method == "peft" and "peft 3" in s.log
    assert solve(p).method.startswith("auto: peft")
