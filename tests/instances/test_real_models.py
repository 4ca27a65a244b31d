"""The real-model instances (``real/*.json.gz``, docs/real-models.md) and the ``real-models`` suite."""

import gzip
import json
from importlib import resources

import networkx as nx
import numpy as np
import pytest

import mapsched
from mapsched import instances
from mapsched.bench.sweep import BOUND
from mapsched.errors import ProblemError

SHIPPED = [n for n in instances.names() if n.startswith("real/") and n not in instances.GENERATED]


def test_names_list_shipped_and_generated_instances():
    assert len(SHIPPED) >= 9 and instances.DEFAULT in instances.names()
    for model in ("inception-v3", "resnet50", "bert", "gnmt"):
        assert {f"real/{model}-layer", f"real/{model}-op"} <= set(SHIPPED)
    assert "real/resnet50-train-op" in SHIPPED
    assert {f"real/gpt{k}-step-{s}" for k in (12, 22) for s in ("cpu-t4-a100", "4-gpu-server")} == set(
        instances.GENERATED)
    with pytest.raises(ProblemError, match="unknown built-in instance 'real/nope'"):
        instances.load("real/nope")


def test_shipped_data_is_small_and_declared():
    files = list(resources.files("mapsched.instances").joinpath("real").iterdir())
    assert sum(len(f.read_bytes()) for f in files) < 2_000_000
    for f in files:  # compressed JSON of the problem format
        assert json.loads(gzip.decompress(f.read_bytes()))["format"] == "mapsched.problem/1"


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_instance_is_real_tight_and_heft_validates(name):
    p = instances.load(name)
    assert 96 <= p.n <= 1000 and 8 <= p.m <= 24
    assert nx.is_directed_acyclic_graph(p.graph)
    acc = [u for u, d in enumerate(p.device_names) if d.startswith("acc")]
    cpu = [u for u, d in enumerate(p.device_names) if d.startswith("cpu")]
    assert 2 <= len(acc) <= 4 and len(acc) + len(cpu) == p.m
    need = float((p.weight + p.act).sum())
    assert need > p.mem[acc].sum()  # the model does not fit the accelerators alone ...
    assert (p.mem[cpu] >= need).all()  # ... while each CPU core holds all of it
    # transfers through host memory cost more than compute
    assert float(p.comm[:, acc[0], cpu[0]].sum()) > float(np.min(p.dur, axis=1).sum())
    s = mapsched.solve(p, "heft")
    assert mapsched.validate(p, s) == []


def test_gpt_step_is_generated_at_load():
    p = instances.load("real/gpt12-step-cpu-t4-a100")
    assert (p.n, p.m, p.name) == (18951, 3, "gpt12-step-cpu-t4-a100")


def test_layer_graph_keeps_the_op_graphs_memory_and_work():
    layer, op = instances.load("real/resnet50-layer"), instances.load("real/resnet50-op")
    assert layer.n < op.n and layer.device_names == op.device_names
    assert float(layer.weight.sum()) == pytest.approx(float(op.weight.sum()))
    assert float(layer.act.sum()) == pytest.approx(float(op.act.sum()))
    assert layer.dur.sum(axis=0) == pytest.approx(op.dur.sum(axis=0))


def test_suite_is_registered():
    from mapsched.bench.suites import REAL_MODELS, SUITES

    suite = SUITES["real-models"]
    suite.check()
    assert suite.time_limit == 60.0 and len(suite.cases) >= 10
    assert {"auto", "exact", "split", "heft", BOUND} <= set(suite.methods)
    assert [c.kwargs["name"] for c in suite.cases] == list(REAL_MODELS)
    assert set(REAL_MODELS) == set(SHIPPED) | set(instances.GENERATED)
    assert suite.cases[0].build().n < 200  # the command builds the first case in its own process
