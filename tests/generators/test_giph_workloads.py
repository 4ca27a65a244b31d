"""GiPH's workloads (issue 29): the generators against values drawn by the public code
(uidmice/placement-rl at 427caced, env/utils.py and adaptivity.py, run with Python 3.11 and
numpy 2.4), their structure, the experiment sets, the CLI, SLR and the baselines."""

import math

import numpy as np
import pytest

from mapsched import solve
from mapsched.bounds import critical_path_bound, slr
from mapsched.cli import main
from mapsched.generators import GIPH_SETS, giph_adapt, giph_experiment, giph_graph, giph_network, giph_problem
from mapsched.model.problem import Device, Edge, Link, Problem, System, Task
from mapsched.model.validate import validate

# (v, alpha, conn_prob, seed): tasks, edges, first edges, compute of task 1, types of tasks 0-7,
# bytes of the last edge; all as the public code's generate_graph(alpha, v, p, seed, 5, 100, 100, 0.4, 0.4)
GRAPH_PINS = [
    ((10, 0.3, 0.1, 0), 21, 37, [(0, 3), (0, 16), (0, 2), (0, 1), (1, 3), (1, 12)], 104.11053504286576,
     [0, 3, 3, 4, 0, 2, 0, 1], 104.19382078980183),
    ((15, 0.1, 0.2, 7), 35, 145, [(0, 7), (0, 8), (0, 12), (0, 14), (0, 16), (0, 21)], 92.75888903093613,
     [1, 3, 4, 0, 2, 4, 4, 2], 106.89476873717146),
    ((10, 0.2, 0.1, 25), 22, 47, [(0, 4), (0, 8), (0, 12), (0, 13), (0, 15), (0, 1)], 97.32996114457814,
     [2, 4, 0, 1, 4, 3, 3, 3], 82.26906438963454),
]


@pytest.mark.parametrize("args, n, E, first, c1, types, last", GRAPH_PINS)
def test_graph_matches_public_code(args, n, E, first, c1, types, last):
    g = giph_graph(*args)
    assert (g.n, len(g.edges)) == (n, E)
    assert list(g.edges[:6]) == first
    assert g.compute[1] == c1 and g.types[:8].tolist() == types and g.nbytes[-1] == last


def test_network_matches_public_code():
    net = giph_network(20, seed=1)  # generate_network(20, 1, 5, 0.2, 5, 100, 10, 0.8, 0.8)
    assert net.delay[0, 1] == 16.014891373510732 and net.delay[3, 17] == 17.082308876730774
    assert net.rate[0, 1] == 0.007147384389361959
    assert net.speed[0] == 6.553545737581544 and net.speed[19] == 5.797230494787257
    assert [list(t) for t in net.types] == [
        [1], [1], [1, 2], [0, 4], [2], [0, 3], [2, 3], [1], [2], [3, 4], [2], [3, 4], [0, 2], [1, 2, 3, 4], [1], [4],
        [0], [0, 2, 4], [2], [2, 4]]


def test_adapt_matches_public_code():
    nets, changes, graphs = giph_adapt()
    assert [(c.removed, c.added) for c in changes[:4]] == [
        (("d5", "d16"), ()), (("d19", "d10", "d14", "d0"), ()), ((), ("d10", "d16")), ((), ("d14", "d0", "d5", "d19"))]
    assert nets[3].speed[10] == 4.8986590599223785
    assert [list(nets[3].types[10]), list(nets[3].types[16])] == [[2, 3, 4], [3]]
    assert [len(n.present) for n in nets] == [20] + [18, 14, 16, 20] * 5
    assert len(graphs) == 10 and all(11 <= g.n <= 23 for g in graphs)


def test_graph_structure_and_distributions():
    for seed in range(6):
        for v, alpha, p in ((10, 0.3, 0.1), (15, 0.1, 0.2)):
            g = giph_graph(v, alpha, p, seed)
            h = g.depth - 2
            mean = math.sqrt(v) / alpha
            assert math.ceil(0.8 * mean) <= h <= math.ceil(1.2 * mean)
            assert g.n == sum(g.widths) and g.widths[0] == g.widths[-1] == 1
            assert all(1 <= w <= math.ceil(2 * alpha * math.sqrt(v)) for w in g.widths[1:-1])
            assert len(set(g.edges)) == len(g.edges) and all(a < b for a, b in g.edges)
            src = {a for a, _ in g.edges}
            dst = {b for _, b in g.edges}
            assert src == set(range(g.n - 1)) and dst == set(range(1, g.n))  # single entry 0 and exit n-1
            assert ((g.compute >= 80) & (g.compute <= 120)).all()  # 100 +- 40% / 2
            assert ((g.nbytes >= 80) & (g.nbytes <= 120)).all()
            assert set(g.types.tolist()) <= set(range(5))
            p_ = giph_problem(g, giph_network(20, seed))
            longest = [0] * g.n  # depth = h + 2 levels: a path of h + 2 tasks
            for a, b in sorted(g.edges):
                longest[b] = max(longest[b], longest[a] + 1)
            assert longest[-1] == g.depth - 1 and p_.n == g.n


def test_network_structure_and_problem():
    net = giph_network(24, seed=3)
    assert np.array_equal(net.delay, net.delay.T) and np.array_equal(net.rate, net.rate.T)
    off = ~np.eye(24, dtype=bool)
    assert (net.delay[off] >= 0).all() and (net.delay[off] <= 20).all()
    assert (net.rate[off] >= 0.6 / 100).all() and (net.rate[off] <= 1.4 / 100).all()
    assert ((net.speed >= 3) & (net.speed <= 7)).all()
    assert all(net.types) and set().union(*net.types) == set(range(5))
    g = giph_graph(10, 0.3, 0.1, 4)
    p = giph_problem(g, net)
    assert isinstance(p, Problem) and p.m == 24 and len(g.edges) == p.E
    for i in range(p.n):  # a task runs exactly on the devices supporting its type, in C_i / SP_k
        can = {f"d{k}" for k in range(24) if int(g.types[i]) in net.types[k]}
        assert set(p.tasks[i].latency) == can
        for k in range(24):
            if f"d{k}" in can:
                assert p.dur[i, p.device_index[f"d{k}"]] == pytest.approx(g.compute[i] / net.speed[k], rel=1e-12)
    u, v = p.device_index["d2"], p.device_index["d5"]
    assert p.device_comm(100.0, u, v) == pytest.approx(net.delay[2, 5] + 100.0 * net.rate[2, 5], rel=1e-12)
    # determinism per seed, and a different seed differs
    assert giph_problem(giph_graph(10, 0.3, 0.1, 4), giph_network(24, seed=3)) == p
    assert giph_network(24, seed=4).speed[0] != net.speed[0]


def test_tiny_network_supports_every_type():
    net = giph_network(2, seed=0)  # int(2 * 0.2) = 0 devices in the code; one here
    assert set().union(*net.types) == set(range(5))
    giph_problem(giph_graph(10, 0.3, 0.1, 0), net)


def test_bad_parameters():
    with pytest.raises(ValueError, match="alpha"):
        giph_graph(10, 0.0)
    for alpha in (1e300, 1e-9):  # a level of 1e300 tasks, or a billion levels: drawn for ever
        with pytest.raises(ValueError, match="alpha: expected a shape from 0.01 to 50"):
            giph_graph(1, alpha)
    with pytest.raises(ValueError, match="type_prob"):
        giph_network(5, type_prob=1.5)
    with pytest.raises(ValueError, match="experiment"):
        giph_experiment("nope")
    for seed in (-1, 2**32):  # numpy's RandomState takes 32 bits; its own message named no argument
        with pytest.raises(ValueError, match="seed: GiPH's generator takes a seed from 0 to 4294967295"):
            giph_graph(10, 0.3, seed=seed)
        with pytest.raises(ValueError, match="seed: GiPH's generator"):
            giph_network(5, seed=seed)


def test_experiment_sets():
    sizes = {"single": (300, 300, 1, 1), "multi": (120, 120, 10, 10), "multi-diff": (180, 120, 150, 100)}
    for name in GIPH_SETS:
        e = giph_experiment(name)
        got = (len(e.train_graphs), len(e.test_graphs), len(e.train_networks), len(e.test_networks))
        assert got == sizes[name]
    e = giph_experiment("multi-diff")
    assert {kw["m"] for kw in e.test_networks} == set(range(15, 25))
    assert {kw["seed"] for kw in e.test_networks} == set(range(20, 30))
    assert e.test_graphs[0] == dict(v=10, alpha=0.1, conn_prob=0.1, seed=25)
    first = next(giph_experiment("single").problems("test"))
    assert first.m == 20 and first.n == giph_graph(10, 0.1, 0.1, 25).n


def test_adapt_changes_apply():
    nets, changes, graphs = giph_adapt(4)
    p = giph_problem(graphs[0], nets[0])
    for k, c in enumerate(changes):
        after = giph_problem(graphs[0], nets[k + 1])
        q = c.apply(p, after)
        assert q == after
        p = q


def test_cli_generate_giph(tmp_path, capsys):
    out = tmp_path / "g.json"
    assert main(["generate", "giph", "--tasks", "10", "--devices", "20", "--seed", "0", "--network-seed", "1",
                 "-o", str(out)]) == 0
    assert Problem.read(str(out)) == giph_problem(giph_graph(10, 0.3, 0.1, 0), giph_network(20, 1))
    assert main(["generate", "giph", "--experiment", "multi-diff", "--case", "7", "-o", str(out)]) == 0
    assert Problem.read(str(out)).m == 15  # networks m-major: case 7 = graph 0, network 7 (m 15, seed 27)
    assert main(["generate", "giph", "--experiment", "adapt", "--case", "2", "-o", str(out)]) == 0
    assert Problem.read(str(out)).m == 14
    capsys.readouterr()
    assert main(["generate", "giph", "--experiment", "multi", "--case", "5000", "-o", str(out)]) == 2
    assert "--case" in capsys.readouterr().err
    assert main(["generate", "giph", "--conn-prob", "2", "-o", str(out)]) == 2
    assert "--conn-prob" in capsys.readouterr().err


def test_slr_and_solves_validate():
    p = giph_problem(giph_graph(10, 0.3, 0.1, 1), giph_network(20, 1))
    s = solve(p, "heft", seed=0)
    assert validate(p, s) == []
    assert slr(p, s) == pytest.approx(s.makespan / critical_path_bound(p)) and slr(p, s) >= 1


def test_simulate_giph_noise(tmp_path, capsys):
    from mapsched.scheduling.simulate import simulate

    p = giph_problem(giph_graph(10, 0.3, 0.1, 2), giph_network(20, 1))
    mapping = solve(p, "heft", seed=0).mapping()
    base = simulate(p, mapping)
    assert validate(p, base) == []
    a = simulate(p, mapping, 0.2, 5, "giph")
    assert a.makespan == simulate(p, mapping, 0.2, 5, "giph").makespan != base.makespan
    for j in a.jobs:  # every duration within +-20% of its latency
        w = p.dur[p.task_index[j.task], p.device_index[j.device]]
        assert 0.8 * w - 1e-9 <= j.end - j.start <= 1.2 * w + 1e-9
    from mapsched.errors import OptionError
    with pytest.raises(OptionError, match="at most 1"):
        simulate(p, mapping, 1.5, 0, "giph")
    sched, out = tmp_path / "s.json", tmp_path / "o.json"
    prob = tmp_path / "p.json"
    p.write(str(prob))
    solve(p, "heft", seed=0).write(str(sched))
    assert main(["simulate", str(prob), str(sched), "--noise", "0.2", "--noise-model", "giph", "-o", str(out)]) == 0


def test_baselines_validate_and_are_deterministic():
    from mapsched.scheduling.simulate import simulate

    p = giph_problem(giph_graph(10, 0.2, 0.1, 3), giph_network(20, 2))
    heft = solve(p, "heft", seed=0)
    runs = {"heft": simulate(p, heft.mapping())}
    for method, opts in (("random", dict(samples=0, evaluator="simulate")), ("random-eft", {})):
        r = solve(p, method, seed=0, **opts)
        assert validate(p, r) == [], method
        assert r.makespan == solve(p, method, seed=0, **opts).makespan  # ctx.rng only
        assert r.makespan == pytest.approx(simulate(p, r.mapping()).makespan)  # scored by the runtime model
        assert slr(p, r) >= 1
        runs[method] = r
    assert validate(p, runs["heft"]) == []
    # random-eft starts from a random mapping and keeps the best run: never above its own start,
    # and on this instance below the best of 2|V| random samples
    assert runs["random-eft"].makespan < runs["random"].makespan
    from mapsched.errors import OptionError
    from mapsched.instances import load
    with pytest.raises(OptionError):
        solve(p, "random", evaluator="exhaustive")
    assert load("topcuoglu2002").n == 10


def test_random_eft_starts_from_the_repair_where_random_mappings_do_not_fit():
    # 48 tasks on 8 devices that hold 6 tasks' weights each: about 1 random mapping in 130,000 fits.
    devices = tuple(Device(f"d{u}", 60.0) for u in range(8))
    links = tuple(Link(f"d{u}", f"d{v}", 1000.0) for u in range(8) for v in range(u + 1, 8))
    tasks = [Task(f"t{i}", {f"d{u}": 1.0 for u in range(8)}, 10.0) for i in range(48)]
    p = Problem(tasks, [Edge(f"t{i}", f"t{i + 1}", 1.0) for i in range(47)], System(devices, links))
    r = solve(p, "random-eft", seed=0)
    assert validate(p, r) == []


def test_bench_rows_and_slr_table(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    from mapsched.bench.sweep import Case, Suite, results_table, run_suite
    from mapsched.generators.giph import giph_instance

    suite = Suite("g", (Case("g0", giph_instance, {"seed": 0, "network_seed": 1}),), ("heft", "random-eft"), 5.0)
    with ThreadPoolExecutor(1) as pool:
        rows = run_suite(suite, str(tmp_path / "r.jsonl"), executor=pool)
    for r in rows:
        assert r["slr"] == pytest.approx(r["makespan"] / r["critical_path"])
        assert r["slr_simulated"] == pytest.approx(r["simulated"] / r["critical_path"])
    table = results_table(rows, suite.methods, "slr_simulated")
    assert "GiPH's metric" in table and table.splitlines()[0] == "| instance | heft | random-eft | bound |"


def test_giph_suite_builds():
    from mapsched.bench.suites import SUITES

    suite = SUITES["giph"]
    assert len(suite.cases) == 12 and "random-eft" in suite.methods
    sizes = [case.build().n for case in suite.cases]
    assert min(sizes) >= 11 and max(sizes) <= 49


def test_baselines_with_giph_noise():
    from mapsched.errors import OptionError
    from mapsched.scheduling.simulate import simulate

    p = giph_problem(giph_graph(10, 0.3, 0.2, 4), giph_network(20, 3))
    for method, opts in (("random", dict(samples=0, evaluator="simulate", noise=0.2)), ("random-eft", {"noise": 0.2})):
        r = solve(p, method, seed=1, **opts)
        assert validate(p, r) == [], method  # the noiseless run of the best noisy mapping
        assert r.makespan == pytest.approx(simulate(p, r.mapping()).makespan)
        assert r.makespan == solve(p, method, seed=1, **opts).makespan
    with pytest.raises(OptionError, match="--noise"):
        solve(p, "random", noise=0.2)
    with pytest.raises(OptionError, match="at most 1"):
        solve(p, "random-eft", noise=2.0)


def test_initial_placement_matches_public_code():
    from mapsched.generators import giph_initial
    from mapsched.scheduling.simulate import simulate

    g, net = giph_graph(10, 0.3, 0.1, 0), giph_network(20, 1)
    m = giph_initial(g, net)  # PlacementEnv.random_mapping(..., seed=20) of the public code
    assert list(m.values())[:8] == ["d16", "d9", "d13", "d11", "d5", "d10", "d16", "d2"]
    p = giph_problem(g, net)
    start = simulate(p, m)
    assert validate(p, start) == []
    r = solve(p, "cp-search", seed=0, initial=m)
    assert validate(p, r) == [] and r.makespan <= start.makespan + 1e-9
