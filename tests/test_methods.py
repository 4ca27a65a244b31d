"""Every registered method, on random problems, through the validator."""

import numpy as np
import pytest
from exhaustive import exhaustive_optimum
from hypothesis import given, settings
from strategies import problems

import mapsched
from mapsched import InfeasibleError, OptionError, instances, solve, validate
from mapsched.bounds import critical_path_bound, load_bound, lower_bound, work_bound
from mapsched.bounds.interval import interval_load_bound
from mapsched.bounds.memory import memory_binds, memory_chain_bound, memory_load_bound, transfer_path_bound
from mapsched.engine import registry

METHODS = [m.name for m in registry.all_methods() if m.available()]  # doppler needs mapsched[torch]
# Methods that may legitimately find nothing on a feasible problem (pure sampling,
# or one device for the whole graph).
INCOMPLETE = {"random", "single-best"}
# Learned methods train on the problem: a few updates of a small policy here (the paper's
# 128-wide, 6-round networks for 100 episodes a stage take seconds even on 10 tasks).
SMALL = {"doppler": {"episodes": 2, "hidden": 8, "rounds": 1}, "placeto": {"episodes": 2, "hidden": 8, "rounds": 1}}


def run(p, name, **kw):
    m = registry.get(name)
    if p.objective.kind not in m.objectives:
        with pytest.raises(OptionError):
            solve(p, name)
        return None
    if any(o.name == "iterations" for o in m.options):
        kw.setdefault("iterations", 300)  # enough to move; property tests need many examples
    for key, value in SMALL.get(name, {}).items():
        kw.setdefault(key, value)
    try:
        # One thread: multi-threaded CP-SAT may return another optimal schedule run to run.
        return solve(p, name, time_limit=kw.pop("time_limit", 2.0), seed=kw.pop("seed", 0), threads=1, **kw)
    except InfeasibleError:
        assert name in INCOMPLETE, f"{name} found no schedule on a feasible problem"
        return None


@pytest.mark.parametrize("name", METHODS)
@given(p=problems(throughput=None, max_tasks=7))
def test_method_schedules_are_valid(name, p):
    r = run(p, name)
    if r is None:
        return
    assert validate(p, r) == []
    assert r.method.split(": ")[0] == name and r.status in ("optimal", "feasible")
    assert r.lower_bound is not None and r.lower_bound <= r.makespan * (1 + 1e-9)
    assert 0.0 <= r.gap <= 1.0


@pytest.mark.parametrize("name", METHODS)
@given(p=problems(throughput=None, max_tasks=6))
def test_same_seed_same_schedule(name, p):
    a, b = run(p, name, seed=7), run(p, name, seed=7)
    assert (a is None) == (b is None)
    if a is not None:
        assert a.jobs == b.jobs


@pytest.mark.parametrize("name", [m.name for m in registry.all_methods() if "latency" in m.objectives and m.available()])
def test_topcuoglu(name):
    p = instances.load("topcuoglu2002")
    r = solve(p, name, time_limit=5, **({**SMALL[name], "episodes": 10} if name in SMALL else {}))
    assert validate(p, r) == []
    assert 41 <= r.makespan <= 127  # between the critical path and the best single device


def test_methods_listing_and_errors():
    listed = mapsched.methods()
    assert {"single-best", "random"} <= set(listed)
    assert all(isinstance(d, str) and d for d in listed.values())
    p = instances.load("topcuoglu2002")
    with pytest.raises(OptionError, match="unknown method 'nope'"):
        solve(p, "nope")
    with pytest.raises(OptionError, match="--samples: method 'random' expects int"):
        solve(p, "random", samples="many")
    with pytest.raises(OptionError, match="has no such option"):
        solve(p, "random", sample=3)
    with pytest.raises(OptionError, match="--time-limit"):
        solve(p, "random", time_limit=0)
    with pytest.raises(OptionError, match="--window: expected an integer of at least 0, got -1"):
        solve(p, "split", window=-1)
    with pytest.raises(OptionError, match="--module-time-limit: expected a number above 0"):
        solve(p, "split", module_time_limit=0)
    with pytest.raises(OptionError, match="--samples: expected an integer of at least 0"):
        solve(p, "random", samples=-1)
    with pytest.raises(OptionError, match="--threads: expected an integer from 0 to 1024"):
        solve(p, "heft", threads=10**20)
    # A string, a fraction, a function that is none: each was a TypeError or was taken as another value.
    for method, kwargs, message in [("heft", {"time_limit": "5"}, "--time-limit: expected a positive number of "
                                     "seconds or None, got '5'"),
                                    ("exact", {"threads": 2.5}, "--threads: expected an integer from 0 to 1024 or None, got 2.5"),
                                    ("random", {"samples": 1.5}, "--samples: expected an integer of at least 0, got 1.5"),
                                    # True ran as 1 (R) and as 1.0 (threshold)
                                    ("celeritas", {"R": True}, "--R: expected an integer of at least 1, got True"),
                                    ("m-sct", {"threshold": True}, "--threshold: expected a number, got True"),
                                    ("heft", {"callback": 5}, "callback: expected a function")]:
        with pytest.raises(OptionError, match=message):
            solve(p, method, **kwargs)
    assert solve(p, "random", samples=3.0, seed=0).makespan == solve(p, "random", samples=3, seed=0).makespan
    with pytest.raises(OptionError, match="--t0: expected a finite number, got nan"):
        solve(p, "sa", t0=float("nan"))
    with pytest.raises(OptionError, match="--t0: expected a finite number"):
        solve(p, "sa", t0=10**400)
    with pytest.raises(OptionError, match="problem: expected a mapsched.Problem, got str"):  # AttributeError
        solve("p.json", "heft")


def test_progress_callback_and_history():
    p = instances.load("topcuoglu2002")
    seen = []
    r = solve(p, "random", samples=200, callback=lambda t, v: seen.append(v))
    assert seen and seen == sorted(seen, reverse=True) and seen[-1] == r.makespan
    assert [v for _, v in r.history] == seen


@given(problems(throughput=None))
def test_simple_bounds_are_below_every_planted_schedule(p):
    s = mapsched.decode(p, p.planted)
    assert critical_path_bound(p) <= s.makespan + 1e-9
    assert work_bound(p) <= s.makespan + 1e-9
    assert load_bound(p) <= s.makespan + 1e-9
    b = lower_bound(p)
    # latency adds the interval load LP; throughput the batched relaxation, whose LP holds the load LP's rows;
    # both the path with transfers and where memory binds the load LP with memory rows
    quick = max(critical_path_bound(p), work_bound(p), load_bound(p), transfer_path_bound(p),
                max(memory_load_bound(p), memory_chain_bound(p)) if memory_binds(p) else 0.0)
    assert b.value == pytest.approx(max(quick, interval_load_bound(p)), rel=1e-9) if p.L == 1 else (
        b.value == quick or (b.rule == "batched-relaxation" and b.value >= load_bound(p) * (1 - 1e-6)))
    assert b.value <= s.makespan * (1 + 1e-6) + 1e-9


def _ungrouped_lp(p):
    """The load LP with one row per task, as first written: the reference for the grouping."""
    from scipy.optimize import linprog

    sizes = p.batch_sizes.astype(float)
    fits = np.isfinite(p.lat) & (sizes[None, None, :] <= p.L) & (
        p.weight[:, None, None] + p.act[:, None, None] * sizes[None, None, :] <= p.mem[None, :, None])
    i, u, k = np.nonzero(fits)
    a_eq = np.zeros((p.n, len(i) + 1))
    a_eq[i, np.arange(len(i))] = sizes[k]
    a_ub = np.zeros((p.m, len(i) + 1))
    a_ub[u, np.arange(len(i))] = p.lat[i, u, k]
    a_ub[:, -1] = -1
    c = np.zeros(len(i) + 1)
    c[-1] = 1
    return linprog(c, A_ub=a_ub, b_ub=np.zeros(p.m), A_eq=a_eq, b_eq=np.full(p.n, float(p.L)), method="highs").fun


@given(problems(max_tasks=10, max_devices=3, throughput=None))
def test_load_bound_groups_alike_tasks_exactly_and_its_dual_ascent_stays_below(p):
    from mapsched.bounds import load

    lp = _ungrouped_lp(p)
    assert load_bound(p) == pytest.approx(lp, rel=1e-6, abs=1e-9)
    saved = load.LP_COLUMNS
    load.LP_COLUMNS = 0  # the ascent, as on a large random graph
    try:
        dual = load_bound(p)
    finally:
        load.LP_COLUMNS = saved
    assert dual <= lp * (1 + 1e-9) + 1e-9 and dual >= 0.9 * lp


@given(problems(max_tasks=10, max_devices=3, throughput=None))
def test_device_prices_are_the_load_lps_dual(p):
    # Weights summing to 1 whose cheapest priced jobs add up to the LP optimum (strong duality);
    # the ascent's weights give no more than it.
    from mapsched.bounds import load

    fits = np.isfinite(p.lat) & (p.batch_sizes[None, None, :] <= p.L) & (
        p.weight[:, None, None] + p.act[:, None, None] * p.batch_sizes[None, None, :] <= p.mem[None, :, None])
    per_input = np.where(fits, p.lat / p.batch_sizes[None, None, :], 0.0)

    def priced(lam):
        assert lam.min() >= 0 and lam.sum() == pytest.approx(1.0)
        return p.L * float(np.where(fits, lam[None, :, None] * per_input, np.inf).min(axis=(1, 2)).sum())

    lp = _ungrouped_lp(p)
    assert priced(load.device_prices(p)) == pytest.approx(lp, rel=1e-6, abs=1e-9)
    saved = load.LP_COLUMNS
    load.LP_COLUMNS = 0
    try:
        assert priced(load.device_prices(p)) <= lp * (1 + 1e-9) + 1e-9
    finally:
        load.LP_COLUMNS = saved


@settings(max_examples=40, deadline=None)
@given(problems(max_tasks=6, max_devices=3))
def test_load_bound_ascent_is_below_the_exhaustive_optimum(p):
    from mapsched.bounds import load

    saved = load.LP_COLUMNS
    load.LP_COLUMNS = 0
    try:
        assert load_bound(p) <= exhaustive_optimum(p) + 1e-9
    finally:
        load.LP_COLUMNS = saved


def test_load_bound_weighs_each_device_by_its_speed():
    # Eight independent unit tasks, a device seven times slower beside the fast one:
    # seven on the fast device and one on the slow is optimal, at 7; the total work
    # shared evenly (4) ignores that the slow device does a seventh of the work.
    p = mapsched.Problem.from_arrays(np.tile([[1.0, 7.0]], (8, 1)), [])
    assert work_bound(p) == 4.0
    assert load_bound(p) == pytest.approx(7.0, rel=1e-6) and load_bound(p) <= 7.0
    assert lower_bound(p).rule == "load"
    assert solve(p, "exact").status == "optimal"  # the bound proves the optimum


def test_optimal_status_when_bound_is_met():
    # A chain on one device: the critical path is the optimum.
    p = mapsched.Problem.from_arrays(np.array([[2.0], [3.0]]), [(0, 1)])
    r = solve(p, "single-best")
    assert r.makespan == 5 and r.lower_bound == 5 and r.status == "optimal"


def test_both_solver_backends_load_in_one_process():
    """highspy and ortools' bundled HiGHS must coexist (pinned pair)."""
    import highspy
    import pyomo.environ as pyo
    from ortools.sat.python import cp_model

    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    assert pyo.SolverFactory("appsi_highs").available()
    model = cp_model.CpModel()
    x = model.new_int_var(0, 3, "x")
    model.maximize(x)
    solver = cp_model.CpSolver()
    assert solver.solve(model) == cp_model.OPTIMAL and solver.value(x) == 3
