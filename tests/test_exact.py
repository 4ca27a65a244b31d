"""Exact latency models: both backends, against exhaustive search and each other."""

import numpy as np
import pytest
from exhaustive import exhaustive_optimum, some_valid_makespans
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import problems

import mapsched
from mapsched import Problem, instances, solve, validate
from mapsched.formulations import build_model
from mapsched.formulations.cpsat import CpSatModel

BACKENDS = ["cpsat", "highs"]
TOPCUOGLU = instances.load("topcuoglu2002")


def exact(p, backend, **kw):
    r = solve(p, "exact", backend=backend, threads=1, **kw)
    assert validate(p, r) == []
    assert r.lower_bound <= r.makespan * (1 + 1e-9) + 1e-9
    return r


@pytest.mark.parametrize("backend", BACKENDS)
def test_topcuoglu_optimum_is_73(backend):
    r = exact(TOPCUOGLU, backend)
    assert r.makespan == 73.0 and r.status == "optimal" and r.lower_bound == pytest.approx(73.0)


def test_topcuoglu_73_by_exhaustive_search():
    assert exhaustive_optimum(TOPCUOGLU, upper=solve(TOPCUOGLU, "heft").makespan) == 73.0


@settings(max_examples=15)
@given(problems(max_tasks=6, max_devices=3))
def test_optimum_equals_exhaustive_enumeration(p):
    opt = exhaustive_optimum(p, upper=solve(p, "heft").makespan)
    for backend in BACKENDS:
        r = exact(p, backend)
        assert r.status == "optimal"
        assert r.makespan == pytest.approx(opt, rel=1e-6, abs=1e-6)


@settings(max_examples=20)
@given(problems(max_tasks=8, max_devices=3))
def test_backends_agree(p):
    a, b = exact(p, "cpsat"), exact(p, "highs")
    assert a.status == b.status == "optimal"
    assert a.makespan == pytest.approx(b.makespan, rel=1e-6, abs=1e-6)


@settings(max_examples=20)
@given(problems(max_tasks=7, max_devices=3), st.integers(0, 2**31))
def test_cpsat_bound_never_exceeds_any_valid_schedule(p, seed):
    """With non-integer data and a coarse resolution the rounded model still bounds from below."""
    r = solve(p, "exact", resolution=1.0, threads=1)  # 1 tick = 1 ms: heavy rounding
    assert validate(p, r) == []
    others = some_valid_makespans(p, np.random.default_rng(seed)) + [r.makespan]
    assert all(r.lower_bound <= ms + 1e-9 for ms in others)
    assert r.lower_bound <= exhaustive_optimum(p, upper=r.makespan) + 1e-9


@pytest.mark.parametrize("backend", BACKENDS)
def test_time_limit_returns_feasible_with_bound(backend):
    p = mapsched.generators.random_dag(60, 3, seed=4, window=8)
    r = solve(p, "exact", backend=backend, time_limit=1.0, threads=1)
    assert validate(p, r) == [] and r.solve_seconds < 10
    assert r.lower_bound is not None and r.lower_bound <= r.makespan
    assert r.makespan <= solve(p, "heft").makespan  # never worse than its warm start
    if r.status == "feasible":
        assert r.gap > 0


def test_plugins_reach_both_backends():
    """A plugin that forbids p3 entirely raises the optimum."""
    def no_p3(view):
        for i in range(view.problem.n):
            view.add(view.use(i, 2) == 0)

    base = exact(TOPCUOGLU, "cpsat").makespan
    for backend in BACKENDS:
        r = exact(TOPCUOGLU, backend, plugins=(no_p3,))
        assert all(j.device != "p3" for j in r.jobs) and r.makespan > base


def test_build_model_is_exposed_and_extensible():
    import pyomo.environ as pyo

    from mapsched.formulations import solve_model

    m = build_model(TOPCUOGLU)
    assert m.build_seconds >= 0 and len(m.x) == 30
    m.extra = pyo.Constraint(expr=m.x[0, 2] == 0)  # t1 may not run on p3
    out = solve_model(m, time_limit=30)
    assert out["optimal"] and out["owner"][0] != 2 and out["objective"] >= 73 - 1e-6


def test_solver_log_on_request():
    assert "resolution" in solve(TOPCUOGLU, "exact", log=True).log
    assert "HiGHS" in solve(TOPCUOGLU, "exact", backend="highs", log=True).log


def test_missing_link_and_memory_in_models():
    d = TOPCUOGLU.to_dict()
    d["links"] = [ln for ln in d["links"] if {ln["a"], ln["b"]} != {"p1", "p3"}]
    d["devices"][2]["memory"] = 30
    for t in d["tasks"]:
        t["weight_bytes"] = 10
    p = Problem.from_dict(d)
    a, b = exact(p, "cpsat"), exact(p, "highs")
    assert a.makespan == pytest.approx(b.makespan)
    assert sum(j.device == "p3" for j in a.jobs) <= 3


def test_resolution_default_is_a_power_of_ten():
    m = CpSatModel(TOPCUOGLU, 80.0)
    assert m.res == 1e7 and np.log10(m.res) == int(np.log10(m.res))


@given(problems(max_tasks=8), st.sampled_from(["heft", "met", "greedy", "cpop"]))
def test_device_windows_hold_in_every_valid_schedule(p, method):
    # The models' redundant windows: where a task runs bounds its start and what follows it.
    from mapsched.formulations.common import device_windows

    head, tail = device_windows(p)
    for s in (mapsched.decode(p, p.planted), solve(p, method, seed=1, time_limit=2, threads=1)):
        for j in s.jobs:
            i, u = p.task_index[j.task], p.device_index[j.device]
            assert j.start >= head[i, u] - 1e-9
            assert s.makespan >= j.end + tail[i, u] - 1e-9


@pytest.mark.parametrize("deadline", [False, True])
def test_two_thread_portfolio_swaps_the_default_search_for_the_bound_search_under_a_deadline(deadline):
    from ortools.sat.python import cp_model

    from mapsched.formulations.cpsat import portfolio

    params = cp_model.CpSolver().parameters
    portfolio(params, 2, deadline)
    assert params.num_workers == 3
    assert list(params.subsolvers) == ["no_lp", "objective_lb_search" if deadline else "default_lp"]


@pytest.mark.parametrize("time_limit", [None, 30.0])
def test_exact_takes_the_bound_search_only_under_a_time_limit(monkeypatch, time_limit):
    # Without a limit only the proof counts, and the LP-free and default searches finish
    # it soonest; with one, the bound at the limit counts.
    from mapsched.formulations import cpsat

    seen = []
    real = cpsat.portfolio
    monkeypatch.setattr(cpsat, "portfolio", lambda prm, threads, deadline=False: (
        seen.append(deadline), real(prm, threads, deadline)))
    r = solve(instances.load("topcuoglu2002"), "exact", threads=2, time_limit=time_limit)
    assert r.status == "optimal" and seen == [time_limit is not None]


@settings(max_examples=15, deadline=None)
@given(problems(max_tasks=7))
def test_two_threads_without_a_time_limit_reach_the_one_thread_optimum(p):
    # The set-up exact takes with no time limit on two threads, on random problems.
    r = solve(p, "exact", threads=2)
    assert validate(p, r) == [] and r.status == "optimal"
    assert r.makespan == pytest.approx(exact(p, "cpsat").makespan, rel=1e-6)


@given(problems(max_tasks=8), st.sampled_from(["heft", "met", "greedy", "cpop"]))
def test_load_cuts_hold_in_every_valid_schedule(p, method):
    # s[k] >= e[i] + the work of the tasks between them on each device (i = -1: time 0; k = -1: C).
    from mapsched.formulations.common import load_cuts

    for s in (mapsched.decode(p, p.planted), solve(p, method, seed=1, time_limit=2, threads=1)):
        job = {p.task_index[j.task]: j for j in s.jobs}
        for i, k, between in load_cuts(p):
            after = job[i].end if i >= 0 else 0.0
            before = job[k].start if k >= 0 else s.makespan
            for v in range(p.m):
                work = sum(p.dur[j, v] for j in between.tolist() if p.device_index[job[j].device] == v)
                assert before >= after + work - 1e-9


def test_load_cuts_are_every_set_between_two_tasks_or_none_beyond_the_budget():
    import networkx as nx

    from mapsched.formulations.common import load_cuts
    from mapsched.generators import random_wired

    p = random_wired(12, "er", seed=3)
    g = nx.DiGraph([(int(a), int(b)) for a, b in zip(p.src, p.dst)])
    want = set()
    for i in [-1, *g]:
        for k in [-1, *g]:
            between = (nx.descendants(g, i) if i >= 0 else set(g)) & (nx.ancestors(g, k) if k >= 0 else set(g))
            if (i >= 0 or k >= 0) and len(between) >= 2:
                want.add((i, k, frozenset(between)))
    every = load_cuts(p, max_terms=10**9)
    assert {(i, k, frozenset(b.tolist())) for i, k, b in every} == want and len(every) == len(want)
    terms = sum(len(b) for _, _, b in every) * p.m
    assert len(load_cuts(p, max_terms=terms)) == len(every)
    assert load_cuts(p, max_terms=terms - 1) == []


@settings(max_examples=15)
@given(problems(max_tasks=8, max_devices=3))
def test_load_cuts_keep_the_optimum(p):
    opt = []
    for terms in (0, 10**6):
        m = CpSatModel(p, solve(p, "heft").makespan, load_cut_terms=terms)
        out = m.solve(None, 1)
        assert out["optimal"]
        opt.append(out["bound"])
    assert opt[0] == pytest.approx(opt[1], rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("backend", BACKENDS)
def test_exact_hands_its_load_cut_budget_to_the_model(backend, monkeypatch):
    from mapsched.formulations import cpsat, milp
    from mapsched.formulations.common import LOAD_CUT_TERMS, device_load_cuts

    asked = []

    def spy(problem, max_terms):
        asked.append(max_terms)
        return device_load_cuts(problem, max_terms)

    monkeypatch.setattr(cpsat if backend == "cpsat" else milp, "device_load_cuts", spy)
    for budget, want in ((None, LOAD_CUT_TERMS), (0, 0), (123, 123)):
        kw = {} if budget is None else {"load_cuts": budget}
        r = exact(TOPCUOGLU, backend, **kw)
        assert r.makespan == 73.0 and asked[-1] == want
