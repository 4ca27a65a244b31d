"""Calibration: fitting the overhead terms to real runs, on emulated CPU devices."""

import importlib

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import mapsched  # noqa: E402
from mapsched import Problem  # noqa: E402
from mapsched.cli import main  # noqa: E402
from mapsched.errors import HarnessError  # noqa: E402
from mapsched.harness import calibrate, execute, profile  # noqa: E402
from mapsched.harness.models import transformer  # noqa: E402

cal = importlib.import_module("mapsched.harness.calibrate")  # the module; mapsched.harness.calibrate is the function

DEVICES = ["cpu:0", "cpu:1"]
MODEL = "mapsched.harness.models:transformer"


@pytest.fixture(scope="module", autouse=True)
def one_thread(one_torch_thread):
    """Every test here, and the module's fixtures, under one torch thread (see conftest)."""


@pytest.fixture(scope="module")
def setup():
    m = transformer()
    x = torch.randn(m.input_shape, generator=torch.Generator().manual_seed(1))
    return m, x, profile(m, x, DEVICES, warmup=1, repeats=3, max_spread=1e9)


def test_schedules_are_distinct_and_valid(setup):
    _, _, p = setup
    runs = cal.schedules(p, 5)
    assert len(runs) == 5 and runs[0][0] == "heft" and runs[1][0] == "only cpu:0"
    assert len({cal.schedule_key(s) for _, s in runs}) == 5
    assert all(mapsched.validate(p, s) == [] for _, s in runs)


def test_prediction_replays_the_mapping_and_device_order(setup):
    _, _, p = setup
    for _, s in cal.schedules(p, 4):
        # as early as possible in the same order: never later than the schedule itself
        assert cal.predict(p, s) <= s.makespan + 1e-9
    alone = cal._decode(p, np.zeros(p.n, dtype=int), "only")
    assert cal.predict(p, alone) == pytest.approx(alone.makespan)


class _Run:
    def __init__(self, makespan):
        self.makespan = makespan


def _machine(monkeypatch, truth):
    """A stand-in for the machine whose overheads are exactly ``truth``'s."""
    monkeypatch.setattr(cal, "execute", lambda graph, problem, s, *a, **k: _Run(cal.predict(truth, s)))


def test_fit_recovers_the_makespans_it_was_given(setup, monkeypatch):
    m, x, p = setup
    _machine(monkeypatch, cal._candidate(p, [0.05, 0.2, 1.3]))
    q, report = calibrate(m, p, x, count=6)
    assert np.allclose(report.after, report.measured, rtol=0.02)
    assert not np.allclose(report.before, report.measured, rtol=0.02)
    assert q.calibration.fitted and q.calibration.threads == 1
    assert "median measured/predicted" in report.table()


def _report(after, measured, devices):
    """A report of schedules whose jobs take time on ``devices[k]`` devices each."""
    made = tuple(mapsched.Schedule("p", [mapsched.Job("t", f"cpu:{u}", 0.0, 1.0) for u in range(d)], 1.0)
                 for d in devices)
    return cal.CalibrationReport(tuple(f"s{k}" for k in range(len(after))), tuple(after), tuple(after),
                                 tuple(measured), 0.0, 0.0, 1.0, made)


def test_a_report_warns_where_several_devices_gain_nothing(capsys):
    from mapsched.cli.harness import _report as show

    serial = _report([2.6, 3.7, 3.7], [3.5, 3.3, 3.4], [2, 1, 1])
    assert "did not run side by side" in serial.serial() and "3.5 ms against 3.3 ms" in serial.serial()
    show(serial)
    out, err = capsys.readouterr()
    assert "median measured/predicted" in out and err.count("\n") == 1 and err.startswith("mapsched: warning: ")
    # measured gains, predicted no gain, one kind of schedule only, or nothing recorded: silent
    for after, measured, devices in (([2.6, 3.7], [2.8, 3.3], [2, 1]), ([3.6, 3.7], [3.5, 3.3], [2, 1]),
                                     ([2.6, 3.7], [3.5, 3.3], [2, 2]), ([2.6, 3.7], [3.5, 3.3], [])):
        quiet = _report(after, measured, devices)
        assert quiet.serial() is None
        show(quiet)
        assert capsys.readouterr().err == ""


def test_a_report_counts_the_devices_each_schedule_uses(setup, monkeypatch):
    m, x, p = setup
    _machine(monkeypatch, p)
    _, report = calibrate(m, p, x, count=3)
    assert report.names[1:] == ("only cpu:0", "only cpu:1") and report.devices[1:] == (1, 1)
    assert len(report.devices) == 3 and all(1 <= d <= 2 for d in report.devices)


def test_a_schedule_the_fit_misses_is_measured_again(setup, monkeypatch):
    m, x, p = setup
    truth = cal._candidate(p, [0.05, 0.2, 1.3])
    calls = []

    def once_slow(graph, problem, s, *a, **k):  # the second schedule's first execution is 1.5x slow
        calls.append(cal.schedule_key(s))
        slow = len(calls) == 3
        return _Run(cal.predict(truth, s) * (1.5 if slow else 1.0))

    monkeypatch.setattr(cal, "execute", once_slow)
    q, report = calibrate(m, p, x, count=6, rounds=1)
    # the slow one, and any the first fit bent towards it (its twin on the other device)
    assert report.names[1] in report.remeasured and "measured twice more" in report.table()
    assert len(calls) == 1 + 6 + 2 * len(report.remeasured) and calls[2] in calls[7:]
    # the medians are the true makespans again, and the fit reaches them
    assert np.allclose(report.measured, [cal.predict(truth, s) for s in report.schedules])
    assert np.allclose(report.after, report.measured, rtol=0.02) and q.calibration.fitted


def test_rounds_go_over_every_schedule_and_outvote_a_slow_execution(setup, monkeypatch):
    m, x, p = setup
    truth = cal._candidate(p, [0.05, 0.2, 1.3])
    calls = []

    def once_slow(graph, problem, s, *a, **k):  # the second schedule's first timed execution is 1.5x slow
        calls.append(cal.schedule_key(s))
        return _Run(cal.predict(truth, s) * (1.5 if len(calls) == 3 else 1.0))

    monkeypatch.setattr(cal, "execute", once_slow)
    q, report = calibrate(m, p, x, count=6)
    # one untimed execution, then cal.ROUNDS rounds of the six schedules in the same order
    assert cal.ROUNDS == 3 and len(calls) == 1 + 6 * 3 and calls[1:7] == calls[7:13] == calls[13:19]
    assert report.remeasured == () and np.allclose(report.measured, [cal.predict(truth, s) for s in report.schedules])
    with pytest.raises(HarnessError, match="rounds"):
        calibrate(m, p, x, rounds=0)


def test_calibrated_prediction_is_near_the_measurement(setup, tmp_path):
    m, x, p = setup
    q, report = calibrate(m, p, x, count=4, repeats=3)
    assert len(report.measured) == 4 and len(report.before) == len(report.after) == 4
    # the structure stays; only times and the record change
    assert [t.name for t in q.tasks] == [t.name for t in p.tasks] and q.edges == p.edges
    assert q.system.devices == p.system.devices and len(q.system.links) == len(p.system.links)
    assert Problem.from_json(q.to_json()) == q
    # Regression guard, on a shared machine (the real figures are in BENCHMARKS.md; the fit
    # itself is checked exactly above): three schedules measured afresh are, in geometric
    # mean, within a factor of 2 of the calibrated predictions. In 11 runs on a 2-core machine
    # whose speed drifted, that mean was 1.12-1.58 and single schedules 0.75-1.71. Asking
    # for predictions twice as near as the profiled ones flaked (0.66 against 0.42 in summed
    # |log ratio|): the profile is one moment's measurement, off by 1.0-4.5x in those runs,
    # so where it happens to be near, halving its error is luck. Each schedule is measured in
    # two rounds and its faster execution kept: another process on the cores only slows a run
    # down, and one such spell failed this guard once in a batch of harness tests.
    made = [s for _, s in cal.schedules(p, 3)]
    runs = [[execute(m, p, s, x, repeats=5).makespan for s in made] for _ in range(2)]
    errors = [abs(np.log(min(a, b) / cal.predict(q, s))) for s, a, b in zip(made, *runs)]
    assert np.mean(errors) <= np.log(2.0)


def test_cli_calibrate_writes_the_problem_and_refuses_other_threads(setup, tmp_path, capsys):
    _, _, p = setup
    prob, out = tmp_path / "p.json", tmp_path / "c.json"
    p.write(str(prob))
    for flags, message in ((["--threads", "2"], "--threads"),
                           (["--input-shape", "3"], "--input-shape: the model runs on no input of shape [3] with its first "
                                                     f"dimension {p.L}, the problem's inputs, ("),
                           (["--seed", str(2**64)], "--seed: expected an integer from 0")):
        assert main(["calibrate", MODEL, str(prob), "-o", str(out), *flags]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err and not out.exists()
    assert main(["calibrate", MODEL, str(prob), "-o", str(out), "--schedules", "3", "--repeats", "1"]) == 0
    text = capsys.readouterr().out
    assert "fitted: overhead" in text and "median measured/predicted" in text and "wrote the calibrated" in text
    q = Problem.read(str(out))
    assert q.calibration.fitted and q.n == p.n


def test_fit_recovers_a_throughput_problems_makespans(setup, monkeypatch):
    # As above, over batched schedules of two inputs.
    m, x, _ = setup
    thr = profile(m, x, DEVICES, [1, 2], warmup=0, repeats=1, max_spread=1e9,
                  objective=mapsched.Objective("throughput", 2))
    _machine(monkeypatch, cal._candidate(thr, [0.05, 0.2, 1.3]))
    q, report = calibrate(m, thr, torch.cat([x, x]), count=6)
    assert report.names[:3] == ("bheft", "only cpu:0", "only cpu:1") and len(report.names) == 6
    assert all(mapsched.validate(thr, s) == [] for _, s in cal.schedules(thr, 6))
    assert np.allclose(report.after, report.measured, rtol=0.02)
    assert q.L == 2 and q.calibration.fitted
