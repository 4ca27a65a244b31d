"""The relaxation with separated load cuts: sound, above the quick bounds, within its time."""

import time

import numpy as np
import pytest
from exhaustive import exhaustive_optimum
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import problems

from mapsched import Objective, solve
from mapsched.bounds import critical_path_bound, load_bound, lower_bound, relaxation, work_bound
from mapsched.bounds.cuts import LoadCut, load_cuts
from mapsched.bounds.interval import interval_load_bound
from mapsched.bounds.relaxation import _Relaxation, relaxation_bound
from mapsched.generators import stack
from mapsched.split import chain_bounds, full_bound


@settings(max_examples=40, deadline=None)
@given(problems(max_tasks=7, max_devices=3))
def test_relaxation_lies_between_the_quick_bounds_and_the_optimum(p):
    heft = solve(p, "heft")
    opt = exhaustive_optimum(p, upper=heft.makespan)
    lp = relaxation_bound(p, time_limit=5, integral=False)
    mip = relaxation_bound(p, time_limit=5)
    # the programme holds the load LP's rows and every path (not the path with each task on
    # one device, transfer_path_bound: its transfers are a fractional transport)
    quick = max(critical_path_bound(p), work_bound(p), load_bound(p), interval_load_bound(p))
    assert quick * (1 - 1e-6) <= lp <= mip * (1 + 1e-9)
    assert lower_bound(p).value <= opt * (1 + 1e-9)
    assert mip <= opt + 1e-9


def test_separation_reaches_the_lp_with_every_load_cut():
    # Separation adds only broken cuts, so at the end it must equal the LP that states
    # all of them up front (margins off on both sides: they are added, not separated).
    p = stack(3, 5, 2, "sdep", seed=3)
    everything = _Relaxation(p, time.perf_counter() + 30)
    for i, k, between in load_cuts(p, 10**9):
        for v in range(p.m):
            runs = [j for j in between.tolist() if everything.ok[j, v]]
            everything.add_cut(LoadCut(i, k, v, runs, 0.0, 0.0))
    everything.flush()
    assert everything.run()
    old = relaxation.MARGIN_TASKS
    try:
        relaxation.MARGIN_TASKS = 0
        separated = relaxation_bound(p, time_limit=30, integral=False)
    finally:
        relaxation.MARGIN_TASKS = old
    assert separated == pytest.approx(everything.value(), rel=1e-6)
    # and the cuts matter: without them the LP is lower
    bare = _Relaxation(p, time.perf_counter() + 30)
    assert bare.run() and bare.value() < separated * (1 - 1e-3)


def test_relaxation_beats_the_quick_bounds_on_a_four_channel_stack():
    p = stack(4, 6, 4, "sdep", seed=1)
    lp = relaxation_bound(p, time_limit=10, integral=False)
    assert lp > 1.1 * max(critical_path_bound(p), work_bound(p), load_bound(p))
    assert lp > 1.05 * lower_bound(p).value  # the interval load LP sees part of it
    assert relaxation_bound(p, time_limit=3) >= lp
    assert lp <= solve(p, "split", workers=1).makespan


def test_relaxation_keeps_its_time_limit():
    p = stack(10, 10, 4, "sdep", seed=10)
    for integral in (False, True):
        t = time.perf_counter()
        b = relaxation_bound(p, time_limit=1.0, integral=integral)
        assert time.perf_counter() - t < 2.0  # building the programme comes first
        assert 0.0 <= b <= solve(p, "heft").makespan


# Five tasks on three devices where HiGHS 1.12's MIP presolve loops past any time limit.
_PRESOLVE_LOOPS = (
    '{"format":"mapsched.problem/1","name":"g140","objective":{"kind":"latency"},"devices":[{"name":"d0",'
    '"batch_sizes":[1]},{"name":"d1","batch_sizes":[1]},{"name":"d2","batch_sizes":[1],"memory":200.0}],"'
    'links":[{"a":"d0","b":"d2","bandwidth":1000000000.0,"latency":0.5},{"a":"d1","b":"d2","bandwidth":10'
    '00000000.0,"latency":0.0,"directed":true}],"tasks":[{"name":"t0","latency":{"d0":22.0,"d1":0.0},"wei'
    'ght_bytes":10.0,"input_bytes":19.06380297406461,"output_bytes":20.0},{"name":"t1","latency":{"d0":35'
    '.0,"d1":0.0,"d2":24.0}},{"name":"t2","latency":{"d0":0.0,"d1":1.0,"d2":4.0},"input_bytes":4.92874280'
    '5032743,"output_bytes":5.0},{"name":"t3","latency":{"d0":4.0,"d1":27.0,"d2":0.0}},{"name":"t4","late'
    'ncy":{"d0":0.0,"d1":0.0,"d2":22.0},"input_bytes":11.639765093438292,"output_bytes":20.0}],"edges":[{'
    '"src":"t0","dst":"t1","bytes":1290.0},{"src":"t0","dst":"t3","bytes":0.0},{"src":"t0","dst":"t4","by'
    'tes":22.0},{"src":"t1","dst":"t2","bytes":1746.0},{"src":"t1","dst":"t3","bytes":2676.0},{"src":"t2"'
    ',"dst":"t3","bytes":0.0},{"src":"t3","dst":"t4","bytes":1788.0}]}'
)


def test_the_integral_bound_keeps_its_time_limit_where_presolve_loops(tmp_path):
    # relaxation_bound(p, 5) and 'mapsched bound --time-limit 5' ran for minutes; in a process
    # of its own, as HiGHS cannot be stopped from here
    import subprocess
    import sys

    path = tmp_path / "p.json"
    path.write_text(_PRESOLVE_LOOPS)
    code = ("import sys, time; from mapsched import Problem; from mapsched.bounds.relaxation import "
            "relaxation_bound; p = Problem.read(sys.argv[1]); t = time.perf_counter(); "
            "print(relaxation_bound(p, 5.0), time.perf_counter() - t)")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=120)
    bound, seconds = map(float, out.stdout.split())
    assert seconds < 7 and 0 < bound <= 23 + 1e-6  # 23: the optimum, by exhaustive search


def test_full_bound_names_the_relaxation(monkeypatch):
    # Without the exact model's share (chain_bounds.EXACT_BOUND_SHARE), the relaxation gets a third of the time.
    monkeypatch.setattr(chain_bounds, "EXACT_BOUND_TASKS", 0)
    p = stack(6, 10, 4, "sdep", seed=6)
    b = full_bound(p, time_limit=6)
    assert b.rule == "relaxation"
    assert b.value >= relaxation_bound(p, time_limit=2, integral=False) * (1 - 1e-9)


def test_full_bound_with_the_exact_model_on_a_stack():
    p = stack(6, 10, 4, "sdep", seed=6)
    b = full_bound(p, time_limit=6)
    assert b.rule in ("exact", "relaxation") and b.value >= lower_bound(p).value


def test_relaxation_refuses_what_it_cannot_bound():
    with pytest.raises(ValueError, match="latency problems only"):
        relaxation_bound(stack(2, 4, 2, seed=0, objective=Objective("throughput", 4)))
    p = stack(2, 4, 2, seed=0)
    with pytest.raises(ValueError, match="time_limit: expected a positive number"):
        relaxation_bound(p, time_limit=0)
    old = relaxation.RELAXATION_TASKS
    try:
        relaxation.RELAXATION_TASKS = 3
        with pytest.raises(ValueError, match="more than the 3 it takes on"):
            relaxation_bound(p)
    finally:
        relaxation.RELAXATION_TASKS = old
    assert np.isfinite(relaxation_bound(p, time_limit=2))


@pytest.mark.parametrize("option", ["time_limit", "window_time_limit"])
def test_full_bound_names_a_bad_time(option):
    # the relaxation gets a third of the limit: its own error would name the wrong field
    with pytest.raises(ValueError, match=f"^{option}: expected a positive number of seconds"):
        full_bound(stack(2, 4, 2, seed=0), **{option: -1.0})


def test_relaxation_tries_nothing_in_too_short_a_time(monkeypatch):
    # Below SETUP seconds per column no LP could finish; the list schedule of its cap and the
    # build took 0.8 s of a 0.17 s share on a 2,000-task DAG.
    from mapsched.engine import highs
    from mapsched.scheduling import best_list

    p = stack(modules=3, n=6, channels=4, variant="sdep", seed=1)

    def refused(*args, **kwargs):
        raise AssertionError("the list schedule ran")

    monkeypatch.setattr(best_list, "best_list_schedule", refused)
    assert relaxation_bound(p, time_limit=0.9 * highs.SETUP * (p.n * p.m + p.E * p.m * p.m)) == 0.0


def test_a_bounds_wrong_argument_is_a_mapsched_error():
    # they raised plain ValueErrors, which a caller catching MapschedError let through
    from mapsched import MapschedError, instances
    from mapsched.bounds.relaxation import relaxation_bound
    from mapsched.split import full_bound

    p = instances.load("topcuoglu2002")
    for call in (lambda: full_bound(p, 0), lambda: relaxation_bound(p, time_limit=-1)):
        with pytest.raises(MapschedError, match="^time_limit: expected a positive number of seconds"):
            call()


@settings(max_examples=40, deadline=None)
@given(problems(max_tasks=6, max_devices=2, tight=True, transfers=10.0), st.integers(1, 2))
def test_relaxation_over_classes_of_identical_devices_stays_below_the_optimum(p, copies):
    """Each class of identical devices folded into one that shares its load and memory (alone,
    as past QUOTIENT_COLUMNS, and before the whole programme, as below it), on small problems
    with copies of a device."""
    q = p.with_devices({f"{p.device_names[0]}-copy{k}": p.device_names[0] for k in range(copies)})
    folded, mult, _ = relaxation._quotient(q)
    assert folded.m < q.m and mult.sum() == q.m
    both = relaxation_bound(q, time_limit=5)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(relaxation, "QUOTIENT_COLUMNS", -1)
        alone = relaxation_bound(q, time_limit=5)
    # What relax-round and a timed solve's bound share carry: the folded programme alone
    carried = relaxation.folded_relaxation(q, 5.0, unfolded=False).bound
    opt = exhaustive_optimum(q, upper=solve(q, "heft").makespan)
    assert alone <= opt * (1 + 1e-9) + 1e-9 and both <= opt * (1 + 1e-9) + 1e-9
    assert carried <= opt * (1 + 1e-9) + 1e-9


@settings(max_examples=30, deadline=None)
@given(problems(min_tasks=2, max_tasks=5, max_devices=2, tight=True, transfers=10.0))
def test_relaxation_with_only_the_larger_classes_folded_stays_below_the_optimum(p):
    """The middle stage: a class of three copies folded, a class of two kept whole (with
    FOLD_LEAST 2), after the folded one and from what it proved."""
    like = {f"{p.device_names[0]}-copy{k}": p.device_names[0] for k in range(2)}
    like.update({f"{p.device_names[-1]}-twin": p.device_names[-1]} if p.m > 1 else {})
    q = p.with_devices(like)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(relaxation, "FOLD_LEAST", 2)
        part, _, members = relaxation._quotient(q, 2)
        assert part.m == q.m - 2 and sorted(u for c in members for u in c) == list(range(q.m))
        bound = relaxation_bound(q, time_limit=6)
    opt = exhaustive_optimum(q, upper=solve(q, "heft").makespan)
    assert bound <= opt * (1 + 1e-9) + 1e-9


def test_folded_relaxation_proves_more_than_the_quick_rules_on_a_real_model():
    """The operator graph of ResNet-50's training step (892 tasks, 16 devices in two classes):
    folded to 2 devices, the relaxation proves far more than the quick rules in seconds."""
    from mapsched import instances

    p = instances.load("real/resnet50-train-op")
    folded, mult, _ = relaxation._quotient(p)
    assert folded.m == 2 and sorted(mult.tolist()) == [4, 12]
    assert relaxation_bound(p, time_limit=10, integral=False) > 2 * lower_bound(p).value


def test_a_timed_solve_carries_the_folded_relaxation():
    """Issue 68: a list scheduler's result under a time limit carries the relaxation over the
    identical accelerators and CPUs folded, within the bound's share: far above the quick rules."""
    from mapsched import instances
    from mapsched.bounds.relaxation import folded_relaxation

    p = instances.load("real/gnmt-layer")
    r = solve(p, "heft", time_limit=10)
    assert r.lower_bound > 3 * lower_bound(p).value and r.solve_seconds < 10
    assert r.lower_bound <= r.makespan and folded_relaxation(p, 5.0).bound <= r.makespan


def test_the_heaviest_tasks_made_whole_prove_more_than_the_lp_on_a_real_model():
    """GNMT's operator graph: weights of up to 125 MiB beside accelerators of 717 MiB. The LP
    sends half such a weight to a CPU; with the few heaviest tasks binary, HiGHS proves more in
    seconds than with all of them in a minute."""
    import math
    import time

    from mapsched import instances
    from mapsched.scheduling.best_list import makespan_cap

    p = instances.load("real/gnmt-op")
    q, mult, _ = relaxation._quotient(p)
    stages = relaxation._integral_stages(q)
    assert len(stages[0]) < 20 and len(stages[-1]) == q.n
    relax = relaxation._Relaxation(q, time.perf_counter() + 120, makespan_cap(p, math.inf), mult)
    assert relax.run()
    lp = relax.value()
    assert relax.integral_bound(lp, stages[0]) > 1.1 * lp
