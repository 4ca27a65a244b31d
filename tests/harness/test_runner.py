"""The device loops of mapsched.harness.runner: order across devices, and failures."""

import importlib
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from mapsched.harness.runner import Step, launch  # noqa: E402

CPUS = {"cpu:0": torch.device("cpu"), "cpu:1": torch.device("cpu")}


def _record(log: list, name: str, pause: float = 0.0):
    def body(done, t0):
        time.sleep(pause)
        log.append(name)
        return name
    return body


def test_a_step_waits_for_its_producer_on_another_device():
    log = []
    # cpu:1's first step needs a slow step of cpu:0; cpu:1's loop must not run ahead of it
    lines = {"cpu:0": [Step(0, [], True, _record(log, "a", 0.05)), Step(2, [1], False, _record(log, "c"))],
             "cpu:1": [Step(1, [0], True, _record(log, "b"))]}
    done, wall, marks = launch(lines, CPUS, {})
    assert log == ["a", "b", "c"] and done == {0: "a", 1: "b", 2: "c"}
    assert wall >= 50.0 and marks == {}


def test_a_failing_step_ends_the_run_and_frees_the_devices_waiting_for_it():
    def fail(done, t0):
        raise ValueError("boom")

    log = []
    lines = {"cpu:0": [Step(0, [], True, fail)], "cpu:1": [Step(1, [0], False, _record(log, "never"))]}
    with pytest.raises(ValueError, match="boom"):
        launch(lines, CPUS, {})
    # the workers are free again: a later launch runs
    done, _, _ = launch({"cpu:0": [Step(0, [], False, _record(log, "x"))], "cpu:1": []}, CPUS, {})
    assert done == {0: "x"} and log == ["x"]


def test_no_lines_is_an_empty_run():
    assert launch({}, {}, {})[0] == {}


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_a_device_loop_never_runs_a_job_before_its_producer(data):
    order = importlib.import_module("mapsched.harness.execute")._order
    n = data.draw(st.integers(1, 12))
    keys = {j: (data.draw(st.floats(0, 3)), j) for j in range(n)}
    # producers have lower indices: acyclic, whatever the keys say
    before = {j: sorted(data.draw(st.sets(st.integers(0, j - 1), max_size=3))) for j in range(1, n)}
    out = order(keys, before)
    at = {j: k for k, j in enumerate(out)}
    assert sorted(out) == list(range(n))
    assert all(at[src] < at[j] for j, srcs in before.items() for src in srcs)
    # with no producers to respect, the keys' order
    assert order(keys, {}) == sorted(keys, key=keys.get)
