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


@pytest.mark.parametrize("prove", [False, True])
def test_two_thread_portfolio_swaps_the_default_search_for_the_bound_search_when_proving(prove):
    from ortools.sat.python import cp_model

    from mapsched.formulations.cpsat import portfolio

    params = cp_model.CpSolver().parameters
    portfolio(params, 2, prove)
    assert params.num_workers == 3
    assert list(params.subsolvers) == ["no_lp", "objective_lb_search" if prove else "default_lp"]
