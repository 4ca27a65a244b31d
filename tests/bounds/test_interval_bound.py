"""The interval load bound: sound against the exhaustive optimum and every schedule, and at
least the critical path and the load LP when nothing is left out."""

import pytest
from exhaustive import exhaustive_optimum
from hypothesis import given, settings
from strategies import problems

import mapsched
from mapsched import Device, Edge, Link, Objective, Problem, System, Task
from mapsched.bounds import critical_path_bound, load_bound
from mapsched.bounds.interval import INTERVAL_CUTS, interval_load_bound
from mapsched.generators import transformer_train

# (cuts, columns): the defaults; one cut and no room for windows (only the path's lengths);
# two cuts and room for a few windowed groups, the rest shared over the whole schedule.
SIZES = [(INTERVAL_CUTS, None), (1, 0), (2, 12)]


@pytest.mark.parametrize("cuts,columns", SIZES)
@settings(max_examples=40, deadline=None)
@given(p=problems(max_tasks=6, max_devices=3))
def test_interval_bound_is_below_the_exhaustive_optimum(cuts, columns, p):
    assert interval_load_bound(p, columns=columns, cuts=cuts) <= exhaustive_optimum(p) + 1e-9


@pytest.mark.parametrize("cuts,columns", SIZES)
@given(p=problems(max_tasks=30, max_devices=4))
def test_interval_bound_is_below_every_heuristic(cuts, columns, p):
    b = interval_load_bound(p, columns=columns, cuts=cuts)
    for method in ("heft", "cpop"):
        assert b <= mapsched.solve(p, method).makespan * (1 + 1e-9)
    assert b <= mapsched.decode(p, p.planted).makespan * (1 + 1e-9)


@given(p=problems(max_tasks=30, max_devices=4))
def test_interval_bound_holds_the_critical_path_and_the_load_lp(p):
    # With room for every window, each interval's rows sum to the load LP's and the lengths
    # to the critical path.
    b = interval_load_bound(p, columns=10**7, cuts=p.n)
    assert b >= critical_path_bound(p) * (1 - 1e-6) - 1e-9
    assert b >= load_bound(p) * (1 - 1e-6) - 1e-9


def fork_joins(fans, width, devices):
    """``fans`` fans of ``width`` unit tasks in series, each between a fork and a join."""
    names, edges = ["j0"], []
    for f in range(fans):
        names += [f"f{f}x{k}" for k in range(width)] + [f"j{f + 1}"]
        edges += [Edge(f"j{f}", f"f{f}x{k}") for k in range(width)]
        edges += [Edge(f"f{f}x{k}", f"j{f + 1}") for k in range(width)]
    devs = tuple(Device(f"d{u}") for u in range(devices))
    links = tuple(Link(f"d{u}", f"d{v}", 1e12, 0.0) for u in range(devices) for v in range(u + 1, devices))
    return Problem([Task(n, {d.name: 1.0 for d in devs}) for n in names], edges, System(devs, links))


@pytest.mark.parametrize("fans,width,devices", [(2, 8, 2), (3, 6, 3), (4, 5, 2)])
def test_interval_bound_sees_fork_joins_that_the_other_bounds_do_not(fans, width, devices):
    p = fork_joins(fans, width, devices)
    # The joins one after the other, and between them each fan shared evenly: the LP's value.
    b = interval_load_bound(p)
    assert b == pytest.approx(fans + 1 + fans * width / devices, rel=1e-6)
    assert max(critical_path_bound(p), load_bound(p)) < b - 0.5
    optimum = fans + 1 + fans * -(-width // devices)  # each fan in rounds
    r = mapsched.solve(p, "heft")
    assert r.makespan == optimum and r.lower_bound == pytest.approx(b)
    assert (r.status == "optimal") == (width % devices == 0)


def test_interval_bound_on_a_training_step_and_throughput():
    p = transformer_train(1, d_model=256, heads=2, ff=1024, vocab=8000, seed=0)
    heft = mapsched.solve(p, "heft").makespan
    quick = max(critical_path_bound(p), load_bound(p))
    assert interval_load_bound(p) <= heft
    # The attention heads and the weights' gradients fill the devices between the path's tasks.
    assert quick * 1.02 <= interval_load_bound(p, columns=10**7, cuts=p.n) <= heft
    assert interval_load_bound(mapsched.generators.stack(2, 5, seed=1, objective=Objective("throughput", 4))) == 0.0


def test_critical_path_search_stops_at_a_proved_optimum(monkeypatch):
    from mapsched.heuristics import critical_path_search

    p = fork_joins(3, 6, 3)  # heft's schedule meets the interval bound: optimal
    decodes = []
    times = critical_path_search._Path.times
    monkeypatch.setattr(critical_path_search._Path, "times", lambda self, *a: decodes.append(1) or times(self, *a))
    r = mapsched.solve(p, "cp-search", time_limit=30)
    assert r.status == "optimal" and r.makespan == 10 and len(decodes) == 1  # the start's timing, no move


def test_the_lp_gets_what_the_windows_and_the_build_left_of_the_limit(monkeypatch):
    # HiGHS was given the whole limit after the windows and the build had spent part of it:
    # 5.65 s for a 5 s limit on a 19,000-task training step.
    from mapsched.bounds import interval

    asked = []
    real = interval.linprog
    monkeypatch.setattr(interval, "linprog", lambda *a, **kw: (asked.append(kw["options"]), real(*a, **kw))[1])
    p = transformer_train(1)
    assert interval_load_bound(p, time_limit=1e-9) == 0.0 and asked == []
    assert interval_load_bound(p, time_limit=60) > 0 and 0 < asked[0]["time_limit"] < 60
