import networkx as nx
import numpy as np
import pytest

from mapsched import Objective, Problem, solve, validate
from mapsched.generators import SYSTEMS, module_graph, platform, random_dag, random_wired, stack


@pytest.mark.parametrize("kind", ["er", "ws", "ba"])
@pytest.mark.parametrize("n", [10, 32])
def test_random_wired_module_has_one_input_and_output(kind, n):
    p = random_wired(n, kind, seed=3)
    g = p.graph
    sources = [i for i in g if g.in_degree(i) == 0]
    sinks = [i for i in g if g.out_degree(i) == 0]
    assert len(sources) == len(sinks) == 1
    assert nx.is_weakly_connected(g)
    # every task lies on a path from the input to the output
    assert set(nx.descendants(g, sources[0])) | {sources[0]} == set(g)
    assert set(nx.ancestors(g, sinks[0])) | {sinks[0]} == set(g)


def test_module_graph_is_oriented_low_to_high():
    g = module_graph(20, "er", seed=1, p=0.2)
    assert all(a < b for a, b in g.edges) and nx.is_weakly_connected(g)


def test_generators_are_seeded():
    assert stack(3, 10, 2, "wdep", seed=5) == stack(3, 10, 2, "wdep", seed=5)
    assert stack(3, 10, 2, "wdep", seed=5) != stack(3, 10, 2, "wdep", seed=6)
    assert random_dag(50, 3, seed=2) == random_dag(50, 3, seed=2)


def test_random_dag_without_jitter_has_identical_devices():
    from mapsched.model.symmetry import find_symmetry

    assert find_symmetry(random_dag(12, 4, seed=1, speeds=[1, 1, 2, 2])).devices == ()
    flat = find_symmetry(random_dag(12, 4, seed=1, speeds=[1, 1, 2, 2], jitter=0.0))
    assert sorted(map(len, flat.devices)) == [2, 2]
    with pytest.raises(ValueError, match="jitter"):
        random_dag(12, 4, jitter=1.5)


@pytest.mark.parametrize("channels", [2, 3, 4])
def test_sdep_paths_stem_from_inputs_and_reach_outputs(channels):
    p = stack(4, 10, channels, "sdep", seed=channels)
    g = nx.relabel_nodes(p.graph, dict(enumerate(p.task_names)))
    for t in range(4):
        inner = [v for v in g if v.startswith(f"m{t}.n")]
        ins = [v for v in g if v.startswith(f"m{t}.in")]
        outs = [v for v in g if v.startswith(f"m{t}.out")]
        assert len(ins) == len(outs) == channels
        reach = set().union(*(nx.descendants(g, v) for v in ins))
        back = set().union(*(nx.ancestors(g, v) for v in outs))
        assert set(inner) <= reach and set(inner) <= back
    # channels: exactly `channels` edges leave each module
    cut = [(a, b) for a, b in g.edges if a.startswith("m0.") and b.startswith("m1.")]
    assert len(cut) == channels


def test_wdep_channels_are_random_inner_nodes():
    p = stack(3, 10, 3, "wdep", seed=2)
    g = nx.relabel_nodes(p.graph, dict(enumerate(p.task_names)))
    cut = [(a, b) for a, b in g.edges if a.startswith("m0.") and b.startswith("m1.")]
    assert len(cut) == 3 and all(".n" in a and ".n" in b for a, b in cut)


def test_throughput_stack_gets_quarter_batches_and_solves():
    p = stack(2, 10, 1, seed=1, objective=Objective("throughput", 16))
    assert [d.batch_sizes for d in p.system.devices] == [(4, 8, 12, 16)] * 3
    r = solve(p, "bheft")
    assert validate(p, r) == []


def test_presets_and_relative_speeds():
    assert set(SYSTEMS) == {"cpu-t4-a100", "4-gpu-server", "multi-node"}
    p = random_wired(32, seed=0)
    ratio = p.dur.sum(axis=0) / p.dur[:, 2].sum()
    assert ratio == pytest.approx([7.1, 1.26, 1.0], rel=0.1)
    assert len(platform("multi-node").devices) == 30
    assert len(platform("4-gpu-server").system().devices) == 5
    assert isinstance(Problem.from_json(p.to_json()), Problem)


def test_cost_model_batching_is_sublinear():
    p = stack(1, 10, seed=0, objective=Objective("throughput", 8))
    k = {int(b): c for c, b in enumerate(p.batch_sizes)}
    per_input = p.lat[:, :, k[8]] / 8
    assert np.all(per_input < p.lat[:, :, k[2]] / 2)


def test_network_shapes():
    from mapsched.generators import inception, resnet, transformer, vgg
    from mapsched.split import detect_modules

    v = vgg(16)
    assert v.n == 16 and v.E == 15  # a chain
    r = resnet()
    assert r.n > 20 and any(len(r.pred[i]) == 2 for i in range(r.n))  # residual adds
    inc = inception(3)
    chain = detect_modules(inc)
    cats = {inc.task_index[f"i{t}.concat"] for t in range(2)}
    assert cats <= {n for n in chain.nodes if n is not None} | {i for m in chain.modules for i in m}
    assert len(chain.modules) >= 3
    t = transformer(2, heads=4)
    assert sum(name.startswith("l0.head") for name in t.task_names) == 4
    # CPU far slower than the GPUs on conv-heavy nets; batching helps on the GPU
    assert v.dur[:, 0].sum() > 5 * v.dur[:, 2].sum()
    for p in (v, r, inc, t):
        assert validate(p, solve(p, "heft")) == []


@pytest.mark.parametrize("B", [2, 10, 33])
def test_random_dag_with_a_batch_can_be_solved(B):
    # Devices used to run batches of 1 only, so four devices could not split 10 inputs.
    p = random_dag(30, 4, seed=3, objective=Objective("throughput", B))
    r = solve(p, "bheft")
    assert p.L == B and validate(p, r) == []


@pytest.mark.parametrize("kind", ["er", "ws", "ba"])
@pytest.mark.parametrize("nodes", [1, 2, 3, 4])
def test_modules_of_few_nodes_are_drawn_for_every_graph_model(kind, nodes):
    # WS's 4 neighbours and BA's 5 new edges a node exceeded modules of 1-3 nodes:
    # networkx's NetworkXError reached the command line as a traceback
    g = module_graph(nodes, kind, seed=1)
    assert sorted(g.nodes) == list(range(nodes)) and all(a < b for a, b in g.edges)
