"""Head-and-tail windows: the mirrored problem, one window's solve and the window bound."""

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from strategies import problems

from mapsched import Objective, Problem, solve
from mapsched.bounds import critical_path_bound, lower_bound, work_bound
from mapsched.generators import stack
from mapsched.model.problem import Device, Edge, Link, System, Task
from mapsched.split import chain_bound, full_bound, window_bound
from mapsched.split.windows import mirror, window_lower_bound


@settings(max_examples=8, deadline=None)
@given(problems(max_tasks=6))
def test_mirror_keeps_the_optimum(p):
    a = solve(p, "exact", threads=1, time_limit=20)
    b = solve(mirror(p), "exact", threads=1, time_limit=20)
    assert a.status == b.status == "optimal"
    assert a.makespan == pytest.approx(b.makespan, rel=1e-9)


def test_mirror_reverses_edges_and_directed_links():
    system = System((Device("a"), Device("b")), (Link("a", "b", 1e6, 0.5, directed=True),))
    p = Problem([Task("x", {"a": 1.0}), Task("y", {"b": 2.0})], [Edge("x", "y", 3000.0)], system)
    q = mirror(p)
    assert (q.task_names[int(q.src[0])], q.task_names[int(q.dst[0])]) == ("y", "x")
    # y (on b) now sends to x (on a): the link must run b -> a, at the same cost
    assert q.comm[0, 1, 0] == pytest.approx(p.comm[0, 0, 1]) == pytest.approx(3.5)
    assert q.system.links[0].a == "b"
    assert solve(q, "exact").makespan == pytest.approx(solve(p, "exact").makespan) == pytest.approx(6.5)


def test_a_window_counts_its_release_and_tail():
    p = Problem.from_arrays([[3.0, 5.0], [2.0, 2.0]], [])
    # task 0 released at 2 and followed by 4: 2 + 3 + 4 on its fastest device
    assert window_lower_bound(p, frozenset({0}), {0: 2.0}, {0: 4.0}, 10) == pytest.approx(9.0, abs=1e-6)
    # both tasks, each on its own device: the later of the two
    assert window_lower_bound(p, frozenset({0, 1}), {1: 7.5}, {0: 1.0}, 10) == pytest.approx(9.5, abs=1e-6)


@settings(max_examples=6, deadline=None)
@given(st.integers(0, 10**6), st.sampled_from(["sdep", "wdep"]), st.integers(1, 3))
@example(seed=64, variant="sdep", channels=1)  # CP-SAT's LP-free search proved a window 0.13% above the optimum
def test_window_bound_lies_between_the_quick_bound_and_the_optimum(seed, variant, channels):
    p = stack(3, 4, channels, variant, seed=seed)
    b = window_bound(p, time_limit=20, block=4)
    opt = solve(p, "exact", threads=2, time_limit=30)
    assert lower_bound(p).value <= b <= opt.makespan * (1 + 1e-6)


def test_windows_beat_the_chain_on_a_four_channel_stack():
    p = stack(4, 6, 4, "sdep", seed=1)
    b = window_bound(p, time_limit=15)
    assert b > chain_bound(p, time_limit=15) * 1.05
    assert b <= solve(p, "split", workers=1).makespan


def test_window_bound_is_for_latency():
    p = stack(2, 4, 1, seed=0, objective=Objective("throughput", 4))
    with pytest.raises(ValueError, match="latency problems only"):
        window_bound(p)


@pytest.mark.parametrize("option,value", [("span", 0), ("block", 2.5), ("time_limit", 0), ("window_time_limit", -1)])
def test_window_bound_names_a_bad_option(option, value):
    with pytest.raises(ValueError, match=f"^{option}: expected (a whole|a positive|an integer)"):
        window_bound(stack(2, 4, 2, seed=0), **{option: value})


def test_full_bound_hands_the_window_time_on(monkeypatch):
    import mapsched.split.chain_bounds as bound_module

    seen = {}

    def spy(problem, chain=None, **kwargs):
        seen.update(kwargs)
        return window_bound(problem, chain, **kwargs)

    monkeypatch.setattr(bound_module, "window_bound", spy)
    monkeypatch.setattr(bound_module, "EXACT_BOUND_TASKS", 0)  # it would prove the optimum and stop
    b = full_bound(stack(2, 4, 2, seed=0), time_limit=10, window_time_limit=0.5)
    assert seen["window_time_limit"] == 0.5 and b.value >= lower_bound(stack(2, 4, 2, seed=0)).value


@settings(max_examples=30, deadline=None)
@given(problems(max_tasks=9, max_devices=3, throughput=None), st.data())
def test_subset_bound_equals_the_quick_bounds_of_the_restriction(p, data):
    from mapsched.bounds import SubsetBound

    tasks = data.draw(st.sets(st.integers(0, p.n - 1), min_size=1))
    q = p.restrict(sorted(tasks))
    assert SubsetBound(p)(tasks) == pytest.approx(max(critical_path_bound(q), work_bound(q)), rel=1e-12)


def test_windows_past_their_deadline_build_no_restriction(monkeypatch):
    # Past the deadline each task set took a restriction and lower_bound (20-70 ms a set, 0.6 s
    # over a 1.2 s limit on a 20-module stack); the quick bounds need neither.
    from mapsched.split import windows

    def refused(*args, **kwargs):
        raise AssertionError("lower_bound past the deadline")

    p = stack(modules=6, n=6, channels=2, variant="sdep", seed=0)
    quick = max(critical_path_bound(p), work_bound(p))
    monkeypatch.setattr(windows, "lower_bound", refused)
    assert quick <= window_bound(p, time_limit=1e-6) <= solve(p, "heft").makespan * (1 + 1e-9)
