"""Robust profiling: the spread of every measurement, re-measuring and refusing noisy figures.

A stubbed pass timer stands in for a busy machine, so these tests are fast and do
not depend on how loaded the machine running them is.
"""

import importlib
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from mapsched import HarnessError, Problem  # noqa: E402
from mapsched.cli import main  # noqa: E402
from mapsched.harness import NoisyMeasurementWarning, profile, profile_report  # noqa: E402

prof = importlib.import_module("mapsched.harness.profile")  # the module; mapsched.harness.profile is the function

MODEL = "mapsched.harness.models:transformer"
BUSY = [1.0, 40.0, 3.0, 20.0, 8.0]  # ms per pass: spread 1.4826 * 7 / 8 = 1.30 over five passes


def _tiny():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4)), torch.randn(1, 8)


@pytest.fixture
def timer(monkeypatch):
    """Replace the pass timer: ``timer(fn)`` makes pass ``i`` take ``fn(i)`` ms per task; returns the call log.

    The overheads are stubbed too, at 0 ms: the latencies are then exactly the stubbed medians."""
    calls = []

    def install(ms_of_pass):
        def fake(graph, dev, inputs, calls_of_tasks):
            calls.append(dev)
            ms = ms_of_pass(len(calls) - 1)
            return [ms if seg.nodes else 0.0 for seg in graph.segments]
        monkeypatch.setattr(prof, "_timed_pass", fake)
        monkeypatch.setattr(prof, "measure_overheads", lambda devices, **_: (dict.fromkeys(devices, 0.0), {}))
        return calls
    return install


def test_spread_is_the_scaled_mad_over_the_median():
    med, cv, scatter = prof._spread(np.array([[1.0, 0.0, 2.0], [40.0, 0.0, 2.0], [3.0, 0.0, 2.0],
                                              [20.0, 0.0, 2.0], [8.0, 0.0, 2.0]]))
    assert med.tolist() == [8.0, 0.0, 2.0]
    assert cv[0] == pytest.approx(1.4826 * 7 / 8) and cv[1] == 0 and cv[2] == 0  # a task taking no time: 0
    assert scatter[0] == pytest.approx(1.4826 * 7)


def test_real_profile_records_a_spread_per_task_device_and_batch(one_torch_thread):
    m, x = _tiny()
    r = profile_report(m, x, ["cpu:0", "cpu:1"], [1, 2], warmup=1, repeats=3, max_spread=1e9)
    p = r.problem
    timed = [t for t in p.tasks if any(t.latency["cpu:0"].values())]
    assert len(r.spreads) == 2 * (p.n - 1)  # per batch size; emulated devices are timed once, together
    assert {s.devices for s in r.spreads} == {"cpu:0,cpu:1"} and {s.batch_size for s in r.spreads} == {1, 2}
    assert timed and all(s.spread >= 0 and s.rounds == 1 for s in r.spreads)
    by_name = {t.name: t for t in p.tasks}
    for s in r.spreads:
        # the latency is the median plus the measured per-job overhead, which the calibration records
        lat = by_name[s.task].latency["cpu:1"][s.batch_size]
        assert p.calibration.kernel(lat, "cpu:1") == pytest.approx(s.median_ms, abs=1e-12)
    assert "spread (1.4826 MAD / median) of" in r.summary() and "0 unstable" in r.summary()


def test_whole_passes_are_timed_so_repeats_interleave_across_tasks(timer):
    calls = timer(lambda i: 2.0)
    m, x = _tiny()
    r = profile_report(m, x, ["cpu"], [1, 2], warmup=2, repeats=3)
    assert len(calls) == 2 * (2 + 3)  # one call per pass over every task, none per task
    assert all(s.spread == 0 and s.median_ms == 2.0 and s.rounds == 1 for s in r.spreads)


def test_noise_that_passes_is_re_measured_with_a_warning(timer):
    calls = timer(lambda i: BUSY[i] if i < 5 else 2.0)  # busy for the first round only
    m, x = _tiny()
    with pytest.warns(NoisyMeasurementWarning, match=r"vary by more than 0.25 .*re-measuring \(round 2 of 3\)"):
        p = profile(m, x, ["cpu"], repeats=5, warmup=0)
    assert len(calls) == 10  # one extra round, then steady
    assert all(lat["cpu"][1] in (0.0, 2.0) for lat in (t.latency for t in p.tasks))


def test_noise_that_stays_is_refused_in_one_line_unless_forced(timer):
    calls = timer(lambda i: BUSY[i % 5])
    m, x = _tiny()
    with warnings.catch_warnings(record=True) as caught, pytest.raises(HarnessError) as err:
        warnings.simplefilter("always")
        profile(m, x, ["cpu"], repeats=5, warmup=0, retries=2)
    assert len(calls) == 15  # two extra rounds, no more
    assert [str(w.message)[-14:] for w in caught] == ["(round 2 of 3)", "(round 3 of 3)"]
    assert all(w.category is NoisyMeasurementWarning for w in caught)
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith("max_spread: 2 of 2 measurements still vary by more than 0.25")
    assert "spread 1.30" in msg and "force=True" in msg
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        p = profile(m, x, ["cpu"], repeats=5, warmup=0, force=True)
    assert str(caught[-1].message) == "kept 2 unstable measurements (force=True)"
    assert {t.latency["cpu"][1] for t in p.tasks} == {0.0, 8.0}  # the medians, kept
    r = profile_report(m, x, ["cpu"], repeats=5, warmup=0, retries=0, max_spread=2.0)
    assert not r.unstable and r.refusal() is None  # under a looser threshold, steady enough


def test_scatter_under_the_floor_is_timer_jitter_not_noise(timer):
    timer(lambda i: [0.001, 0.04, 0.003, 0.02, 0.008][i % 5])  # huge relative spread, microseconds apart
    m, x = _tiny()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = profile_report(m, x, ["cpu"], repeats=5, warmup=0)
    assert all(s.spread > 1 for s in r.spreads) and not r.unstable


def test_bad_spread_options_are_named():
    m, x = _tiny()
    with pytest.raises(HarnessError, match="max_spread: expected a positive number"):
        profile(m, x, ["cpu"], max_spread=0)
    with pytest.raises(HarnessError, match="retries: expected an integer of at least 0"):
        profile(m, x, ["cpu"], retries=-1)


def test_cli_refuses_noisy_figures_in_one_line_and_writes_nothing(timer, tmp_path, capsys):
    timer(lambda i: BUSY[i % 5])
    out = tmp_path / "p.json"
    assert main(["profile", MODEL, "--devices", "cpu", "--repeats", "5", "--warmup", "0", "-o", str(out)]) == 2
    err = capsys.readouterr().err.splitlines()
    errors = [line for line in err if line.startswith("mapsched: error:")]
    assert len(errors) == 1 and errors[0] == err[-1]
    assert "--max-spread: 13 of 13 measurements still vary by more than 0.25" in errors[0]
    assert "--force" in errors[0]
    assert sum("warning:" in line and "re-measuring" in line for line in err) == 2 and all(line.startswith("mapsched:") for line in err)
    assert not out.exists() and not list(tmp_path.iterdir())


def test_cli_force_writes_noisy_figures_with_a_warning(timer, tmp_path, capsys):
    timer(lambda i: BUSY[i % 5])
    out = tmp_path / "p.json"
    assert main(["profile", MODEL, "--devices", "cpu", "--repeats", "5", "--warmup", "0", "--retries", "0",
                 "--force", "-o", str(out)]) == 0
    captured = capsys.readouterr()
    assert "writing 13 unstable measurements anyway (--force)" in captured.err
    assert "re-measuring" not in captured.err  # --retries 0
    assert "13 unstable" in captured.out and "wrote" in captured.out
    assert Problem.read(str(out)).n == 14


def test_cli_check_reports_and_writes_nothing(timer, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    timer(lambda i: BUSY[i % 5])
    assert main(["profile", MODEL, "--devices", "cpu", "--repeats", "5", "--warmup", "0", "--retries", "1",
                 "--check"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("spread (1.4826 MAD / median) of 13 measurements: median 1.297, max 1.297; 13 unstable")
    assert out[1].split() == ["task", "devices", "batch", "median", "ms", "spread", "rounds"]
    assert len(out) == 2 + 5 and all(line.endswith("2  unstable") for line in out[2:])
    assert not list(tmp_path.iterdir())

    timer(lambda i: 2.0)
    assert main(["profile", MODEL, "--devices", "cpu", "--repeats", "3", "--warmup", "0", "--check"]) == 0
    assert "0 unstable" in capsys.readouterr().out
    assert main(["profile", MODEL, "--devices", "cpu", "--repeats", "3", "--warmup", "0", "--check",
                 "-o", "p.json"]) == 0  # with -o, reports and writes
    assert "spread (" in capsys.readouterr().out and Problem.read("p.json").n == 14


@pytest.mark.parametrize("argv,message", [
    (["profile", MODEL, "--devices", "cpu"], "-o: give the problem file to write"),
    (["profile", MODEL, "--max-spread", "0", "-o", "x.json"], "--max-spread: expected a positive number"),
    (["profile", MODEL, "--max-spread", "nan", "-o", "x.json"], "--max-spread: expected a positive number"),
    (["profile", MODEL, "--retries", "-1", "-o", "x.json"], "--retries: expected an integer from 0 to 10000"),
    # torch's tracebacks before: a shape the model does not take, one too large to allocate,
    # batch sizes and thread counts past what torch's C++ takes
    (["profile", MODEL, "--input-shape", "3", "-o", "x.json"],
     "--input-shape: the model runs on no input of shape [3] (Given normalized_shape=[64]"),
    (["profile", MODEL, "--input-shape", "2000000000,2000000000", "-o", "x.json"],
     "--input-shape: the model runs on no input of shape [2000000000, 2000000000]"),
    (["profile", MODEL, "--batch-sizes", str(10**20), "-o", "x.json"], "--batch-sizes: expected integers from 1 to 100000"),
    (["profile", MODEL, "--interop-threads", str(2**32), "-o", "x.json"], "--interop-threads: expected an integer from 1"),
    (["profile", MODEL, "--repeats", str(2**32), "-o", "x.json"], "--repeats: expected an integer from 1 to 10000"),
    (["trace", MODEL, "--batch-size", str(10**20), "-o", "x.json"], "--batch-size: expected an integer from 1"),
])
def test_cli_spread_option_errors_are_one_line(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not list(tmp_path.iterdir())
