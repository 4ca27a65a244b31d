"""Lean per-task callables (``compile="jit"``): the same outputs, recorded, and required by ``run``."""

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import mapsched  # noqa: E402
from mapsched import HarnessError, Objective, Problem, ProblemError, validate  # noqa: E402
from mapsched.cli import main  # noqa: E402
from mapsched.harness import calibrate, execute, outputs_match, prepare, profile, trace  # noqa: E402
from mapsched.harness.models import FACTORIES  # noqa: E402
from mapsched.harness.profile import profile_graph  # noqa: E402

DEVICES = ["cpu:0", "cpu:1"]


@pytest.fixture(scope="module", autouse=True)
def one_thread(one_torch_thread):
    """Every test here under one torch thread (see conftest)."""


def _model(name):
    m = FACTORIES[name]()
    return m, torch.randn(m.input_shape, generator=torch.Generator().manual_seed(1))


@pytest.fixture(scope="module")
def lean():
    """Per model: its traced graph and the problem profiled through its jit callables."""
    out = {}
    for name in FACTORIES:
        m, x = _model(name)
        g = trace(m, x)
        out[name] = g, profile_graph(g, x, DEVICES, [1, 2], warmup=0, repeats=1, compile="jit").problem
    return out


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_jit_callables_are_torchscript_and_compute_the_fx_values(name):
    m, x = _model(name)
    g = trace(m, x)
    calls = prepare(g, [x], 1, "jit")
    tasks = [k for k, s in enumerate(g.segments) if s.nodes]
    assert sorted(calls) == tasks
    script = [k for k in tasks if isinstance(calls[k], torch.jit.ScriptModule)]
    assert len(script) >= len(tasks) // 2  # only segments passing sizes between them stay fx
    with torch.inference_mode():
        ref = g.run(x)
        for k in script:
            args = [ref[v] for v in g.segments[k].inputs]
            for v, got in zip(g.segments[k].outputs, calls[k](*args)):
                assert torch.allclose(got, ref[v], rtol=1e-4, atol=1e-5)
    assert prepare(g, [x], 1, "jit") == calls  # cached: built once


def test_cuda_graph_setting_is_jit_on_the_cpu():
    m, x = _model("resnet")
    calls = prepare(trace(m, x), [x], 1, "cuda-graph")
    assert all(isinstance(fn, torch.jit.ScriptModule) for fn in calls.values())


def test_a_segment_crossing_a_python_number_keeps_its_fx_module():
    m, x = _model("transformer")
    g = trace(m, x)
    calls = prepare(g, [x], 1, "jit")
    with torch.inference_mode():
        values = g.run(x)
    numbers = {k for k, s in enumerate(g.segments)
               if s.nodes and any(not isinstance(values[v], torch.Tensor) for v in s.inputs + s.outputs)}
    assert numbers and all(isinstance(calls[k], torch.fx.GraphModule) for k in numbers)


@pytest.mark.parametrize("name", sorted(FACTORIES))
@pytest.mark.parametrize("method", ["heft", "random"])
def test_lean_latency_schedule_reproduces_the_model(name, method, lean):
    g, p = lean[name]
    m, x = _model(name)
    built = dict(g._lean)
    r = mapsched.solve(p, method, seed=3)
    run = execute(g, p, r, x, warmup=0)
    with torch.inference_mode():
        assert outputs_match(run.outputs, m(x), p.device_names)
    # What was profiled is what ran: the callables of batch 1 were not built again.
    assert all(g._lean[key] is fn for key, fn in built.items())


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_lean_throughput_schedule_with_several_batch_sizes_reproduces_the_model(name, lean):
    g, p = lean[name]
    p = p.with_objective(Objective("throughput", 3))
    m, _ = _model(name)
    x = torch.randn(3, *m.input_shape[1:], generator=torch.Generator().manual_seed(2))
    # Each task puts one input on one device and two on the other, which input and which
    # device changing from task to task: batches of 1 and 2 gathered from several jobs.
    owner = np.array([[(i + (k == i % 3)) % 2 for k in range(3)] for i in range(p.n)])
    r = mapsched.decode(p, owner)
    assert validate(p, r) == [] and {len(j.inputs) for j in r.jobs} >= {1, 2}
    run = execute(g, p, r, x, warmup=0)
    with torch.inference_mode():
        assert outputs_match(run.outputs, m(x), p.device_names)
    b = mapsched.solve(p, "bheft")
    with torch.inference_mode():
        assert outputs_match(execute(g, p, b, x, warmup=0).outputs, m(x), p.device_names)


def test_compile_setting_is_recorded_and_round_trips(lean):
    _, p = lean["resnet"]
    assert p.calibration.compile == "jit" and "tasks compiled jit" in p.calibration.summary()
    again = Problem.from_dict(json.loads(p.to_json()))
    assert again.calibration == p.calibration
    data = p.to_dict()
    del data["calibration"]["compile"]  # a file from before the setting: profiled op by op
    old = Problem.from_dict(data)
    assert old.calibration.compile is None and "compile" not in old.to_dict()["calibration"]
    with pytest.raises(ProblemError, match="calibration.compile: expected one of none, jit"):
        Problem.from_dict({**p.to_dict(), "calibration": {"compile": "inductor"}})


def test_execute_refuses_another_setting_than_the_profile(lean):
    g, p = lean["transformer"]
    _, x = _model("transformer")
    r = mapsched.solve(p, "heft")
    with pytest.raises(HarnessError, match="profiled with tasks compiled 'jit', this run asks for 'none'"):
        execute(g, p, r, x, compile="none")
    old = Problem.from_dict({**p.to_dict(), "calibration": {"threads": 1}})
    with pytest.raises(HarnessError, match="profiled with tasks compiled 'none'"):
        execute(g, old, r, x, compile="jit")
    with pytest.raises(HarnessError, match="compile: expected one of none, jit"):
        profile(FACTORIES["transformer"](), x, DEVICES, compile="inductor")


def test_calibration_keeps_the_setting(lean):
    g, p = lean["transformer"]
    _, x = _model("transformer")
    q, report = calibrate(g, p, x, count=1, warmup=0, repeats=1)
    assert q.calibration.compile == "jit" and q.calibration.fitted and len(report.measured) == 1
    with pytest.raises(HarnessError, match="profiled with tasks compiled 'jit'"):
        calibrate(g, p, x, count=1, compile="none")


def test_cli_profile_jit_and_run_refuses_another_setting(tmp_path, capsys):
    prob, sched, out = tmp_path / "p.json", tmp_path / "s.json", tmp_path / "measured.json"
    model = "mapsched.harness.models:transformer"
    assert main(["profile", model, "--devices", "cpu:0,cpu:1", "--repeats", "1", "--warmup", "0", "--threads", "1",
                 "--compile", "jit", "-o", str(prob)]) == 0
    assert "tasks compiled jit" in capsys.readouterr().out
    assert json.loads(prob.read_text())["calibration"]["compile"] == "jit"
    assert main(["solve", str(prob), "-m", "heft", "-o", str(sched)]) == 0
    capsys.readouterr()
    assert main(["run", model, str(prob), str(sched), "--threads", "1", "--compile", "none", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "--compile: the problem was profiled with tasks compiled 'jit'" in err
    assert err.count("\n") == 1 and not out.exists()
    assert main(["run", model, str(prob), str(sched), "--threads", "1", "--repeats", "1"]) == 0
    assert "outputs match the unscheduled model: yes" in capsys.readouterr().out


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")
@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_cuda_graph_tasks_reproduce_the_model(name):
    m, x = _model(name)
    g = trace(m, x)
    p = profile_graph(g, x, ["cpu", "cuda:0"], [1, 2], warmup=0, repeats=1, compile="cuda-graph",
                      objective=Objective("throughput", 3)).problem
    xs = torch.randn(3, *m.input_shape[1:], generator=torch.Generator().manual_seed(2))
    for q, method in ((p.with_objective(Objective()), "heft"), (p, "bheft")):
        run = execute(g, q, mapsched.solve(q, method), xs[:q.L], warmup=0)
        with torch.inference_mode():
            assert outputs_match(run.outputs, m(xs[:q.L]), p.device_names)


def test_a_trace_that_computes_other_values_is_refused(monkeypatch):
    import mapsched.harness.lean as lean_mod

    real = torch.jit.freeze
    monkeypatch.setattr(lean_mod.torch.jit, "freeze", lambda m: (lambda *a: tuple(t + 1 for t in real(m)(*a))))
    m, x = _model("resnet")
    with pytest.raises(HarnessError, match="computes other values than its fx module; run with compile none"):
        prepare(trace(m, x), [x], 1, "jit")


@pytest.mark.parametrize("message, graphed", [("Graph is empty", False), ("a capture's other warning", True)])
def test_a_cuda_capture_passes_on_its_other_warnings(monkeypatch, message, graphed):
    """An empty capture falls back to the task itself; any other warning of the capture
    reaches the caller. CUDA is faked here: this checks the logic around the capture."""
    import contextlib
    import types
    import warnings

    import mapsched.harness.lean as lean_mod

    stream = types.SimpleNamespace(wait_stream=lambda other: None)

    @contextlib.contextmanager
    def capture(graph):
        warnings.warn(message, UserWarning, stacklevel=2)
        yield

    for name, fake in (("Stream", lambda device: stream), ("current_stream", lambda device: stream),
                       ("stream", lambda s: contextlib.nullcontext()), ("graph", capture),
                       ("CUDAGraph", lambda: types.SimpleNamespace(replay=lambda: None))):
        monkeypatch.setattr(torch.cuda, name, fake)

    def task(x):
        return (x * 2,)

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        call = lean_mod._graphed(task, [torch.ones(2)], torch.device("cpu"))
    assert (call is not task) == graphed
    assert [str(w.message) for w in seen] == ([message] if graphed else [])
    if graphed:  # the replay returns a copy of what the capture computed
        assert torch.equal(call(torch.ones(2))[0], torch.full((2,), 2.0))
