"""The work-conserving runtime model (issue 28): hand timeline, properties, refusals."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import problems, random_owner

from mapsched import Device, Edge, InfeasibleError, Link, Objective, OptionError, Problem, System, Task, validate
from mapsched.bounds import lower_bound
from mapsched.generators import random_dag
from mapsched.scheduling.decoder import Decoder
from mapsched.scheduling.simulate import simulate


def hand_problem():
    """Two devices, 1 ms per 1000 bytes between them; every task as fast on both."""
    t = {"s1": 2, "s2": 1, "z": 1, "x": 1, "w": 1, "y": 2, "f": 1}
    tasks = [Task(k, {"a": v, "b": v}) for k, v in t.items()]
    edges = [Edge("s1", "z", 1000), Edge("s2", "x", 1000), Edge("s2", "w", 1000), Edge("s1", "y", 1000),
             Edge("y", "f", 1000), Edge("w", "f", 1000)]
    return Problem(tasks, edges, System((Device("a"), Device("b")), (Link("a", "b", 1e6),)), name="hand")


def test_hand_timeline():
    p = hand_problem()
    s = simulate(p, {"s1": "a", "s2": "a", "z": "a", "x": "a", "w": "a", "y": "b", "f": "b"})
    # a: s1 and s2 both ready at 0, s1 listed first. At 2, z (ready 2) queues behind s2 (ready 0).
    # At 3 s2 ends, x and w arrive (3); z, ready earliest, goes first; x and w tie at 3: x, listed first.
    # b: y's data leaves a at 2 and arrives at 3; f waits for y (5, same device) and w (6 + 1).
    got = {j.task: (j.device, j.start, j.end) for j in s.jobs}
    assert got == {"s1": ("a", 0, 2), "s2": ("a", 2, 3), "z": ("a", 3, 4), "y": ("b", 3, 5),
                   "x": ("a", 4, 5), "w": ("a", 5, 6), "f": ("b", 7, 8)}
    assert [j.task for j in s.jobs] == ["s1", "s2", "z", "y", "x", "w", "f"]  # start order
    assert s.makespan == 8 and s.method == "simulate"
    assert validate(p, s) == []


def test_work_conserving_differs_from_the_static_order():
    p = hand_problem()
    # Priority order f-first is impossible; give the decoder s2 before s1: a static list
    # schedule keeps that order on device a, the runtime starts s1, listed first.
    owner = np.array([0, 0, 0, 0, 0, 1, 1])
    static = Decoder(p, [1, 0, 2, 3, 4, 5, 6]).schedule(owner[:, None])
    assert [j.task for j in static.jobs][:2] == ["s2", "s1"]
    assert simulate(p, owner).jobs[0].task == "s1"


@given(problems(throughput=False), st.integers(0, 2**32 - 1))
def test_random_mappings(p, seed):
    rng = np.random.default_rng(seed)
    for owner in (p.planted[:, 0], random_owner(p, rng)[:, 0]):
        if Decoder(p).infeasibility(owner[:, None]) is not None:
            with pytest.raises(InfeasibleError, match="mapping is infeasible"):
                simulate(p, owner)
            continue
        s = simulate(p, owner)
        assert validate(p, s) == []
        # The decoder, given the mapping and the simulated start order, gives the same schedule.
        order = [p.task_index[j.task] for j in s.jobs]
        assert Decoder(p, order).schedule(owner[:, None]).jobs == s.jobs
        assert lower_bound(p).value <= s.makespan * (1 + 1e-9)


def test_larger_graph_matches_the_decoder():
    p = random_dag(2000, 4, seed=3)
    owner = np.random.default_rng(0).integers(4, size=p.n)
    s = simulate(p, owner)
    assert validate(p, s) == []
    assert Decoder(p, [p.task_index[j.task] for j in s.jobs]).schedule(owner[:, None]).jobs == s.jobs


def test_noise_is_seeded_and_unbiased_in_mean():
    p = random_dag(200, 3, seed=1)
    owner = np.arange(p.n) % 3
    base = simulate(p, owner)
    assert simulate(p, owner, noise=0.0).jobs == base.jobs
    a, b = simulate(p, owner, noise=0.2, rng=5), simulate(p, owner, noise=0.2, rng=np.random.default_rng(5))
    assert a.jobs == b.jobs and a.makespan != base.makespan
    assert simulate(p, owner, noise=0.2, rng=6).makespan != a.makespan
    spans = [simulate(p, owner, noise=0.1, rng=k).makespan for k in range(20)]
    assert 0.8 * base.makespan < np.mean(spans) < 1.2 * base.makespan


def test_refusals_name_the_task():
    p = hand_problem()
    full = {t: "a" for t in p.task_names}
    with pytest.raises(InfeasibleError, match="task 'f' has inputs on no device"):
        simulate(p, {k: v for k, v in full.items() if k != "f"})
    with pytest.raises(InfeasibleError, match="task 'x' is on no device"):
        simulate(p, [0, 0, 0, -1, 0, 0, 0])
    with pytest.raises(InfeasibleError, match="unknown device 'c'"):
        simulate(p, {**full, "w": "c"})
    # a latency task given two devices ran on the last one named
    with pytest.raises(InfeasibleError, match=r"mapping\['w'\]: input 0 is on both 'a' and 'b'"):
        simulate(p, {**full, "w": {"a": (0,), "b": (0,)}})
    with pytest.raises(OptionError, match="--noise"):
        simulate(p, full, noise=-1)
    # past 30 the draws overflowed to NaN durations, on which the event loop never ended
    with pytest.raises(OptionError, match="--noise: at most 5"):
        simulate(p, full, noise=1e308, rng=2)
    assert np.isfinite(simulate(p, full, noise=5.0, rng=2).makespan)
    with pytest.raises(OptionError, match="GiPH's noise is a fraction of each time, at most 1; got 6"):  # "at most 5"
        simulate(p, full, noise=6, noise_model="giph")
    with pytest.raises(OptionError, match="--noise: expected a non-negative number, got '0.1'"):  # TypeError
        simulate(p, full, noise="0.1")
    with pytest.raises(OptionError, match="rng: expected a numpy Generator or a seed of at least 0"):
        simulate(p, full, noise=0.1, rng=-1)
    q = Problem([Task("x", {"a": 1}), Task("y", {"a": 1, "b": 1}, weight_bytes=10)], [Edge("x", "y", 1)],
                System((Device("a"), Device("b", memory=5))))
    with pytest.raises(InfeasibleError, match="task 'x' cannot run on device 'b'"):
        simulate(q, [1, 0])
    with pytest.raises(InfeasibleError, match="device 'b' needs 10 bytes of memory, has 5"):
        simulate(q, [0, 1])
    r = Problem([Task("x", {"a": 1, "b": 1}), Task("y", {"a": 1, "b": 1})], [Edge("x", "y", 1)],
                System((Device("a"), Device("b"))))
    with pytest.raises(InfeasibleError, match="edge 'x' -> 'y' crosses from 'a' to 'b', which have no link"):
        simulate(r, [0, 1])
    thr = Problem([Task("x", {"a": 1})], [], System((Device("a"),)), Objective("throughput", 1))
    with pytest.raises(OptionError, match="latency problems only"):
        simulate(thr, [0])


def test_empty_and_zero_time_tasks():
    p = Problem([Task("x", {"a": 0}), Task("y", {"a": 0}), Task("z", {"a": 1})], [Edge("x", "y"), Edge("y", "z")],
                System((Device("a"),)))
    s = simulate(p, [0, 0, 0])
    assert [(j.task, j.start, j.end) for j in s.jobs] == [("x", 0, 0), ("y", 0, 0), ("z", 0, 1)]
    assert validate(p, s) == []


def test_simulate_sums_a_transfer_as_the_decoder_does():
    # 0.1 + 0.2 + 0.3 is 0.6000000000000001 summed from the left and 0.6 with the transfer
    # (0.2 ms latency, 300 bytes at 1 MB/s) summed first: both must sum alike, so that the
    # decoder on the simulated order gives the same schedule bit for bit.
    devs = (Device("d0"), Device("d1"))
    p = Problem([Task("a", {"d0": 0.1}, output_bytes=300), Task("b", {"d1": 1.0})], [Edge("a", "b")],
                System(devs, (Link("d0", "d1", 1e6, 0.2),)))
    owner = np.array([0, 1])
    s = simulate(p, owner)
    assert Decoder(p, [0, 1]).schedule(owner[:, None]).jobs == s.jobs
    assert validate(p, s) == []
