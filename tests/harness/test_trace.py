"""``make_fx`` tracing of whole training steps in fake mode (``mapsched trace``), on small models."""

import operator
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from mapsched import Problem, solve, validate  # noqa: E402
from mapsched.cli import main  # noqa: E402
from mapsched.generators import platform  # noqa: E402
from mapsched.generators.training import VIEW_MS, transformer_train_ops  # noqa: E402
from mapsched.harness import trace_step  # noqa: E402
from mapsched.harness.aten import step_graph, step_ops  # noqa: E402
from mapsched.harness.models import gpt, resnet  # noqa: E402

MODEL = "mapsched.harness.models:gpt"


@pytest.fixture(scope="module")
def tiny():
    m = gpt()
    gm = step_graph(m, m.input_shape)
    return m, gm, step_ops(gm)


def test_tiny_gpt_step_nodes_and_ops(tiny):
    _, gm, ops = tiny
    calls = [n for n in gm.graph.nodes if n.op == "call_function"]
    getitems = [n for n in calls if n.target is operator.getitem]
    assert (len(calls), len(getitems), len(ops)) == (319, 20, 299)
    kinds = Counter(op.kind for op in ops)
    assert kinds["sub"] == sum(1 for _ in gpt().parameters())  # one SGD update per parameter
    assert kinds["embedding_dense_backward"] == 1 and kinds["bmm"] == 12
    assert all(j < k for k, op in enumerate(ops) for j in op.inputs)  # topological


def test_tracer_and_generator_build_the_same_step(tiny):
    """The torch-free generator replays the traced graph op for op: same kinds, FLOPs, bytes, weights, edges."""
    def signature(ops):
        return sorted((op.kind, op.flops, op.moved, op.output, op.view, op.weight, tuple(sorted(op.inputs.values())))
                      for op in ops)
    assert signature(tiny[2]) == signature(transformer_train_ops(1, 32, 2, 128, 100, 2, 16))


def test_costs_are_finite_and_heft_is_valid(tiny):
    p = trace_step(tiny[0], platform=platform("4-gpu-server"))
    assert (p.n, p.m) == (299, 5) and np.isfinite(p.dur).all() and (p.dur > 0).all()
    views = np.array([op.view for op in tiny[2]])
    assert (p.dur[views] == VIEW_MS).all() and (p.dur[~views] > VIEW_MS).all()
    assert (p.nbytes > 0).all() and sum(t.weight_bytes for t in p.tasks) > 0
    r = solve(p, "heft")
    assert validate(p, r) == []


def test_forward_only_and_real_weights():
    m = resnet()  # real, seeded weights, in eval mode: traced in training mode, then left as it was
    train, infer = (trace_step(m, (2, *m.input_shape[1:]), train=t) for t in (True, False))
    assert not m.training
    names = [t.name for t in infer.tasks]
    assert not any("backward" in n for n in names) and not any(n.startswith("sub") for n in names)
    assert infer.n < train.n // 2
    assert any(t.name.startswith("native_batch_norm_backward") for t in train.tasks)


def test_cli_trace_end_to_end(tmp_path, capsys):
    out = tmp_path / "p.json"
    assert main(["trace", MODEL, "--system", "4-gpu-server", "-o", str(out)]) == 0
    assert "training step of a batch of shape [2, 16]" in capsys.readouterr().out
    p = Problem.read(str(out))
    assert (p.n, p.m, p.name) == (299, 5, "gpt")
    assert main(["trace", MODEL, "--batch-size", "4", "--no-train", "-o", str(out)]) == 0
    q = Problem.read(str(out))
    embed = next(t for t in q.tasks if t.name == "embedding")
    assert embed.output_bytes == 4 * 16 * 32 * 4 and q.n < p.n


@pytest.mark.parametrize("argv,message", [
    (["trace", MODEL, "--system", "tpu-pod", "-o", "x.json"], "unknown system preset"),
    (["trace", "mapsched.harness.models:nope", "-o", "x.json"], "cannot load"),
    # a factory that returns no module, or needs arguments: tracebacks
    (["trace", "builtins:dict", "--input-shape", "1,4", "-o", "x.json"], "builtins:dict() returned a dict, not"),
    (["trace", "operator:add", "-o", "x.json"], "operator:add() failed: TypeError"),
    (["trace", MODEL, "--input-shape", "2,x", "-o", "x.json"], "--input-shape"),
    (["trace", MODEL, "--input-shape", "2,16,3", "-o", "x.json"], "make_fx could not trace"),
    (["profile", MODEL, "--devices", "cpu", "-o", "x.json"], "meta device"),
])
def test_cli_trace_errors_are_one_line(tmp_path, monkeypatch, capsys, argv, message):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not (tmp_path / "x.json").exists()


def test_the_script_finds_a_model_in_the_current_folder(tmp_path):
    # 'No module named mymodel': the script's path starts at its own folder, not here, as python -m's does
    (tmp_path / "mymodel.py").write_text("from mapsched.harness.models import gpt\n\ndef build():\n    return gpt()\n")
    script = [sys.executable, "-I", "-c", "from mapsched.cli import run; run()"]  # as the script: not '' first
    proc = subprocess.run([*script, "trace", "mymodel:build", "--no-train", "-o", "p.json"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert Problem.read(str(tmp_path / "p.json")).name == "build"


def test_trace_step_checks_its_arguments():
    from mapsched import HarnessError

    m = gpt()
    for kwargs, says in (({"input_shape": (-1, 16)}, "input_shape: expected an integer of at least 1, got -1"),
                         ({"input_shape": (0, 16)}, "got 0"),  # traced a graph of an empty batch
                         ({"lr": float("nan")}, "lr: expected a positive finite"),
                         ({"lr": -1}, "lr:"),
                         ({"platform": "cpu-t4-a100"}, "platform: expected a mapsched.generators.Platform"),
                         ({"train": "no"}, "train: expected True or False"),
                         ({"input_shape": (2**31 - 1, 16)}, "runs on no device here (tasks[0]")):
        with pytest.raises(HarnessError, match="^[^\n]*$") as err:
            trace_step(m, **kwargs)
        assert says in str(err.value)
    with pytest.raises(HarnessError, match="model: expected a torch.nn.Module"):
        trace_step("gpt")
