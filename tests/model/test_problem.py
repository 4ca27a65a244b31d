import copy
import json
import pickle
import re

import networkx as nx
import numpy as np
import pytest
from hypothesis import given
from strategies import problems

from mapsched import (
    Calibration,
    Device,
    Link,
    Objective,
    Problem,
    ProblemError,
    Schedule,
    System,
    decode,
    instances,
)
from mapsched.model.closure import Closure


def test_builtin_topcuoglu_arrays():
    p = instances.load("topcuoglu2002")
    assert (p.n, p.m, p.E, p.L) == (10, 3, 15, 1)
    assert p.dur.shape == (10, 3) and p.dur[0].tolist() == [14, 16, 9]
    # bandwidth 1000 B/s makes an edge's bytes its time in ms
    assert p.comm[0, 0, 1] == 18 and p.comm[0, 1, 1] == 0
    assert p.topo[0] == 0 and p.topo[-1] == 9
    with pytest.raises(ValueError):
        p.dur[0, 0] = 1.0  # arrays are read-only


@pytest.mark.parametrize("copied", [lambda p: p, lambda p: pickle.loads(pickle.dumps(p)), copy.deepcopy],
                         ids=["built", "pickled", "deep-copied"])
@pytest.mark.parametrize("derive", [lambda p: p, lambda p: p.without_devices(["p3"]),
                                    lambda p: p.with_objective(Objective("throughput", 2))],
                         ids=["itself", "without", "objective"])
def test_a_problem_cannot_be_changed_after_its_checks(copied, derive):
    # An edited latency table reached to_dict, == and derived problems (a -5 ms time among
    # them, with a bound validate passed) but not the arrays; pickled arrays came back writable.
    p = instances.load("topcuoglu2002")
    p = derive(copied(Problem(p.tasks, p.edges, p.system, p.objective, p.name, Calibration(overhead={"p1": 0.1}))))
    with pytest.raises(ValueError):
        p.dur[0, 0] = 1.0
    for change in (lambda: p.tasks[0].latency["p1"].__setitem__(1, -5.0), lambda: p.tasks[0].latency.pop("p1"),
                   lambda: p.tasks[0].latency.update(p2={1: 0.0}), lambda: p.calibration.overhead.clear()):
        with pytest.raises(TypeError, match="read-only"):
            change()
    assert p.to_dict()["tasks"][0]["latency"]["p1"] == 14.0 and Problem.from_dict(p.to_dict()) == p


def test_three_constructors_agree():
    p = instances.load("topcuoglu2002")
    g = nx.DiGraph()
    for t in p.tasks:
        g.add_node(t.name, latency={d: v[1] for d, v in t.latency.items()})
    for e in p.edges:
        g.add_edge(e.src, e.dst, bytes=e.bytes)
    q = Problem.from_networkx(g, p.system, name=p.name)
    assert q == p
    w = p.dur.copy()
    edges = [(int(s), int(d), b) for s, d, b in zip(p.src, p.dst, p.nbytes)]
    r = Problem.from_arrays(w, edges, task_names=p.task_names, name=p.name)
    assert np.array_equal(r.dur, p.dur) and np.array_equal(r.comm, p.comm)


def test_from_arrays_nan_means_cannot_run():
    p = Problem.from_arrays([[1.0, float("nan")], [2.0, 3.0]], [(0, 1)])
    assert not p.can_run[0, 1] and p.can_run[1, 1]


def test_batched_latency_table_and_defaults():
    d = {
        "format": "mapsched.problem/1",
        "objective": {"kind": "throughput", "batch": 4},
        "devices": [{"name": "a", "batch_sizes": [1, 2, 4]}, {"name": "b", "memory": 100}],
        "links": [{"a": "a", "b": "b", "bandwidth": 1e3}],
        "tasks": [{"name": "x", "latency": {"a": {"1": 1, "2": 1.5, "4": 2.5}, "b": 3},
                   "output_bytes": 7}, {"name": "y", "latency": {"a": {"4": 2}}}],
        "edges": [{"src": "x", "dst": "y"}],
    }
    p = Problem.from_dict(d)
    assert p.L == 4 and p.batch_sizes.tolist() == [1, 2, 4]
    assert p.lat[0, 0].tolist() == [1, 1.5, 2.5]
    assert np.isinf(p.lat[0, 1, 1]) and p.lat[0, 1, 0] == 3  # b only runs batch 1
    assert p.nbytes[0] == 7  # edge bytes default to the source's output_bytes
    assert p.mem[0] == np.inf and p.mem[1] == 100


@pytest.mark.parametrize("table, message", [
    ({"01": 1, "1": 2}, "expected a positive integer written as str(n) writes it, got '01'"),
    ({" 1": 1}, "got ' 1'"), ({"+1": 1}, "got '+1'"), ({"\u0661": 1}, "got '\u0661'"),
    ({1: 1, "1": 2}, "batch size 1 given twice"),
])
def test_a_batch_size_has_one_key(table, message):
    # "01" and "1" were both batch size 1, and the last time read silently won
    from mapsched import Task

    with pytest.raises(ProblemError, match=re.escape(message)):
        Problem([Task("x", {"a": table})], [], System((Device("a"),)))


@given(problems(throughput=None))
def test_problem_round_trips(p):
    q = Problem.from_json(p.to_json())
    assert q == p
    assert q.to_dict() == p.to_dict()
    assert json.loads(q.to_json()) == json.loads(p.to_json())
    for a in ("lat", "comm", "mem", "weight", "act", "src", "dst"):
        assert np.array_equal(getattr(p, a), getattr(q, a))


@given(problems(throughput=None))
def test_schedule_round_trips(p):
    r = decode(p, p.planted, method="planted", lower_bound=1.0)
    s = Schedule.from_json(r.to_json())
    assert s.to_dict() == r.to_dict()
    assert s.jobs == r.jobs and s.makespan == r.makespan


def test_file_round_trip(tmp_path):
    p = instances.load("topcuoglu2002")
    path = tmp_path / "p.json"
    p.write(str(path))
    assert Problem.read(str(path)) == p
    assert [f.name for f in tmp_path.iterdir()] == ["p.json"]  # no temporary left behind


CALIBRATION = {"threads": 1, "interop_threads": 2, "overhead": {"p1": 0.02, "p2": 0.5},
               "sync": [{"a": "p1", "b": "p2", "ms": 0.03}], "scale": 1.25, "fitted": True}


def test_calibration_round_trips_and_old_files_stay_byte_identical(tmp_path):
    p = instances.load("topcuoglu2002")
    old = tmp_path / "old.json"
    p.write(str(old))
    text = old.read_text()
    assert "calibration" not in text and Problem.read(str(old)).calibration is None
    Problem.read(str(old)).write(str(tmp_path / "again.json"))
    assert (tmp_path / "again.json").read_text() == text
    data = json.loads(text)
    data["calibration"] = CALIBRATION
    new = tmp_path / "new.json"
    new.write_text(json.dumps(data, indent=1) + "\n")
    q = Problem.read(str(new))
    assert q.calibration == Calibration(1, 2, {"p1": 0.02, "p2": 0.5}, {("p1", "p2"): 0.03}, 1.25, True)
    assert q.to_dict() == data and np.array_equal(q.lat, p.lat)  # a record: the times are unchanged
    q.write(str(tmp_path / "new2.json"))
    assert (tmp_path / "new2.json").read_text() == new.read_text()
    assert q.with_objective(q.objective).calibration == q.calibration
    assert q.calibration.kernel(1.27, "p1") == pytest.approx(1.0) and q.calibration.copy(0.05, "p1", "p2") == pytest.approx(0.02)


@pytest.mark.parametrize("field, value, message", [
    ("threads", 0, "calibration.threads"),
    ("overhead", {"gpu": 1.0}, "calibration.overhead: unknown device 'gpu'"),
    ("overhead", {"p1": -1.0}, "calibration.overhead.p1"),
    ("sync", [{"a": "p1", "b": "p1", "ms": 1.0}], "two distinct devices"),
    ("sync", [{"a": "p1", "b": "p2"}], "calibration.sync[0]: missing field 'ms'"),
    ("sync", [{"a": ["p1"], "b": "p2", "ms": 1.0}], "calibration.sync[0].a: expected a device name"),
    ("sync", [{"a": "p1", "b": {"p": 2}, "ms": 1.0}], "calibration.sync[0].b: expected a device name"),
    ("scale", 0, "calibration.scale"),
    ("fitted", "yes", "calibration.fitted"),
    ("speed", 1, "calibration: unknown field 'speed'"),
])
def test_calibration_errors_name_the_field(field, value, message):
    data = instances.load("topcuoglu2002").to_dict()
    data["calibration"] = {**CALIBRATION, field: value}
    with pytest.raises(ProblemError, match=re.escape(message)):
        Problem.from_dict(data)


@given(problems(max_tasks=12))
def test_closure_matches_networkx(p):
    c = Closure(p).matrix()
    for i in range(p.n):
        desc = nx.descendants(p.graph, i)
        assert {int(j) for j in np.flatnonzero(c[i])} == desc
    pairs = Closure(p).unordered_pairs()
    for i, j in pairs:
        assert not nx.has_path(p.graph, i, j) and not nx.has_path(p.graph, j, i)


def test_with_objective_and_repr():
    p = instances.load("topcuoglu2002")
    sys2 = System(tuple(Device(d.name, batch_sizes=(1, 2)) for d in p.system.devices), p.system.links)
    q = Problem(p.tasks, p.edges, sys2, Objective("throughput", 2), "t")
    assert q.L == 2 and "L=2" in repr(q)
    assert q.with_objective(Objective()).L == 1
    assert Link("a", "b", 1.0).directed is False


def test_restrict_keeps_tasks_edges_and_allowed_devices():
    p = Problem.from_arrays(np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]]),
                            [(0, 1, 1.0), (1, 2, 1.0)])
    sub = p.restrict([1, 2], fix={2: 2}, devices=[1, 2])
    assert sub.task_names == ("t1", "t2") and sub.E == 1
    assert sub.can_run.tolist() == [[False, True, True], [False, False, True]]
    with pytest.raises(ProblemError, match=r"tasks\[0\].latency"):
        p.restrict([0], fix={0: 0}, devices=[1])
    # fix may name several devices a task may use
    sub = p.restrict(range(3), fix={0: [0, 2], 1: {1}})
    assert sub.can_run.tolist() == [[True, False, True], [False, True, False], [True, True, True]]


def test_a_schedules_mapping_keeps_every_job_of_a_task_on_one_device():
    # two jobs of t on d0 (which the format allows): mapping() kept the last one's inputs
    # only, and a decode of it found input 0 on no device
    from mapsched import Job, Task, validate

    q = Problem([Task("t", {"d0": 1.0, "d1": 10.0})], [], System((Device("d0"), Device("d1"))),
                Objective("throughput", 2))
    s = Schedule.from_jobs(q, [Job("t", "d0", 1, 2, (1,)), Job("t", "d0", 0, 1, (0,))])
    assert validate(q, s) == [] and s.mapping() == {"t": {"d0": (0, 1)}}


@pytest.mark.parametrize("call, message", [
    (lambda p: p.restrict([-1]), "tasks: expected task indices from 0 to 9, got -1"),  # gave the last task
    (lambda p: p.restrict(["t1"]), "tasks: expected task indices"),
    (lambda p: p.with_devices(["p4"]), "--add: expected a mapping of new device name"),
    (lambda p: p.with_devices({"p4": ["p3"]}), "--add: expected a mapping"),
    (lambda p: p.without_devices(None), "--remove: expected a list of device names"),
    (lambda p: p.with_objective("throughput"), "objective: expected an Objective"),
    (lambda p: Problem.from_arrays([[3, 5], [2]], []), "latency: expected a task x device matrix of numbers"),
    (lambda p: Problem.from_arrays([[3, 5], [2, 1]], [5]), "edges[0]: expected (i, j) or (i, j, cost)"),
    (lambda p: Problem.from_arrays([[3, 5], [2, 1]], [(0.9, 1.7)]), "edges[0]: expected task indices"),  # 0 -> 1
    (lambda p: Problem.from_json(None), "problem: expected JSON text, got NoneType"),
    (lambda p: Problem.read(None), "path: expected a file path, got NoneType"),
])
def test_wrong_arguments_are_one_line_errors(call, message):
    # each was a bare AttributeError, TypeError, IndexError or ValueError, or a silent answer
    with pytest.raises(ProblemError, match=re.escape(message)):
        call(instances.load("topcuoglu2002"))


def test_a_copied_device_keeps_its_originals_syncs():
    p = instances.load("topcuoglu2002")
    p = Problem(p.tasks, p.edges, p.system, p.objective, p.name,
                Calibration(overhead={"p1": 0.1}, sync={("p1", "p2"): 0.05, ("p2", "p1"): 0.05}))
    q = p.with_devices({"p4": "p1"})
    assert q.calibration.sync[("p4", "p2")] == q.calibration.sync[("p2", "p4")] == 0.05  # was left out
    assert q.calibration.overhead["p4"] == 0.1
