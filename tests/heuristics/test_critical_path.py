"""``critical-path``: DOPPLER's Critical Path heuristic, scored by the work-conserving model."""

import numpy as np
from hypothesis import given, settings
from strategies import problems

from mapsched import Device, Edge, Link, Problem, System, Task, instances, solve, validate
from mapsched.generators import random_dag
from mapsched.scheduling.decoder import ready_order
from mapsched.scheduling.simulate import simulate


def gpus(k):
    names = [f"g{u}" for u in range(k)]
    return names, System(tuple(Device(d) for d in names),
                         tuple(Link(a, b, 1e9) for i, a in enumerate(names) for b in names[i + 1:]))


def test_fork_runs_in_parallel():
    names, system = gpus(2)
    lat = {d: 1 for d in names}
    tasks = [Task("s", lat), Task("a", {d: 10 for d in names}), Task("b", {d: 10 for d in names})]
    p = Problem(tasks, [Edge("s", "a", 1e5), Edge("s", "b", 1e5)], system)  # 0.1 ms across
    r = solve(p, "critical-path", seed=0)
    assert r.makespan == 11.1 and {j.device for j in r.jobs if j.task in "ab"} == set(names)


def test_highest_b_level_first_and_earliest_start():
    # s feeds a long chain (c1 -> c2) and a short task t: the chain head goes first, on s's device;
    # t then starts earliest on the other device after the transfer.
    names, system = gpus(2)
    same = lambda v: {d: v for d in names}  # noqa: E731
    tasks = [Task("s", same(1)), Task("t", same(2)), Task("c1", same(5)), Task("c2", same(5))]
    p = Problem(tasks, [Edge("s", "t", 1e5), Edge("s", "c1", 1e5), Edge("c1", "c2", 1e5)], system)
    for seed in range(5):
        got = {j.task: (j.device, j.start) for j in solve(p, "critical-path", seed=seed, runs=1).jobs}
        assert got["c1"][1] == 1 and got["c2"][0] == got["c1"][0] == got["s"][0]
        assert got["t"][0] != got["s"][0] and got["t"][1] == 1.1


def test_result_is_its_mapping_simulated_and_best_of_runs():
    p = random_dag(60, 3, seed=2, jitter=0.0, speeds=[1, 1, 1])
    for seed in range(3):
        r = solve(p, "critical-path", seed=seed, runs=20)
        assert validate(p, r) == []
        assert simulate(p, r.mapping()).jobs == r.jobs
        assert "best of 20 runs" in r.log
        assert r.makespan <= solve(p, "critical-path", seed=seed, runs=1).makespan  # the first of the 20


def test_ties_are_random_and_seeded():
    names, system = gpus(4)
    p = Problem([Task(f"t{i}", {d: 1 for d in names}) for i in range(4)], [], system)
    maps = {tuple((j.task, j.device) for j in solve(p, "critical-path", seed=s, runs=1).jobs) for s in range(8)}
    assert len(maps) > 1
    a, b = solve(p, "critical-path", seed=3), solve(p, "critical-path", seed=3)
    assert a.jobs == b.jobs and a.makespan == 1


def test_ready_order_tie_breaker():
    p = Problem([Task(f"t{i}", {"a": 1}) for i in range(4)], [Edge("t0", "t3")], System((Device("a"),)))
    prio = np.zeros(4)
    assert ready_order(p, prio) == [0, 1, 2, 3]
    assert ready_order(p, prio, [3, 2, 1, 0]) == [2, 1, 0, 3]


@settings(max_examples=30)
@given(problems(throughput=False, max_tasks=7))
def test_memory_and_links_are_kept(p):
    r = solve(p, "critical-path", seed=0, runs=5)
    assert validate(p, r) == []


def test_topcuoglu_within_bounds():
    r = solve(instances.load("topcuoglu2002"), "critical-path", seed=1)
    assert 41 <= r.makespan <= 127
