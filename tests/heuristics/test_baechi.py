"""Baechi's m-TOPO, m-ETF and m-SCT: validity under memory, restrictions and missing links,
hand-checked placements, the favourite-child LP and its rounding, and the ETF heap's work."""

import numpy as np
import pytest
from hypothesis import given
from strategies import problems

import mapsched
from mapsched import Device, InfeasibleError, Link, Problem, System, Task, solve, validate
from mapsched.heuristics.baechi import (
    etf_placement,
    favourite_children,
    favourite_lp,
    memory_shortfall,
    topo_placement,
)
from mapsched.solve import SolveContext

METHODS = ["m-topo", "m-etf", "m-sct"]


def system(memory=(float("inf"), float("inf")), linked=True):
    devs = tuple(Device(f"d{u}", mem) for u, mem in enumerate(memory))
    links = tuple(Link(a.name, b.name, 1000.0) for k, a in enumerate(devs) for b in devs[k + 1:]) if linked else ()
    return System(devs, links)


def chain(n, need, sys, latency=None):
    """n tasks in a chain, each holding ``need`` bytes; ``latency`` per task, default 1 ms everywhere."""
    names = [d.name for d in sys.devices]
    tasks = [Task(f"t{i}", latency[i] if latency else {d: 1.0 for d in names}, weight_bytes=need) for i in range(n)]
    edges = [mapsched.Edge(f"t{i}", f"t{i + 1}", 0.0) for i in range(n - 1)]
    return Problem(tasks, edges, sys)


@pytest.mark.parametrize("name", METHODS)
@given(p=problems(max_tasks=12, max_devices=4))
def test_schedules_are_valid_under_memory_restrictions_and_missing_links(name, p):
    # Every drawn problem has a feasible (planted) mapping: a method must find a valid schedule.
    r = solve(p, name, time_limit=10, threads=1)
    assert validate(p, r) == []
    assert r.method == name and r.lower_bound <= r.makespan * (1 + 1e-9)


@given(p=problems(max_tasks=12, max_devices=4))
def test_memory_shortfall_passes_every_feasible_problem(p):
    assert memory_shortfall(p) is None


def test_memory_shortfall_names_the_devices_and_the_missing_bytes():
    # four 35-byte tasks that only d0 and d1 run (60 bytes each); d2 is roomy but runs none of them
    tasks = [Task(f"t{i}", {"d0": 1.0, "d1": 1.0}, weight_bytes=35) for i in range(4)]
    p = Problem([*tasks, Task("z", {"d2": 1.0}, weight_bytes=10)], [], system((60, 60, 1000)))
    for name in METHODS:
        with pytest.raises(InfeasibleError, match=f"^{name}: no mapping fits memory: devices 'd0', 'd1' have 120 "
                                                  "bytes of memory, the tasks only they can run need 140: 20 bytes short$"):
            solve(p, name)


def test_m_topo_fills_device_0_up_to_the_uniform_cap_before_device_1():
    # 6 tasks of 10 bytes on 2 devices: cap = 60 / 2 + 10 = 40, so 4 tasks, then 2.
    p = chain(6, 10, system())
    assert topo_placement(p).owner.tolist() == [0, 0, 0, 0, 1, 1]
    r = solve(p, "m-topo")
    assert validate(p, r) == [] and [j.device for j in sorted(r.jobs, key=lambda j: j.start)] == ["d0"] * 4 + ["d1"] * 2


def test_m_topo_memory_cap_uses_each_device_to_its_memory_and_never_past_it():
    p = chain(6, 10, system((50, 100)))
    assert topo_placement(p, "memory").owner.tolist() == [0, 0, 0, 0, 0, 1]
    # the uniform cap (40) never lets a device past its own memory: 30 bytes hold 3 tasks
    assert topo_placement(chain(6, 10, system((30, 100)))).owner.tolist() == [0, 0, 0, 1, 1, 1]


def test_m_topo_sends_a_task_its_device_cannot_run_ahead_without_moving_on():
    # t1 runs only on d1; the fill stays on d0 (cap 4 * 10 / 2 + 10 = 30 bytes).
    lat = [{"d0": 1.0, "d1": 1.0}, {"d1": 1.0}, {"d0": 1.0, "d1": 1.0}, {"d0": 1.0, "d1": 1.0}]
    assert topo_placement(chain(4, 10, system(), lat)).owner.tolist() == [0, 1, 0, 0]
    # without a link, t0 on d0 leaves t1 nowhere: the repair moves the chain to d1
    p = chain(4, 10, system(linked=False), lat)
    assert topo_placement(p).owner.tolist() == [0, -1, -1, -1]
    r = solve(p, "m-topo")
    assert validate(p, r) == [] and {j.device for j in r.jobs} == {"d1"} and "feasibility repair" in r.log


def fork(comm):
    """a (1 ms) forks into b (2 ms) and c (3 ms) over edges of ``comm`` ms, on two identical devices."""
    return Problem.from_arrays([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]], [(0, 1, comm), (0, 2, comm)])


def test_m_etf_on_a_fork():
    # a runs on d0 until 1. c (higher rank) starts at 1 on d0 and at 1 + comm on d1: d0.
    # b then starts at 4 on d0 or 1 + comm on d1: d1 when comm < 3, d0 otherwise.
    assert etf_placement(fork(1)).owner.tolist() == [0, 1, 0]
    assert etf_placement(fork(4)).owner.tolist() == [0, 0, 0]
    r = solve(fork(1), "m-etf")
    assert validate(fork(1), r) == [] and r.makespan == 4.0


def test_m_etf_memory_dead_end_is_repaired():
    # ETF puts x on d0 (it finishes there first); then y, which only d0 runs, no longer fits.
    tasks = [Task("x", {"d0": 1.0, "d1": 10.0}, weight_bytes=60), Task("y", {"d0": 5.0}, weight_bytes=60)]
    p = Problem(tasks, [], system((100, 100)))
    assert etf_placement(p).owner.tolist() == [0, -1]
    for name in METHODS:
        r = solve(p, name)
        assert validate(p, r) == [] and "feasibility repair" in r.log
        assert {j.task: j.device for j in r.jobs} == {"x": "d1", "y": "d0"}


def test_m_sct_keeps_the_device_for_the_favourite_child():
    # a forks into f (1 ms) and g (2 ms, higher rank) over 10 ms edges. ETF runs g first
    # after a on d0; with f as a's favourite child, d0 runs f first (g is not urgent: its
    # data reaches d1 only at 11).
    p = Problem.from_arrays([[1.0, 1.0], [1.0, 1.0], [2.0, 2.0]], [(0, 1, 10), (0, 2, 10)])
    assert etf_placement(p).order == [0, 2, 1]
    assert etf_placement(p, np.array([1, -1, -1])).order == [0, 1, 2]
    # an urgent task (its data is everywhere already) goes before the favourite child
    p = Problem.from_arrays([[1.0, 1.0], [1.0, 1.0], [2.0, 2.0], [0.5, np.inf]], [(0, 1, 10), (0, 2, 10)])
    assert etf_placement(p, np.array([1, -1, -1, -1])).order[:3] == [0, 3, 2]


def test_favourite_lp_and_rounding():
    # a chain: every edge favourite, the LP makespan is the sum of times
    p = Problem.from_arrays([[1.0, 3.0]] * 4, [(0, 1, 5), (1, 2, 5), (2, 3, 5)])
    x, w = favourite_lp(p)
    assert x.tolist() == [0.0, 0.0, 0.0] and w == pytest.approx(8.0)
    assert favourite_children(p, x).tolist() == [1, 2, 3, -1]
    # a diamond with all edges below the threshold: at most one favourite child and parent each
    p = Problem.from_arrays([[1.0, 1.0]] * 4, [(0, 1, 1), (0, 2, 2), (1, 3, 3), (2, 3, 4)])
    # (costliest edge first: 2->3 wins 3's parent, so 1->3 is dropped; 0->2 then wins 0's child)
    assert favourite_children(p, np.zeros(4)).tolist() == [2, -1, 3, -1]
    assert favourite_children(p, np.full(4, 0.5)).tolist() == [-1, -1, -1, -1]
    assert favourite_children(p, np.full(4, 0.5), threshold=0.6).tolist() == [2, -1, 3, -1]


@pytest.mark.parametrize("favourites", [False, True])
def test_etf_heap_work_grows_with_n_m_not_with_ready_set_times_events(favourites):
    # O(n m log n): each ready task enters each heap of each device at most once.
    for n in (300, 1200):
        p = mapsched.generators.random_dag(n, 4, seed=n)
        fav = favourite_children(p, favourite_lp(p)[0]) if favourites else None
        pl = etf_placement(p, fav)
        assert len(pl.order) == n and not pl.hurried
        assert pl.pushes <= (3 if favourites else 2) * n * p.m


def test_expired_time_limit_finishes_in_rank_order():
    p = mapsched.generators.random_dag(500, 3, seed=2)
    ctx = SolveContext(time_limit=1e-9)
    pl = etf_placement(p, ctx=ctx)
    assert pl.hurried and sorted(pl.order) == list(range(p.n))
    r = solve(p, "m-sct", time_limit=1e-3)
    assert validate(p, r) == [] and "time limit" in r.log
