import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import problems, random_owner

from mapsched import InfeasibleError, OptionError, Problem, decode, instances, validate
from mapsched.scheduling.decoder import Decoder, as_owner


@given(problems(throughput=None), st.integers(0, 2**32 - 1), st.booleans())
def test_decoded_schedules_are_valid(p, seed, insertion):
    rng = np.random.default_rng(seed)
    dec = Decoder(p, insertion=insertion)
    s = dec.schedule(p.planted)
    assert validate(p, s) == []
    owner = random_owner(p, rng)
    reason = dec.infeasibility(owner)
    if reason is None:
        s = dec.schedule(owner)
        assert validate(p, s) == []
        assert s.makespan == pytest.approx(dec.makespan(owner))
    else:
        assert dec.makespan(owner) == np.inf
        with pytest.raises(InfeasibleError, match="mapping is infeasible"):
            dec.schedule(owner)


@given(problems(throughput=None), st.integers(0, 2**32 - 1))
def test_any_topological_order_decodes_validly(p, seed):
    rng = np.random.default_rng(seed)
    # a random topological order: repeatedly pick a random ready task
    indeg = np.bincount(p.dst, minlength=p.n)
    ready = [i for i in range(p.n) if indeg[i] == 0]
    order = []
    while ready:
        i = ready.pop(int(rng.integers(len(ready))))
        order.append(i)
        for j in p.succ[i]:
            indeg[j] -= 1
            if indeg[j] == 0:
                ready.append(j)
    s = Decoder(p, order).schedule(p.planted)
    assert validate(p, s) == []


@given(problems())
def test_insertion_is_never_later_than_appending(p):
    """Insertion only fills gaps before the append position, so no job starts later."""
    a = Decoder(p).schedule(p.planted)
    b = Decoder(p, insertion=True).schedule(p.planted)
    assert b.makespan <= a.makespan + 1e-9


def test_topcuoglu_single_device_is_sequential():
    p = instances.load("topcuoglu2002")
    for u in range(3):
        assert decode(p, [u] * p.n).makespan == pytest.approx(p.dur[:, u].sum())


def test_mapping_forms_agree():
    p = instances.load("topcuoglu2002")
    arr = [0, 1, 2, 0, 1, 2, 0, 1, 2, 0]
    by_name = {t: p.device_names[u] for t, u in zip(p.task_names, arr)}
    by_inputs = {t: {d: [0]} for t, d in by_name.items()}
    assert decode(p, arr).jobs == decode(p, by_name).jobs == decode(p, by_inputs).jobs


def test_bad_orders_and_mappings():
    p = instances.load("topcuoglu2002")
    with pytest.raises(ValueError, match="topological"):
        Decoder(p, list(reversed(range(p.n))))
    with pytest.raises(ValueError, match="permutation"):
        Decoder(p, [0] * p.n)
    with pytest.raises(InfeasibleError, match="unknown device"):
        as_owner(p, {"t1": "p7"})
    with pytest.raises(InfeasibleError, match="has inputs on no device"):
        as_owner(p, {"t1": "p1"})


def test_infeasibility_reasons():
    d = instances.load("topcuoglu2002").to_dict()
    d["links"] = [ln for ln in d["links"] if {ln["a"], ln["b"]} != {"p1", "p2"}]
    d["devices"][2]["memory"] = 10
    d["tasks"][0]["weight_bytes"] = 11
    p = Problem.from_dict(d)
    dec = Decoder(p)
    assert "no link" in dec.infeasibility(np.array([[0]] + [[1]] * 9))
    assert "memory" in dec.infeasibility(np.array([[2]] * 10))


def test_batched_jobs_wait_only_for_their_own_inputs():
    """Input 1's child may start before input 0's parent job ends."""
    p = Problem.from_dict({
        "format": "mapsched.problem/1",
        "objective": {"kind": "throughput", "batch": 2},
        "devices": [{"name": "a"}, {"name": "b"}],
        "links": [{"a": "a", "b": "b", "bandwidth": 1e9}],
        "tasks": [{"name": "x", "latency": {"a": 1, "b": 5}}, {"name": "y", "latency": {"a": 1, "b": 1}}],
        "edges": [{"src": "x", "dst": "y", "bytes": 0}],
    })
    s = decode(p, np.array([[0, 1], [0, 1]]))  # input 0 on a, input 1 on b, for both tasks
    assert validate(p, s) == []
    ends = {(j.task, j.device): j.end for j in s.jobs}
    assert ends == {("x", "a"): 1, ("x", "b"): 5, ("y", "a"): 2, ("y", "b"): 6}


@pytest.mark.parametrize("call, error, message", [
    # a float mapping was truncated (1.9: device 1), and bad orders gave bare errors
    (lambda p: decode(p, [1.9] * p.n), InfeasibleError, "mapping: expected device indices (integers)"),
    (lambda p: decode(p, ["p1"] * p.n), InfeasibleError, "mapping: expected device indices (integers)"),
    (lambda p: decode(p, [0] * p.n, order=[*range(p.n - 1), p.n]), OptionError, "order: expected a permutation"),
    (lambda p: decode(p, {t: {"p1": [0.5]} for t in p.task_names}), InfeasibleError, "input 0.5 is not in 0..0"),
    (lambda p: decode(p, {t: ["p1"] for t in p.task_names}), InfeasibleError, "unknown device ['p1']"),
])
def test_wrong_mappings_and_orders_are_one_line_errors(call, error, message):
    with pytest.raises(error, match=re.escape(message)):
        call(instances.load("topcuoglu2002"))
