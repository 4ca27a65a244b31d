"""Batched throughput: split's pipelined walk and the batched CP-SAT model's reformulations."""

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from ortools.sat.python import cp_model
from strategies import problems

from mapsched import Device, Objective, Problem, System, Task, solve, validate
from mapsched.formulations import batched_cpsat
from mapsched.formulations.batched_cpsat import CpSatBatched
from mapsched.formulations.batched_milp import MilpBatched
from mapsched.formulations.common import retime_jobs
from mapsched.formulations.cpsat import run_cpsat
from mapsched.generators import stack
from mapsched.solve import SolveContext
from mapsched.split.milp_split import _probe, pick_chain
from mapsched.split.pipeline import grouped_improve, pipeline


def optimum(p, model):
    out = model.solve(60, 1)
    assert out["optimal"]
    s = retime_jobs(p, out["jobs"])
    assert validate(p, s) == []
    return s.makespan


@settings(max_examples=8, deadline=None)
@given(problems(throughput=True, max_tasks=4, max_devices=2, max_batch=3))
def test_sorted_inputs_keep_the_optimum(p):
    """Lexicographic input signatures, link literals and the batched windows and load cuts
    remove no optimum: the same value as the model without input ordering and as the MILP."""
    upper = solve(p, "bheft").makespan
    ordered = optimum(p, CpSatBatched(p, upper))
    assert ordered == pytest.approx(optimum(p, CpSatBatched(p, upper, input_symmetry=False)), rel=1e-6, abs=1e-6)
    out = MilpBatched(p, upper).solve(60, 1)
    assert out["optimal"]
    assert ordered == pytest.approx(retime_jobs(p, out["jobs"]).makespan, rel=1e-6, abs=1e-6)


@settings(max_examples=10, deadline=None)
@given(problems(throughput=True, max_tasks=5, max_devices=3, max_batch=4))
def test_counts_relaxation_bounds_and_exact_reaches_the_per_input_optimum(p):
    """The counts model is a relaxation: its proved optimum is at most the per-input model's.
    ``exact``, which solves it first and realises its solutions (or falls back to the
    per-input model), ends at the per-input optimum, or at its start where that is better
    (a start may run a task in two batches on one device)."""
    start = solve(p, "bheft")
    per_input = optimum(p, CpSatBatched(p, start.makespan))
    relaxed = CpSatBatched(p, start.makespan, counts=True).solve(60, 1)
    assert relaxed["optimal"]
    assert relaxed["bound"] <= per_input * (1 + 1e-9) + 1e-9
    s = solve(p, "exact", threads=1)
    assert validate(p, s) == []
    assert s.makespan == pytest.approx(min(per_input, start.makespan), rel=1e-6, abs=1e-6)


def test_counts_solutions_not_realised_fall_back_to_the_exact_check_then_the_per_input_model(monkeypatch):
    """Where the greedy realisation fails, the exact check (the per-input model with the
    counts and starts fixed) realises the relaxation's optimum; where that fails too, the
    per-input model proves the same optimum from the relaxation's bound."""
    p = stack(1, 6, 1, seed=1, objective=Objective("throughput", 4))
    per_input = optimum(p, CpSatBatched(p, solve(p, "bheft").makespan))
    monkeypatch.setattr(batched_cpsat, "realise_greedily", lambda *a: None)
    checked = solve(p, "exact", threads=1, log=True)
    assert checked.makespan == pytest.approx(per_input, rel=1e-6) and "not realised" not in checked.log
    monkeypatch.setattr(CpSatBatched, "realise", lambda *a: None)
    fallback = solve(p, "exact", threads=1, log=True)
    assert "not realised; the per-input model" in fallback.log
    assert validate(p, fallback) == [] and fallback.makespan == pytest.approx(per_input, rel=1e-6)
    assert "optimal among" in fallback.log


@settings(max_examples=10, deadline=None)
@given(problems(throughput=True, max_tasks=4, max_devices=3, max_batch=4))
def test_hint_follows_the_input_order(p):
    """A hinted schedule is relabelled so that its input signatures are in lexicographic
    order, as the model requires, and keeps its batches."""
    start = solve(p, "bheft")
    model = CpSatBatched(p, start.makespan * 1.01 + 1.0)
    model.hint(start)
    hint = dict(zip(model.model.proto.solution_hint.vars, model.model.proto.solution_hint.values))
    owner = {(i, lo): u for (i, u, lo), y in model.y.items() if hint[y.index]}
    assert len(owner) == p.n * p.L or any(  # unless a task has two batches on one device (outside the model)
        len([j for j in start.jobs if j.task == t.name]) > len({j.device for j in start.jobs if j.task == t.name})
        for t in p.tasks)
    if len(owner) == p.n * p.L:
        sig = [tuple(owner[i, lo] for i in model.order) for lo in range(p.L)]
        assert sig == sorted(sig)
        sizes = sorted((j.task, j.device, len(j.inputs)) for j in start.jobs)
        assert sizes == sorted((p.task_names[i], p.device_names[u], sum(hint[y.index] for (ii, uu, _), y
                                                                        in model.y.items() if (ii, uu) == (i, u)))
                               for (i, u) in model.x if any(hint[model.y[i, u, lo].index] for lo in range(p.L)))


@settings(max_examples=6, deadline=None)
@given(problems(throughput=True, max_tasks=5, max_devices=3, max_batch=3))
def test_priced_work_objective_trades_makespan_for_priced_work(p):
    """Both optima of the walk's two objectives: the makespan plus the priced work is at
    most the makespan-only optimum's, whose makespan is the least, so its priced work is no
    more."""
    start = solve(p, "bheft")
    values = []
    for priced in (False, True):
        model = CpSatBatched(p, start.makespan, input_symmetry=False)
        if priced:
            model.minimize_with_priced_work()
        solver, status, _ = run_cpsat(model, 60, 1, 0, False)
        assert status == cp_model.OPTIMAL
        values.append((solver.value(model.C), sum(solver.value(v) for v, _ in model.priced)))
    (c0, w0), (c1, w1) = values
    assert c1 >= c0 and w1 <= w0


@settings(max_examples=6, deadline=None)
@given(problems(throughput=True, max_tasks=5, max_devices=2, max_batch=3))
def test_walk_in_one_window_is_the_exact_optimum(p):
    """With a window over every module the walk is one exact step: the optimum of the batched
    model (``exact`` may return its start instead, with two batches of a task on one device)."""
    chain = pick_chain(p, 0)
    assert sorted(i for mod in chain.modules for i in mod) == list(range(p.n))
    start = solve(p, "bheft")
    s = pipeline(p, chain, len(chain.modules), start.makespan, 60.0, SolveContext(), start)
    assert s is not None and validate(p, s) == []
    assert s.makespan == pytest.approx(optimum(p, CpSatBatched(p, start.makespan)), rel=1e-6, abs=1e-6)


@settings(max_examples=6, deadline=None)
@given(problems(throughput=True, max_tasks=6, max_devices=3, max_batch=4))
def test_walk_schedules_are_valid_and_no_better_than_the_optimum(p):
    chain = pick_chain(p, 0)
    start = solve(p, "bheft")
    best = solve(p, "exact", threads=1).makespan
    for group in (False, True):
        s = pipeline(p, chain, 1, start.makespan, 5.0, SolveContext(), start, group=group)
        if s is not None:
            assert validate(p, s) == []
            assert s.makespan >= best * (1 - 1e-6) - 1e-6


def test_walk_hints_no_job_of_a_size_the_step_has_no_room_for():
    """Hypothesis found it: bheft's start has a job of 2 inputs that a step's model has no
    option of that size for; hinting it raised a KeyError."""
    from pathlib import Path

    from mapsched import Problem

    p = Problem.read(str(Path(__file__).parents[1] / "data" / "walk_hint_of_a_size_without_room.json"))
    chain = pick_chain(p, 0)
    start = solve(p, "bheft")
    best = solve(p, "exact", threads=1).makespan
    for group in (False, True):
        s = pipeline(p, chain, 1, start.makespan, 5.0, SolveContext(), start, group=group)
        assert s is not None and validate(p, s) == [] and s.makespan >= best * (1 - 1e-6) - 1e-6


def test_grouped_walk_pipelines_a_stack():
    """Batches of 2, 4, 6 and 8 over 8 inputs: the walk moves inputs in pairs, its schedule
    is valid, and split with it is never worse than without it."""
    p = stack(2, 5, 1, seed=2, objective=Objective("throughput", 8))
    assert all(b % 2 == 0 for d in p.system.devices for b in d.batch_sizes)
    chain = pick_chain(p, 0)
    start = solve(p, "bheft")
    s = pipeline(p, chain, 1, start.makespan, 5.0, SolveContext(), start, group=True)
    assert validate(p, s) == []
    assert all(len(j.inputs) % 2 == 0 and min(j.inputs) % 2 == 0 for j in s.jobs)
    plain = solve(p, "split", threads=1, pipeline=0)
    walked = solve(p, "split", threads=1)
    assert validate(p, walked) == [] and walked.makespan <= plain.makespan + 1e-9


@settings(max_examples=5, deadline=None)
@given(st.integers(2, 3), st.integers(3, 5), st.integers(1, 2), st.sampled_from(["sdep", "wdep"]),
       st.integers(0, 10**6))
def test_priced_steps_and_second_walk_give_valid_schedules_on_random_stacks(modules, n, channels, variant, seed):
    """Stacks of several modules, so that the walk has steps before its last (the priced ones),
    the probe from the walk's schedule, and split under a time limit: no module recursion."""
    p = stack(modules, n, channels, variant, seed=seed, objective=Objective("throughput", 8))
    chain = pick_chain(p, 0)
    assume(len(chain.modules) > 1)  # small multi-channel stacks are sometimes detected as one module
    start = solve(p, "bheft")
    s = pipeline(p, chain, 1, start.makespan, 2.0, SolveContext(), start, group=True)
    assert s is not None and validate(p, s) == []
    probed = _probe(p, s, "cpsat", SolveContext(time_limit=4.0))  # a 1 s probe from the walk
    assert validate(p, probed) == [] and probed.makespan <= s.makespan
    r = solve(p, "split", time_limit=4.0, threads=1)
    assert validate(p, r) == [] and r.makespan <= start.makespan * (1 + 1e-9)


def test_the_probe_keeps_a_valid_schedule_no_worse_and_split_takes_one_branch():
    """The probe of the whole graph's model after the first walk, and split's choice after it:
    either the polish gets the second walk's time, or the second walk runs, never both."""
    p = stack(3, 5, 2, "wdep", seed=1, objective=Objective("throughput", 8))
    chain = pick_chain(p, 0)
    start = solve(p, "bheft")
    s = pipeline(p, chain, 1, start.makespan, 1.0, SolveContext(), start, group=True)
    probed = _probe(p, s, "cpsat", SolveContext(time_limit=6.0))
    assert validate(p, probed) == [] and probed.makespan <= s.makespan
    assert _probe(p, s, "cpsat", SolveContext()) is s  # only under a time limit
    r = solve(p, "split", time_limit=12.0, threads=1)
    assert validate(p, r) == [] and r.makespan <= start.makespan * (1 + 1e-9)
    assert not ("polish gets the time of a second walk" in r.log and "second walk, hinted" in r.log)


def test_grouped_improve_keeps_a_valid_schedule_no_worse():
    p = stack(2, 5, 1, seed=3, objective=Objective("throughput", 8))
    chain = pick_chain(p, 0)
    start = solve(p, "bheft")
    s = pipeline(p, chain, 1, start.makespan, 1.0, SolveContext(), start, group=True)
    better = grouped_improve(p, s, SolveContext(), 1.0)
    assert validate(p, better) == [] and better.makespan <= s.makespan
    assert grouped_improve(p, start, SolveContext(), 1.0) is start or all(
        len(j.inputs) % 2 == 0 for j in start.jobs)  # a start that splits a pair is returned as it is


def test_split_of_a_zero_makespan():
    # a start of 0 ms set the walk's resolution to 1e18 ticks per ms, and its first step's
    # 5 ms horizon then past CP-SAT's range: an OptionError on --resolution, never given
    p = Problem([Task("t0", {"d0": 5.0, "d1": {"1": 0.0, "2": 0.0}})], [],
                System((Device("d0"), Device("d1", batch_sizes=(1, 2))), ()), Objective("throughput", 2))
    s = solve(p, "split", time_limit=5, workers=1)
    assert validate(p, s) == [] and s.makespan == 0.0 and s.status == "optimal"
