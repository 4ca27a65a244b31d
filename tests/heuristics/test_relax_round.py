"""``relax-round``: the folded relaxation's class shares, rounded and list-scheduled."""

import re

import numpy as np
import pytest
from hypothesis import given, settings
from strategies import problems

import mapsched
from mapsched import solve, validate
from mapsched.bounds.relaxation import folded_relaxation
from mapsched.heuristics.relax_round import PREFERENCES, SLACKS, rounded_classes
from mapsched.scheduling.best_list import best_list_schedule


def with_copies(p):
    """``p`` with a copy of every device, so that classes of identical devices fold."""
    return p.with_devices({f"{d}-copy": d for d in p.device_names})


@settings(max_examples=25, deadline=None)
@given(p=problems(max_tasks=12, max_devices=3, tight=True, transfers=20.0))
def test_roundings_fit_memory_and_schedules_are_valid(p):
    q = with_copies(p)
    folded = folded_relaxation(q, 10.0)
    assert folded is not None
    classes, x = folded.classes, folded.shares
    assert sorted(u for c in classes for u in c) == list(range(q.m))
    assert np.allclose(x.sum(axis=1), 1.0, atol=1e-6) and x.shape == (q.n, len(classes))
    need = q.weight + q.act
    if folded.whole is not None:  # one class per task, within the class's memory and devices
        w = folded.whole
        assert set(np.unique(w)) <= {0.0, 1.0} and (w.sum(axis=1) == 1).all()
        for c, devices in enumerate(classes):
            on = w[:, c] == 1
            assert need[on].sum() <= q.room[devices].sum() * (1 + 1e-6)
            assert all(q.can_run[i, devices].any() for i in np.flatnonzero(on))
    for slack in SLACKS:
        for prefer in PREFERENCES:
            allowed = rounded_classes(q, classes, x, slack, prefer)
            if allowed is None:
                continue
            for i, devices in enumerate(allowed):
                assert devices and all(q.can_run[i, u] and need[i] <= q.room[u] for u in devices)
            for c in classes:  # each class within its memory, less the slack
                on = [i for i, devices in enumerate(allowed) if set(devices) <= set(c)]
                assert need[on].sum() <= q.room[c].sum() / slack * (1 + 1e-9)
    s = solve(q, "relax-round", threads=1)
    assert validate(q, s) == []


@pytest.mark.parametrize("name", ["real/gnmt-op", "real/bert-op"])
def test_it_beats_the_list_schedulers_where_memory_forces_tasks_off_the_accelerators(name):
    # Accelerators that hold 40-60% of the model beside CPUs 45x slower: the list schedulers
    # fill the accelerators in rank order and leave the late tasks to the CPUs
    p = mapsched.instances.load(name)
    s = solve(p, "relax-round")
    assert validate(p, s) == []
    assert s.makespan < 0.8 * best_list_schedule(p).makespan
    assert "relax-round: programme" in s.log


def test_the_whole_tasks_choice_beats_the_rounded_shares_on_resnet50():
    """ResNet-50's layers on two accelerators of 870 MiB beside CPUs: the mixed-integer
    programme's one class per task schedules shorter than any rounding of the LP's shares,
    and the result carries the bound it proved."""
    p = mapsched.instances.load("real/resnet50-layer")
    s = solve(p, "relax-round", threads=1)
    assert validate(p, s) == [] and "(whole)" in s.log
    rounded = min(float(part.rsplit(" ", 1)[1]) for part in s.log.split("; ", 1)[1].split(", ")
                  if "(whole)" not in part)
    assert s.makespan < rounded
    assert s.lower_bound > mapsched.bounds.lower_bound(p).value and s.lower_bound <= s.makespan


def test_auto_starts_from_it_where_memory_binds():
    p = mapsched.instances.load("real/bert-op")
    s = solve(p, time_limit=8, threads=1)
    assert validate(p, s) == []
    assert s.method.startswith("auto: relax-round")
    assert s.makespan <= solve(p, "relax-round").makespan
    # What relax-round's programme proved (ctx.fast_bound, logged to 6 digits) reaches the result's bound
    proved = float(re.search(r"programme \(bound ([^)]+)\)", s.log).group(1))
    assert proved > mapsched.bounds.lower_bound(p).value
    assert s.lower_bound >= proved * (1 - 1e-5) and s.lower_bound <= s.makespan


def test_without_a_programme_it_falls_back_to_the_list_schedulers():
    p = mapsched.instances.load("topcuoglu2002").with_objective(mapsched.Objective("throughput", 2))
    with pytest.raises(mapsched.OptionError):  # a latency method
        solve(p, "relax-round")
    p = mapsched.generators.random_dag(2_100, 3, seed=1)  # past RELAXATION_TASKS
    s = solve(p, "relax-round")
    assert "the best list schedule" in s.log and s.makespan == best_list_schedule(p).makespan


@pytest.mark.parametrize("limit", [1e-6, 1e-3])
def test_no_time_for_the_programme_gives_the_list_schedule(limit):
    p = mapsched.instances.load("real/gnmt-layer")
    s = solve(p, "relax-round", lp_seconds=0)
    assert "the best list schedule" in s.log and validate(p, s) == []
    r = solve(p, time_limit=limit)  # auto: no time for relax-round either
    assert validate(p, r) == [] and r.status == "feasible"


def test_an_unknown_preference_is_refused():
    p = mapsched.instances.load("topcuoglu2002")
    with pytest.raises(mapsched.OptionError, match="^prefer: expected one of largest, fastest"):
        rounded_classes(p, [[0], [1], [2]], np.full((p.n, 3), 1 / 3), prefer="slowest")
