"""The torch-free training-step generator: structure, op counts, costs, and HEFT at 10k ops."""

import time
from collections import Counter

import networkx as nx
import numpy as np
import pytest

from mapsched import Problem, solve, validate
from mapsched.cli import main
from mapsched.generators import platform, transformer_train
from mapsched.generators.training import VIEW_MS, Op, op_problem, transformer_train_ops

TINY = {"d_model": 32, "heads": 2, "ff": 128, "vocab": 100, "batch": 2, "tokens": 16}


def _count(layers, heads):
    """The docstring's formula for the number of ops."""
    return layers * (94 * heads + 72) + 39


@pytest.mark.parametrize("layers,heads", [(1, 2), (2, 2), (3, 4), (2, 16)])
def test_op_counts_follow_the_formula(layers, heads):
    ops = transformer_train_ops(layers, **{**TINY, "d_model": 8 * heads, "heads": heads})
    assert len(ops) == _count(layers, heads)
    kinds = Counter(op.kind for op in ops)
    params = layers * (6 * heads + 10) + 5  # q/k/v per head; ln1, proj, ln2, fc1, fc2; tok, pos, ln_f, head
    assert kinds["sub"] == params and kinds["mul"] == params + 2 * heads * layers  # + the scale and its gradient
    assert kinds["bmm"] == 6 * heads * layers  # two forward and four backward per head
    assert kinds["native_layer_norm"] == kinds["native_layer_norm_backward"] == 2 * layers + 1
    assert kinds["addmm"] == (3 * heads + 3) * layers and kinds["mm"] == 2 * kinds["addmm"] + 3


def test_small_step_structure_bytes_and_memory():
    layers = 2
    p = transformer_train(layers, **TINY)
    ops = transformer_train_ops(layers, **TINY)
    g = p.graph
    assert nx.is_directed_acyclic_graph(g) and nx.is_weakly_connected(g)
    names = [t.name for t in p.tasks]
    kind = {k: op.kind for k, op in enumerate(ops)}
    # a training step: the loss's gradient seed precedes every optimizer update, and every
    # parameter's update follows the forward op that first read the parameter
    seed = names.index("ones_like")
    subs = [k for k in kind if kind[k] == "sub"]
    assert set(subs) <= nx.descendants(g, seed)
    assert all(nx.has_path(g, names.index("embedding"), k) for k in subs)
    # backward mirrors forward: the first layer's norm is the last to get its gradient
    lnb = [k for k in kind if kind[k] == "native_layer_norm_backward"]
    ln = [k for k in kind if kind[k] == "native_layer_norm"]
    assert nx.has_path(g, lnb[0], lnb[-1]) and nx.has_path(g, ln[0], ln[-1])
    # costs: finite and positive; views cost VIEW_MS everywhere and allocate nothing
    assert np.isfinite(p.dur).all() and (p.dur > 0).all()
    view = np.array([op.view for op in ops])
    assert (p.dur[view] == VIEW_MS).all() and (p.dur[~view] > VIEW_MS).all()
    out = np.array([t.output_bytes for t in p.tasks])
    assert (out[view] == 0).all() and (out[~view] > 0).all()
    assert (p.nbytes > 0).all() and all(t.input_bytes == 0 for t in p.tasks)
    # weights: every parameter, mask, token id and label once, at its first reader
    d, h, f, v, b, t = (TINY[k] for k in ("d_model", "heads", "ff", "vocab", "batch", "tokens"))
    per_layer = 3 * h * (d * (d // h) + d // h) + (d * d + d) + 4 * d + (f * d + f) + (d * f + d)
    params = layers * per_layer + 2 * v * d + t * d + 2 * d
    assert sum(tk.weight_bytes for tk in p.tasks) == 4 * params + 4 * layers * t * t + 2 * 8 * b * t
    assert np.isfinite(p.mem).all() and p.weight.sum() + p.act.sum() < p.mem.sum()


def test_seeded_and_deterministic():
    a, b = transformer_train(1, **TINY, seed=3), transformer_train(1, **TINY, seed=3)
    c = transformer_train(1, **TINY, seed=4)
    assert a == b and a != c
    assert [t.name for t in a.tasks] == [t.name for t in c.tasks] and (a.nbytes == c.nbytes).all()


def test_op_problem_without_seed_is_the_plain_roofline():
    ops = [Op("a", "mm", 19.5e12 * 1e-3, 0, 8), Op("b", "add", 0, 1.5e12 * 2e-3, 8, inputs={0: 8})]
    p = op_problem(ops, platform("cpu-t4-a100"))
    slow = np.array([d.slowdown for d in platform("cpu-t4-a100").devices])
    assert np.allclose(p.dur, (np.array([[1.0], [2.0]]) + 0.01) * slow)
    assert [(e.src, e.dst, e.bytes) for e in p.edges] == [("a", "b", 8.0)]


def test_ten_thousand_ops_solve_with_heft():
    t0 = time.perf_counter()
    p = transformer_train(6, platform=platform("4-gpu-server"))
    assert p.n == _count(6, 16) and 9_000 < p.n < 11_000
    r = solve(p, "heft")
    assert validate(p, r) == []
    assert r.makespan < p.dur.min(axis=1).sum()  # spreading over the GPUs beats any one of them
    assert time.perf_counter() - t0 < 60


def test_cli_generate_transformer_train(tmp_path, capsys):
    out = tmp_path / "p.json"
    assert main(["generate", "transformer-train", "--layers", "1", "--system", "4-gpu-server", "-o", str(out)]) == 0
    p = Problem.read(str(out))
    assert p.n == _count(1, 16) and p.m == 5 and p.name == "transformer-train-1l"
    assert main(["generate", "transformer-train", "--batch", "4", "-o", str(out)]) == 2
    assert "--batch" in capsys.readouterr().err
