"""The throughput bounds that see pipelining (mapsched.bounds.batched): never above an
optimum or any schedule, and never below the load bound they extend."""

import numpy as np
import pytest
from exhaustive import exhaustive_batched_optimum
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import problems

from mapsched import Device, Objective, Problem, System, Task, solve, validate
from mapsched.bounds import load_bound, lower_bound, min_work
from mapsched.bounds.batched import batched_relaxation_bound, heads_tails, shrunk, stage_bound, two_part_bound
from mapsched.generators import stack
from mapsched.split import full_bound

pytest.importorskip("highspy")

SLACK = 1e-6


def below(bound: float, makespan: float) -> bool:
    return bound <= makespan * (1 + SLACK) + 1e-9


def every_bound(p) -> dict[str, float]:
    """Each new rule on its own (blocks: one task each, in topological order)."""
    blocks = [[i] for i in p.topo.tolist()]
    return {
        "batched-lp": batched_relaxation_bound(p, time_limit=5, integral=False),
        "batched-mip": batched_relaxation_bound(p, time_limit=5),
        "stages": stage_bound(p, blocks),
        "two-part": two_part_bound(p, blocks),
        "lower_bound": lower_bound(p).value,
    }


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(problems(max_tasks=3, max_devices=2, throughput=True, max_batch=3).filter(lambda p: p.n * p.L <= 6))
def test_bounds_never_exceed_the_exhaustive_optimum(p):
    opt = exhaustive_batched_optimum(p)
    for rule, value in every_bound(p).items():
        assert below(value, opt), (rule, value, opt)


@settings(max_examples=12, deadline=None)
@given(problems(max_tasks=5, max_devices=3, throughput=True, max_batch=4, min_tasks=2))
def test_bounds_never_exceed_a_proved_exact_optimum(p):
    r = solve(p, "exact", time_limit=10, threads=1)
    assert not validate(p, r)
    for rule, value in every_bound(p).items():
        assert below(value, r.makespan), (rule, value, r.makespan)  # any schedule, optimal or not


@settings(max_examples=3, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 2), st.sampled_from([4, 8]))
def test_full_bound_is_below_every_heuristic_on_stacks(seed, channels, batch):
    p = stack(modules=2, n=4, channels=channels, seed=seed, objective=Objective("throughput", batch))
    b = full_bound(p, time_limit=1)
    for method, kw in (("bheft", {}), ("sa", {"time_limit": 0.5}), ("split", {"time_limit": 1})):
        r = solve(p, method, seed=seed, **kw)
        assert not validate(p, r)
        assert below(b.value, r.makespan), (method, b, r.makespan)
        assert below(r.lower_bound, r.makespan)


@settings(max_examples=25, deadline=None)
@given(problems(max_tasks=8, max_devices=3, throughput=True, max_batch=4))
def test_batched_relaxation_is_at_least_the_load_bound(p):
    # Its LP holds the load LP's rows (shares x = b z / L), so only tolerance separates them.
    assert batched_relaxation_bound(p, time_limit=5, integral=False) >= load_bound(p) * (1 - 1e-6) - 1e-9


def test_batched_relaxation_sees_that_inputs_wait_for_their_batch():
    # On a chain of modules the load LP balances full batches on every device; an input
    # in a batch of 16 waits for the whole job, which the relaxation charges.
    p = stack(modules=3, n=10, seed=0, objective=Objective("throughput", 16))
    assert batched_relaxation_bound(p, time_limit=10, integral=False) > 1.02 * load_bound(p)
    assert lower_bound(p).rule == "batched-relaxation"


def test_shrunk_batches_take_the_least_larger_job():
    p = stack(modules=1, n=4, seed=1, objective=Objective("throughput", 8))  # batches 2, 4, 6, 8
    q = shrunk(p, range(p.n), 3)
    assert q.L == 3 and q.batch_sizes.tolist() == [1, 2, 3]
    # one input: the batch of 2; three: the batch of 4
    assert np.allclose(q.lat[:, :, 0], p.lat[:, :, 0]) and np.allclose(q.lat[:, :, 2], p.lat[:, :, 1])
    assert shrunk(p, range(p.n), p.L) == p.restrict(range(p.n))


def test_heads_and_tails_are_the_shortest_paths_around_a_task():
    p = stack(modules=2, n=4, seed=2, objective=Objective("throughput", 4))
    head, tail = heads_tails(p)
    shortest = p.lat.min(axis=(1, 2))
    assert np.allclose((head + shortest + tail).max(), (head + shortest + tail)[p.topo[0]])
    assert head[p.topo[0]] == 0 and tail[p.topo[-1]] == 0


def several_jobs_per_device() -> Problem:
    """One device; t1 takes 41 ms for one input, 66 for two, 111 for three: a job of two
    and a job of one (107 ms) beat the batch of three."""
    dev = Device("d0", batch_sizes=(1, 2, 3))
    tasks = [Task("t0", {"d0": {"1": 4.0, "2": 7.0, "3": 13.0}}), Task("t1", {"d0": {"1": 41.0, "2": 66.0, "3": 111.0}})]
    return Problem(tasks, [], System((dev,)), Objective("throughput", 3))


def test_bounds_count_several_jobs_of_a_task_on_one_device():
    p = several_jobs_per_device()
    opt = exhaustive_batched_optimum(p)
    assert opt == pytest.approx(11.0 + 107.0)  # 7 + 4 and 66 + 41
    assert min_work(p).tolist() == [11.0, 107.0]
    assert below(lower_bound(p).value, opt)
    assert below(full_bound(p, time_limit=2).value, opt)
    assert lower_bound(p).value == pytest.approx(opt, rel=1e-6)  # the work bound is tight here


def test_batched_relaxation_tries_nothing_in_too_short_a_time(monkeypatch):
    # Below SETUP seconds per column no LP could finish: neither the list schedule of its
    # cap nor the build may run (they overran short limits by up to 3.7 s).
    from mapsched.engine import highs
    from mapsched.scheduling import best_list

    p = stack(modules=3, n=10, seed=0, objective=Objective("throughput", 16))
    columns = p.n * p.m * len(p.batch_sizes) + p.E * p.m * p.m

    def refused(*args, **kwargs):
        raise AssertionError("the list schedule ran")

    monkeypatch.setattr(best_list, "best_list_schedule", refused)
    assert batched_relaxation_bound(p, time_limit=0.9 * highs.SETUP * columns) == 0.0


def test_full_bound_runs_the_batched_relaxation_once(monkeypatch):
    # On the whole problem, lower_bound leaves it to full_bound, which runs it with its
    # mixed-integer stage (the chain recursion bounds its task sets with it too).
    from mapsched.bounds import batched, lower
    from mapsched.split import chain_bounds

    calls = []

    def counted(q, *args, **kwargs):
        if q.n == p.n:
            calls.append(kwargs.get("integral", True))
        return batched.batched_relaxation_bound(q, *args, **kwargs)

    monkeypatch.setattr(lower, "batched_relaxation_bound", counted)
    monkeypatch.setattr(chain_bounds, "batched_relaxation_bound", counted)
    p = stack(modules=2, n=6, seed=1, objective=Objective("throughput", 8))
    b = full_bound(p, time_limit=5)
    assert calls == [True]
    assert below(b.value, solve(p, "bheft").makespan)
