"""Every bad input gets a one-line ProblemError that names the field."""

import copy
import json
import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mapsched import Problem, ProblemError, Schedule, ScheduleError, instances, solve, validate
from mapsched.cli import main

BASE = instances.load("topcuoglu2002").to_dict()


def mutate(fn):
    d = copy.deepcopy(BASE)
    fn(d)
    return d


CASES = [
    ("cycle", lambda d: d["edges"].append({"src": "t10", "dst": "t1"}), "edges: the task graph has a cycle t1 -> "),
    ("self loop", lambda d: d["edges"].append({"src": "t3", "dst": "t3"}), "cycle t3 -> t3"),
    ("unknown task", lambda d: d["edges"].append({"src": "t1", "dst": "t99"}), "edges[15].dst: unknown task 't99'"),
    ("unknown device in latency", lambda d: d["tasks"][2]["latency"].update(tpu=3),
     "tasks[2].latency: unknown device 'tpu'"),
    ("unknown device in link", lambda d: d["links"].append({"a": "p1", "b": "p9", "bandwidth": 1}),
     "links[3].b: unknown device 'p9'"),
    ("duplicate task", lambda d: d["tasks"].append(copy.deepcopy(d["tasks"][0])),
     "tasks[10].name: duplicate name 't1'"),
    ("duplicate device", lambda d: d["devices"].append({"name": "p2"}), "devices[3].name: duplicate name 'p2'"),
    ("latency with a batch", lambda d: d["objective"].update(batch=4),
     "objective.batch: a latency objective has one input, got 4; use kind 'throughput'"),
    ("negative latency", lambda d: d["tasks"][1]["latency"].update(p1=-1), "tasks[1].latency.p1: expected a number from 0 to 1e+12 ms, got -1"),
    ("string latency", lambda d: d["tasks"][1]["latency"].update(p1="fast"), "tasks[1].latency.p1: expected a number, got 'fast'"),
    ("bool latency", lambda d: d["tasks"][1]["latency"].update(p1=True), "tasks[1].latency.p1: expected a number"),
    ("missing latency", lambda d: d["tasks"][4].pop("latency"), "tasks[4]: missing field 'latency'"),
    ("batch latency key", lambda d: d["tasks"][0]["latency"].update(p1={"two": 3}), "tasks[0].latency.p1 (batch size 'two')"),
    ("no device runs a task", lambda d: d["tasks"][3].update(latency={}), "tasks[3].latency: no device can run task 't4'"),
    ("task too big for memory", lambda d: (d["devices"][0].update(memory=10), d["devices"][1].update(memory=10),
                                           d["devices"][2].update(memory=10), d["tasks"][0].update(weight_bytes=11)),
     "tasks[0]: no device can run task 't1' on one input"),
    ("wrong format", lambda d: d.update(format="mapsched.problem/2"), "format: expected 'mapsched.problem/1', got 'mapsched.problem/2'"),
    ("unknown field", lambda d: d["devices"][0].update(memroy=5), "devices[0]: unknown field 'memroy'"),
    ("bad objective", lambda d: d.update(objective={"kind": "energy"}), "objective.kind: expected 'latency' or 'throughput'"),
    ("throughput without batch", lambda d: d.update(objective={"kind": "throughput"}), "objective.batch: missing"),
    ("zero bandwidth", lambda d: d["links"][0].update(bandwidth=0), "links[0].bandwidth: expected a number from 1 to 1e+18 bytes/s, got 0"),
    ("unsplittable batch", lambda d: d.update(objective={"kind": "throughput", "batch": 4}),
     "tasks[0]: task 't1' cannot process objective.batch=4"),
    ("bad batch sizes", lambda d: d["devices"][0].update(batch_sizes=[0]), "devices[0].batch_sizes: expected an integer from 1 to 100000, got 0"),
    ("negative bytes", lambda d: d["edges"][0].update(bytes=-5), "edges[0].bytes: expected a number from 0 to 1e+18 bytes, got -5"),
    ("duplicate edge", lambda d: d["edges"].append({"src": "t1", "dst": "t2"}), "edges[15]: duplicate edge 't1' -> 't2'"),
    # Values past the stated ranges used to load and then crash exact, split and bound.
    ("huge memory", lambda d: d["devices"][0].update(memory=1e308), "devices[0].memory: expected a number above 0 and up to 1e+18 bytes, got 1e+308"),
    # JSON's Infinity and a number past the float range (1e400) read as Python's infinity,
    # which a Device takes for unlimited memory: a file says that by leaving memory out.
    ("infinite memory", lambda d: d["devices"][0].update(memory=math.inf), "devices[0].memory: expected a finite number of bytes, got inf; leave memory out"),
    ("huge link latency", lambda d: d["links"][0].update(latency=1e308), "links[0].latency: expected a number from 0 to 1e+12 ms, got 1e+308"),
    ("huge edge bytes", lambda d: d["edges"][0].update(bytes=1e308), "edges[0].bytes: expected a number from 0 to 1e+18 bytes, got 1e+308"),
    ("tiny bandwidth", lambda d: d["links"][0].update(bandwidth=1e-300), "links[0].bandwidth: expected a number from 1 to 1e+18 bytes/s"),
    ("huge batch", lambda d: d.update(objective={"kind": "throughput", "batch": 10**9}), "objective.batch: expected an integer from 1 to 100000, got 1000000000"),
    # The format says numbers: a string is refused, except as a latency table's batch-size key.
    ("string batch size", lambda d: d["devices"][0].update(batch_sizes=["5", 2]), "devices[0].batch_sizes: expected an integer from 1 to 100000, got '5'"),
    ("string batch", lambda d: d.update(objective={"kind": "throughput", "batch": "5"}), "objective.batch: expected an integer from 1 to 100000, got '5'"),
    # Hypothesis found a list as an edge's end: a TypeError (unhashable) instead of this line.
    ("list as a task name", lambda d: d["edges"][7].update(src=[]), "edges[7].src: unknown task []"),
    ("list as a device name", lambda d: d["links"][0].update(a=[1]), "links[0].a: unknown device [1]"),
    ("huge name", lambda d: d["edges"].append({"src": "t1", "dst": "x" * 10**6}), "edges[15].dst: unknown task 'xxxxxxxxxxxx"),
    # A file of a few hundred KB listing 20,000 devices would have taken tens of GB.
    ("too many devices", lambda d: d["devices"].extend({"name": f"x{i}"} for i in range(1022)),
     "devices: 1025 devices; mapsched takes at most 1024"),
]


@pytest.mark.parametrize("name,fn,message", CASES, ids=[c[0] for c in CASES])
def test_bad_problem_message(name, fn, message):
    with pytest.raises(ProblemError) as exc:
        Problem.from_dict(mutate(fn))
    text = str(exc.value)
    assert message in text
    assert "\n" not in text


@pytest.mark.parametrize("name,fn,message", CASES[:6], ids=[c[0] for c in CASES[:6]])
def test_bad_problem_on_the_command_line(tmp_path, capsys, name, fn, message):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(mutate(fn)))
    out = tmp_path / "s.json"
    assert main(["solve", str(path), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and "Traceback" not in err
    assert not out.exists()  # nothing half-written


def test_malformed_json(tmp_path, capsys):
    path = tmp_path / "bad.json"
    path.write_text('{"format": "mapsched.problem/1",, }')
    with pytest.raises(ProblemError, match=r"malformed JSON at line 1 column 33"):
        Problem.read(str(path))
    assert main(["bound", str(path)]) == 2
    assert "malformed JSON" in capsys.readouterr().err


def test_missing_file(capsys):
    assert main(["bound", "/nonexistent/p.json"]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_not_an_object():
    with pytest.raises(ProblemError, match="problem: expected a JSON object"):
        Problem.from_json("[1, 2]")


@pytest.mark.parametrize("field,value,says", [
    ("status", "done", "status: expected 'optimal' or 'feasible'"),
    ("interrupted", True, "interrupted: a schedule stopped before its end is not proved optimal"),
    ("solve_seconds", -1.0, "solve_seconds: expected a number of at least 0"),
    ("lower_bound", math.inf, "lower_bound: expected a finite number, got inf"),
    ("method", 3, "method: expected a string, got 3"),
])
def test_a_schedule_the_reader_refuses_is_not_written(tmp_path, field, value, says):
    # Set by hand after a solve: validate() passes it, and write() gave a file that read()
    # refused, or a bare "Out of range float values are not JSON compliant".
    p = instances.load("topcuoglu2002")
    r = solve(p, "heft")
    r.status = "optimal"
    setattr(r, field, value)
    out = tmp_path / "s.json"
    with pytest.raises(ScheduleError, match=re.escape(says)):
        r.write(str(out))
    assert not out.exists()


# Any value a JSON file can hold, in the places a file's fields hold them.
ODD = [None, True, -1, 0, 0.5, 1e308, float("inf"), float("-inf"), float("nan"), 10**400, -(10**400), "", "x", [],
       [1, "a"], {}, {"a": 1},
       # names no terminal may get raw (issue #67): a line break, ANSI escapes, a right-to-left mark, 10 kB
       "t\n1", "\x1b[31mred\x1b[0m", "\x1b]0;title\x07", "\u202ep1", "\r", "p" * 10_000]


def _places(doc, path=()):
    yield path
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for key, value in items:
        yield from _places(value, (*path, key))


@st.composite
def mutated(draw, doc):
    """``doc`` with one to three fields deleted, replaced by an odd value, or duplicated."""
    doc = copy.deepcopy(doc)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from([p for p in _places(doc) if p]))
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        how = draw(st.sampled_from(["delete", "replace", "replace", "copy"]))
        if how == "delete":
            del parent[path[-1]]
        elif how == "copy" and isinstance(parent, list):
            parent.append(copy.deepcopy(parent[path[-1]]))
        else:
            parent[path[-1]] = copy.deepcopy(draw(st.sampled_from(ODD)))
        if not any(_places(doc)):
            break
    return doc


# A small problem, so that each of its fields, the calibration's among them, is often drawn.
SMALL = {"format": "mapsched.problem/1", "name": "small", "objective": {"kind": "throughput", "batch": 2},
         "devices": [{"name": "p1", "batch_sizes": [1, 2], "memory": 1e6}, {"name": "p2"}],
         "links": [{"a": "p1", "b": "p2", "bandwidth": 1e9, "latency": 0.01}],
         "tasks": [{"name": "a", "latency": {"p1": {"1": 1.0, "2": 1.5}, "p2": 2.0}, "output_bytes": 8},
                   {"name": "b", "latency": {"p1": {"1": 1.0, "2": 1.2}, "p2": 0.5}}],
         "edges": [{"src": "a", "dst": "b", "bytes": 8}],
         "calibration": {"threads": 1, "overhead": {"p1": 0.02}, "scale": 1.1, "fitted": True,
                         "sync": [{"a": "p1", "b": "p2", "ms": 0.03}], "compile": "jit"}}
SCHEDULE = solve(Problem.from_dict(BASE), "heft").to_dict()


# Through the JSON text, as a file brings it (``Infinity`` and ``NaN`` included), and as
# Python values, as a caller builds them (an int past the float range stays an int).
THROUGH = {"json": lambda cls, doc: cls.from_json(json.dumps(doc)), "python": lambda cls, doc: cls.from_dict(doc)}


@pytest.mark.parametrize("through", THROUGH)
@settings(max_examples=300)  # a read takes a fraction of a millisecond
@given(doc=mutated(SMALL))
def test_any_damaged_problem_is_read_or_refused_in_one_line(through, doc):
    try:
        THROUGH[through](Problem, doc)
    except ProblemError as exc:
        assert str(exc) and _one_short_line(str(exc))


@pytest.mark.parametrize("through", THROUGH)
@settings(max_examples=100)
@given(doc=mutated(SCHEDULE))
def test_any_damaged_schedule_is_read_and_validated_or_refused_in_one_line(through, doc):
    try:
        schedule = THROUGH[through](Schedule, doc)
    except ScheduleError as exc:
        assert str(exc) and _one_short_line(str(exc))
        return
    assert all(str(v) and _one_short_line(str(v)) for v in validate(Problem.from_dict(BASE), schedule))


def _one_short_line(message):
    """A message a terminal shows as it is: one line, no control character, no 100 kB name."""
    return message.isprintable() and len(message) < 5000


def _dumps_twice(value, target, path=()):
    """``value`` as JSON text, the object at ``target`` with its first key written twice."""
    if isinstance(value, dict):
        items = [f"{json.dumps(k)}: {_dumps_twice(v, target, (*path, k))}" for k, v in value.items()]
        if path == target:
            items.insert(1, items[0])
        return "{" + ", ".join(items) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_dumps_twice(v, target, (*path, i)) for i, v in enumerate(value)) + "]"
    return json.dumps(value)


def _field(path):
    return "".join(f"[{k}]" if isinstance(k, int) else f".{k}" if i else k for i, k in enumerate(path))


@pytest.mark.parametrize("cls", [Problem, Schedule])
@settings(max_examples=100)
@given(data=st.data())
def test_any_key_twice_is_refused_naming_it(cls, data):
    doc = data.draw(mutated(SMALL if cls is Problem else SCHEDULE))
    objects = [p for p in _places(doc) if isinstance(_at(doc, p), dict) and _at(doc, p)]
    if not objects:
        return
    target = data.draw(st.sampled_from(objects))
    key = next(iter(_at(doc, target)))
    with pytest.raises((ProblemError, ScheduleError)) as info:
        cls.from_json(_dumps_twice(doc, target))
    message = str(info.value)
    assert _one_short_line(message) and "appears twice" in message
    if key.isprintable() and len(key) < 60 and all(isinstance(k, int) or k.isprintable() for k in target):
        assert f"{_field((*target, key))}: key {key!r} appears twice" in message


def _at(doc, path):
    for key in path:
        doc = doc[key]
    return doc
