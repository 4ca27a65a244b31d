"""Batched throughput: the CP-SAT and MILP models of data + model parallel schedules."""

import numpy as np
import pytest
from hypothesis import given, settings
from strategies import problems

from mapsched import Device, Objective, Problem, System, Task, solve, validate
from mapsched.formulations.batched_cpsat import CpSatBatched
from mapsched.formulations.batched_milp import MilpBatched
from mapsched.formulations.common import retime_jobs
from mapsched.generators import stack


def exact(p, backend="cpsat", **kw):
    r = solve(p, "exact", backend=backend, threads=1, **kw)
    assert validate(p, r) == []
    assert r.lower_bound <= r.makespan * (1 + 1e-9) + 1e-9
    return r


def test_batched_model_with_one_input_equals_the_latency_optimum():
    p = stack(1, 5, 1, seed=3)  # latency, L = 1
    lat = exact(p)
    for model in (CpSatBatched(p, lat.makespan * 1.5), MilpBatched(p, lat.makespan * 1.5)):
        out = model.solve(60, 1)
        assert out["optimal"]
        assert retime_jobs(p, out["jobs"]).makespan == pytest.approx(lat.makespan, rel=1e-6)


def test_one_device_runs_every_task_as_one_batch():
    tasks = [Task(f"t{i}", {"gpu": {1: 1.0 + i, 2: 1.5 + i, 4: 2.0 + i}}) for i in range(3)]
    from mapsched import Edge

    p = Problem(tasks, [Edge("t0", "t1"), Edge("t1", "t2")], System((Device("gpu", batch_sizes=(1, 2, 4)),)),
                Objective("throughput", 4))
    r = exact(p)
    # one batch per (task, device): the only schedule runs each task once at batch 4
    assert r.makespan == pytest.approx(2.0 + 3.0 + 4.0) and r.status == "optimal"
    assert r.throughput == pytest.approx(1000 * 4 / 9.0)


@pytest.mark.parametrize("backend", ["cpsat", "highs"])
def test_the_one_batch_optimum_is_not_claimed_as_a_bound(backend):
    # Three jobs of one input (3 x 2.97 ms) beat the one batch of three (13.71 ms) that the
    # batched models allow per task and device: their bound is no lower bound of the format's.
    from mapsched import Job, Schedule

    p = Problem([Task("t", {"gpu": {1: 2.97, 3: 13.71}})], [], System((Device("gpu", batch_sizes=(1, 3)),)),
                Objective("throughput", 3))
    three = Schedule.from_jobs(p, [Job("t", "gpu", 2.97 * k, 2.97 * (k + 1), (k,)) for k in range(3)])
    assert validate(p, three) == []
    r = exact(p, backend)
    assert r.lower_bound <= three.makespan + 1e-9
    assert r.status == "optimal" or "among schedules with one job per task and device" in r.log


@settings(max_examples=8, deadline=None)
@given(problems(throughput=True, max_tasks=3, max_devices=2, max_batch=3))
def test_backends_agree_on_small_problems(p):
    a = exact(p, "cpsat", time_limit=60)
    b = exact(p, "highs", time_limit=60)
    if a.status == b.status == "optimal":
        assert a.makespan == pytest.approx(b.makespan, rel=1e-6, abs=1e-6)
    # each backend's proved bound holds for the other's schedule
    assert a.lower_bound <= b.makespan * (1 + 1e-6) and b.lower_bound <= a.makespan * (1 + 1e-6)


@settings(max_examples=10, deadline=None)
@given(problems(throughput=True, max_tasks=5, max_devices=3, max_batch=4))
def test_bound_is_sound_and_schedules_valid(p):
    r = exact(p, time_limit=10)
    for other in ("bheft", "bgreedy", "bmet"):
        assert r.lower_bound <= solve(p, other).makespan * (1 + 1e-9) + 1e-9
    assert r.makespan <= solve(p, "bheft").makespan + 1e-9  # never worse than the warm start
    # only supported batch sizes, within memory: the validator's rules 1 and 6
    for j in r.jobs:
        assert len(j.inputs) in p.system.devices[p.device_index[j.device]].batch_sizes


def test_throughput_beats_single_device_on_a_stack():
    p = stack(1, 6, 1, seed=1, objective=Objective("throughput", 8))
    r = exact(p, time_limit=5)
    single = [np.sum(p.lat[:, u, p.batch_pos[8]]) for u in range(p.m)]
    assert r.makespan <= min(single) + 1e-9
    assert {j.device for j in r.jobs} != {p.device_names[int(np.argmin(single))]} or r.makespan == min(single)


@settings(max_examples=10, deadline=None)
@given(problems(throughput=True, max_tasks=5, max_devices=3, max_batch=4))
def test_a_schedule_hints_every_variable_of_the_model_feasibly(p):
    # A partial or infeasible hint leaves CP-SAT repairing it instead of improving it.
    from ortools.sat.python import cp_model

    start = solve(p, "bheft")
    model = CpSatBatched(p, start.makespan)
    model.hint(start)
    assert len(model.model.proto.solution_hint.vars) == len(model.model.proto.variables)
    solver = cp_model.CpSolver()
    solver.parameters.fix_variables_to_their_hinted_value = True
    solver.parameters.num_workers = 1
    solver.parameters.max_time_in_seconds = 10
    assert solver.solve(model.model) in (cp_model.OPTIMAL, cp_model.FEASIBLE)


def test_a_start_that_is_a_float_sum_hints_feasibly():
    # bheft's t3 starts at 93 + 35.2 = 128.19999999999999 ms; floored at 10**6 ticks a ms it
    # was a tick before its input's arrival in ticks, and the whole hint was infeasible.
    from pathlib import Path

    from ortools.sat.python import cp_model

    p = Problem.read(str(Path(__file__).parents[1] / "data" / "hint_start_a_float_sum.json"))
    start = solve(p, "bheft")
    assert any(j.start == 93 + 35.2 for j in start.jobs)
    model = CpSatBatched(p, start.makespan)
    model.hint(start)
    solver = cp_model.CpSolver()
    solver.parameters.fix_variables_to_their_hinted_value = True
    solver.parameters.num_workers = 1
    assert solver.solve(model.model) == cp_model.OPTIMAL


@settings(max_examples=25, deadline=None)
@given(problems(throughput=True, max_tasks=4, max_devices=3, max_batch=5))
def test_each_tasks_priced_work_starts_at_its_cheapest_pattern(p):
    # The knapsack over devices against every pattern: a batch size or none per device, summing to L.
    import itertools

    model = CpSatBatched(p, solve(p, "bheft").makespan)
    for i, (priced, on) in enumerate(model.priced):
        choices = [[0, *model.ticks[i, u]] for u in on]
        costs = [sum(w * model.ticks[i, u][k] for (u, w), k in zip(on.items(), pick) if k)
                 for pick in itertools.product(*choices) if sum(pick) == p.L]
        assert model.model.proto.variables[priced.index].domain[0] == min(costs)


@settings(max_examples=8, deadline=None)
@given(problems(throughput=True, max_tasks=4, max_devices=3, max_batch=3))
def test_the_search_form_has_the_same_optimum(p):
    # Per-input precedences and no signature order: the form exact builds for large models.
    start = solve(p, "bheft")
    proof = CpSatBatched(p, start.makespan).solve(60, 1)
    search = CpSatBatched(p, start.makespan, links=False, input_symmetry=False).solve(60, 1)
    assert proof["optimal"] and search["optimal"]
    assert search["bound"] == pytest.approx(proof["bound"], rel=1e-9, abs=1e-9)


def test_a_large_batched_stack_is_solved_in_the_search_form():
    from mapsched.formulations.batched_cpsat import search_form

    p = stack(5, 10, 1, seed=0, objective=Objective("throughput", 4))
    assert search_form(p)
    r = exact(p, time_limit=3)
    assert r.makespan <= solve(p, "bheft").makespan + 1e-9


def test_the_hinted_model_takes_over_when_the_search_form_finds_nothing(monkeypatch):
    p = stack(5, 10, 1, seed=0, objective=Objective("throughput", 4))
    probes = []

    def nothing(self, time_limit, *args, first_within=None):  # the search form (links=False) finds nothing
        probes.append(first_within)
        return {"jobs": None, "log": "", "optimal": False, "bound": 0.0}

    real = CpSatBatched.solve
    monkeypatch.setattr(CpSatBatched, "solve", lambda self, *a, **kw: (nothing if not self.z else real)(
        self, *a, **kw))
    r = solve(p, "exact", time_limit=4, log=True)
    assert probes and 0 < probes[0] <= 0.25 * 4
    assert "the hinted model for the rest" in r.log and validate(p, r) == []
    assert r.makespan <= solve(p, "bheft").makespan + 1e-9



def test_no_mapping_with_one_job_per_device_is_no_proof_that_none_exists():
    # d1 runs one input at a time and d0 cannot hold both weights: two jobs of t1 on d1 make a
    # valid schedule (46 ms, the optimum by exhaustive search), which the methods do not build;
    # they said 'no mapping of the 3 tasks exists'
    from mapsched import InfeasibleError, Job, Link, Schedule

    p = Problem([Task("t0", {"d0": {"1": 5.0, "2": 3.0}, "d1": 3.0}),
                 Task("t1", {"d0": {"1": 6.0, "2": 26.0}, "d1": 23.0}, weight_bytes=100),
                 Task("t2", {"d0": {"1": 10.0, "2": 26.0}, "d1": 40.0}, weight_bytes=100)], [],
                System((Device("d0", memory=120, batch_sizes=(1, 2)), Device("d1", batch_sizes=(1,))),
                       (Link("d0", "d1", 1e9, directed=True), Link("d1", "d0", 100.0, directed=True))),
                Objective("throughput", 2))
    s = Schedule.from_jobs(p, [Job("t0", "d0", 0, 3, (0, 1)), Job("t2", "d0", 3, 13, (0,)),
                               Job("t2", "d0", 13, 23, (1,)), Job("t1", "d1", 0, 23, (0,)),
                               Job("t1", "d1", 23, 46, (1,))])
    assert validate(p, s) == []
    with pytest.raises(InfeasibleError, match="no mapping of the 3 tasks found with one job per task and device"):
        solve(p, "bheft")


def test_a_device_without_a_memory_limit_is_no_nan_in_the_refusal():
    # Only several jobs of a task on a fits (b holds one 60-byte input of the two): every method
    # raised "cannot convert float NaN to integer" where a's unlimited room entered an int().
    from mapsched import InfeasibleError

    p = Problem.from_dict({
        "format": "mapsched.problem/1", "objective": {"kind": "throughput", "batch": 2},
        "devices": [{"name": "a"}, {"name": "b", "memory": 100}],
        "links": [{"a": "a", "b": "b", "bandwidth": 1e9}],
        "tasks": [{"name": f"t{i}", "output_bytes": 60, "latency": {"a": 1, "b": 1}} for i in range(2)]})
    for method in ("bheft", "exact"):
        with pytest.raises(InfeasibleError, match="several jobs of a task on a device"):
            solve(p, method)
