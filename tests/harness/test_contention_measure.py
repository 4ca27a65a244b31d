"""The harness's measure of contention (issue 69): which links and devices take turns."""

import pytest

torch = pytest.importorskip("torch")

from mapsched import Device, Link, Problem, System, Task, solve, validate  # noqa: E402
from mapsched.cli import main  # noqa: E402
from mapsched.harness import contention  # noqa: E402
from mapsched.harness.contention import TURNS, measure_contention  # noqa: E402


def test_the_rule_reads_turns_from_the_timings(monkeypatch):
    """Copies side by side that take twice one copy's time take turns; a job and a copy that
    overlap do not share the device; opposite copies that overlap make a duplex link."""
    # in the order measured: a copy alone, two the same way, two opposite ways; then per device a
    # copy alone, a job alone (as long: no larger job is tried), and both at once
    timings = iter([4.0, 8.0, 4.4] + [4.0, 4.0, 4.4] * 2)

    def fake(fns, devices, warmup, repeats):
        return next(timings)

    monkeypatch.setattr(contention, "_together", fake)
    c = measure_contention(["cpu:0", "cpu:1"], size=64, warmup=0, repeats=1)
    assert c.concurrency == {("cpu:0", "cpu:1"): 1} and c.duplex == {("cpu:0", "cpu:1"): True}
    assert c.ratios["cpu:0 -> cpu:1 x2"] == pytest.approx(2.0) and c.copy_engines == {"cpu:0": None, "cpu:1": None}
    p = Problem([Task("x", {"cpu:0": 1}), Task("y", {"cpu:1": 1})], [],
                System((Device("cpu:0"), Device("cpu:1")), (Link("cpu:0", "cpu:1", 1e9),)))
    q = c.apply(p)
    assert q.contended and q.channel_lanes == (1, 1) and q.copy_engines == (None, None)


def test_measured_fields_agree_with_their_ratios():
    c = measure_contention(["cpu:0", "cpu:1"], size=2**16, warmup=0, repeats=3)
    pair = ("cpu:0", "cpu:1")
    assert (c.concurrency[pair] == 1) == (c.ratios["cpu:0 -> cpu:1 x2"] >= TURNS)
    assert c.duplex[pair] == (c.ratios["cpu:0 <-> cpu:1"] < TURNS)
    for d in pair:
        assert (c.copy_engines[d] == 0) == (c.ratios[f"{d}: job and copy"] >= TURNS)


def test_cli_profile_writes_what_it_measured(tmp_path, capsys):
    prob = tmp_path / "p.json"
    assert main(["profile", "mapsched.harness.models:transformer", "--devices", "cpu:0,cpu:1", "--repeats", "1",
                 "--warmup", "0", "--no-calibrate", "--contention", "-o", str(prob)]) == 0
    assert "contention: cpu:0 -> cpu:1 x2 " in capsys.readouterr().out
    p = Problem.read(str(prob))
    assert validate(p, solve(p, "heft")) == []
