"""Relocation costs: moving a task away from the initial placement costs start-up plus migration."""

import importlib.util
import re
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import problems

import mapsched
from mapsched import OptionError, Schedule, instances, solve, validate
from mapsched.engine.relocation import Relocation, relocation_costs
from mapsched.scheduling.decoder import as_owner

TORCH = importlib.util.find_spec("torch") is not None
SEARCH = ["sa", "ea", "auto"] + (["giph"] if TORCH else [])
FAST = {"sa": {"iterations": 300}, "ea": {"iterations": 300}, "giph": {"ratio": 1.0}, "auto": {}}


def owner(p, s):
    return as_owner(p, s.mapping())[:, 0]


@settings(max_examples=40, deadline=None)
@given(problems(max_tasks=8, max_devices=4), st.floats(0, 50), st.floats(1, 10), st.integers(0, 2**31))
def test_a_moved_task_pays_start_up_and_migration_over_runs(p, startup, runs, seed):
    rng = np.random.default_rng(seed)
    origin = {t: p.device_names[int(rng.integers(p.m))] for t in p.task_names}
    c = relocation_costs(p, Relocation(startup=startup, runs=runs), origin)
    for i, t in enumerate(p.task_names):
        o = p.device_index[origin[t]]
        for u in range(p.m):
            if u == o:
                assert c[i, u] == 0
            elif np.isfinite(p.link_latency[o, u]):
                want = (startup + p.device_comm(p.weight[i], o, u)) / runs
                assert c[i, u] == pytest.approx(want)
            else:  # unlinked: the slowest link's time, never less than start-up alone
                assert c[i, u] >= startup / runs - 1e-12


def test_per_task_and_per_device_values_replace_the_defaults_and_gone_devices_pay_start_up_only():
    p = instances.load("topcuoglu2002")
    r = Relocation(startup={"p2": 4.0}, bytes=0, runs=2,
                   tasks={"t1": {"startup": {"p3": 10.0}, "bytes": 1000.0}, "t2": {"startup": 6.0}})
    c = relocation_costs(p, r, {"t1": "p1", "t2": "p1", "t3": "p1", "t4": "gone"})
    lat, mpb = p.link_latency, p.link_ms_per_byte
    assert c[0].tolist() == pytest.approx([0.0, (4.0 + lat[0, 1] + 1000 * mpb[0, 1]) / 2,
                                           (10.0 + lat[0, 2] + 1000 * mpb[0, 2]) / 2])
    assert c[1].tolist() == pytest.approx([0.0, (6.0 + lat[0, 1]) / 2, (6.0 + lat[0, 2]) / 2])
    assert c[2].tolist() == pytest.approx([0.0, (4.0 + lat[0, 1]) / 2, lat[0, 2] / 2])
    assert c[3].tolist() == [0.0, 2.0, 0.0]  # its device is gone: start-up alone, wherever it goes
    assert not c[4:].any()  # not in the initial placement: nothing to relocate


@settings(max_examples=25, deadline=None)
@given(problems(max_tasks=8, max_devices=3), st.sampled_from(SEARCH), st.floats(0, 30), st.integers(0, 3))
def test_search_methods_minimise_makespan_plus_relocation_and_never_lose_to_the_start(p, method, startup, seed):
    start = mapsched.decode(p, p.planted)
    reloc = Relocation(startup=startup)
    r = solve(p, method, time_limit=5, seed=seed, initial=start, relocation=reloc, **FAST[method])
    assert validate(p, r) == []
    costs = relocation_costs(p, reloc, {j.task: j.device for j in start.jobs})
    assert r.relocation_cost == pytest.approx(costs[np.arange(p.n), owner(p, r)].sum())
    assert r.makespan + r.relocation_cost <= start.makespan + 1e-9  # the start costs nothing to keep
    assert Schedule.from_json(r.to_json()).relocation_cost == r.relocation_cost


@pytest.mark.parametrize("method", SEARCH)
def test_a_cost_above_any_gain_keeps_every_task_and_a_cheap_one_lets_them_move(method):
    p = mapsched.generators.random_dag(40, 4, seed=5)
    start = solve(p, "met")  # every task on its fastest device: much to gain by moving
    free = solve(p, method, seed=1, initial=start, relocation=Relocation(startup=0, bytes=0), **FAST[method])
    assert free.relocation_cost == 0 and free.makespan < start.makespan
    assert (owner(p, free) != owner(p, start)).any()
    kept = solve(p, method, seed=1, initial=start, relocation=Relocation(startup=start.makespan), **FAST[method])
    assert kept.relocation_cost == 0 and np.array_equal(owner(p, kept), owner(p, start))
    assert "the result runs 0 task(s) elsewhere" in kept.log and "relocation cost 0" in kept.log


def test_amortising_over_more_runs_moves_more_tasks():
    p = mapsched.generators.random_dag(60, 4, seed=7)
    start = solve(p, "met")
    moved = []
    for runs in (1, 10, 1000):
        r = solve(p, "sa", seed=0, initial=start, relocation={"startup": 20.0, "runs": runs}, iterations=2000)
        moved.append(int((owner(p, r) != owner(p, start)).sum()))
    assert moved[0] <= moved[1] <= moved[2] and moved[0] < moved[2]


def test_status_is_optimal_only_when_makespan_plus_relocation_meets_the_bound():
    p = mapsched.Problem.from_arrays([[1.0, 1.0]], [])  # one task, optimal on either device
    r = solve(p, "sa", initial={"t0": "p0"}, relocation={"startup": 1.0}, iterations=10)
    assert r.status == "optimal" and r.relocation_cost == 0 and owner(p, r)[0] == 0
    r = solve(p.without_devices(["p0"]), "sa", initial={"t0": "p0"}, relocation={"startup": 1.0}, iterations=10)
    assert r.relocation_cost == 1.0 and r.status == "feasible"  # makespan optimal, the move unavoidable


def test_a_solve_without_relocation_drops_the_cost_an_initial_schedule_carried():
    p = mapsched.generators.random_dag(12, 3, seed=2)  # an optimum that re-timing by rank would lose
    best = solve(p, "exact", time_limit=10)
    assert best.status == "optimal"
    start = solve(p, "sa", initial=best, relocation={"startup": 1e6}, iterations=50)
    assert start.relocation_cost == 0
    # An optimum comes back as it was given: without a cost this time, none is reported.
    again = solve(p, "sa", initial=Schedule.from_json(start.to_json()), iterations=50)
    assert again.makespan == best.makespan
    assert again.relocation_cost is None and "relocation_cost" not in again.to_dict()


def test_bad_relocations_are_refused_in_one_line():
    p = instances.load("topcuoglu2002")
    start = solve(p, "heft")
    for bad, needle in (({"runs": 0}, "relocation.runs: expected a number from 1e-06 to 1e+18"),
                        ({"startup": -1}, "relocation.startup: expected a number from 0 to 1e+12"),
                        # the cost overflowed to inf, and the result could not be written
                        ({"startup": 1e308}, "relocation.startup: expected a number from 0 to 1e+12"),
                        ({"runs": 1e-320}, "relocation.runs: expected a number from 1e-06"),
                        ({"bytes": 1e19}, "relocation.bytes: expected a number from 0 to 1e+18"),
                        ({"bytes": "all"}, "relocation.bytes: expected a number of bytes or \"weights\""),
                        ({"tasks": {"zz": {"startup": 1}}}, "task 'zz' is not in problem"),
                        ({"tasks": {"t1": {"cost": 1}}}, "relocation.tasks.t1: unknown field 'cost'"),
                        ({"speed": 1}, "relocation: unknown field 'speed'")):
        with pytest.raises(OptionError, match=re.escape(needle)):
            solve(p, "sa", initial=start, relocation=bad, iterations=10)
    with pytest.raises(OptionError, match="give --initial"):
        solve(p, "sa", relocation={"startup": 1})
    assert Relocation(runs=np.int64(10)).runs == 10.0  # as a problem takes NumPy integers
    with pytest.raises(OptionError, match="'exact' does not weigh relocation costs; these do: auto, ea"):
        solve(p, "exact", initial=start, relocation={"startup": 1})


def test_the_file_form_round_trips():
    r = Relocation(startup={"p1": 3.0}, bytes=10, runs=4, tasks={"t1": {"startup": 2.0}})
    assert Relocation.from_dict(r.to_dict()) == r
    assert Relocation.from_dict({"format": "mapsched.relocation/1"}) == Relocation()


def run(*args):
    proc = subprocess.run([sys.executable, "-m", "mapsched", *map(str, args)], capture_output=True, text=True)
    return proc.returncode, proc.stdout, proc.stderr


def test_relocation_command_line(tmp_path):
    prob, sched, spec = tmp_path / "p.json", tmp_path / "s.json", tmp_path / "r.json"
    mapsched.generators.random_dag(40, 4, seed=3).write(str(prob))
    assert run("solve", prob, "-m", "met", "-o", sched)[0] == 0
    spec.write_text('{"format": "mapsched.relocation/1", "startup": 1e6}')
    new = tmp_path / "new.json"
    code, out, err = run("solve", prob, "-m", "sa", "--iterations", "200", "--initial", sched,
                         "--relocation", spec, "-o", new)
    assert code == 0, err
    assert "the result runs 0 task(s) elsewhere" in out and "relocation cost 0;" in out
    assert Schedule.read(str(new)).relocation_cost == 0
    code, out, err = run("adapt", prob, sched, "--remove", "d1", "-m", "ea", "--iterations", "100",
                         "--relocation", spec, "-o", new)
    assert code == 0 and "relocation cost" in out, err
    spec.write_text('{"format": "mapsched.relocation/1", "runs": -2}')
    for args in (["-m", "sa", "--initial", sched], ["-m", "exact", "--initial", sched], ["-m", "sa"]):
        code, _, err = run("solve", prob, *args, "--relocation", spec, "-o", tmp_path / "x.json")
        assert code == 2 and len(err.strip().splitlines()) == 1 and "relocation" in err, err
        assert not (tmp_path / "x.json").exists()


def test_between_unlinked_devices_state_goes_over_the_slowest_single_link():
    # the largest latency (b-c, 100 ms) and the largest ms per byte (a-b, 1 ms) came from two
    # links, and 1,000 bytes a->c cost 1,100 ms: more than any link takes (a-b: 1,000 ms)
    from mapsched import Device, Link, Problem, System, Task

    p = Problem([Task(t, dict.fromkeys("abcd", 1.0), weight_bytes=1000) for t in ("x", "y")], [],
                System(tuple(Device(d) for d in "abcd"),
                       (Link("a", "b", 1000.0), Link("b", "c", 1e9, 100.0), Link("c", "d", 1e6, 1.0, directed=True))))
    cost = relocation_costs(p, Relocation(startup=0, runs=1), {"x": "a", "y": "c"})
    assert cost[0].tolist() == pytest.approx([0.0, 1000.0, 1000.0, 1000.0])  # a-c, a-d: unlinked
    assert cost[1].tolist() == pytest.approx([1000.0, 100.001, 0.0, 2.0])  # c-a unlinked; c->d its own link
