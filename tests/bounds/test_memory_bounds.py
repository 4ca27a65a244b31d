"""The bounds that see memory and transfers (issue #68): sound against the exhaustive optimum
on small random problems, memory-tight and transfer-heavy ones included, and below every
heuristic's makespan on larger ones; strictly above the old quick bounds where memory or
transfers bind; and ``full_bound`` at least the exact model's own bound."""

import networkx as nx
import numpy as np
import pytest
from exhaustive import exhaustive_batched_optimum, exhaustive_optimum
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import problems

import mapsched
from mapsched import Device, Edge, Link, Objective, Problem, System, Task
from mapsched.bounds import (
    critical_path_bound,
    interval_load_bound,
    load_bound,
    lower_bound,
    memory_chain_bound,
    memory_load_bound,
    transfer_path_bound,
    work_bound,
)
from mapsched.bounds.memory import device_times, memory_binds
from mapsched.split import full_bound

# (transfers, tight): the usual problems, transfers as long as the tasks, memory-tight, both
KINDS = [(1.0, False), (20.0, False), (1.0, True), (20.0, True)]


def old_quick(p: Problem) -> float:
    """What lower_bound proved before these rules (the interval LP had no memory rows: on
    the problems below it is the load LP or less)."""
    return max(critical_path_bound(p), work_bound(p), load_bound(p))


def every_path(p: Problem) -> list[list[int]]:
    g = nx.DiGraph(zip(p.src.tolist(), p.dst.tolist()))
    return [[i] for i in range(p.n)] + [path for a in g for b in g if a != b for path in nx.all_simple_paths(g, a, b)]


def _sound(p: Problem, opt: float) -> None:
    assert transfer_path_bound(p) <= opt * (1 + 1e-9) + 1e-9
    assert memory_load_bound(p) <= opt * (1 + 1e-9) + 1e-9
    assert interval_load_bound(p) <= opt * (1 + 1e-9) + 1e-9  # with its memory rows
    assert memory_chain_bound(p) <= opt * (1 + 1e-9) + 1e-9
    # every path, not only the two it picks by default: its memory priced in on the longer ones
    assert memory_chain_bound(p, every_path(p)) <= opt * (1 + 1e-9) + 1e-9
    assert lower_bound(p).value <= opt * (1 + 1e-9) + 1e-9


@settings(max_examples=60, deadline=None)
@given(p=problems(max_tasks=6, max_devices=3, transfers=20.0))
def test_below_the_optimum_with_heavy_transfers(p):
    _sound(p, exhaustive_optimum(p))


@settings(max_examples=60, deadline=None)
@given(p=problems(max_tasks=6, max_devices=3, tight=True))
def test_below_the_optimum_when_memory_is_tight(p):
    _sound(p, exhaustive_optimum(p))


@settings(max_examples=60, deadline=None)
@given(p=problems(max_tasks=6, max_devices=3, transfers=20.0, tight=True))
def test_below_the_optimum_when_memory_is_tight_and_transfers_heavy(p):
    _sound(p, exhaustive_optimum(p))


@settings(max_examples=40, deadline=None)
@given(p=problems(max_tasks=6, max_devices=3))
def test_below_the_optimum_of_the_usual_problems(p):
    _sound(p, exhaustive_optimum(p))


@settings(max_examples=30, deadline=None)
@given(problems(max_tasks=3, max_devices=2, throughput=True, max_batch=3, transfers=20.0, tight=True)
       .filter(lambda p: p.n * p.L <= 6))
def test_below_the_throughput_optimum(p):
    opt = exhaustive_batched_optimum(p)
    assert transfer_path_bound(p) <= opt * (1 + 1e-9) + 1e-9
    assert memory_load_bound(p) <= opt * (1 + 1e-9) + 1e-9
    assert memory_chain_bound(p) <= opt * (1 + 1e-9) + 1e-9


@pytest.mark.parametrize("transfers,tight", KINDS)
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_below_every_heuristic_on_larger_problems(transfers, tight, data):
    p = data.draw(problems(max_tasks=30, max_devices=4, transfers=transfers, tight=tight, throughput=None))
    path, mem, quick = transfer_path_bound(p), max(memory_load_bound(p), memory_chain_bound(p)), lower_bound(p).value
    methods = ("heft", "peft") if p.L == 1 else ("bheft",)
    spans = [mapsched.solve(p, method).makespan for method in methods] + [mapsched.decode(p, p.planted).makespan]
    for span in spans:
        assert max(path, mem, quick) <= span * (1 + 1e-9) + 1e-9


@given(p=problems(max_tasks=10, max_devices=3, throughput=None, transfers=5.0, tight=True))
def test_the_path_holds_the_critical_path_and_the_memory_lp_the_load_lp(p):
    assert transfer_path_bound(p) >= critical_path_bound(p) * (1 - 1e-9)
    assert memory_load_bound(p) >= load_bound(p) * (1 - 1e-6)
    if not memory_binds(p):
        assert memory_load_bound(p) == pytest.approx(load_bound(p), rel=1e-6)


@given(p=problems(max_tasks=12, max_devices=4, transfers=5.0, tight=True))
def test_the_interval_lp_holds_the_memory_lp_with_every_window(p):
    # summing each device's load and memory rows over the intervals gives the memory LP's
    assert interval_load_bound(p, columns=10**7, cuts=p.n) >= memory_load_bound(p) * (1 - 1e-6)


def test_device_times_keep_what_fits():
    p = tight_problem()
    t = device_times(p)
    assert np.array_equal(np.isfinite(t), p.can_run)


def tight_problem() -> Problem:
    """Four independent tasks: 1 ms on a GPU that holds one of them, 4 ms on a CPU that holds
    all. The optimum is 12 (one on the GPU, three on the CPU); the load LP puts 3.2 tasks on
    the GPU (3.2 ms)."""
    tasks = [Task(f"t{i}", {"gpu": 1.0, "cpu": 4.0}, 60.0, 10.0, 10.0) for i in range(4)]
    devices = (Device("gpu", 80.0), Device("cpu"))
    return Problem(tasks, [], System(devices, (Link("gpu", "cpu", 1000.0),)))


def transfer_problem() -> Problem:
    """A chain a -> b -> c: a runs only on d0, c only on d2, b anywhere but the middle device
    d1 cannot hold b beside anything; 500 bytes at 100 kB/s (5 ms) per transfer."""
    tasks = [Task("a", {"d0": 2.0}, 0, 0, 10), Task("b", {"d0": 3.0, "d1": 1.0, "d2": 3.0}, 50, 10, 10),
             Task("c", {"d2": 2.0}, 0, 10, 0)]
    devices = (Device("d0"), Device("d1", 80.0), Device("d2"))
    links = (Link("d0", "d1", 1e5), Link("d1", "d2", 1e5), Link("d0", "d2", 1e5))
    return Problem(tasks, [Edge("a", "b", 500.0), Edge("b", "c", 500.0)], System(devices, links))


def test_memory_beats_the_old_quick_bound_strictly():
    p = tight_problem()
    assert old_quick(p) == pytest.approx(3.2, rel=1e-6)
    assert memory_load_bound(p) == pytest.approx(12.0, rel=1e-6) and memory_load_bound(p) <= 12.0
    b = lower_bound(p)
    assert b.rule == "memory-load" and b.value > old_quick(p) * 3
    assert interval_load_bound(p) == pytest.approx(12.0, rel=1e-6)  # its memory rows
    assert mapsched.solve(p, "exact").status == "optimal"  # the bound proves heft's 12 optimal
    assert mapsched.solve(p, "heft").lower_bound == pytest.approx(12.0, rel=1e-6)


def test_transfers_beat_the_old_quick_bound_strictly():
    # Every path from d0 to d2 pays at least one 5 ms transfer: 2 + 5 + 3 + 2 = 12 with b on d0
    # or d2 (d1, at 1 ms, costs two transfers: 15).
    p = transfer_problem()
    assert old_quick(p) == pytest.approx(5.0)
    assert transfer_path_bound(p) == pytest.approx(12.0)
    assert lower_bound(p).rule == "transfer-path"
    assert exhaustive_optimum(p) == pytest.approx(12.0)


def chain_problem() -> Problem:
    """A chain a -> b -> c: 1 ms each on a GPU that holds two of them, 10 ms on a CPU; 5 ms
    per transfer. Two on the GPU and one on the CPU is optimal, at 17."""
    tasks = [Task(x, {"gpu": 1.0, "cpu": 10.0}, 20.0, 10.0, 10.0) for x in "abc"]
    devices = (Device("gpu", 100.0), Device("cpu"))
    return Problem(tasks, [Edge("a", "b", 500.0), Edge("b", "c", 500.0)],
                   System(devices, (Link("gpu", "cpu", 1e5),)))


def test_memory_along_a_path_beats_the_old_quick_bound_strictly():
    p = chain_problem()
    assert transfer_path_bound(p) == pytest.approx(3.0)  # any two fit together
    assert memory_load_bound(p) == pytest.approx(5.0, rel=1e-6)  # 2.5 tasks' memory on the GPU
    assert memory_chain_bound(p) == pytest.approx(17.0)
    b = lower_bound(p)
    assert b.rule == "memory-path" and b.value > 3 * old_quick(p)
    assert exhaustive_optimum(p) == pytest.approx(17.0)


def test_pricing_the_memory_of_a_path_proves_more_than_runs_that_fit_one_at_a_time():
    # a -> b -> c -> d on a GPU that holds two of them: runs of two fit one at a time, so the
    # cut ab | c | d (GPU, CPU, GPU) passes without the prices, not with them
    tasks = [Task(x, {"gpu": 1.0, "cpu": 10.0}, 20.0, 10.0, 10.0) for x in "abcd"]
    p = Problem(tasks, [Edge(a, b, 500.0) for a, b in ("ab", "bc", "cd")],
                System((Device("gpu", 100.0), Device("cpu")), (Link("gpu", "cpu", 1e5),)))
    opt = exhaustive_optimum(p)
    assert opt == pytest.approx(27.0)
    assert memory_chain_bound(p, dual_steps=0) == pytest.approx(23.0)
    priced = memory_chain_bound(p)
    assert 23.0 + 1.0 < priced <= opt * (1 + 1e-9)
    assert lower_bound(p).value >= priced


def test_the_prices_stop_at_the_time_limit():
    p = chain_problem()
    assert memory_chain_bound(p, time_limit=1e-9) == memory_chain_bound(p, dual_steps=0)


def test_the_chain_rule_stays_below_the_path_rule_without_memory_limits():
    from mapsched import instances

    p = instances.load("topcuoglu2002")
    assert memory_chain_bound(p) <= transfer_path_bound(p) * (1 + 1e-12)


def test_a_memory_tight_random_problem_gains():
    # The memory-tight problems of the strategy, with slow transfers: the new rules prove more
    # on most of them than the old quick bounds.
    from hypothesis import find

    p = find(problems(max_tasks=10, max_devices=3, transfers=20.0, tight=True, min_tasks=6),
             lambda q: lower_bound(q).value > old_quick(q) * 1.2)
    assert lower_bound(p).rule in ("transfer-path", "memory-path", "memory-load")


def fixed_problems() -> list[Problem]:
    from mapsched import instances
    from mapsched.generators import random_dag

    return [instances.load("topcuoglu2002"), tight_problem(), transfer_problem(), random_dag(12, 3, 1)]


@pytest.mark.parametrize("k", range(4))
def test_full_bound_is_at_least_the_exact_models_bound(k):
    # Each is solved to optimality well within the share: full_bound then proves the optimum,
    # which no exact solve's bound exceeds, whatever the solver's luck.
    p = fixed_problems()[k]
    exact = mapsched.solve(p, "exact", time_limit=10)
    full = full_bound(p, time_limit=10)
    assert full.value >= exact.lower_bound * (1 - 1e-6)  # the same proof, within the LP roundings
    assert full.value <= exact.makespan * (1 + 1e-9)
    assert full.rule == "exact"


def test_full_bound_skips_the_exact_model_for_throughput():
    p = tight_problem().with_objective(Objective("throughput", 2))
    assert full_bound(p, time_limit=2).rule != "exact"
