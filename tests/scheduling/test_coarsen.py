"""Coarsening: partitions, quotients and expansion (mapsched.coarsen)."""

from contextlib import suppress
from itertools import combinations

import networkx as nx
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import problems

import mapsched
from mapsched import InfeasibleError, OptionError, Problem, decode, validate
from mapsched.generators import random_dag
from mapsched.scheduling.coarsen import SLACK, coplace, expand, fuse_intervals, quotient
from mapsched.scheduling.decoder import Decoder
from mapsched.scheduling.orders import cpd_topo, dfs_topo


def partitions(p: Problem, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """The built-in partitions, with a random R and M for the intervals."""
    need = p.weight + p.act
    R = int(rng.integers(1, p.n + 1))
    M = float(rng.uniform(need.max(), need.sum() + 1)) if rng.random() < 0.5 else None
    return {
        "coplace": coplace(p),
        "cpd": fuse_intervals(p, R=R, M=M),
        "dfs": fuse_intervals(p, dfs_topo(p), R=R, M=M),
        "bfs": fuse_intervals(p, p.topo, R=R, M=M),
    }


def assert_quotient(p: Problem, groups: np.ndarray, merge: str = "sum") -> Problem:
    q, of = quotient(p, groups, merge=merge)
    assert nx.is_directed_acyclic_graph(q.graph)
    # A partition: one group per task, every group non-empty.
    assert of.shape == (p.n,) and sorted(set(of.tolist())) == list(range(q.n))
    assert (np.unique(groups, return_inverse=True)[1].ravel() == of).all()
    for c in range(q.n):
        members = of == c
        assert q.dur[c] == pytest.approx(p.dur[members].sum(axis=0))
        assert q.weight[c] + q.act[c] == pytest.approx((p.weight + p.act)[members].sum())
    # Edges: one per pair of distinct groups that some edge joins, bytes merged.
    want: dict[tuple[int, int], list[float]] = {}
    for s, d, b in zip(of[p.src], of[p.dst], p.nbytes):
        if s != d:
            want.setdefault((int(s), int(d)), []).append(float(b))
    got = {(int(s), int(d)): float(b) for s, d, b in zip(q.src, q.dst, q.nbytes)}
    assert got.keys() == want.keys()
    for pair, bs in want.items():
        assert got[pair] == pytest.approx(sum(bs) if merge == "sum" else max(bs))
    return q


@given(problems(max_tasks=12), st.integers(0, 2**32 - 1))
def test_partitions_give_runnable_acyclic_quotients(p, seed):
    rng = np.random.default_rng(seed)
    for name, groups in partitions(p, rng).items():
        assert groups.shape == (p.n,), name
        assert_quotient(p, groups, merge=str(rng.choice(["sum", "max"])))


@given(problems(max_tasks=12), st.integers(0, 2**32 - 1))
def test_intervals_are_contiguous_and_allowed(p, seed):
    rng = np.random.default_rng(seed)
    order = cpd_topo(p)
    R = int(rng.integers(1, p.n + 1))
    M = float(rng.uniform(0, (p.weight + p.act).sum() + 1))
    groups = fuse_intervals(p, order, R=R, M=M)
    along = groups[order]
    assert along[0] == 0 and set(np.diff(along).tolist()) <= {0, 1}
    need = p.weight + p.act
    for c in range(along[-1] + 1):
        members = order[along == c]
        if len(members) > 1:
            total = need[members].sum()
            assert len(members) <= R and total <= M
            assert (p.can_run[members].all(axis=0) & (total * (1 + SLACK) <= p.mem)).any()


def test_cpd_topo_follows_the_critical_path():
    # a -> b (light), a -> c (heavy), b -> d, c -> d, e -> d; two identical devices,
    # 1 ms per byte. tlevel + blevel: a 9, b 5, c 9, d 9, e 2.
    p = Problem.from_arrays([[1, 1], [2, 2], [4, 4], [1, 1], [1, 1]],
                            [(0, 1, 1), (0, 2, 1), (1, 3, 0), (2, 3, 2), (4, 3, 0)])
    assert cpd_topo(p).tolist() == [0, 2, 1, 4, 3]  # a, c, b, e, d
    assert p.topo.tolist() == [0, 4, 1, 2, 3]  # breadth-first: a, e, b, c, d


@given(problems(max_tasks=12))
def test_cpd_topo_is_topological(p):
    order = cpd_topo(p)
    pos = np.empty(p.n, dtype=int)
    pos[order] = np.arange(p.n)
    assert sorted(order.tolist()) == list(range(p.n)) and (pos[p.src] < pos[p.dst]).all()


def brute_force(p: Problem, order: np.ndarray, R: int, M: float, cost: np.ndarray) -> tuple[float, int]:
    """Least (cut cost, number of intervals) over every partition of ``order`` into allowed intervals."""
    n, need = p.n, p.weight + p.act

    def allowed(members):
        total = need[members].sum()
        fits = (p.can_run[members].all(axis=0) & (total * (1 + SLACK) <= p.mem)).any()
        return len(members) == 1 or (len(members) <= R and total <= M and fits)

    best = (np.inf, 0)
    for k in range(n):
        for cuts in combinations(range(1, n), k):
            bounds = [0, *cuts, n]
            if not all(allowed(order[i:j]) for i, j in zip(bounds, bounds[1:])):
                continue
            groups = np.empty(n, dtype=int)
            groups[order] = np.repeat(np.arange(k + 1), np.diff(bounds))
            cut = cost[groups[p.src] != groups[p.dst]].sum()
            best = min(best, (cut, k + 1))
    return best


@given(problems(max_tasks=9), st.integers(0, 2**32 - 1))
def test_fusion_dp_matches_brute_force(p, seed):
    rng = np.random.default_rng(seed)
    order = (cpd_topo(p), dfs_topo(p), p.topo)[rng.integers(3)]
    R = int(rng.integers(1, p.n + 1))
    need = p.weight + p.act
    M = float(rng.uniform(0, need.sum() + 1)) if rng.random() < 0.7 else np.inf
    cost = rng.integers(0, 4, size=p.E).astype(float)  # integers: sums are exact, ties are real
    groups = fuse_intervals(p, order, R=R, M=M, cost=cost)
    got = (cost[groups[p.src] != groups[p.dst]].sum(), len(np.unique(groups)))
    assert got == brute_force(p, order, R, M, cost)


def coarse_schedules(q: Problem, rng: np.random.Generator) -> list[mapsched.Schedule]:
    """HEFT's schedule of the quotient, and a random feasible mapping's, where they exist."""
    out = []
    with suppress(InfeasibleError):  # grouping can lose feasibility (memory, missing links)
        out.append(mapsched.solve(q, "heft"))
    owner = np.array([rng.choice(np.flatnonzero(q.can_run[c])) for c in range(q.n)])[:, None]
    dec = Decoder(q, insertion=bool(rng.random() < 0.5))
    if dec.infeasibility(owner) is None:
        out.append(dec.schedule(owner))
    return out


@given(problems(max_tasks=12, max_devices=4), st.integers(0, 2**32 - 1))
def test_expanded_schedules_are_valid_and_no_later(p, seed):
    rng = np.random.default_rng(seed)
    for groups in partitions(p, rng).values():
        q, _ = quotient(p, groups, merge=str(rng.choice(["sum", "max"])))
        for coarse in coarse_schedules(q, rng):
            assert validate(q, coarse) == []
            s = expand(p, coarse, groups, insertion=bool(rng.random() < 0.7))
            assert validate(p, s) == []
            assert s.makespan <= coarse.makespan * (1 + 1e-9) + 1e-9
            # Each task on its group's device.
            where = {j.task: j.device for j in coarse.jobs}
            of = np.unique(groups, return_inverse=True)[1].ravel()
            assert all(j.device == where[f"g{of[p.task_index[j.task]]}"] for j in s.jobs)


@given(st.integers(0, 2**16), st.integers(1, 4))
def test_random_dag_coarsen_solve_expand(seed, m):
    p = random_dag(120, m, seed, degree=3)
    for groups in (coplace(p), fuse_intervals(p, R=8)):
        q = assert_quotient(p, groups)
        coarse = mapsched.solve(q, "heft")
        s = expand(p, coarse, groups)
        assert validate(p, s) == [] and s.makespan <= coarse.makespan * (1 + 1e-9)


@given(problems(max_tasks=8), st.integers(0, 2**32 - 1))
def test_any_partition_is_refused_exactly_when_cyclic_or_unrunnable(p, seed):
    groups = np.random.default_rng(seed).integers(0, max(1, p.n // 2), size=p.n)
    g = nx.DiGraph()
    g.add_nodes_from(groups.tolist())
    g.add_edges_from((int(s), int(d)) for s, d in zip(groups[p.src], groups[p.dst]) if s != d)
    need = p.weight + p.act
    runnable = all((p.can_run[groups == c].all(axis=0) & (need[groups == c].sum() <= p.mem)).any()
                   for c in np.unique(groups))
    if not runnable:
        with pytest.raises(ValueError, match="holds their memory"):
            quotient(p, groups)
    elif not nx.is_directed_acyclic_graph(g):
        with pytest.raises(ValueError, match="cycle"):
            quotient(p, groups)
    else:
        assert_quotient(p, groups)


def test_coplace_merges_single_consumers_only_where_a_device_runs_the_group():
    # a -> b -> c and a -> d: b joins c. d runs only on p1, c only on p0: e -> d stays apart.
    inf = np.inf
    p = Problem.from_arrays([[1, 1], [1, 1], [1, inf], [inf, 1], [1, inf]],
                            [(0, 1), (1, 2), (0, 3), (4, 3)])
    assert coplace(p).tolist() == [0, 2, 2, 3, 4]


def test_errors():
    p = Problem.from_arrays([[1], [1], [1]], [(0, 1), (1, 2)])
    with pytest.raises(ValueError, match="cycle"):
        quotient(p, [0, 1, 0])  # {a, c} -> b -> {a, c}
    with pytest.raises(ValueError, match="3 integer group ids"):
        quotient(p, [0, 1])
    with pytest.raises(ValueError, match="merge"):
        quotient(p, [0, 0, 0], merge="mean")
    with pytest.raises(ValueError, match="topological"):
        fuse_intervals(p, [2, 1, 0])
    with pytest.raises(ValueError, match="R"):
        fuse_intervals(p, R=0)
    with pytest.raises(ValueError, match="holds their memory"):
        quotient(Problem.from_arrays([[1, np.inf], [np.inf, 1]], []), [0, 0])
    q, _ = quotient(p, [0, 0, 1])
    coarse = decode(q, [0, 0])
    with pytest.raises(ValueError, match="unknown group"):
        expand(p, coarse, [0, 0, 0])
    with pytest.raises(ValueError, match="has no job"):
        expand(p, coarse, [0, 1, 2])
    thr = random_dag(10, 2, 0, objective=mapsched.Objective("throughput", 4))
    for fn in (coplace, fuse_intervals, lambda x: quotient(x, np.zeros(x.n, dtype=int))):
        with pytest.raises(OptionError, match="latency objective only"):
            fn(thr)
