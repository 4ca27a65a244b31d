"""Module detection, MILP-SPLIT and the chain bound."""

import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import networkx as nx
import numpy as np
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st
from strategies import problems

from mapsched import Objective, OptionError, Problem, solve, validate
from mapsched.bounds import critical_path_bound, lower_bound, work_bound
from mapsched.generators import stack
from mapsched.model.formats import problem_from_dict
from mapsched.model.schedule import Job, Schedule
from mapsched.solve import SolveContext
from mapsched.split import ModuleChain, chain_bound, chain_bounds, detect_modules, full_bound
from mapsched.split.modules import k_edge_classes
from mapsched.split.rolling import _append_schedule, rolling


def chain_problem(g: nx.DiGraph, seed: int = 0) -> Problem:
    """A latency problem on a hand-built graph, on 3 heterogeneous linked devices."""
    rng = np.random.default_rng(seed)
    w = rng.uniform(1, 5, size=(g.number_of_nodes(), 3)) * np.array([3.0, 1.2, 1.0])
    nodes = sorted(g.nodes)
    idx = {v: k for k, v in enumerate(nodes)}
    edges = [(idx[a], idx[b], float(rng.integers(1, 4))) for a, b in g.edges]
    return Problem.from_arrays(w, edges, task_names=[str(v) for v in nodes])


def diamonds(k: int) -> nx.DiGraph:
    """A chain of k diamonds a_t -> (b_t, c_t) -> d_t, joined d_t -> a_{t+1}."""
    g = nx.DiGraph()
    for t in range(k):
        g.add_edges_from([(f"a{t}", f"b{t}"), (f"a{t}", f"c{t}"), (f"b{t}", f"d{t}"), (f"c{t}", f"d{t}")])
        if t:
            g.add_edge(f"d{t - 1}", f"a{t}")
    return g


def test_chain_of_diamonds_splits_at_bridges():
    p = chain_problem(diamonds(4))
    chain = detect_modules(p)
    assert [sorted(p.task_names[i] for i in m) for m in chain.modules] == [
        sorted(f"{x}{t}" for x in "abcd") for t in range(4)]
    assert chain.width == 1 and all(n is None for n in chain.nodes)
    assert "4 modules" in chain.describe(p)


def inception(k: int) -> nx.DiGraph:
    """Blocks whose concat node fans straight out into the next block: articulation points."""
    g = nx.DiGraph()
    g.add_edges_from([("in", f"x0.{b}") for b in range(3)])
    for t in range(k):
        g.add_edges_from([(f"x{t}.{b}", f"cat{t}") for b in range(3)])
        if t + 1 < k:
            g.add_edges_from([(f"cat{t}", f"x{t + 1}.{b}") for b in range(3)])
    return g


def test_articulation_points_become_node_channels():
    p = chain_problem(inception(3))
    chain = detect_modules(p)
    cats = [p.task_index[f"cat{t}"] for t in range(2)]
    assert [n for n in chain.nodes if n is not None] == cats
    r = solve(p, "split", workers=1)
    assert validate(p, r) == []
    assert r.makespan == pytest.approx(solve(p, "exact").makespan)


@settings(max_examples=60, deadline=None)
@given(problems(max_tasks=14, max_devices=1))
def test_single_channel_pieces_are_those_of_networkx_bridges_and_articulation_points(p):
    # _bridged_parts finds both in one search; networkx's own two give the pieces by definition.
    from mapsched.split.modules import _bridged_parts

    und = p.graph.to_undirected()
    bridges = {frozenset(b) for b in nx.bridges(und)}
    cut = set(nx.articulation_points(und)) - {v for b in bridges for v in b}
    g = nx.Graph(und)
    g.remove_edges_from(tuple(b) for b in bridges)
    g.remove_edges_from([(v, j) for v in cut for j in p.succ[v]])
    expected = sorted(sorted(c) for c in nx.connected_components(g))
    assert sorted(sorted(c) for c in _bridged_parts(p, und)) == expected


@pytest.mark.parametrize("channels", [2, 3])
def test_multi_channel_stacks(channels):
    p = stack(3, 10, channels, "sdep", seed=channels)
    chain = detect_modules(p, channels)
    assert len(chain.modules) >= 3 and chain.width <= channels
    # every edge stays inside a module or joins consecutive modules
    t = {i: k for k, m in enumerate(chain.modules) for i in m}
    assert all(t[b] - t[a] in (0, 1) for a, b in zip(p.src, p.dst))


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 25), st.floats(0.05, 0.4), st.integers(0, 2**16), st.integers(1, 5))
def test_k_edge_classes_are_networkx_k_edge_components(n, density, seed, k):
    g = nx.gnp_random_graph(n, density, seed=seed)
    ours = sorted(sorted(c) for c in k_edge_classes(g, k))
    # networkx's flow code drops isolated nodes: they are classes of their own
    theirs = sorted(sorted(c) for comp in nx.connected_components(g)
                    for c in ([comp] if len(comp) == 1 else nx.k_edge_components(g.subgraph(comp), k)))
    assert ours == theirs


@settings(max_examples=6, deadline=None)
@given(st.integers(0, 10**6), st.integers(2, 3))
def test_split_equals_exact_on_single_channel_stacks(seed, modules):
    p = stack(modules, 5, 1, seed=seed)
    r = solve(p, "split", workers=1)
    opt = solve(p, "exact", threads=1, time_limit=60)
    assume(opt.status == "optimal")  # a rare draw CP-SAT cannot close in a minute proves nothing here
    assert validate(p, r) == []
    assert r.makespan == pytest.approx(opt.makespan, rel=1e-6)
    assert r.status == "optimal"


@settings(max_examples=4, deadline=None)
@given(st.integers(0, 10**6), st.sampled_from(["sdep", "wdep"]), st.integers(2, 3))
def test_multi_channel_split_is_valid_and_bounded(seed, variant, channels):
    p = stack(2, 5, channels, variant, seed=seed)
    r = solve(p, "split", channels=channels, workers=1, module_time_limit=2)
    opt = solve(p, "exact", threads=1, time_limit=30)
    assert validate(p, r) == []
    b = chain_bound(p, time_limit=10)
    # bound <= optimum <= split, through what is proved: the exact solve's bound and makespan
    assert b <= opt.makespan * (1 + 1e-6)
    assert opt.lower_bound <= r.makespan * (1 + 1e-6)


@settings(max_examples=4, deadline=None)
@given(st.integers(0, 10**6), st.sampled_from(["sdep", "wdep"]), st.integers(2, 3))
@example(7763, "sdep", 3)  # a module solve's wrong optimum (CP-SAT's presolve probing) once lifted it above
def test_wider_spans_raise_the_chain_bound_and_stay_below_the_optimum(seed, variant, channels):
    p = stack(3, 4, channels, variant, seed=seed)
    narrow = chain_bound(p, time_limit=20, span=1)
    wide = chain_bound(p, time_limit=20, span=2)
    opt = solve(p, "exact", threads=2, time_limit=30)
    assert narrow <= wide + 1e-9
    assert wide <= opt.makespan * (1 + 1e-6)


def test_any_executor_works():
    p = stack(3, 6, 1, seed=4)
    with ThreadPoolExecutor(2) as pool:
        a = solve(p, "split", executor=pool)
    b = solve(p, "split", workers=1)
    assert a.makespan == pytest.approx(b.makespan) and validate(p, a) == []
    # the DP's bound, over a complete table (pairs with no schedule included), is claimed as here
    assert a.lower_bound == pytest.approx(b.lower_bound) and a.status == b.status
    assert b.lower_bound > lower_bound(p).value + 1e-6


def _closed_pool():
    pool = ThreadPoolExecutor(1)
    pool.shutdown()
    return pool


@pytest.mark.parametrize("executor, says", [
    (42, "got a int"),
    ("tcp://127.0.0.1:8786", "'tcp://127.0.0.1:8786'"),
    (ThreadPoolExecutor, "the class ThreadPoolExecutor; pass an instance"),
    (_closed_pool(), "it is shut down"),
])
def test_split_and_the_chain_bound_refuse_what_is_no_executor(executor, says):
    # these raised AttributeError or RuntimeError from deep inside, at the first task
    p = stack(2, 4, 1, seed=1)
    with pytest.raises(OptionError, match=r"^executor: .*" + re.escape(says)):
        solve(p, "split", executor=executor, time_limit=5)
    with pytest.raises(OptionError, match=r"^executor: .*" + re.escape(says)):
        chain_bound(p, time_limit=5, executor=executor)


class _Counting(ThreadPoolExecutor):
    """An executor with a cluster's ``share`` and ``slots`` (the problem built into
    subproblems by the tasks), counting the tasks and the subproblems sent."""

    def __init__(self, slots: int, share: bool):
        super().__init__(slots)
        self.slots, self.tasks, self.subproblems = slots, 0, 0
        if share:
            self.share = lambda obj: obj

    def submit(self, fn, *args, **kwargs):
        self.tasks += 1
        self.subproblems += len(args[1])  # _solve_chunk(shared, items, ...)
        return super().submit(fn, *args, **kwargs)


@pytest.mark.parametrize("channels, variant, modules", [(1, "sdep", 6), (2, "wdep", 10)])
def test_chunked_tasks_give_the_schedule_of_one_subproblem_a_task(channels, variant, modules):
    p = stack(modules, 4, channels, variant, seed=channels)
    opts = dict(channels=channels, module_threads=1, window=0)
    here = solve(p, "split", workers=1, **opts)
    tasks = {}
    # 1e3 s: as many subproblems a task as the balance of the tail allows
    for share, seconds in ((True, 0.0), (True, 1e3), (False, 1e3)):
        with _Counting(1, share) as pool:
            r = solve(p, "split", executor=pool, chunk_seconds=seconds, **opts)
        tasks[share, seconds] = pool.tasks, pool.subproblems
        assert validate(p, r) == [] and r.jobs == here.jobs and r.makespan == here.makespan
        assert r.lower_bound == here.lower_bound and r.status == here.status and r.log == here.log
    (single, sent), (chunked, same) = tasks[True, 0.0], tasks[True, 1e3]
    assert single == sent == same and chunked < 0.6 * single


def test_chunked_tasks_stop_at_the_time_limit():
    # four times the subproblems of 30 modules (some 340, 5 s on two threads); in 1 s a fast
    # machine sent 280-460 (302 of those 340), CI's machine once solved none in 0.5 s
    p = stack(120, 6, 1, seed=3)
    solve(stack(2, 3, 1, seed=3), "split", time_limit=5)  # the solvers' imports count in a first solve's limit
    began = time.perf_counter()
    with _Counting(2, True) as pool:
        r = solve(p, "split", executor=pool, time_limit=1.0, module_threads=1)
    assert validate(p, r) == [] and time.perf_counter() - began < 2.5
    solved = int(re.search(r"(\d+) module subproblems solved", r.log).group(1))
    assert 0 < solved <= pool.subproblems < 1000 and r.status == "feasible"  # a partial table proves nothing


def test_a_plain_executor_never_loads_dask():
    # Importing distributed to tell a Client from other executors took 0.9-2.4 s of the time
    # limit: the test above then solved no subproblem in 1 s on a slow machine.
    code = ("import sys, concurrent.futures as cf, mapsched; p = mapsched.generators.stack(3, 3, seed=0); "
            "pool = cf.ThreadPoolExecutor(2); mapsched.solve(p, 'split', executor=pool, time_limit=5); "
            "pool.shutdown(); assert 'distributed' not in sys.modules, 'distributed loaded'")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-500:]


def test_split_returns_its_start_where_the_start_took_the_time(monkeypatch):
    # On 5,000 tasks and 16 inputs bheft alone passed a 5 s limit; split then still detected
    # modules and built the pipelined walk's grouped problem, 3 s more.
    from mapsched.split import milp_split

    real = milp_split.best_start

    def slow(*args, **kwargs):
        s = real(*args, **kwargs)
        time.sleep(1.2)
        return s

    def refused(*args, **kwargs):
        raise AssertionError("modules detected after the time limit")

    monkeypatch.setattr(milp_split, "best_start", slow)
    monkeypatch.setattr(milp_split, "pick_chain", refused)
    p = stack(4, 5, 1, seed=0, objective=Objective("throughput", 4))
    r = solve(p, "split", time_limit=1.0)
    assert validate(p, r) == [] and "reached by the warm start" in r.log


def test_chunk_size_follows_the_times_so_far_and_shrinks_at_the_tail():
    from mapsched.split.milp_split import _chunk_size

    assert _chunk_size(0.2, 0.0, 0, 500, 2) == 1  # nothing back yet: one a task
    assert _chunk_size(0.2, 1.0, 100, 500, 2) == 20  # 10 ms each: 0.2 s a task
    assert _chunk_size(0.2, 1.0, 100, 48, 2) == 6  # the last ones: at most left / (4 * slots)
    assert _chunk_size(0.2, 1.0, 100, 10, 2) == 5  # but 50 ms a task while each slot has that much
    assert _chunk_size(0.2, 1.0, 100, 3, 2) == 1
    assert _chunk_size(0.2, 50.0, 100, 500, 2) == 1  # 0.5 s each: one a task


def test_ruled_out_pairs_are_not_subproblems():
    from mapsched.split.milp_split import _ruled_out, _subproblem, pick_chain

    p = stack(4, 5, 4, "wdep", seed=1)
    chain = pick_chain(p, 4)
    keys = [(t, u, v) for t in range(1, len(chain.modules) - 1) for u in range(p.m) for v in range(p.m)]
    out = [k for k in keys if _ruled_out(p, chain, *k)]
    assert out and all(_subproblem(p, chain, *k) is None for k in out)
    # a task both input and output of its module, held on two devices at once
    assert all(set(chain.inputs(p, t)) & set(chain.outputs(p, t)) and u != v for t, u, v in out)


@pytest.mark.parametrize(("batch", "threads", "module_threads", "expected"),
                         [(1, 2, 0, 1), (1, 3, 0, 1), (1, 2, 2, 2), (1, 4, 0, 4), (4, 2, 0, 2)])
def test_module_threads_by_default(monkeypatch, batch, threads, module_threads, expected):
    """Latency modules get one CP-SAT worker where split has two or three threads; batched
    modules and an explicit ``module_threads`` keep theirs."""
    from mapsched.split import milp_split

    seen = []

    def spy(sub, backend, limit, symmetry, threads, until):
        seen.append(threads)
        return solve_module(sub, backend, limit, symmetry, threads, until)

    solve_module = milp_split.solve_module
    monkeypatch.setattr(milp_split, "solve_module", spy)
    p = stack(2, 4, 1, seed=3, objective=Objective("throughput", batch) if batch > 1 else None)
    r = solve(p, "split", threads=threads, module_threads=module_threads, workers=1, pipeline=0)
    assert validate(p, r) == []
    assert seen and set(seen) == {expected}


@pytest.mark.parametrize(("nodes", "limit"), [(8, None), (40, 0.05)])
def test_module_bound_lps_only_when_unproved(monkeypatch, nodes, limit):
    """A module subproblem the solver proves gets no bound LPs (they cost more than its
    proof); one it leaves unproved gets a bound at least theirs."""
    from mapsched.split import milp_split

    got = []

    def spy(sub, time_limit=None):
        got.append(lower_bound(sub, time_limit).value)
        return type("B", (), {"value": got[-1]})

    monkeypatch.setattr(milp_split, "lower_bound", spy)
    p = stack(1, nodes, 1, seed=1)
    sol = milp_split.solve_module(p, "cpsat", limit)
    assert max(critical_path_bound(p), work_bound(p)) <= sol.bound <= sol.makespan + 1e-9
    if limit is None:
        assert got == [] and abs(sol.makespan - sol.bound) <= 1e-6 * sol.makespan
    else:
        assert len(got) == 1 and sol.bound >= got[0] and sol.bound < sol.makespan


def test_full_bound_uses_the_chain(monkeypatch):
    monkeypatch.setattr(chain_bounds, "EXACT_BOUND_TASKS", 0)  # no exact model of the whole graph
    p = stack(3, 8, 1, seed=2)
    fast, full = lower_bound(p), full_bound(p, time_limit=30)
    assert full.value >= fast.value and full.rule == "module-chain"
    assert full.value <= solve(p, "split", workers=1).makespan + 1e-9


@pytest.mark.parametrize("batch", [4, 8])
def test_split_on_a_throughput_stack(batch):
    # batch 8 runs batches of 2, 4, 6 and 8 only: a held channel end takes all 8 inputs at once
    p = stack(2, 5, 1, seed=3, objective=Objective("throughput", batch))
    assert (1 in p.batch_sizes) == (batch == 4)
    r = solve(p, "split", workers=1, module_time_limit=5)
    assert validate(p, r) == [] and r.lower_bound <= r.makespan
    assert "heuristic recursion" in r.log  # the DP combined module solves with held channel ends


def _slices(p, k, rng):
    """The topological order cut into k consecutive non-empty slices: a chain for rolling."""
    order = [int(i) for i in p.topo]
    cuts = sorted(rng.choice(np.arange(1, p.n), size=min(k, p.n) - 1, replace=False).tolist())
    bounds = [0, *cuts, p.n]
    return ModuleChain(tuple(tuple(sorted(order[a:b])) for a, b in zip(bounds, bounds[1:])), (), ())


@settings(max_examples=8, deadline=None)
@given(problems(min_tasks=4, max_tasks=8), st.integers(2, 4), st.integers(0, 2**16))
def test_rolling_with_the_whole_chain_in_its_first_window_is_exact(p, k, seed):
    # Step one then solves everything; each later step, with what came before fixed,
    # still admits the rest of that solution, so nothing gets worse.
    chain = _slices(p, k, np.random.default_rng(seed))
    ctx = SolveContext(rng=np.random.default_rng(0), threads=1)
    r = rolling(p, chain, len(chain.modules), solve(p, "heft").makespan, 30.0, ctx)
    opt = solve(p, "exact", threads=1, time_limit=30)
    assume(opt.status == "optimal")
    assert r is not None and validate(p, r) == []
    assert r.makespan == pytest.approx(opt.makespan, rel=1e-6)


def test_a_one_worker_rolling_step_starts_from_a_schedule():
    # Found by the test above: a one-worker step (no LP) proved its bound one tick at a
    # time and found no schedule in 30 s. Each step now starts from an appended schedule.
    d0, d1, d2 = ({"d0": 19.0, "d1": 33.0, "d2": 26.0}, {"d0": 8.0, "d1": 14.0}, {"d1": 23.0, "d2": 18.0})
    tasks = [{"name": f"t{k}", "latency": lat, "weight_bytes": w, "input_bytes": a, "output_bytes": a}
             for k, (lat, w, a) in enumerate([(d0, 52.0, 22.5), (d1, 65.0, 20.0), (d2, 52.0, 7.5),
                                              ({"d0": 13.0, "d1": 23.0, "d2": 18.0}, 5.0, 12.5)])]
    p = problem_from_dict({
        "format": "mapsched.problem/1", "objective": {"kind": "latency"}, "tasks": tasks,
        "devices": [{"name": "d0", "batch_sizes": [1]}, {"name": "d1", "batch_sizes": [1], "memory": 122.6268},
                    {"name": "d2", "batch_sizes": [1], "memory": 71.4408}],
        "links": [{"a": "d0", "b": "d1", "bandwidth": 5000.0}, {"a": "d0", "b": "d2", "bandwidth": 100.0}],
        "edges": [{"src": "t0", "dst": "t1", "bytes": 171.0}, {"src": "t0", "dst": "t3", "bytes": 104.0}]})
    chain = _slices(p, 3, np.random.default_rng(2517))
    r = rolling(p, chain, 3, solve(p, "heft").makespan, 1.0, SolveContext(rng=np.random.default_rng(0), threads=1))
    assert r is not None and validate(p, r) == []
    assert r.makespan == pytest.approx(solve(p, "exact", threads=1).makespan)


@settings(max_examples=30, deadline=None)
@given(problems(min_tasks=1, max_tasks=9), st.sampled_from([1.0, 10.0, 1000.0]))
def test_the_appended_schedule_of_a_rolling_step_is_valid(p, res):
    # With nothing placed yet it is a schedule of the whole problem, durations rounded up.
    placed = np.full(p.n, -1)
    out = _append_schedule(p, [], placed, np.zeros(p.n, dtype=np.int64), res)
    assume(out is not None)  # some task fits nowhere after the greedy choices before it
    owner, starts, makespan = out
    jobs = [Job(p.task_names[i], p.device_names[u], starts[i] / res, starts[i] / res + p.dur[i, u])
            for i, u in enumerate(owner)]
    s = Schedule.from_jobs(p, jobs)
    assert validate(p, s) == []
    assert s.makespan <= makespan / res + 1e-9


@settings(max_examples=8, deadline=None)
@given(problems(min_tasks=4, max_tasks=9), st.integers(2, 5), st.integers(0, 2**16))
def test_rolling_one_module_at_a_time_respects_every_rule(p, k, seed):
    # Memory limits, missing links and devices that cannot run a task all bind in context.
    chain = _slices(p, k, np.random.default_rng(seed))
    ctx = SolveContext(rng=np.random.default_rng(0), threads=1)
    r = rolling(p, chain, 1, solve(p, "heft").makespan, 5.0, ctx)
    if r is not None:  # None: what earlier modules left of memory did not fit a later one
        assert validate(p, r) == []
        assert r.makespan >= lower_bound(p).value * (1 - 1e-9)


@pytest.mark.parametrize("window", [0, 1, 2])
def test_multi_channel_split_stitches_by_rolling_unless_window_is_zero(window):
    p = stack(3, 6, 2, "sdep", seed=5)
    r = solve(p, "split", channels=2, window=window, module_time_limit=2)
    assert validate(p, r) == []
    assert ("rolling stitching" in r.log) == (window > 0)
    assert ("heuristic recursion" in r.log) == (window == 0)
    assert r.makespan <= solve(p, "heft").makespan + 1e-9  # never worse than its warm start


@pytest.mark.parametrize("window", [0, 2])
def test_split_spends_a_time_limit_on_the_whole_graph(window):
    # Two 2-channel modules of 5 nodes: the whole-graph model proves its optimum in a
    # fraction of the limit, so split ends optimal where its stitching alone cannot tell.
    p = stack(2, 5, 2, "wdep", seed=3)
    plain = solve(p, "split", channels=2, window=window, module_time_limit=2)
    assert "whole graph" not in plain.log  # no time limit: no whole-graph solve
    r = solve(p, "split", channels=2, window=window, module_time_limit=2, time_limit=30, threads=2)
    assert validate(p, r) == []
    assert "whole graph" in r.log
    assert r.status == "optimal"
    assert r.makespan == pytest.approx(solve(p, "exact").makespan, rel=1e-6)
    assert r.makespan <= plain.makespan + 1e-9


def test_split_proved_by_its_recursion_keeps_the_time_left():
    p = stack(3, 6, 1, seed=2)
    r = solve(p, "split", time_limit=30)
    assert r.status == "optimal" and "whole graph" not in r.log


@pytest.mark.parametrize("channels", [1, 2])
def test_batched_split_is_never_worse_than_its_warm_start(channels):
    from mapsched import Objective

    p = stack(3, 5, channels, "wdep", seed=1, objective=Objective("throughput", 4))
    r = solve(p, "split", channels=channels, module_time_limit=0.5)
    assert validate(p, r) == []
    assert r.makespan <= solve(p, "bheft").makespan + 1e-9


@settings(max_examples=4, deadline=None)
@given(st.integers(0, 10**6), st.integers(2, 4))
def test_throughput_chain_bound_is_below_the_optimum(seed, batch):
    from mapsched import Objective

    # Small wdep stacks: the batched exact model proves them in about a second.
    p = stack(2, 3, 2, "wdep", seed=seed, objective=Objective("throughput", batch))
    b = chain_bound(p, time_limit=20)
    assert b >= max(critical_path_bound(p), work_bound(p))
    for method in ("bheft", "bmet", "split"):
        assert b <= solve(p, method, time_limit=10).makespan * (1 + 1e-9)
    # the best schedule the batched exact model finds (its one-batch optimum: not a bound)
    assert b <= solve(p, "exact", threads=1, time_limit=10).makespan * (1 + 1e-9)


def test_full_bound_covers_throughput():
    from mapsched import Objective

    p = stack(3, 6, 1, seed=2, objective=Objective("throughput", 8))
    full = full_bound(p, time_limit=30)
    assert full.value >= lower_bound(p).value
    assert full.value <= solve(p, "bheft").makespan


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 9), min_size=1, max_size=7), st.integers(1, 4))
def test_balanced_stages_minimise_the_largest_stage(weights, k):
    from itertools import combinations

    from mapsched.split.stages import balanced_stages

    def largest(starts):
        ends = [*starts[1:], len(weights)]
        return max(sum(weights[a:b]) for a, b in zip(starts, ends))

    starts = balanced_stages(weights, k)
    parts = min(k, len(weights))
    assert starts[0] == 0 and len(starts) == parts and starts == sorted(set(starts))
    best = min(largest([0, *c]) for c in combinations(range(1, len(weights)), parts - 1))
    assert largest(starts) == best


def run_server_stages(p: Problem) -> tuple[ModuleChain, list[tuple[int, ...]]]:
    """Run split's server stages on p and check them: every task in one stage, each stage
    on its own identical server, and the stitched schedule valid. Returns the chain and
    the stages' task groups."""
    from mapsched.model.symmetry import find_symmetry
    from mapsched.split.milp_split import _stitch, pick_chain, solve_module
    from mapsched.split.stages import server_stages

    chain, sym = pick_chain(p, 0), find_symmetry(p)
    out = server_stages(p, chain, sym, lambda sub, limit: solve_module(sub, "cpsat", limit, "none", 1),
                        1.0, SolveContext())
    assert out is not None  # every server can run every task in these tests
    groups, parts = out
    assert sorted(i for g in groups for i in g) == list(range(p.n))
    (servers,) = sym.servers
    for k, part in enumerate(parts):
        assert {p.device_index[dev] for _, dev, _, _ in part.jobs} <= set(servers[k])
    assert validate(p, _stitch(p, groups, parts, SolveContext())) == []
    return chain, groups


@settings(max_examples=12, deadline=None)
@given(modules=st.integers(2, 4), n=st.integers(4, 6), servers=st.integers(2, 3), gpus=st.integers(1, 2),
       inputs=st.sampled_from([2, 4]), seed=st.integers(0, 10_000))
def test_server_stages_of_random_stacks_are_valid_schedules(modules, n, servers, gpus, inputs, seed):
    """The stage candidate that split weighs on identical servers, on random throughput stacks."""
    from mapsched import Objective
    from mapsched.generators import multi_node

    run_server_stages(stack(modules, n, 1, seed=seed, platform=multi_node(servers, gpus), objective=Objective("throughput", inputs)))


def test_server_stages_put_one_stage_on_each_identical_server():
    from mapsched import Objective
    from mapsched.generators import gpt3, multi_node

    p = gpt3(4, platform=multi_node(2, 2), objective=Objective("throughput", 4), d_model=1024, heads=8)
    chain, groups = run_server_stages(p)
    # 8 modules of alternating weight in two stages of four, each on its own server
    assert groups == [tuple(i for mod in chain.modules[4 * k:4 * k + 4] for i in mod) for k in range(2)]
    # split builds the same candidate (with its own time limits) and keeps the best
    r = solve(p, "split", workers=1, time_limit=8)
    staged = float(re.search(r"server stages: makespan (\S+)", r.log).group(1))
    assert validate(p, r) == [] and r.makespan <= staged + 1e-9


def test_module_detection_stops_at_its_deadline():
    from mapsched.split.milp_split import pick_chain

    p = stack(3, 8, 4, "sdep", seed=1)
    assert pick_chain(p, 0).width > 1
    # past the deadline only the single-channel chain (bridges, O(n + E)) is found
    late = pick_chain(p, 0, deadline=time.perf_counter())
    assert late.width == 1 and sorted(i for mod in late.modules for i in mod) == list(range(p.n))
    with pytest.raises(TimeoutError, match="past the deadline"):
        k_edge_classes(p.graph.to_undirected(), 3, deadline=time.perf_counter())


def test_full_bound_within_a_limit_spent_by_module_detection():
    # Finding the modules of 1,000 tasks takes longer than 1 ms: the relaxation's share of
    # what was left came out negative, and relaxation_bound raised ValueError (a traceback
    # from 'mapsched bound --time-limit 1' on 2,000 tasks)
    from mapsched.generators import random_dag

    p = random_dag(1000, 4, 0)
    b = full_bound(p, time_limit=0.001)
    assert 0 < b.value <= solve(p, "heft").makespan


def test_split_of_a_zero_makespan_latency_problem():
    # the rolling stitching's resolution came out at 1e18 ticks per ms from a 0 ms start, and
    # CP-SAT refused a transfer of 1.4e20 ticks with a TypeError
    from mapsched import Device, Edge, Link, System, Task

    p = Problem(
        [Task("t0", {"d0": 0.0, "d1": 0.0, "d2": 0.0}, input_bytes=2.72, output_bytes=40.0),
         Task("t1", {"d0": 0.0, "d1": 4.856}),
         Task("t3", {"d1": 0.0, "d2": 10.82}, weight_bytes=10.0, input_bytes=37.3, output_bytes=40.0)],
        [Edge("t0", "t1", 1412.0)],
        System((Device("d0"), Device("d1"), Device("d2")),
               (Link("d0", "d2", 10000.0), Link("d1", "d2", 100.0, 0.5, directed=True))))
    s = solve(p, "split", time_limit=5, workers=1)
    assert validate(p, s) == [] and s.makespan == 0.0 and s.status == "optimal"


def test_a_chain_too_long_to_recurse_gives_the_quick_bounds(monkeypatch):
    # 'generate stack --modules 200' made 'mapsched bound' end in a RecursionError traceback
    import sys

    from mapsched.bounds import critical_path_bound, work_bound
    from mapsched.split import chain_bounds as split_bound

    def deep(self, *args):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(split_bound._Recursion, "bound", deep)
    p = stack(3, 5, 1, seed=0)
    depth = sys.getrecursionlimit()
    assert split_bound.chain_bound(p, time_limit=5) == max(critical_path_bound(p), work_bound(p))
    assert sys.getrecursionlimit() == depth
