"""Identical devices and servers: detection, and symmetry breaking that keeps the optimum."""

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mapsched import Device, Edge, Link, Objective, OptionError, Problem, System, Task, solve, validate
from mapsched.generators import cpu_t4_a100, gpu_server, multi_node
from mapsched.model.symmetry import find_symmetry, lex_relabelled, symmetry_plugins


def on(platform, n=3, seed=0, objective=None, batch_sizes=(1,)):
    rng = np.random.default_rng(seed)
    system = platform.system(batch_sizes)
    base = rng.uniform(1, 3, size=n)
    lat = platform.latencies(base, batch_sizes, np.random.default_rng(1))
    # identical devices must have identical latencies: drop the per-device jitter
    lat = [{d.name: {b: float(base[i] * d.slowdown * b ** d.batch_exponent) for b in batch_sizes}
            for d in platform.devices} for i in range(n)]
    tasks = [Task(f"t{i}", lat[i], output_bytes=1e6) for i in range(n)]
    edges = [Edge(f"t{i}", f"t{j}") for i in range(n) for j in range(i + 1, n) if rng.random() < 0.4]
    return Problem(tasks, edges, system, objective)


def test_detects_identical_devices_and_servers():
    assert find_symmetry(on(cpu_t4_a100())).devices == ()
    s = find_symmetry(on(gpu_server(4)))
    assert [len(c) for c in s.devices] == [4] and s.servers == ()
    big = find_symmetry(on(multi_node(3, 2)))
    assert [len(c) for c in big.servers] == [3]
    assert len(big.devices) == 3 and all(len(c) == 2 for c in big.devices)  # GPU pairs inside servers
    assert big.order() == 6 * 2**3
    assert "S3 on servers" in big.describe(on(multi_node(3, 2)))


def identical(n, seed, L=1):
    """n tasks on 3 identical devices and a slower one, all linked alike."""
    rng = np.random.default_rng(seed)
    devs = tuple(Device(f"g{k}", batch_sizes=(1, 2) if L > 1 else (1,)) for k in range(3)) + (
        Device("cpu", batch_sizes=(1, 2) if L > 1 else (1,)),)
    links = tuple(Link(a.name, b.name, 1e4) for k, a in enumerate(devs) for b in devs[k + 1:])
    tasks = []
    for i in range(n):
        t = float(rng.uniform(1, 4))
        table = {1: t, 2: 1.6 * t} if L > 1 else {1: t}
        tasks.append(Task(f"t{i}", {d.name: {b: v * (4 if d.name == "cpu" else 1) for b, v in table.items()}
                                    for d in devs}, output_bytes=float(rng.integers(0, 20))))
    edges = [Edge(f"t{i}", f"t{j}") for i in range(n) for j in range(i + 1, n) if rng.random() < 0.3]
    return Problem(tasks, edges, System(devs, links), Objective("throughput", L) if L > 1 else Objective())


@settings(max_examples=10, deadline=None)
@given(st.integers(2, 6), st.integers(0, 10**6))
def test_optimum_unchanged_by_every_criterion(n, seed):
    p = identical(n, seed)
    assert [len(c) for c in find_symmetry(p).devices] == [3]
    base = solve(p, "exact", threads=1, symmetry="none")
    assert base.status == "optimal"
    # With the solvers' own symmetry detection on and off: the cuts must keep an optimum
    # by themselves, and must not clash with what the solver breaks on its own.
    for k, crit in enumerate(("task", "batch", "time", "lex", "task,time", "time,batch")):
        r = solve(p, "exact", threads=1, symmetry=crit, solver_symmetry=bool(k % 2))
        assert validate(p, r) == [] and r.status == "optimal"
        assert r.makespan == pytest.approx(base.makespan, rel=1e-6), crit
    for own in (True, False):
        r = solve(p, "exact", backend="highs", threads=1, symmetry="time", solver_symmetry=own)
        assert r.makespan == pytest.approx(base.makespan, rel=1e-6)


@settings(max_examples=4, deadline=None)
@given(st.integers(2, 3), st.integers(0, 10**6))
def test_throughput_optimum_unchanged(n, seed):
    p = identical(n, seed, L=2)
    base = solve(p, "exact", threads=1, time_limit=60, symmetry="none")
    for crit in ("task", "lex"):
        r = solve(p, "exact", threads=1, time_limit=60, symmetry=crit)
        if base.status == r.status == "optimal":
            assert r.makespan == pytest.approx(base.makespan, rel=1e-6)


@settings(max_examples=6, deadline=None)
@given(st.integers(2, 5), st.integers(0, 10**6))
def test_server_and_device_orders_together_keep_the_optimum(n, seed):
    p = on(multi_node(2, 2), n=n, seed=seed)
    sym = find_symmetry(p)
    assert len(sym.servers) == 1 and len(sym.devices) == 2  # two servers, a GPU pair in each
    base = solve(p, "exact", threads=1, symmetry="none")
    for crit in ("lex", "task", "time,batch"):
        r = solve(p, "exact", threads=1, symmetry=crit, solver_symmetry=False)
        assert validate(p, r) == [] and r.status == "optimal"
        assert r.makespan == pytest.approx(base.makespan, rel=1e-6), crit


def test_relabelling_identical_devices_keeps_the_optimum():
    p = identical(5, 3)
    d = p.to_dict()
    names = {"g0": "g2", "g2": "g0"}
    for t in d["tasks"]:
        t["latency"] = {names.get(k, k): v for k, v in t["latency"].items()}
    q = Problem.from_dict(d)
    assert solve(p, "exact", threads=1).makespan == pytest.approx(solve(q, "exact", threads=1).makespan)


@pytest.mark.parametrize(("backend", "applied"), [("cpsat", "lex"), ("highs", None)])
def test_default_breaks_symmetry_with_cpsat_only(backend, applied):
    """exact's default is lex with CP-SAT and none with HiGHS, and only where devices are
    identical; the optimum is the unbroken model's."""
    p = identical(5, 3)
    r = solve(p, "exact", threads=1, backend=backend)
    said = re.search(r"symmetry broken by (\w+)", r.log)
    assert (said and said.group(1)) == applied
    assert r.status == "optimal"
    assert r.makespan == pytest.approx(solve(p, "exact", threads=1, symmetry="none").makespan, rel=1e-6)
    q = on(cpu_t4_a100(), n=5, seed=3)  # no two devices alike
    assert "symmetry broken" not in solve(q, "exact", threads=1).log


def test_bad_criterion_is_a_one_line_error():
    p = identical(3, 0)
    with pytest.raises(OptionError, match="--symmetry"):
        symmetry_plugins(p, "task,lex")
    with pytest.raises(OptionError, match="--symmetry"):
        solve(p, "exact", symmetry="speed")


def test_generated_identical_hardware_is_found():
    from mapsched.generators import gpt3, random_wired

    p = random_wired(6, seed=1, platform=gpu_server(4))
    assert [len(c) for c in find_symmetry(p).devices] == [4]  # the four A100s, not the CPU
    g = gpt3(layers=1)
    sym = find_symmetry(g)
    assert len(sym.devices) == 6 and len(sym.servers) == 1 and len(sym.servers[0]) == 6


def test_orbits_map_representatives_onto_every_pair():
    from mapsched.generators import random_wired

    prob = random_wired(5, seed=2, platform=multi_node(2, 2))
    sym = find_symmetry(prob)
    pairs = [(u, v) for u in range(prob.m) for v in range(prob.m)]
    orb = sym.orbits(pairs, prob.m)
    assert set(orb) == set(pairs)
    for q, (rep, g) in orb.items():
        assert tuple(int(g[x]) for x in rep) == q
        assert sorted(g) == list(range(prob.m))
    # 6 devices in 2 servers of (cpu, gpu, gpu): far fewer orbits than pairs
    assert len({rep for rep, _ in orb.values()}) < len(pairs) / 3


@settings(max_examples=4, deadline=None)
@given(st.integers(0, 10**6))
def test_split_orbit_reduction_keeps_the_optimum(seed):
    from mapsched.generators import stack

    p = stack(2, 4, 1, seed=seed, platform=gpu_server(3))
    full = solve(p, "split", workers=1, orbits=False)
    fast = solve(p, "split", workers=1)
    assert validate(p, fast) == []
    assert fast.makespan == pytest.approx(full.makespan, rel=1e-6)
    count = [int(r.log.split(" module subproblems solved")[0].rsplit("\n", 1)[-1]) for r in (fast, full)]
    assert count[0] < count[1]


@settings(max_examples=20, deadline=None)
@given(st.integers(2, 7), st.integers(0, 10**6), st.booleans())
def test_lex_relabelled_schedules_keep_their_makespan_and_meet_the_lex_order(n, seed, servers):
    p = on(multi_node(2, 2), n=n, seed=seed) if servers else identical(n, seed, L=2 if seed % 2 else 1)
    s = solve(p, "random", seed=seed, time_limit=0.2)  # devices used in any order
    r = lex_relabelled(p, s)
    assert validate(p, r) == [] and r.makespan == pytest.approx(s.makespan, rel=1e-12)
    # The lex cuts: a device (a server) of a class is first used no earlier, in topological
    # order, than the one before it.
    rank = {int(t): k for k, t in enumerate(p.topo)}
    first = [min((rank[p.task_index[j.task]] for j in r.jobs if j.device == name), default=np.inf)
             for name in p.device_names]
    sym = find_symmetry(p)
    pairs = [((a,), (b,)) for c in sym.devices for a, b in zip(c, c[1:])]
    pairs += [(a, b) for c in sym.servers for a, b in zip(c, c[1:])]
    assert pairs and all(min(first[u] for u in a) <= min(first[u] for u in b) for a, b in pairs)


def test_exact_returns_an_unimproved_initial_placement_on_its_own_devices():
    # The start is renamed into the lex order only as the model's hint: an optimal initial
    # placement that uses the identical devices out of that order must come back as it is.
    from dataclasses import replace

    from mapsched.scheduling.best_list import best_list_schedule

    for seed in range(30):
        p = identical(8, seed)
        best = solve(p, "exact", threads=1, symmetry="none")
        if best.status != "optimal" or best_list_schedule(p).makespan <= best.makespan * (1 + 1e-9):
            continue  # the initial placement must be the strictly best start
        for a, b in (("g0", "g1"), ("g0", "g2"), ("g1", "g2")):
            swap = {a: b, b: a}
            initial = replace(best, jobs=[replace(j, device=swap.get(j.device, j.device)) for j in best.jobs])
            if lex_relabelled(p, initial).mapping() != initial.mapping():
                break
        else:
            continue  # every swap is in lex order
        r = solve(p, "exact", threads=1, initial=initial)
        assert validate(p, r) == [] and r.status == "optimal"
        assert r.makespan == pytest.approx(best.makespan, rel=1e-9)
        assert r.mapping() == initial.mapping()
        return
    pytest.fail("no instance whose optimum the list schedulers miss, out of lex order")


class _Terms:
    """A stand-in for a solver's linear expression that counts its terms."""

    def __init__(self, n=1):
        self.n = n

    def __add__(self, other):
        return _Terms(self.n + (other.n if isinstance(other, _Terms) else 0))

    __radd__ = __add__

    def __ge__(self, other):
        return self.n + other.n


class _CountingView:
    def __init__(self, problem):
        self.problem, self.terms = problem, []

    def use(self, i, u):
        return _Terms()

    def add(self, constraint):
        self.terms.append(constraint)


def test_lex_cuts_cover_a_prefix_of_the_tasks(monkeypatch):
    """The lex cut at a task sums every use before it, so cuts at all n tasks would grow
    as n^2 (minutes to build at 19,000 tasks); a prefix of them keeps the optimum."""
    import mapsched.model.symmetry as symmetry

    p = identical(6, 5)
    monkeypatch.setattr(symmetry, "LEX_TASKS", 2)
    view = _CountingView(p)
    (plugin,) = symmetry_plugins(p, "lex")
    plugin(view)
    pairs = len(find_symmetry(p).consecutive())
    assert len(view.terms) == pairs * 2 and max(view.terms) <= 3  # two tasks' cuts, a use and at most two uses
    r = solve(p, "exact", threads=1, symmetry="lex")
    assert validate(p, r) == [] and r.status == "optimal"
    assert r.makespan == pytest.approx(solve(p, "exact", threads=1, symmetry="none").makespan, rel=1e-6)
