"""Heuristics: golden values, search invariants, memory and link handling."""

import pytest
from hypothesis import given
from strategies import problems

import mapsched
from mapsched import Device, Edge, InfeasibleError, Problem, System, Task, instances, solve, validate
from mapsched.heuristics.ea import start_mapping
from mapsched.heuristics.search import MappingSpace
from mapsched.scheduling.feasibility import feasible_counts
from mapsched.scheduling.ranks import downward_rank, upward_rank

TOPCUOGLU = instances.load("topcuoglu2002")


def test_heft_golden_80():
    r = solve(TOPCUOGLU, "heft")
    assert r.makespan == 80.0 and validate(TOPCUOGLU, r) == []


def test_cpop_golden_86():
    # Topcuoglu et al. report 86 for CPOP on their example.
    assert solve(TOPCUOGLU, "cpop").makespan == 86.0


def test_topcuoglu_ranks():
    # Upward ranks from Table 1 of Topcuoglu et al. (2002).
    ru = upward_rank(TOPCUOGLU)
    assert ru[[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]] == pytest.approx(
        [108.0, 77.0, 80.0, 80.0, 69.0, 63.333, 42.667, 35.667, 44.333, 14.667], abs=1e-3)
    rd = downward_rank(TOPCUOGLU)
    assert rd[0] == 0 and rd[9] == pytest.approx(93.333, abs=1e-3)


@pytest.mark.parametrize("name", ["sa", "ea"])
def test_search_reaches_topcuoglu_optimum(name):
    assert solve(TOPCUOGLU, name, seed=0).makespan == 73.0


@given(problems(throughput=None, max_tasks=7))
def test_ea_never_worse_than_its_start(p):
    space = MappingSpace(p)
    start = space.fitness(start_mapping(p))
    assert solve(p, "ea", iterations=200).makespan <= start + 1e-9


@given(problems(throughput=None, max_tasks=7))
def test_sa_never_worse_than_its_start(p):
    init = solve(p, "bheft" if p.L > 1 else "heft").makespan
    assert solve(p, "sa", iterations=200).makespan <= init + 1e-9


def test_time_limit_is_honoured():
    p = mapsched.generators.random_dag(300, 4, seed=1)
    for name in ("sa", "ea"):
        r = solve(p, name, time_limit=0.5, iterations=10**9)
        assert r.solve_seconds < 2.0 and r.status == "feasible" and validate(p, r) == []


def tight_problem(mem_b: float):
    """Two parallel tasks that each need 60 bytes; device a holds 100, b holds mem_b."""
    return Problem.from_dict({
        "format": "mapsched.problem/1",
        "objective": {"kind": "latency"},
        "devices": [{"name": "a", "memory": 100}, {"name": "b", "memory": mem_b}],
        "links": [{"a": "a", "b": "b", "bandwidth": 1e6}],
        "tasks": [{"name": "x", "latency": {"a": 1, "b": 10}, "weight_bytes": 60},
                  {"name": "y", "latency": {"a": 1, "b": 10}, "weight_bytes": 60}],
        "edges": [],
    })


@pytest.mark.parametrize("name", ["met", "greedy", "heft", "peft", "cpop", "sa", "ea"])
def test_memory_forces_a_slower_device(name):
    p = tight_problem(100)
    r = solve(p, name)
    assert validate(p, r) == [] and {j.device for j in r.jobs} == {"a", "b"}


@pytest.mark.parametrize("name", ["met", "heft", "peft", "ea"])
def test_no_feasible_mapping_names_the_devices(name):
    p = tight_problem(50)
    with pytest.raises(InfeasibleError, match="memory of a"):
        solve(p, name)


def test_dead_end_is_repaired():
    """met puts x on a (fastest), leaving y nowhere: a -> b has no link and a is full."""
    p = Problem.from_dict({
        "format": "mapsched.problem/1",
        "objective": {"kind": "latency"},
        "devices": [{"name": "a", "memory": 100}, {"name": "b"}, {"name": "c"}],
        "links": [{"a": "b", "b": "c", "bandwidth": 1e6}, {"a": "a", "b": "c", "bandwidth": 1e6}],
        "tasks": [{"name": "x", "latency": {"a": 1, "b": 9}, "weight_bytes": 60},
                  {"name": "y", "latency": {"a": 1, "b": 9}, "weight_bytes": 60}],
        "edges": [{"src": "x", "dst": "y"}],
    })
    r = solve(p, "met")
    assert validate(p, r) == [] and "feasibility repair" in r.log


@given(problems(throughput=None, max_tasks=8))
def test_feasible_counts_fit(p):
    counts = feasible_counts(p, None)
    assert (counts.sum(axis=1) == p.L).all()
    s = mapsched.decode(p, mapsched.model.owners.owner_from_counts(counts))
    assert validate(p, s) == []


def test_heft_on_2000_tasks():
    p = mapsched.generators.random_dag(2000, 4, seed=0)
    r = solve(p, "heft")
    assert validate(p, r) == [] and r.makespan < solve(p, "met").makespan


def test_split_beam_matches_enumeration_when_it_keeps_everything(monkeypatch):
    from mapsched.generators import gpu_server, random_wired
    from mapsched.scheduling import construct as common

    p = random_wired(4, seed=0, platform=gpu_server(2), objective=mapsched.Objective("throughput", 4))
    for i in range(p.n):
        listed = common._splits(p, i)
        monkeypatch.setattr(common, "_ENUMERATE", 0)
        beamed = common._splits(p, i)
        monkeypatch.undo()
        assert beamed == listed and all(sum(c) == p.L for c in beamed)


def test_batched_heuristics_scale_to_many_devices():
    from mapsched.generators import gpt3

    p = gpt3(layers=1, objective=mapsched.Objective("throughput", 8))  # 30 devices: 5^30 count vectors
    r = solve(p, "bheft")
    assert validate(p, r) == []


@pytest.mark.parametrize("name", ["sa", "ea", "random"])
def test_searches_stop_at_a_proved_optimum(name, monkeypatch):
    # One device: every mapping is optimal, and its makespan (the chain's 4) meets the
    # critical-path bound, so no search step has anything to find.
    from mapsched.scheduling.decoder import Decoder

    p = Problem([Task(f"t{k}", {"d0": 1.0}) for k in range(4)], [Edge(f"t{k}", f"t{k + 1}") for k in range(3)],
                System((Device("d0"),)))
    calls = []
    makespan = Decoder.makespan
    monkeypatch.setattr(Decoder, "makespan", lambda self, *a: calls.append(1) or makespan(self, *a))
    r = solve(p, name, iterations=50) if name != "random" else solve(p, name, samples=50)
    # sa and ea decode the start twice (its feasibility check, then its fitness); then no step.
    assert r.makespan == 4.0 and r.status == "optimal" and len(calls) == (1 if name == "random" else 2)


@pytest.mark.parametrize("name, options", [("random-eft", {"steps": 50}),
                                           ("random", {"samples": 50, "evaluator": "simulate"})])
def test_simulated_searches_stop_at_a_proved_optimum(name, options, monkeypatch):
    # As above: on one device the first run of the runtime model meets the bound.
    import mapsched.scheduling.simulate
    from mapsched.heuristics import random_eft

    p = Problem([Task(f"t{k}", {"d0": 1.0}) for k in range(4)], [Edge(f"t{k}", f"t{k + 1}") for k in range(3)],
                System((Device("d0"),)))
    calls = []
    run = mapsched.scheduling.simulate.simulate
    counted = lambda *a, **k: calls.append(1) or run(*a, **k)  # noqa: E731
    monkeypatch.setattr(mapsched.scheduling.simulate, "simulate", counted)
    monkeypatch.setattr(random_eft, "simulate", counted)
    r = solve(p, name, **options)
    assert r.makespan == 4.0 and r.status == "optimal" and len(calls) == 1


def test_construct_refuses_an_order_that_is_not_topological():
    # The builder would time a task before its parents and return an invalid schedule.
    from mapsched.scheduling.construct import construct, earliest_finish

    p = TOPCUOGLU
    for order, match in ((p.topo.tolist()[::-1], "expected a topological order"),
                         (p.topo.tolist()[1:], "expected a permutation"),
                         (p.topo.tolist()[:-1] + [p.topo[0]], "expected a permutation")):
        with pytest.raises(ValueError, match=match):
            construct(p, order, earliest_finish, insertion=True)
    assert validate(p, construct(p, p.topo.tolist(), earliest_finish, insertion=True)) == []


def test_ea_on_throughput_where_only_input_by_input_links_fit():
    # Input 0 runs a and b on d0, input 1 on d1; b's fastest device d2 has no link. ea's
    # repair, whose counts keep an edge's inputs off unlinked devices altogether, found
    # none and said that no mapping exists
    from mapsched import Link, Objective

    p = Problem([Task("a", {"d0": 1.0, "d1": 1.0}), Task("b", {"d0": 5.0, "d1": 5.0, "d2": {"1": 0.5, "2": 0.5}})],
                [Edge("a", "b", 100)],
                System((Device("d0"), Device("d1"), Device("d2", batch_sizes=(1, 2))),
                       (Link("d0", "d1", 1e6, directed=True),)), Objective("throughput", 2))
    s = solve(p, "ea", seed=0)
    assert validate(p, s) == [] and s.makespan == pytest.approx(6.0)
    with pytest.raises(InfeasibleError, match="found that keeps each edge's inputs off unlinked devices"):
        feasible_counts(p)


def test_memory_short_of_every_tasks_weights_is_proved_at_once():
    # on GPT-3 at 1,000 layers (7.2 TB of weights on 2.5 TB of devices) the feasibility model
    # took minutes to build, past any time limit, before it could say so
    p = Problem([Task(f"t{i}", {"d0": 1.0, "d1": 1.0}, weight_bytes=10) for i in range(4)], [],
                System((Device("d0", memory=15), Device("d1", memory=15))))
    with pytest.raises(InfeasibleError, match="need 40 bytes of memory, and all the devices hold 30"):
        feasible_counts(p)
    with pytest.raises(InfeasibleError, match="need 40 bytes"):
        solve(p, "heft")


def test_single_best_keeps_the_fastest_device_tried_by_the_time_limit():
    # It decoded every device whatever the limit: 16 s at 1 s on 1,024 devices.
    p = Problem.from_arrays([[5.0] + [1.0] * 7] * 4, [(0, 1), (1, 2), (2, 3)])
    assert solve(p, "single-best").makespan == 4.0
    late = solve(p, "single-best", time_limit=1e-9)  # spent before the first device: that one only
    assert validate(p, late) == [] and late.makespan == 20.0


def test_cp_search_moves_a_task_whose_successor_is_reached_by_a_directed_link():
    # Link a -> b only. x belongs on a (1 ms, against 10 on b) and feeds y, on b only: the move
    # checked the link from y's device to x's (b -> a), which is not there, and was never tried.
    from mapsched import Link
    from mapsched.heuristics.critical_path_search import improve
    from mapsched.scheduling.decoder import decode
    from mapsched.solve import SolveContext

    p = Problem([Task("x", {"a": 1.0, "b": 10.0}), Task("y", {"b": 1.0})], [Edge("x", "y", 0.0)],
                System((Device("a"), Device("b")), (Link("a", "b", 1e9, directed=True),)))
    start = decode(p, [1, 1])  # both on b: 11 ms
    better = improve(p, start, SolveContext(), moves=10)
    assert validate(p, better) == [] and better.makespan == 2.0
