"""Time limits hold in-process: every method and full_bound return within theirs, and
full_bound leaves out on large graphs the rules whose cost grows faster than the graph.

The tolerances are generous (CI shares two cores); the exact figures are in
benchmarks/bench_time_limits.py.
"""

import subprocess
import sys
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import problems

from mapsched import Objective, OptionError, solve, validate
from mapsched import bounds as quick_bounds
from mapsched.bounds import critical_path_bound, work_bound
from mapsched.bounds.cuts import _least_terms, load_cuts
from mapsched.engine import registry
from mapsched.generators import random_dag, stack
from mapsched.model.closure import Closure
from mapsched.split import chain_bounds, full_bound, windows
from mapsched.split.milp_split import pick_chain

LATENCY = [m.name for m in registry.all_methods() if "latency" in m.objectives and m.available()]


def slack(limit: float) -> float:
    """The most seconds a run with ``limit`` may take here."""
    return 1.5 * limit + 0.5


def keeps_limit(problem, name: str, limit: float) -> None:
    """``name`` solves ``problem`` within ``slack(limit)`` and validly. What the method
    imports first (torch, and torch._dynamo, which the first optimizer loads: seconds) is
    no part of a solve, so it is imported before the clock starts."""
    for package in registry.get(name).requires:
        __import__(package)
        if package == "torch":
            __import__("torch._dynamo")
    start = time.perf_counter()
    r = solve(problem, name, time_limit=limit)
    assert time.perf_counter() - start <= slack(limit)
    assert validate(problem, r) == []


@pytest.fixture(scope="module", params=["random-dag", "stack"])
def problem(request):
    if request.param == "random-dag":
        return random_dag(400, 4, 0)
    return stack(10, 10, 4, "sdep", seed=0)


@pytest.mark.parametrize("name", LATENCY)
def test_every_method_keeps_its_time_limit(problem, name):
    keeps_limit(problem, name, 1.0)


THROUGHPUT = [m.name for m in registry.all_methods() if "throughput" in m.objectives and m.available()]


@pytest.fixture(scope="module")
def batched():
    # The per-input CP-SAT model of 150 tasks on 8 devices with L=16 takes seconds to build,
    # and a single module's pipelined step as long: building counts within the time limit.
    return random_dag(150, 8, 0, objective=Objective("throughput", 16))


@pytest.mark.parametrize("name", THROUGHPUT)
def test_every_throughput_method_keeps_its_time_limit(batched, name):
    keeps_limit(batched, name, 2.0)


def test_full_bound_keeps_its_time_limit(problem):
    start = time.perf_counter()
    b = full_bound(problem, time_limit=2.0)
    assert time.perf_counter() - start <= slack(2.0)
    assert b.value > 0


def test_full_bound_leaves_out_the_costly_rules_on_a_large_sparse_dag(monkeypatch):
    # Above 2,000 tasks: no relaxation (n^3 separation), no dense n x n closure, and no
    # exact solve of a set past BOUND_SOLVE_TASKS (the random DAG's chain is one module).
    p = random_dag(2500, 4, 0)

    def forbidden(*args, **kwargs):
        raise AssertionError("full_bound ran a rule it cannot afford at this size")

    def small(real):
        def call(x, *args, **kwargs):
            assert x.n <= windows.BOUND_SOLVE_TASKS, "full_bound ran a rule it cannot afford at this size"
            return real(x, *args, **kwargs)
        return call

    monkeypatch.setattr(chain_bounds, "relaxation_bound", forbidden)
    monkeypatch.setattr(Closure, "matrix", small(Closure.matrix))
    monkeypatch.setattr(windows, "window_lower_bound", forbidden)
    monkeypatch.setattr(chain_bounds, "solve", small(chain_bounds.solve))
    start = time.perf_counter()
    b = full_bound(p, time_limit=4.0)
    assert time.perf_counter() - start <= slack(4.0)
    assert b.rule == "load"  # with no module structure, the quick bounds are what is left


def test_solve_counts_its_bound_within_the_time_limit(monkeypatch):
    # The bound solve() adds runs on the clock, with a share of the limit.
    solve_module = sys.modules["mapsched.solve"]  # the package's name is the function's
    seen = []
    real = quick_bounds.lower_bound  # solve() imports it on each call, from mapsched.bounds
    monkeypatch.setattr(quick_bounds, "lower_bound", lambda p, time_limit=None: (
        seen.append(time_limit), time.sleep(0.3), real(p, time_limit))[-1])
    r = solve(random_dag(50, 3, 0), "heft", time_limit=2.0)
    assert seen == [2.0 * solve_module.BOUND_SHARE] and r.solve_seconds >= 0.3


@given(problems(max_tasks=8))
def test_the_quick_count_of_load_cut_terms_is_a_lower_bound(p):
    # load_cuts skips the closure when _least_terms alone overruns the budget: sound only
    # if it never counts more than the sets hold.
    assert _least_terms(p) <= sum(len(b) * p.m for _, _, b in load_cuts(p, 10**9))


@given(problems(max_tasks=8, throughput=None), st.data())
def test_the_chain_recursions_simple_bounds_are_those_of_the_restricted_problem(p, data):
    # _Recursion.simple reads the whole problem's arrays instead of building restrict(x).
    x = frozenset(data.draw(st.sets(st.integers(0, p.n - 1), min_size=1)))
    rec = chain_bounds._Recursion(p, pick_chain(p, 1), time.perf_counter() + 10, 1.0)
    sub = p.restrict(sorted(x))
    assert rec.simple(x) == pytest.approx(max(critical_path_bound(sub), work_bound(sub)), rel=1e-12)


def test_critical_path_search_leaves_room_for_its_last_move_and_decode(monkeypatch):
    # Moves slowed to 0.2 s each: after the first, a 1 s limit leaves less than the room kept
    # for one more move and the final decode (eight moves' time), so the search stops there
    # instead of running past the limit by a move and a decode.
    from mapsched.heuristics import critical_path_search

    times = critical_path_search._Path.times
    calls = []

    def slow(self, *a):
        calls.append(1)
        if len(calls) > 1:  # the start's own timing is not a move
            time.sleep(0.2)
        return times(self, *a)

    monkeypatch.setattr(critical_path_search._Path, "times", slow)
    p = random_dag(400, 4, 0)
    r = solve(p, "cp-search", time_limit=1.0)
    assert validate(p, r) == [] and len(calls) == 2  # the start, and one move


LEARNED = [name for name in ("doppler", "placeto", "giph") if registry.get(name).available()]


@pytest.mark.skipif(not LEARNED, reason="the learned methods need torch")
def test_learned_methods_keep_a_limit_too_short_to_load_pytorch():
    # A fresh interpreter, as the command line runs: loading PyTorch (and the first optimizer's
    # torch._dynamo) would take seconds past a 1 s limit, so each method returns its placement
    # before learning, found without PyTorch, and says so.
    code = ("import sys, time\n"
            "from mapsched import solve, validate\n"
            "from mapsched.generators import random_dag\n"
            "p = random_dag(60, 3, 0)\n"
            f"for name in {LEARNED!r}:\n"
            "    t = time.perf_counter()\n"
            "    r = solve(p, name, time_limit=1.0)\n"
            "    print(name, time.perf_counter() - t, validate(p, r) == [], 'loading PyTorch' in r.log)\n"
            "print('torch' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    for line, name in zip(out, LEARNED):
        method, seconds, valid, said = line.split()
        assert method == name and float(seconds) <= slack(1.0) and valid == said == "True"
    assert out[len(LEARNED)] == "False"


@pytest.mark.skipif(not LEARNED, reason="the learned methods need torch")
@pytest.mark.parametrize("name", LEARNED)
def test_learned_methods_without_time_to_load_start_where_they_would(name, monkeypatch):
    from mapsched.learned import starts

    monkeypatch.setattr(starts, "load_seconds", lambda train: 1e9)  # as if PyTorch were not loaded
    p = random_dag(30, 3, 0)
    r = solve(p, name, time_limit=5.0, seed=2)
    assert validate(p, r) == [] and "loading PyTorch may take" in r.log and r.status in ("feasible", "optimal")
    with pytest.raises(OptionError, match="--policy: no file 'nope.pt'"):  # a typo is refused all the same
        solve(p, name, time_limit=5.0, policy="nope.pt")
    if name == "giph":  # from an initial placement: that placement, never worse
        start = solve(p, "heft")
        s = solve(p, name, time_limit=5.0, initial=start)
        assert s.mapping() == start.mapping() and "the initial placement it starts from" in s.log
        assert "heft's placement" in solve(p, name, time_limit=5.0, start="heft").log


@pytest.mark.skipif("doppler" not in LEARNED, reason="doppler needs torch")
def test_doppler_has_its_fallback_before_the_deadline():
    # Past the deadline before any rollout: Critical Path's assignment, found before training
    # (not after the deadline); and a limit that does not bind trains as with none.
    p = random_dag(40, 3, 1)
    r = solve(p, "doppler", time_limit=0.01, seed=0, hidden=8, rounds=1)
    assert validate(p, r) == [] and "Critical Path's assignment" in r.log
    kw = dict(seed=3, episodes=2, hidden=8, rounds=1)
    assert solve(p, "doppler", time_limit=600, **kw).jobs == solve(p, "doppler", **kw).jobs
