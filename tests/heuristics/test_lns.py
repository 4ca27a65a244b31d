"""``lns``: large-neighbourhood search over CP-SAT sub-models, alone and as ``auto``'s last stage."""

import math
import time

import numpy as np
import pytest
from exhaustive import exhaustive_optimum
from hypothesis import given, settings
from hypothesis import strategies as st
from ortools.sat.python import cp_model
from strategies import problems

import mapsched
from mapsched import Objective, OptionError, decode, solve, validate
from mapsched.generators import random_dag
from mapsched.heuristics.lns import improve_lns
from mapsched.solve import SolveContext


def planted_start(p):
    """The problems' hidden feasible mapping, decoded in the breadth-first order: a poor start."""
    return decode(p, p.planted[:, 0])


@settings(max_examples=30)
@given(p=problems(max_tasks=14, max_devices=4, min_tasks=2), size=st.integers(2, 8), seed=st.integers(0, 99))
def test_small_neighbourhoods_keep_schedules_valid_and_never_worse(p, size, seed):
    # Neighbourhoods smaller than the problem: a fixed prefix, fixed tasks among the freed
    # ones and a suffix summed up by its tails, on problems with tight memory, tasks that
    # some devices cannot run and missing links.
    start = planted_start(p)
    r = improve_lns(p, start, SolveContext(rng=np.random.default_rng(seed)), steps=12, size=size, slice_=0.02)
    assert validate(p, r) == []
    assert r.makespan <= start.makespan


@settings(max_examples=15)
@given(p=problems(max_tasks=10, max_devices=3, min_tasks=2), seed=st.integers(0, 99))
def test_the_same_seed_gives_the_same_schedule(p, seed):
    start = planted_start(p)
    a, b = (improve_lns(p, start, SolveContext(rng=np.random.default_rng(seed)), steps=8, size=3, slice_=0.02)
            for _ in range(2))
    assert a.jobs == b.jobs


def test_lns_improves_on_the_list_schedules_and_is_repeatable():
    p = random_dag(200, 4, seed=3)
    heft = solve(p, "heft")
    a = solve(p, "lns", steps=12, seed=5, threads=1)
    assert validate(p, a) == [] and a.method == "lns"
    assert a.makespan < heft.makespan
    assert "lns: 12 neighbourhoods" in a.log
    assert solve(p, "lns", steps=12, seed=5, threads=1).jobs == a.jobs


def test_lns_keeps_its_time_limit():
    p = random_dag(600, 4, seed=1)
    began = time.perf_counter()
    r = solve(p, "lns", time_limit=1.5)
    took = time.perf_counter() - began
    assert validate(p, r) == [] and r.makespan <= solve(p, "heft").makespan
    assert took <= 1.5 + 0.5


def test_auto_works_until_its_time_limit():
    p = random_dag(400, 3, seed=1)
    began = time.perf_counter()
    r = solve(p, time_limit=2.0)
    took = time.perf_counter() - began
    assert validate(p, r) == [] and r.method == "auto: heft, cp-search, lns"
    if r.status != "optimal":
        assert 0.9 * 2.0 <= took <= 2.0 + 0.5
    assert r.makespan <= solve(p, "heft").makespan


def test_lns_stops_once_it_solved_the_whole_problem():
    # A neighbourhood of every task, solved to its optimum: nothing is left to search.
    p = mapsched.instances.load("topcuoglu2002")
    began = time.perf_counter()
    r = solve(p, "lns", time_limit=20, threads=1)
    assert time.perf_counter() - began < 10 and validate(p, r) == []
    assert r.makespan <= solve(p, "exact", time_limit=10).makespan * (1 + 1e-9)


def test_throughput_is_refused():
    p = random_dag(20, 3, seed=0, objective=Objective("throughput", 4))
    with pytest.raises(OptionError, match="latency"):
        solve(p, "lns", time_limit=1)


@pytest.mark.parametrize("edit", ["_link_latency", "_slow_link", "_slow_task", "_huge_memory", "_huge_binding_memory"])
def test_extreme_times_and_sizes(edit):
    # Transfers of 1e21 ms, jobs of 1e12 ms beside ones of a microsecond, memory of 1e18
    # bytes: every coefficient of the sub-models fits CP-SAT's 64 bits.
    import test_format_limits

    p = test_format_limits._edited(random_dag(12, 3, 0), getattr(test_format_limits, edit))
    start = solve(p, "met")
    for size in (3, 12):
        r = improve_lns(p, start, SolveContext(rng=np.random.default_rng(1)), steps=10, size=size)
        assert validate(p, r) == [] and r.makespan <= start.makespan


@settings(max_examples=40, deadline=None)
@given(p=problems(max_tasks=6, max_devices=3, min_tasks=2, transfers=20.0), seed=st.integers(0, 99))
def test_a_neighbourhood_of_every_task_is_the_latency_model(p, seed):
    # Links of different speeds and missing ones, transfers as long as the tasks: the rows of
    # the edges (the least cost from each device, dearer pairs on their own) neither lose nor
    # add a constraint, so the model of every task proves the exhaustive optimum, to its
    # rounding of times down to ticks.
    from mapsched.heuristics import lns as lns_module
    from mapsched.scheduling.decoder import as_owner

    start = planted_start(p)
    inc = lns_module._Incumbent(p, as_owner(p, start.mapping())[:, 0], p.topo.copy())
    sub = lns_module._Sub(inc, 0, p.n, np.arange(p.n))
    assert sub.ok  # nothing is fixed, so nothing forces the makespan
    best = exhaustive_optimum(p, start.makespan)
    status, out = sub.solve(math.inf, 10**6, seed)
    assert status == cp_model.OPTIMAL
    proved = out["M"] / sub.res
    # A path of at most n jobs and n - 1 transfers, each rounded down by under a tick
    assert best - 2 * p.n / sub.res <= proved <= best * (1 + 1e-9) + 1 / sub.res
