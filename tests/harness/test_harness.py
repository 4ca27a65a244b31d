"""The measurement harness: tracing, profiling and real execution, on the CPU.

Emulated devices ``cpu:0`` and ``cpu:1`` stand in for a GPU here; the CUDA test at the
end runs wherever a GPU is present.
"""

import json
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import mapsched  # noqa: E402
from mapsched import HarnessError, Objective, Problem, validate  # noqa: E402
from mapsched.cli import main  # noqa: E402
from mapsched.harness import default_threads, execute, measure_links, outputs_match, profile, trace  # noqa: E402
from mapsched.harness.lean import close, prepare  # noqa: E402
from mapsched.harness.models import FACTORIES, LARGE  # noqa: E402
from mapsched.harness.overheads import fold, measure_overheads, refit, thread_settings  # noqa: E402

DEVICES = ["cpu:0", "cpu:1"]


@pytest.fixture(scope="module", autouse=True)
def one_thread(one_torch_thread):
    """Every test here, and the module's fixtures, under one torch thread (see conftest)."""


def _model(name):
    m = FACTORIES[name]()
    return m, torch.randn(m.input_shape, generator=torch.Generator().manual_seed(1))


@pytest.fixture(scope="module")
def profiled():
    out = {}
    for name in FACTORIES:
        m, x = _model(name)
        out[name] = profile(m, x, DEVICES, [1, 2], warmup=0, repeats=1)
    return out


@pytest.mark.parametrize("name", sorted(FACTORIES))
@pytest.mark.parametrize("cluster", [True, False])
def test_trace_partitions_the_graph_in_topological_order(name, cluster):
    m, x = _model(name)
    g = trace(m, x, cluster)
    compute = [n.name for n in g.gm.graph.nodes if n.op in ("call_module", "call_function", "call_method")]
    covered = [n for s in g.segments for n in s.nodes]
    assert sorted(covered) == sorted(compute)  # every op in exactly one task
    for k, seg in enumerate(g.segments):
        assert all(g.producer[v] < k for v in seg.inputs)
    if not cluster:
        assert all(len(s.nodes) <= 1 for s in g.segments)
    with torch.inference_mode():
        assert torch.allclose(g.output(g.run(x)), m(x), atol=1e-5)


def test_clustering_fuses_conv_bn_relu_and_elementwise_runs():
    m, x = _model("resnet")
    fused, plain = trace(m, x), trace(m, x, cluster=False)
    node = {n.name: n for n in fused.gm.graph.nodes}
    kinds = [[type(fused.gm.get_submodule(node[n].target)).__name__ for n in s.nodes] for s in fused.segments[1:2]]
    assert kinds == [["Conv2d", "BatchNorm2d", "ReLU"]]
    assert len(fused.segments) < len(plain.segments)
    # the residual add and its ReLU ride along with the second conv-BN of the block
    assert any("add" in s.nodes and len(s.nodes) >= 3 for s in fused.segments)


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_profiled_problem_matches_the_model(name, profiled):
    p = profiled[name]
    m, x = _model(name)
    g = trace(m, x)
    assert [t.name for t in p.tasks] == g.names
    assert Problem.from_json(p.to_json()).to_json() == p.to_json()
    assert list(p.batch_sizes) == [1, 2]
    for i, (t, seg) in enumerate(zip(p.tasks, g.segments)):
        assert set(t.latency) == set(DEVICES)
        assert bool(np.all(p.lat[i] > 0)) == bool(seg.nodes)  # only model inputs take no time
    params = sum(q.numel() * q.element_size() for q in m.parameters())
    buffers = sum(b.numel() * b.element_size() for b in m.buffers())
    assert params <= sum(t.weight_bytes for t in p.tasks) <= params + buffers + 4 * len(p.tasks) * 64
    # the input task's bytes are those of one input
    assert p.tasks[0].output_bytes == x[0].numel() * x.element_size()
    assert {ln.a for ln in p.system.links} == set(DEVICES)


def test_edge_bytes_are_the_crossing_tensors():
    m, x = _model("transformer")
    p = profile(m, x, ["cpu"], warmup=0, repeats=1)
    edge = next(e for e in p.edges if e.src == "input_1")
    assert edge.bytes == x[0].numel() * 4
    assert p.m == 1 and p.system.links == ()


@pytest.mark.parametrize("name", sorted(FACTORIES))
@pytest.mark.parametrize("method", ["heft", "met", "random"])
def test_executed_schedule_reproduces_the_model(name, method, profiled):
    p = profiled[name]
    m, x = _model(name)
    r = mapsched.solve(p, method, seed=3)
    run = execute(m, p, r, x, warmup=0)
    with torch.inference_mode():
        assert torch.allclose(run.outputs, m(x), rtol=1e-4, atol=1e-5)
    assert run.predicted == r.makespan and run.makespan > 0
    got = sorted((j.task, j.device, j.inputs) for j in run.measured.jobs)
    assert got == sorted((j.task, j.device, j.inputs) for j in r.jobs)
    assert all(0 <= j.start <= j.end <= run.makespan + 1e-6 for j in run.measured.jobs)


def test_default_repeats_run_at_least_three_and_until_the_budget():
    from mapsched.harness.execute import MAX_REPEATS, REPEATS, TIMED_MS, _more

    assert _more(None, []) and _more(None, [10 * TIMED_MS] * (REPEATS - 1))
    assert not _more(None, [TIMED_MS / REPEATS] * REPEATS)
    assert _more(None, [TIMED_MS / (2 * REPEATS)] * REPEATS)
    assert not _more(None, [1e-3] * MAX_REPEATS)
    assert _more(2, [1e9]) and not _more(2, [1e-3, 1e-3]) and _more(0, [])


def test_execute_pauses_the_collector_holds_the_workers_and_counts_its_runs(profiled, monkeypatch):
    import gc
    import importlib

    from mapsched.harness.devices import EXCLUSIVE

    module = importlib.import_module("mapsched.harness.execute")  # the package exports the function

    p = profiled["transformer"]
    m, x = _model("transformer")
    r = mapsched.solve(p, "heft")
    seen = []
    launch = module._launch

    def counted(*args):
        # the collector paused, and the workers held for this execution alone
        seen.append(gc.isenabled() or not EXCLUSIVE.locked())
        return launch(*args)

    monkeypatch.setattr(module, "_launch", counted)
    for enabled in (True, False):
        gc.enable() if enabled else gc.disable()
        try:
            seen.clear()
            execute(m, p, r, x, warmup=1, repeats=4)
            assert len(seen) == 5 and not any(seen) and gc.isenabled() == enabled and not EXCLUSIVE.locked()
            seen.clear()
            run = execute(m, p, r, x, warmup=0)
            assert module.REPEATS <= len(seen) <= module.MAX_REPEATS
            assert len(seen) == module.MAX_REPEATS or len(seen) * run.makespan >= module.TIMED_MS / 2
        finally:
            gc.enable()


def test_worker_threads_live_on_with_the_callers_thread_count():
    import os
    import platform
    import threading

    from mapsched.harness.allocator import _ENVIRONMENT, steady
    from mapsched.harness.devices import worker

    pool = worker("cpu:0")
    assert pool is worker("cpu:0") and pool is not worker("cpu:1")
    assert pool.submit(torch.get_num_threads).result() == torch.get_num_threads()
    first = pool.submit(threading.get_ident).result()
    assert pool.submit(threading.get_ident).result() == first
    assert steady() == steady()
    if platform.libc_ver()[0] == "glibc" and not any(v in os.environ for v in _ENVIRONMENT):
        assert steady()


def test_executions_from_two_threads_take_turns_on_the_workers(profiled):
    from concurrent.futures import ThreadPoolExecutor

    p = profiled["inception"]
    m, x = _model("inception")
    schedules = [mapsched.solve(p, "heft"), mapsched.solve(p, "random", seed=5, samples=1)]
    assert all(len({j.device for j in s.jobs}) == 2 for s in schedules)
    with ThreadPoolExecutor(2) as callers:
        runs = [callers.submit(execute, m, p, s, x, warmup=0, repeats=3) for s in schedules * 2]
        outputs = [r.result(timeout=60).outputs for r in runs]
    with torch.inference_mode():
        assert all(torch.allclose(o, m(x), rtol=1e-4, atol=1e-5) for o in outputs)


def test_each_emulated_devices_worker_runs_on_its_own_core(profiled, monkeypatch):
    import os

    from mapsched.harness import devices
    from mapsched.harness.devices import cores, pin, worker

    p = profiled["transformer"]
    m, x = _model("transformer")
    chosen = cores(DEVICES)
    assert chosen or len(os.sched_getaffinity(0)) < len(DEVICES)
    execute(m, p, mapsched.solve(p, "heft"), x, warmup=0, repeats=1)
    for d, cpus in chosen.items():
        assert worker(d).submit(os.sched_getaffinity, 0).result() == cpus
    assert len(set(chosen.values())) == len(chosen)
    # an execution where the devices cannot have a core each lets the same workers go
    monkeypatch.setattr(devices, "cores", lambda names: {})
    assert pin(DEVICES) == {}
    assert all(worker(d).submit(os.sched_getaffinity, 0).result() == os.sched_getaffinity(0) for d in DEVICES)
    # several intra-op threads, or more CPU devices than cores: nothing is pinned
    assert cores(DEVICES, 2, [0, 1, 2, 3]) == {} and cores(["cpu:0", "cpu:1", "cpu:2"], 1, [0, 1]) == {}
    assert cores(["cuda:0", "cpu"], 1, [4, 5]) == {"cpu": frozenset({4}), "cuda:0": frozenset({5})}


def test_the_allocator_is_left_alone_where_the_environment_sets_it(monkeypatch):
    from mapsched.harness.allocator import _fix

    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "65536")
    assert _fix() is False
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_")
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.trim_threshold=1")
    assert _fix() is False


@pytest.mark.parametrize("name", ["resnet", "transformer"])
@pytest.mark.parametrize("method", ["bheft", "sa"])
def test_batched_throughput_schedule_reproduces_the_model(name, method, profiled):
    p = profiled[name].with_objective(Objective("throughput", 3))
    m, _ = _model(name)
    x = torch.randn(3, *m.input_shape[1:], generator=torch.Generator().manual_seed(2))
    r = mapsched.solve(p, method, seed=1, time_limit=2, **({"iterations": 200} if method == "sa" else {}))
    assert validate(p, r) == []
    assert any(len(j.inputs) > 1 for j in r.jobs) or method == "sa"
    run = execute(m, p, r, x, warmup=0)
    with torch.inference_mode():
        assert torch.allclose(run.outputs, m(x), rtol=1e-4, atol=1e-5)
    assert run.throughput == pytest.approx(3000.0 / run.makespan)


@pytest.mark.parametrize(("name", "size"), [("resnet18", {"images": 2, "image": 8}),
                                            ("transformer-1024", {"d_model": 32, "heads": 2, "tokens": 4})])
def test_large_examples_schedule_inputs_as_wholes(name, size):
    # Each input of resnet18 is a mini-batch of images: a throughput schedule that splits the
    # inputs over both devices must still compute every input's images together.
    m = LARGE[name](**size)
    x = torch.randn(3, *m.input_shape[1:], generator=torch.Generator().manual_seed(2))
    p = profile(m, x[:1], DEVICES, [1, 2], warmup=0, repeats=1).with_objective(Objective("throughput", 3))
    r = mapsched.solve(p, "bheft")
    run = execute(m, p, r, x, warmup=0)
    with torch.inference_mode():
        assert torch.allclose(run.outputs, m(x), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["resnet", "inception"])
def test_inputs_gathered_from_jobs_on_several_devices(name, profiled):
    # Each task splits its 4 inputs over both devices, differently from its parents, so
    # every job assembles its batch from rows that several jobs on several devices made.
    p = profiled[name].with_objective(Objective("throughput", 4))
    m, _ = _model(name)
    x = torch.randn(4, *m.input_shape[1:], generator=torch.Generator().manual_seed(4))
    owner = np.array([[(i + k // (1 + i % 2)) % 2 for k in range(4)] for i in range(p.n)])
    r = mapsched.decode(p, owner)
    assert validate(p, r) == []
    run = execute(m, p, r, x, warmup=0)
    with torch.inference_mode():
        assert outputs_match(run.outputs, m(x), p.device_names)
    assert set(run.assembly) == set(p.device_names) and min(run.assembly.values()) > 0
    # everything on one device: the other's thread assembles nothing
    two = p.with_objective(Objective("throughput", 2))
    alone = execute(m, two, mapsched.decode(two, np.zeros((p.n, 2), dtype=int)), x[:2], warmup=0)
    assert alone.assembly[p.device_names[1]] == 0.0


def test_outputs_match_tolerance_follows_the_devices():
    ref = torch.linspace(-2.0, 2.0, 50)
    assert outputs_match(ref + 1e-6, ref, ["cpu:0"])
    assert not outputs_match(ref + 1e-3, ref, ["cpu:0"])
    assert not outputs_match(ref[:-1], ref, ["cpu:0"])
    assert outputs_match((ref, ref), (ref, ref.clone()), ["cpu"])
    wrong = ref.clone()
    wrong[7] += 0.5  # one value from the wrong task is caught even where TF32 is tolerated
    if torch.cuda.is_available():
        assert outputs_match(ref + 1e-3, ref, ["cpu", "cuda:0"])
        assert not outputs_match(wrong, ref, ["cpu", "cuda:0"])
    assert not outputs_match(wrong, ref, ["cpu:0"])


def test_nan_where_the_model_gives_nan_matches():
    # a deterministic model of NaN outputs: run said they did not match it, exit 1, and compile jit refused it
    nan, inf = float("nan"), float("inf")
    ref = torch.tensor([1.0, nan, inf, -2.0])
    assert outputs_match(ref.clone(), ref, ["cpu:0"])
    assert not outputs_match(torch.tensor([1.0, 0.0, inf, -2.0]), ref, ["cpu:0"])
    assert not outputs_match(torch.tensor([1.0, nan, nan, -2.0]), ref, ["cpu:0"])
    # the TF32 tolerance scales with the finite values: a NaN in them made it NaN, and nothing matched
    assert close(ref + 1e-3, ref, tf32=True) and not close(ref + 0.5, ref, tf32=True)
    graph = trace(_Nan().eval(), torch.zeros(1, 4))
    assert prepare(graph, [torch.zeros(1, 4)], 1, "jit")


def test_execute_rejects_mismatches(profiled):
    p = profiled["resnet"]
    m, x = _model("resnet")
    r = mapsched.solve(p, "heft")
    with pytest.raises(HarnessError, match="cluster setting"):
        execute(m, p, r, x, cluster=False)
    with pytest.raises(HarnessError, match="inputs: expected 1 rows"):
        execute(m, p, r, torch.cat([x, x]))
    other, y = _model("transformer")
    with pytest.raises(HarnessError, match="tasks do not match"):
        execute(other, p, r, y)
    bad = mapsched.Schedule(p.name, r.jobs[1:], r.makespan)
    with pytest.raises(HarnessError, match="schedule: not valid"):
        execute(m, p, bad, x)


def test_bad_devices_are_named():
    m, x = _model("transformer")
    with pytest.raises(HarnessError, match="unknown device 'gpu0'"):
        profile(m, x, ["cpu", "gpu0"])
    with pytest.raises(HarnessError, match="names a device twice"):
        profile(m, x, ["cpu", "cpu"])
    with pytest.raises(HarnessError, match="batch_sizes"):
        profile(m, x, ["cpu"], [0])


def test_links_are_measured_both_ways():
    links = measure_links(DEVICES, sizes=(1024, 2**20), warmup=1, repeats=3)
    assert [(ln.a, ln.b) for ln in links] == [("cpu:0", "cpu:1"), ("cpu:1", "cpu:0")]
    assert all(ln.directed and ln.bandwidth > 0 and ln.latency >= 0 for ln in links)
    assert all(np.isfinite(ln.bandwidth) for ln in links)


def test_cli_profile_solve_run(tmp_path, capsys):
    prob, sched = tmp_path / "p.json", tmp_path / "s.json"
    model = "mapsched.harness.models:transformer"
    assert main(["profile", model, "--devices", "cpu:0,cpu:1", "--batch-sizes", "1,2", "--repeats", "1",
                 "--warmup", "0", "-o", str(prob)]) == 0
    out = capsys.readouterr().out
    assert "overheads in the times:" in out and "median measured/predicted" in out
    p = Problem.read(str(prob))
    assert p.name == "transformer" and p.m == 2 and p.calibration.fitted  # calibrated by default
    assert main(["solve", str(prob), "-m", "heft", "-o", str(sched)]) == 0
    capsys.readouterr()
    assert main(["run", model, str(prob), str(sched), "--repeats", "1", "--threads", "1",
                 "-o", str(tmp_path / "measured.json")]) == 0
    out = capsys.readouterr().out
    assert "predicted" in out and "outputs match the unscheduled model: yes" in out
    assert "input assembly, on the devices' threads and in no task's time (ms): cpu:0 " in out
    assert json.loads((tmp_path / "measured.json").read_text())["method"] == "measured:heft"


def test_cli_profile_calibrates_a_throughput_problem_on_its_own_runs(tmp_path, capsys):
    prob = tmp_path / "p.json"
    assert main(["profile", "mapsched.harness.models:transformer", "--devices", "cpu:0,cpu:1", "--repeats", "1",
                 "--warmup", "0", "--batch", "2", "--batch-sizes", "1,2", "-o", str(prob)]) == 0
    assert "bheft" in capsys.readouterr().out  # the batched schedules were run and fitted
    p = Problem.read(str(prob))
    assert p.L == 2 and p.objective.kind == "throughput" and p.calibration.fitted


def test_cli_profile_no_calibrate_writes_the_profiled_times(tmp_path, capsys):
    prob = tmp_path / "p.json"
    assert main(["profile", "mapsched.harness.models:transformer", "--devices", "cpu:0,cpu:1", "--repeats", "1",
                 "--warmup", "0", "--no-calibrate", "-o", str(prob)]) == 0
    assert "median measured/predicted" not in capsys.readouterr().out
    assert not Problem.read(str(prob)).calibration.fitted


@pytest.mark.parametrize("argv,message", [
    (["profile", "nope", "-o", "x.json"], "model: expected MODULE:FACTORY"),
    (["profile", "mapsched.harness.models:nope", "-o", "x.json"], "cannot load"),
    (["profile", "mapsched.harness.models:resnet", "--devices", "tpu", "-o", "x.json"], "unknown device 'tpu'"),
    (["profile", "mapsched.harness.models:resnet", "--batch-sizes", "1,x", "-o", "x.json"], "--batch-sizes"),
    (["profile", "mapsched.harness.models:resnet", "--input-shape", "0,3", "-o", "x.json"], "--input-shape"),
    # refused after the whole profile, naming tasks[0] and memory
    (["profile", "mapsched.harness.models:resnet", "--batch-sizes", "2", "-o", "x.json"],
     "--batch-sizes: a latency problem (--batch 1) runs each task at batch size 1"),
    # the same after the whole profile, naming tasks[0] and objective.batch: a batch size below
    # --batch was all the early check asked for, and one batch per device must add up to it
    (["profile", "mapsched.harness.models:resnet", "--devices", "cpu", "--batch", "4", "--batch-sizes", "1,2",
      "-o", "x.json"], "--batch-sizes: no choice of one of the sizes 1,2 per device (or none) on 1 device(s) adds "
                       "up to --batch 4; include 4, e.g. --batch-sizes 1,2,4"),
    (["profile", "mapsched.harness.models:resnet", "--devices", "cpu:0,cpu:1", "--batch", "5", "--batch-sizes", "2",
      "-o", "x.json"], "on 2 device(s) adds up to --batch 5; include 5, e.g. --batch-sizes 2,5"),
    (["profile", "mapsched.harness.models:resnet", "--batch", "100001", "-o", "x.json"],
     "--batch: expected an integer from 1 to 100000"),
])
def test_cli_errors_are_one_line(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not (tmp_path / "x.json").exists()


@pytest.mark.parametrize("ref,source,says", [
    ("badsyntax:f", {"badsyntax.py": "def f(:\n    pass\n"},
     "model: importing 'badsyntax' failed: SyntaxError: invalid syntax (badsyntax.py, line 1)"),
    ("badimport:f", {"badimport.py": "raise RuntimeError('boom at import')\n"},
     "model: importing 'badimport' failed: RuntimeError: boom at import"),
    # the package runs as the -o check looks for the module's file
    ("badpkg.mod:f", {"badpkg/__init__.py": "1 / 0\n", "badpkg/mod.py": ""},
     "model: importing 'badpkg.mod' failed: ZeroDivisionError: division by zero"),
])
@pytest.mark.parametrize("command", [
    ["profile", "--devices", "cpu", "-o", "x.json"], ["trace", "-o", "x.json"],
    ["run", "builtin:topcuoglu2002", "s.json"], ["calibrate", "builtin:topcuoglu2002", "-o", "x.json"],
])
def test_cli_model_modules_that_fail_to_import_are_one_line(ref, source, says, command, capsys, tmp_path,
                                                           monkeypatch):
    # a traceback of 13-16 frames, exit 1: only ImportError and AttributeError were caught
    for name, text in source.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main([command[0], ref, *command[1:]]) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1
    assert not (tmp_path / "x.json").exists()


needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")


@needs_cuda
@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_cuda_profile_and_execute(name):
    m, x = _model(name)
    # Forced: three repeats of microsecond kernels can vary beyond the spread check, which
    # these tests are not about (one such refusal was seen on an H200).
    p = profile(m, x, ["cpu", "cuda:0"], [1, 2], warmup=1, repeats=3, force=True)
    assert {ln.a for ln in p.system.links} == {"cpu", "cuda:0"}
    assert all(np.isfinite(ln.bandwidth) and ln.bandwidth > 0 for ln in p.system.links)
    gpu = p.device_index["cuda:0"]
    assert p.mem[gpu] == torch.cuda.get_device_properties(0).total_memory
    for method in ("heft", "met", "single-best"):
        r = mapsched.solve(p, method)
        run = execute(m, p, r, x)
        with torch.inference_mode():
            assert outputs_match(run.outputs, m(x), p.device_names)
        assert sorted((j.task, j.device) for j in run.measured.jobs) == sorted((j.task, j.device) for j in r.jobs)


@needs_cuda
@pytest.mark.parametrize("name", ["resnet", "transformer"])
def test_cuda_batched_throughput_splits_inputs_across_cpu_and_gpu(name):
    m, _ = _model(name)
    p = profile(m, torch.zeros(m.input_shape), ["cpu", "cuda:0"], [1, 2, 4], warmup=1, repeats=3,
                objective=Objective("throughput", 4), force=True)
    x = torch.randn(4, *m.input_shape[1:], generator=torch.Generator().manual_seed(2))
    # Jobs of one task on both devices: the outputs must be gathered from both memories.
    owner = np.zeros((p.n, p.L), dtype=np.int64)
    owner[:, 2:] = p.device_index["cuda:0"]
    owner[:, :2] = p.device_index["cpu"]
    r = mapsched.decode(p, owner)
    assert validate(p, r) == []
    for s in (r, mapsched.solve(p, "bheft")):
        run = execute(m, p, s, x)
        with torch.inference_mode():
            assert outputs_match(run.outputs, m(x), p.device_names)
        assert run.throughput == pytest.approx(4000.0 / run.makespan)


def test_overheads_are_measured_stored_and_read_back(tmp_path):
    m, x = _model("transformer")
    bare = profile(m, x, DEVICES, warmup=0, repeats=1, overheads=False)
    cal = bare.calibration
    assert (cal.threads, cal.interop_threads) == thread_settings() and not cal.overhead and not cal.sync
    overhead, sync = measure_overheads(DEVICES, jobs=20, repeats=1)
    assert set(overhead) == set(DEVICES) and set(sync) == {("cpu:0", "cpu:1"), ("cpu:1", "cpu:0")}
    assert all(0 <= v < 5 for v in [*overhead.values(), *sync.values()])  # ms: microseconds on a quiet CPU
    folded = fold(bare, {"cpu:0": 0.5, "cpu:1": 0.25}, {("cpu:0", "cpu:1"): 0.125, ("cpu:1", "cpu:0"): 0.125})
    u = bare.device_index["cpu:0"]
    work = bare.dur[:, u] > 0
    assert np.allclose(folded.dur[work, u], bare.dur[work, u] + 0.5)
    assert np.all(folded.dur[~work] == 0)  # the model's input stays free
    assert np.allclose(folded.link_latency[0, 1], bare.link_latency[0, 1] + 0.125)
    path = tmp_path / "p.json"
    folded.write(str(path))
    back = Problem.read(str(path))
    assert back == folded and back.calibration.overhead == {"cpu:0": 0.5, "cpu:1": 0.25}
    # Re-fitting takes the recorded terms out before putting others in.
    again = refit(back, {}, {})
    assert np.allclose(again.lat, bare.lat) and np.allclose(again.link_latency, bare.link_latency)
    measured = profile(m, x, DEVICES, warmup=0, repeats=1)
    assert set(measured.calibration.overhead) == set(DEVICES) and len(measured.calibration.sync) == 2


def test_run_refuses_other_thread_settings(tmp_path, capsys, profiled):
    p = profiled["transformer"]
    assert p.calibration.threads == 1
    prob, sched = tmp_path / "p.json", tmp_path / "s.json"
    p.write(str(prob))
    mapsched.solve(p, "heft").write(str(sched))
    out = tmp_path / "measured.json"
    assert main(["run", "mapsched.harness.models:transformer", str(prob), str(sched), "--threads", "2",
                 "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "profiled with 1 torch intra-op thread(s), this run has 2" in err and "--threads" in err
    assert err.count("\n") == 1 and not out.exists() and torch.get_num_threads() == 1
    m, x = _model("transformer")
    other = Problem.from_dict({**p.to_dict(), "calibration": {"threads": 3}})
    with pytest.raises(HarnessError, match="profiled with 3 torch intra-op"):
        execute(m, other, mapsched.solve(other, "heft"), x)


def test_run_refuses_inputs_of_another_size_than_profiled(tmp_path, capsys, profiled):
    # accepted: the predicted times were of 16x16 images, the measured ones of 64x64
    p = profiled["random-wired"]
    prob, sched, out = tmp_path / "p.json", tmp_path / "s.json", tmp_path / "measured.json"
    p.write(str(prob))
    mapsched.solve(p, "heft").write(str(sched))
    model = "mapsched.harness.models:random_wired"
    for command in (["run", model, str(prob), str(sched)], ["calibrate", model, str(prob)]):
        assert main([*command, "--input-shape", "1,3,64,64", "--threads", "1", "-o", str(out)]) == 2
        err = capsys.readouterr().err
        assert err == ("mapsched: error: --input-shape: the model's input 'x' holds 49152 bytes per input here and "
                       "3072 in the problem; give inputs of the shape it was profiled at\n") and not out.exists()
    m = FACTORIES["random-wired"]()
    with pytest.raises(HarnessError, match=r"^inputs: the model's input 'x' holds 49152 bytes per input here"):
        execute(m, p, mapsched.solve(p, "heft"), torch.randn(1, 3, 64, 64))


def test_cli_threads_default_to_the_cores_shared_and_run_takes_the_profiles(tmp_path, capsys):
    """Emulated devices at PyTorch's default would each run a team on every core: profile
    shares the cores among them, and run, given no --threads, takes the profile's."""
    prob, sched = tmp_path / "p.json", tmp_path / "s.json"
    model = "mapsched.harness.models:transformer"
    shared = default_threads(DEVICES)
    torch.set_num_threads(shared + 1)
    try:
        assert main(["profile", model, "--devices", ",".join(DEVICES), "--repeats", "1", "--warmup", "0",
                     "--no-calibrate", "-o", str(prob)]) == 0
        assert Problem.read(str(prob)).calibration.threads == shared == torch.get_num_threads()
        assert main(["solve", str(prob), "-m", "heft", "-o", str(sched)]) == 0
        torch.set_num_threads(shared + 1)
        assert main(["run", model, str(prob), str(sched), "--repeats", "1"]) == 0
        assert torch.get_num_threads() == shared
        assert "makespan (ms)" in capsys.readouterr().out
    finally:
        torch.set_num_threads(1)
    # A device alone (or with GPUs) keeps PyTorch's default.
    assert default_threads(["cpu"]) is None and default_threads(["cpu", "cuda:0"], [0, 1, 2]) is None
    assert default_threads(["cpu:0", "cpu:1"], range(3)) == 1 and default_threads(["cpu:0", "cpu:1"], [5]) == 1


def test_profile_warns_of_devices_whose_threads_share_cores():
    m, x = _model("transformer")
    torch.set_num_threads(default_threads(DEVICES) + 1)
    try:
        with pytest.warns(UserWarning, match=rf"threads: .* use {default_threads(DEVICES)} \(torch.set_num_threads"):
            profile(m, x, DEVICES, warmup=0, repeats=1, overheads=False)
    finally:
        torch.set_num_threads(1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # one thread each here, one device there: nothing to say
        profile(m, x, DEVICES[:1], warmup=0, repeats=1, overheads=False)


# ------------------------------------------------------------- models the harness cannot schedule
class _InPlace(torch.nn.Module):
    """``y.mul_(2)`` while ``b`` reads ``y`` too: no edge orders the two tasks."""

    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = (torch.nn.Linear(8, 8) for _ in range(3))

    def forward(self, x):
        y = self.a(x)
        z = self.b(y)
        y.mul_(2)
        return z + self.c(y)


class _MeanOverBatch(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 8)

    def forward(self, x):
        y = self.a(x)
        return y - y.mean(0, keepdim=True)


class _Branch(torch.nn.Module):
    def forward(self, x):
        return x if x.sum() > 0 else -x


class _OneRowOnly(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 8)

    def forward(self, x):
        return self.a(x.view(-1))


class _Nan(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x) * float("nan")


class _Dict(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 8)

    def forward(self, x):
        y = self.a(x)
        return {"h": y, "o": torch.relu(y)}


@pytest.mark.parametrize("model, objective, says", [
    (_InPlace().eval(), None, "writes a in place, which b also reads"),  # outputs did not match
    (_MeanOverBatch().eval(), Objective("throughput", 2), "mean mixes the inputs of a batch"),  # nor here
    (torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Dropout(), torch.nn.Linear(8, 8)), None,
     "1 (Dropout) is in training mode"),  # nor here: the factory left it in training mode
    (_Branch(), None, "torch.fx cannot trace it"),  # fx's TraceError
    (None, None, "model: expected a torch.nn.Module"),
])
def test_models_whose_schedules_cannot_match_them_are_refused(model, objective, says):
    with pytest.raises(HarnessError, match=r"^[^\n]*$") as info:
        profile(model, torch.zeros(1, 8), ["cpu"], repeats=1, warmup=0, objective=objective)
    assert says in str(info.value)


def test_a_model_of_one_row_at_a_time_profiles_for_latency(capfd):
    # propagating shapes at batch 2 failed, and torch's ShapeProp printed its traceback
    p = profile(_OneRowOnly().eval(), torch.zeros(1, 8), ["cpu"], repeats=1, warmup=0, overheads=False)
    assert p.n == 3 and "Traceback" not in capfd.readouterr().err  # the input, view, linear


def test_dict_outputs_are_compared_key_by_key():
    m = _Dict().eval()
    x = torch.randn(1, 8)
    p = profile(m, x, ["cpu:0", "cpu:1"], repeats=1, warmup=0)
    run = execute(m, p, mapsched.solve(p, "heft"), x)
    with torch.inference_mode():
        reference = m(x)
    assert outputs_match(run.outputs, reference, p.device_names)  # raised on the dict
    assert not outputs_match({"h": reference["h"]}, reference, p.device_names)


@pytest.mark.parametrize("kwargs, says", [
    ({"devices": "cpu:0,cpu:1"}, "devices: expected a list of device names"),  # split into characters
    ({"batch_sizes": "12"}, "batch_sizes: expected a list"),  # profiled sizes 1 and 2
    ({"batch_sizes": [1.7]}, "batch_sizes: expected an integer"),  # truncated to 1
    ({"repeats": 0}, "repeats: expected an integer of at least 1"),  # ran once
    ({"objective": "throughput"}, "objective: expected a mapsched.Objective"),
    ({"devices": ["cpu:01", "cpu:1"]}, "unknown device 'cpu:01'"),  # two names of one device
])
def test_profile_arguments_are_checked(kwargs, says):
    m = _Dict().eval()
    with pytest.raises(HarnessError, match=r"^[^\n]*$") as info:
        profile(m, torch.zeros(1, 8), **{"devices": ["cpu"], "warmup": 0, **kwargs})
    assert says in str(info.value)


def test_profile_refuses_to_write_over_the_models_source(tmp_path, monkeypatch, capsys):
    source = tmp_path / "mymodel.py"
    source.write_text("import torch\n\ndef build():\n    m = torch.nn.Linear(4, 4).eval()\n"
                      "    m.input_shape = (1, 4)\n    return m\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    before = source.read_text()
    assert main(["profile", "mymodel:build", "--devices", "cpu", "-o", str(source)]) == 2
    assert "-o: " in capsys.readouterr().err and source.read_text() == before


def test_token_id_models_are_profiled_and_run_on_ids(tmp_path, monkeypatch, capsys):
    # An nn.Embedding's input: profile, run and calibrate drew floats, and the model failed on them.
    (tmp_path / "lm.py").write_text(
        "import torch\nfrom torch import nn\n\n"
        "class LM(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.e, self.f = nn.Embedding(50, 8), nn.Embedding(7, 8)\n        self.out = nn.Linear(8, 3)\n\n"
        "    def forward(self, x):\n        return self.out(self.e(x) + self.f(x)).flatten(1)\n\n"
        "def build():\n    m = LM().eval()\n    m.input_shape, m.input_dtype = (1, 6), torch.long\n    return m\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    prob, sched = str(tmp_path / "p.json"), str(tmp_path / "s.json")
    assert main(["profile", "lm:build", "--devices", "cpu:0,cpu:1", "--repeats", "1", "--warmup", "0",
                 "--no-calibrate", "-o", prob]) == 0
    assert main(["solve", prob, "-m", "heft", "-o", sched]) == 0
    assert main(["run", "lm:build", prob, sched, "--repeats", "1", "--threads", "1"]) == 0
    assert "outputs match the unscheduled model: yes" in capsys.readouterr().out
    import lm

    from mapsched.harness.graph import random_input

    m = lm.build()
    ids = random_input(m, (200, 6), seed=3)
    assert ids.dtype == torch.long and int(ids.min()) >= 0 and int(ids.max()) < 7  # the smallest table's ids
    assert int(ids.max()) > 1 and torch.equal(ids, random_input(m, (200, 6), seed=3))
    m.input_dtype = "long"
    with pytest.raises(HarnessError, match="input_dtype 'long' is not a real torch dtype"):
        random_input(m, (1, 6), seed=0)


class _Chunked(torch.nn.Module):
    """Q, K and V from one projection, split by chunk (a tuple handed between tasks), and
    a multi-head attention module (a tuple output)."""

    def __init__(self):
        super().__init__()
        self.qkv, self.o = torch.nn.Linear(16, 48), torch.nn.Linear(16, 16)
        self.mha = torch.nn.MultiheadAttention(16, 2, batch_first=True)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, -1)
        h = self.o(torch.nn.functional.scaled_dot_product_attention(q, k, v))
        return self.mha(h, h, h)[0]


def _mixed_schedules(p, seeds=3):
    """Valid schedules whose tasks split the inputs between the two devices each its own way."""
    import random

    from mapsched.scheduling.decoder import Decoder

    patterns = [[0, 0, 1, 1], [0, 1, 1, 0], [1, 0, 0, 1], [0, 1, 0, 1], [0] * 4, [1] * 4]
    for seed in range(seeds):
        rng = random.Random(seed)
        yield Decoder(p).schedule(np.array([rng.choice(patterns) for _ in range(p.n)]), method="mixed")


def test_tuples_of_batched_tensors_are_split_between_jobs():
    # the tuple was taken whole from one job of part of the batch: outputs did not match
    m = _Chunked().eval()
    x = torch.randn(4, 6, 16)
    p = profile(m, x[:1], ["cpu:0", "cpu:1"], [1, 2, 4], repeats=1, warmup=0, objective=Objective("throughput", 4))
    with torch.inference_mode():
        reference = m(x)
    for s in _mixed_schedules(p):
        assert validate(p, s) == []
        assert outputs_match(execute(m, p, s, x).outputs, reference, p.device_names)


class _CatBatch(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)

    def forward(self, x):  # two halves along the batch: rows [x; a(x)], not two rows per input
        c, u = self.b(torch.cat([x, self.a(x)], 0)).chunk(2)
        return c - u


class _SizeView(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(8, 8), torch.nn.Linear(16, 2)

    def forward(self, x):
        b = x.size(0)  # the batch size as a number, handed to another task
        return self.b(torch.relu(self.a(x)).view(b, -1))


class _ThroughView(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = torch.nn.Linear(8, 8), torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)

    def forward(self, x):
        h = self.a(x)
        out = self.b(h)
        h.view(-1).mul_(0.5)  # writes h through a view
        return out + self.c(h)


class _Defaults(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 8)

    def forward(self, x, mask=None, scale: float = 2.0):
        h = self.a(x) * scale
        return h if mask is None else h.masked_fill(mask, 0.0)


@pytest.mark.parametrize("model, example, says", [
    # each profiled, then ran jobs of part of the batch on the wrong rows, or crashed in run
    (_CatBatch(), torch.randn(1, 8), "cat mixes the inputs of a batch"),
    (_SizeView(), torch.randn(1, 2, 8), "size mixes the inputs of a batch"),
])
def test_values_that_do_not_split_by_input_are_refused_for_throughput(model, example, says):
    with pytest.raises(HarnessError, match=r"^[^\n]*$") as info:
        profile(model.eval(), example, ["cpu"], [1, 2], repeats=1, warmup=0, objective=Objective("throughput", 2))
    assert says in str(info.value)
    assert profile(model.eval(), example, ["cpu"], repeats=1, warmup=0).n > 1  # latency: every job is one input


def test_writes_through_a_view_and_default_arguments():
    with pytest.raises(HarnessError, match="mul_ writes view in place, which b also reads through a"):
        trace(_ThroughView().eval(), torch.randn(1, 8))  # profiled, and a schedule changed the outputs
    m = _Defaults().eval()
    x = torch.randn(1, 8)
    p = profile(m, x, ["cpu:0", "cpu:1"], repeats=1, warmup=0)  # KeyError: 'mask'
    with torch.inference_mode():
        assert outputs_match(execute(m, p, mapsched.solve(p, "random", seed=1), x).outputs, m(x), p.device_names)


class _Checks(torch.nn.Module):
    def forward(self, x):
        if not isinstance(x, torch.Tensor):  # as nn.TransformerEncoderLayer's checks do: fx's proxy fails them
            raise RuntimeError("input must be a torch.Tensor")
        return x * 2


def test_what_fx_cannot_trace_is_one_line():
    # a RuntimeError was let through as a traceback
    with pytest.raises(HarnessError, match=r"^model: torch.fx cannot trace it \(RuntimeError: [^\n]*$"):
        trace(_Checks(), torch.randn(1, 4))
    encoder = torch.nn.TransformerEncoderLayer(16, 2, 32, batch_first=True).eval()
    with pytest.raises(HarnessError, match=r"^model: torch.fx cannot trace it [^\n]*$"):
        trace(encoder, torch.randn(1, 4, 16))


_RAISING = """import os, threading, torch

@torch.fx.wrap
def flaky(x):
    how = os.environ.get("FLAKY")
    if how == "key":
        raise KeyError("missing")
    if how == "runtime":
        raise RuntimeError("flaky op failed")
    if how == "thread" and threading.current_thread() is not threading.main_thread():
        raise RuntimeError("failed on a worker thread")
    if how == "pair" and x.shape[0] == 2:
        return 1 // 0
    return x

class Flaky(torch.nn.Module):
    input_shape = (1, 8)

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        return flaky(self.lin(x))

def build():
    return Flaky().eval()
"""


@pytest.mark.parametrize("how,argv,says", [
    # a traceback: only the errors of a shape were caught
    ("key", [], "model: running it on its input_shape [1, 8] raised KeyError: 'missing'; fix the model\n"),
    ("key", ["--input-shape", "1,8"], "model: running it on an input of shape [1, 8] raised KeyError: 'missing'; "
                                      "fix the model\n"),
    # '--input-shape: the model runs on no input of shape [1, 8]', where no --input-shape was given
    ("runtime", [], "model: running it on its input_shape [1, 8] raised RuntimeError: flaky op failed; fix the "
                    "model, or its input_shape, or give --input-shape\n"),
    # a traceback from the profile's timing at batch size 2
    ("pair", ["--batch-sizes", "1,2"], "model: it raised ZeroDivisionError: integer division or modulo by zero "
                                       "while profiling it; fix the model\n"),
])
def test_cli_a_model_that_raises_as_it_runs_is_one_line(how, argv, says, tmp_path, monkeypatch, capsys):
    (tmp_path / "raising.py").write_text(_RAISING)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("FLAKY", how)
    out = tmp_path / "p.json"
    assert main(["profile", "raising:build", "--devices", "cpu", "--repeats", "1", "--warmup", "0", "--no-calibrate",
                 *argv, "-o", str(out)]) == 2
    assert capsys.readouterr().err == f"mapsched: error: {says}" and not out.exists()


def test_cli_run_names_the_task_that_raised_on_a_devices_thread(tmp_path, monkeypatch, capsys):
    # a traceback from the executor's worker thread, exit 1
    (tmp_path / "raising.py").write_text(_RAISING)
    monkeypatch.syspath_prepend(str(tmp_path))
    prob, sched, measured = (str(tmp_path / f) for f in ("p.json", "s.json", "m.json"))
    assert main(["profile", "raising:build", "--devices", "cpu:0,cpu:1", "--repeats", "1", "--warmup", "0",
                 "--no-calibrate", "-o", prob]) == 0
    assert main(["solve", prob, "-m", "heft", "-o", sched]) == 0
    capsys.readouterr()
    monkeypatch.setenv("FLAKY", "thread")
    assert main(["run", "raising:build", prob, sched, "--repeats", "1", "--threads", "1", "-o", measured]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mapsched: error: model: its task 'flaky' raised RuntimeError: failed on a worker thread "
                          "on cpu:") and err.endswith(", running the schedule; fix the model\n")
    assert err.count("\n") == 1 and not (tmp_path / "m.json").exists()


def test_cli_says_it_gives_one_tensor(tmp_path, monkeypatch, capsys):
    # '--input-shape: the model runs on no input of shape [1, 8] (missing ... 'y')', which no shape mends
    (tmp_path / "two.py").write_text("import torch\n\nclass Two(torch.nn.Module):\n    def forward(self, x, y):\n"
                                     "        return x + y\n\ndef build():\n    m = Two()\n    m.input_shape = (1, 8)\n"
                                     "    return m\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["profile", "two:build", "--devices", "cpu", "-o", str(tmp_path / "p.json")]) == 2
    err = capsys.readouterr().err
    assert "its forward takes x, y, and the command line gives it one tensor" in err and err.count("\n") == 1
