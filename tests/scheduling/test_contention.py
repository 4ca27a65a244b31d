"""Transfers that take turns (issue 69): the format's fields, the validator's rules 8 and 9,
and every method's schedule valid under contention."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mapsched
from mapsched import Device, Edge, Link, Problem, ProblemError, System, Task, Transfer, solve, validate
from mapsched.bounds import lower_bound
from mapsched.model.schedule import Schedule
from mapsched.scheduling.decoder import decode, ready_order
from mapsched.scheduling.simulate import simulate
from tests.strategies import problems, random_owner

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def contended(p: Problem, concurrency: int | None, engines: int | None, duplex: bool = True) -> Problem:
    """``p`` with every link's concurrency and every device's copy engines set."""
    d = p.to_dict()
    for dev in d["devices"]:
        if engines is not None:
            dev["copy_engines"] = engines
    for ln in d["links"]:
        if concurrency is not None:
            ln["concurrency"] = concurrency
        ln["duplex"] = duplex
    return Problem.from_dict(d)


KINDS = st.sampled_from([(1, 0, True), (1, None, True), (None, 0, True), (2, 1, True), (1, 2, False), (None, 1, True)])


def two_copies() -> Problem:
    """x and y on a, z on b, 4 ms copies of each into z over one link."""
    return Problem([Task("x", {"a": 1}), Task("y", {"a": 1}), Task("z", {"b": 1})],
                   [Edge("x", "z", 4000), Edge("y", "z", 4000)],
                   System((Device("a", copy_engines=0), Device("b")), (Link("a", "b", 1e6, concurrency=1),)))


def test_fields_round_trip_and_stay_out_when_absent():
    p = two_copies()
    d = p.to_dict()
    assert d["devices"][0]["copy_engines"] == 0 and "copy_engines" not in d["devices"][1]
    assert d["links"][0]["concurrency"] == 1 and "duplex" not in d["links"][0]
    assert Problem.from_dict(d) == p and Problem.from_dict(d).contended
    plain = mapsched.instances.load("topcuoglu2002")
    assert not plain.contended
    text = str(plain.to_dict())
    assert "copy_engines" not in text and "concurrency" not in text and "duplex" not in text


@pytest.mark.parametrize(("where", "value", "field"), [
    ("link", {"concurrency": 0}, "links[0].concurrency"),
    ("link", {"concurrency": 1.5}, "links[0].concurrency"),
    ("link", {"concurrency": True}, "links[0].concurrency"),
    ("link", {"duplex": "yes"}, "links[0].duplex"),
    ("device", {"copy_engines": -1}, "devices[0].copy_engines"),
    ("device", {"copy_engines": 10**6}, "devices[0].copy_engines"),
])
def test_bad_fields_name_the_field(where, value, field):
    d = two_copies().to_dict()
    (d["links"][0] if where == "link" else d["devices"][0]).update(value)
    with pytest.raises(ProblemError, match=field.replace("[", r"\[").replace("]", r"\]")):
        Problem.from_dict(d)


def test_copies_take_turns_on_the_link_and_the_device():
    p = two_copies()
    s = decode(p, [0, 0, 1])
    assert validate(p, s) == []
    assert sorted((t.src, t.start, t.end) for t in s.transfers) == [("x", 2.0, 6.0), ("y", 6.0, 10.0)]
    assert s.makespan == 11.0  # y's copy waits for x's, and both wait for y's job on a
    free = Problem.from_dict({**p.to_dict(), "devices": [{"name": "a"}, {"name": "b"}],
                              "links": [{"a": "a", "b": "b", "bandwidth": 1e6}]})
    assert decode(free, [0, 0, 1]).makespan == 7.0 and not decode(free, [0, 0, 1]).transfers
    assert Schedule.from_dict(s.to_dict()).transfers == s.transfers


def test_validator_catches_each_break():
    p = two_copies()
    s = decode(p, [0, 0, 1])
    jobs = {j.task: j for j in s.jobs}
    assert jobs["x"].end == 1.0

    def broken(transfers):
        return [v.rule for v in validate(p, Schedule(p.name, s.jobs, s.makespan, transfers=transfers))]

    # the two copies at once on a link of concurrency 1, and beside x's job on a device without copy engines
    both = [Transfer("x", "z", 1.0, 5.0), Transfer("y", "z", 2.0, 6.0)]
    assert 9 in broken(both)
    assert broken([Transfer("x", "z", 1.0, 5.0), Transfer("y", "z", 6.0, 10.0)]) == [9]  # x's copy while y runs
    assert broken([Transfer("x", "z", 2.0, 6.0)]) == [8]  # y's copy missing
    assert 8 in broken([Transfer("x", "z", 2.0, 5.0), Transfer("y", "z", 6.0, 10.0)])  # too short
    assert 8 in broken([Transfer("x", "z", 0.5, 4.5), Transfer("y", "z", 6.0, 10.0)])  # leaves before x ends
    assert 8 in broken([*s.transfers, Transfer("x", "y", 0.0, 1.0)])  # no such edge
    assert broken(s.transfers) == []


def test_engines_and_channels_have_their_capacity():
    """Two copies from two devices into one with one copy engine take turns; with two they overlap."""
    for engines, want in ((1, 9.0), (2, 5.0)):
        p = Problem([Task("x", {"a": 1}), Task("y", {"b": 1}), Task("z", {"c": 0})],
                    [Edge("x", "z", 4000), Edge("y", "z", 4000)],
                    System((Device("a"), Device("b"), Device("c", copy_engines=engines)),
                           (Link("a", "c", 1e6), Link("b", "c", 1e6))))
        s = decode(p, [0, 1, 2])
        assert validate(p, s) == [] and s.makespan == want
        assert simulate(p, [0, 1, 2]).makespan == want


@SETTINGS
@given(problems(max_tasks=9, max_devices=3, transfers=20.0), KINDS, st.booleans(), st.integers(0, 2**16))
def test_decoder_builder_and_simulate_are_valid(p0, kind, insertion, seed):
    p = contended(p0, *kind)
    owner = random_owner(p0, np.random.default_rng(seed))
    if decode_ok(p, owner):
        s = decode(p, owner, insertion=insertion)
        assert validate(p, s) == []
        assert s.makespan >= decode(p0, owner, insertion=insertion).makespan - 1e-9 or insertion
        assert validate(p, simulate(p, owner)) == []
    for method in ("heft", "peft", "cpop", "m-etf", "random"):
        try:
            r = solve(p, method)
        except mapsched.InfeasibleError:  # random: none of its samples fit memory and links
            assert method == "random"
            continue
        assert validate(p, r) == [], method
        assert r.lower_bound <= r.makespan + 1e-6


def decode_ok(p: Problem, owner: np.ndarray) -> bool:
    from mapsched.scheduling.decoder import Decoder

    return Decoder(p).infeasibility(owner) is None


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems(max_tasks=8, max_devices=3, transfers=20.0, tight=True), KINDS)
def test_every_method_is_valid_under_contention(p0, kind):
    """Methods that time without contention are re-timed by solve; every result is valid and
    keeps a sound bound."""
    p = contended(p0, *kind)
    for method in ("auto", "exact", "split", "lns", "sa", "cp-search"):
        r = solve(p, method, time_limit=2, threads=1)
        assert validate(p, r) == [], method
        assert r.lower_bound <= r.makespan + 1e-6
    assert lower_bound(p).value <= solve(p, "heft").makespan + 1e-6


@SETTINGS
@given(problems(max_tasks=9, max_devices=3, transfers=20.0), st.integers(0, 2**16))
def test_capacity_that_never_binds_gives_todays_schedule(p0, seed):
    """The contended timing with more lanes than transfers is today's, bit for bit: the same
    first-fit insertion, and simulate's same dispatch."""
    p = contended(p0, 1024, 1024)
    owner = random_owner(p0, np.random.default_rng(seed))
    if not decode_ok(p0, owner):
        return
    for insertion in (False, True):
        a, b = decode(p0, owner, insertion=insertion), decode(p, owner, insertion=insertion)
        assert [(j.task, j.start, j.end) for j in a.jobs] == [(j.task, j.start, j.end) for j in b.jobs]
    assert simulate(p0, owner).makespan == pytest.approx(simulate(p, owner).makespan, rel=1e-12)


@SETTINGS
@given(problems(max_tasks=7, max_devices=3, throughput=True, transfers=20.0), KINDS, st.integers(0, 2**16))
def test_batched_transfers_are_valid(p0, kind, seed):
    """A transfer of k inputs carries k times the bytes; batched jobs' copies take turns too."""
    p = contended(p0, *kind)
    owner = random_owner(p0, np.random.default_rng(seed))  # p0 carries the planted mapping
    if decode_ok(p, owner):
        assert validate(p, decode(p, owner, insertion=True)) == []
    assert validate(p, solve(p, "bheft")) == []


def test_with_contention_per_device_and_link():
    p = mapsched.instances.load("topcuoglu2002")
    q = p.with_contention({"p1": 0}, {("p1", "p2"): 1}, duplex=False)
    assert q.copy_engines == (0, None, None) and q.channel_lanes == (1,)
    assert q.channel[0][1] == q.channel[1][0] == 0 and q.channel[0][2] == -1
    assert not q.with_contention().contended and q.with_contention().name == p.name
    with pytest.raises(ProblemError, match="copy_engines: unknown device 'gpu'"):
        p.with_contention({"gpu": 0})


def early_and_late() -> Problem:
    """A's 12 ms copy is ready first, but A waits for z until 18; B's 4 ms copy is ready at 3
    and B starts first: sent as its data is ready, A's copy keeps its turn on the one link."""
    tasks = [Task("x", {"a": 1}), Task("y", {"a": 2}), Task("z", {"c": 18}), Task("A", {"b": 10}), Task("B", {"b": 1})]
    edges = [Edge("x", "A", 12000), Edge("y", "B", 4000), Edge("z", "A", 0)]
    return Problem(tasks, edges, System((Device("a"), Device("b"), Device("c")),
                                        (Link("a", "b", 1e6, concurrency=1), Link("c", "b", 1e6))))


def test_sending_ahead_keeps_an_early_copy_its_turn():
    from mapsched.scheduling.decoder import Decoder
    from mapsched.scheduling.retime import redecoded

    p = early_and_late()
    owner = np.array([[0], [0], [2], [1], [1]])
    run = simulate(p, owner[:, 0])
    assert run.makespan == pytest.approx(28.0)
    by_start = [0, 2, 1, 4, 3]  # x, z, y, B, A
    late = Decoder(p, by_start, insertion=True).schedule(owner)
    sent = Decoder(p, by_start, insertion=True, send=True).schedule(owner)
    # Placed with B, B's copy takes the link at 3, A's waits until 7 and A starts at 19.
    assert late.makespan == pytest.approx(29.0) and sent.makespan == pytest.approx(28.0)
    assert validate(p, late) == [] and validate(p, sent) == []
    assert redecoded(p, run).makespan == pytest.approx(28.0)


@SETTINGS
@given(problems(max_tasks=9, max_devices=3, transfers=20.0), KINDS, st.integers(0, 2**16))
def test_decodes_that_send_ahead_are_valid(p0, kind, seed):
    from mapsched.scheduling.decoder import Decoder
    from mapsched.scheduling.retime import redecoded

    p = contended(p0, *kind)
    owner = random_owner(p0, np.random.default_rng(seed))
    if not decode_ok(p, owner):
        return
    order = ready_order(p, np.random.default_rng(seed).permutation(p.n))
    assert validate(p, Decoder(p, order, insertion=True, send=True).schedule(owner)) == []
    run = simulate(p, owner)
    again = redecoded(p, run)  # the better of the two decodes in the run's start order
    assert validate(p, again) == []
    starts = np.array([min(j.start for j in run.jobs if j.task == name) for name in p.task_names])
    late = Decoder(p, ready_order(p, -starts), insertion=True).schedule(owner)
    assert again.makespan <= late.makespan


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems(max_tasks=9, max_devices=3, transfers=20.0), KINDS, st.integers(0, 2**16))
def test_cp_search_with_turns_is_never_worse_than_its_start(p0, kind, seed):
    """``cp-search`` finds its moves on the timing without the turns but judges each with them,
    so from any start (here a random mapping decoded with insertion, sending ahead, which its
    own decodes do not) it ends no later, and valid."""
    from mapsched.engine.context import SolveContext
    from mapsched.heuristics.critical_path_search import improve
    from mapsched.scheduling.decoder import Decoder

    p = contended(p0, *kind)
    owner = random_owner(p0, np.random.default_rng(seed))
    if not decode_ok(p, owner):
        return
    start = Decoder(p, ready_order(p, np.arange(p.n)), insertion=True, send=True).schedule(owner)
    r = improve(p, start, SolveContext(), moves=50)
    assert validate(p, r) == [] and r.makespan <= start.makespan + 1e-9


def test_retimed_keeps_the_bound_and_marks_the_log():
    from mapsched.scheduling.retime import retimed

    p = mapsched.instances.load("topcuoglu2002")
    q = p.with_contention(0, 1)
    free = solve(p, "heft")
    free.lower_bound = 42.0
    r = retimed(q, free)
    assert validate(q, r) == [] and r.lower_bound == 42.0 and r.makespan >= free.makespan
    assert "re-timed with transfers taking turns" in r.log
    assert retimed(q, r) is r  # already valid under contention: kept


def test_auto_is_never_worse_than_the_contiguous_fill():
    """The default takes m-TOPO's fills among its starts, so it never loses to them."""
    from mapsched.scheduling.construct import topo_placement
    from mapsched.scheduling.decoder import Decoder

    p = mapsched.generators.random_dag(60, 4, seed=3).with_contention(0, 1)
    r = solve(p, time_limit=2)
    assert validate(p, r) == [] and r.method.startswith("auto: ")
    placed = topo_placement(p, "memory")
    fill = Decoder(p, placed.order, insertion=True).schedule(placed.owner[:, None])
    assert r.makespan <= fill.makespan + 1e-9


@SETTINGS
@given(p0=problems(max_tasks=8, max_devices=3, transfers=20.0), kind=KINDS)
def test_fused_fills_are_valid_and_the_default_never_loses_to_them(p0, kind):
    """Each fused fill (``heft`` on a fusion of the topological order, expanded) is a valid
    schedule under the turns, and the default, which takes them among its starts, is never
    worse than any of them."""
    from mapsched.engine.context import SolveContext
    from mapsched.heuristics.auto import _fused

    p = contended(p0, *kind)
    fills = list(_fused(p, SolveContext(), 0.0))
    for _, t in fills:
        assert validate(p, t) == []
    r = solve(p, moves=20, seed=0)
    assert validate(p, r) == []
    assert all(r.makespan <= t.makespan + 1e-9 for _, t in fills)


def test_a_fused_fill_starts_the_default_where_copies_take_the_accelerators():
    """On a layer graph whose accelerators make their own copies (``copy_engines: 0``), a fused
    fill keeps pieces of the graph whole on a device and beats every list scheduler: the
    default starts from it."""
    p0 = mapsched.instances.load("real/inception-v3-layer")
    whole = float((p0.weight + p0.act).sum())
    p = p0.with_contention({d: 0 for u, d in enumerate(p0.device_names) if p0.mem[u] < whole})
    r = solve(p, moves=20, seed=0)
    assert validate(p, r) == [] and r.method.startswith("auto: fused heft (")
    assert r.makespan < min(solve(p, m).makespan for m in ("heft", "peft", "cpop", "m-etf"))


def test_auto_improves_large_contended_problems_with_lns():
    """Past 300 jobs the default's last stage is ``lns`` with the turns, from the contention-free
    placement re-timed: its result is valid as found (not re-timed) and never worse."""
    p = mapsched.generators.random_dag(320, 4, seed=1).with_contention(copy_engines=0)
    r = solve(p, time_limit=6, seed=0)
    assert r.method.endswith(", lns") and "lns: " in r.log.splitlines()[-1]
    assert validate(p, r) == [] and r.makespan <= solve(p, "heft").makespan


def test_cli_simulate_and_generate_with_contention(tmp_path, capsys):
    from mapsched.cli import main

    sched, out, prob = tmp_path / "s.json", tmp_path / "o.json", tmp_path / "p.json"
    assert main(["solve", "builtin:topcuoglu2002", "-m", "heft", "-o", str(sched)]) == 0
    assert main(["simulate", "builtin:topcuoglu2002", str(sched), "-o", str(out),
                 "--contention", "copy_engines=0,concurrency=1"]) == 0
    assert "with transfers taking turns" in capsys.readouterr().out
    p = mapsched.instances.load("topcuoglu2002").with_contention(0, 1)
    s = Schedule.read(str(out))
    assert validate(p, s) == [] and s.transfers and s.makespan > Schedule.read(str(sched)).makespan
    assert main(["generate", "vgg", "--system", "4-gpu-server", "--contention", "hardware", "-o", str(prob)]) == 0
    q = Problem.read(str(prob))
    assert q.contended and q.copy_engines[q.device_index["gpu0"]] == 2 and q.copy_engines[q.device_index["cpu"]] is None
    assert set(q.channel_lanes) == {1}


@pytest.mark.parametrize(("argv", "message"), [
    (["simulate", "builtin:topcuoglu2002", "s.json", "-o", "o.json", "--contention", "copy_engines=-1"],
     "copy_engines: expected an integer from 0 to 1024"),
    (["simulate", "builtin:topcuoglu2002", "s.json", "-o", "o.json", "--contention", "lanes=2"], "expected none"),
    (["simulate", "builtin:topcuoglu2002", "s.json", "-o", "o.json", "--contention", "duplex=maybe"],
     "duplex: expected true or false"),
    (["generate", "random-dag", "-o", "p.json", "--contention", "hardware"], "is of no system preset"),
])
def test_cli_refuses_bad_contention_in_one_line(tmp_path, monkeypatch, capsys, argv, message):
    from mapsched.cli import main

    monkeypatch.chdir(tmp_path)
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's refusal
        code = exc.code
    err = capsys.readouterr().err
    assert code != 0 and message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "p.json").exists() and not (tmp_path / "o.json").exists()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems(max_tasks=5, max_devices=3, transfers=20.0), KINDS)
def test_exact_meets_the_exhaustive_contended_optimum(p0, kind):
    """exact's model of transfers taking turns, re-timed in the solver's order, reaches the
    optimum of exhaustive search; the bound stays below it and every heuristic above."""
    from tests.exhaustive import contended_optimum

    p = contended(p0, *kind)
    opt = contended_optimum(p)
    r = solve(p, "exact", threads=1)
    assert validate(p, r) == []
    assert r.makespan == pytest.approx(opt, rel=1e-6, abs=1e-9)
    assert r.status == "optimal" and r.lower_bound <= opt + 1e-6 * max(1.0, opt)
    assert lower_bound(p).value <= opt + 1e-6 * max(1.0, opt)
    for method in ("heft", "peft", "cpop", "m-etf"):
        assert solve(p, method).makespan >= opt - 1e-6 * max(1.0, opt), method


def test_highs_backend_refuses_contention():
    p = two_copies()
    with pytest.raises(mapsched.OptionError, match="--backend: highs's model lets transfers overlap"):
        solve(p, "exact", backend="highs")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems(max_tasks=5, max_devices=3, transfers=20.0, tight=True), KINDS)
def test_copy_load_bound_is_below_the_exhaustive_optimum(p0, kind):
    from mapsched.bounds import copy_load_bound
    from tests.exhaustive import contended_optimum

    p = contended(p0, *kind)
    opt = contended_optimum(p)
    assert copy_load_bound(p) <= opt + 1e-6 * max(1.0, opt)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems(min_tasks=8, max_tasks=25, max_devices=4, transfers=20.0, tight=True), KINDS)
def test_copy_load_bound_is_below_every_heuristic(p0, kind):
    from mapsched.bounds import copy_load_bound

    p = contended(p0, *kind)
    b = copy_load_bound(p)
    for method in ("heft", "peft", "m-etf", "sa"):
        assert b <= solve(p, method).makespan + 1e-6


def test_copy_load_bound_sees_the_copies_memory_forces():
    """The docstring's case: the load bound and the memory rules see 1 ms; the copy-load 5."""
    from mapsched.bounds import copy_load_bound, load_bound

    p = Problem([Task("x", {"a": 1}, 0, 0, 1), Task("y", {"a": 1, "b": 1}, 0, 0, 1)], [Edge("x", "y", 4000)],
                System((Device("a", memory=1, copy_engines=0), Device("b")), (Link("a", "b", 1e6),)))
    assert copy_load_bound(p) == pytest.approx(5.0, rel=1e-6) and load_bound(p) < 2.0
    assert lower_bound(p).rule in ("copy-load", "transfer-path") and lower_bound(p).value >= 5.0 - 1e-6
    assert copy_load_bound(p.with_contention()) == 0.0


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems(max_tasks=12, max_devices=4, min_tasks=2, transfers=20.0, tight=True), KINDS,
       st.integers(2, 8), st.integers(0, 99))
def test_lns_with_turns_builds_valid_schedules_never_worse(p0, kind, size, seed):
    """``lns`` itself (not ``solve``'s re-timing) times the transfers taking turns: its own
    schedule validates under contention and never ends after its start, with neighbourhoods
    smaller than the problem (a prefix, fixed transfers, a suffix summed up by its tails)."""
    from mapsched.heuristics.lns import improve_lns
    from mapsched.solve import SolveContext

    p = contended(p0, *kind)
    start = decode(p, p0.planted[:, 0])
    r = improve_lns(p, start, SolveContext(rng=np.random.default_rng(seed)), steps=10, size=size, slice_=0.02)
    assert validate(p, r) == []
    assert r.makespan <= start.makespan


@SETTINGS
@given(problems(max_tasks=12, max_devices=4, min_tasks=2, transfers=20.0), KINDS, st.integers(0, 2**16))
def test_lns_tails_with_turns_are_the_incumbents_longest_paths(p0, kind, seed):
    """Every job's start plus its tail (jobs, transfers and one-lane resources in their order)
    stays within the makespan, and a job ending last meets it: the tails the neighbourhoods'
    models rely on are tight for the incumbent."""
    from mapsched.heuristics.lns import _Incumbent

    p = contended(p0, *kind)
    owner = random_owner(p0, np.random.default_rng(seed))
    if not decode_ok(p, owner):
        return
    inc = _Incumbent(p, owner[:, 0], p.topo)
    reach = inc.start + inc.tails(0)
    assert reach.max() == pytest.approx(inc.cmax, rel=1e-9, abs=1e-9)
    assert (reach <= inc.cmax * (1 + 1e-9) + 1e-9).all()


def test_lns_with_turns_improves_on_heft_and_is_repeatable():
    from mapsched.generators import random_dag

    p = random_dag(120, 4, seed=0).with_contention(copy_engines=0)
    heft = solve(p, "heft")
    a = solve(p, "lns", steps=20, seed=1, threads=1)
    assert validate(p, a) == [] and "re-timed" not in a.log
    assert a.makespan < 0.95 * heft.makespan
    assert solve(p, "lns", steps=20, seed=1, threads=1).jobs == a.jobs


class _FlatLane:
    """The reference: one lane as two flat lists, scanned from ``ready`` on."""

    def __init__(self):
        self.st, self.en = [], []

    def earliest(self, ready, d, insertion):
        from bisect import bisect_right

        st, en = self.st, self.en
        if not insertion:
            return en[-1] if en and en[-1] > ready else ready
        s = ready
        for q in range(bisect_right(en, ready), len(st)):
            if s + d <= st[q]:
                break
            if en[q] > s:
                s = en[q]
        return s

    def reserve(self, s, e):
        from bisect import bisect_left

        q = bisect_left(self.st, s)
        while q < len(self.st) and self.st[q] == s and self.en[q] <= e:
            q += 1
        self.st.insert(q, s)
        self.en.insert(q, e)

    def release(self, s, e):
        q = next(q for q in range(len(self.st)) if self.st[q] == s and self.en[q] == e)
        del self.st[q], self.en[q]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 50), st.sampled_from([0.0, 0.5, 1.0, 2.5, 7.0]), st.booleans()),
                min_size=1, max_size=80),
       st.integers(2, 5), st.booleans(), st.integers(0, 2**16))
def test_a_lane_in_blocks_answers_as_the_flat_scan(steps, block, insertion, seed):
    """A lane kept in blocks with their longest gaps (blocks of 2-5 intervals here, so that
    searches skip blocks, blocks split and empty) gives the flat scan's earliest start, to
    the bit, through reservations and releases (a trial's reserve-then-release)."""
    from mapsched.scheduling import contention

    old, contention._BLOCK = contention._BLOCK, block
    try:
        lane, flat = contention._Lane(), _FlatLane()
        rng = np.random.default_rng(seed)
        held = []
        for ready, d, keep in steps:
            s = lane.earliest(ready, d, insertion)
            assert s == flat.earliest(ready, d, insertion)
            lane.reserve(s, s + d)
            flat.reserve(s, s + d)
            if keep:
                held.append((s, s + d))
            else:  # tried, then released
                lane.release(s, s + d)
                flat.release(s, s + d)
            if held and rng.random() < 0.15:
                a, b = held.pop(int(rng.integers(len(held))))
                lane.release(a, b)
                flat.release(a, b)
            assert [x for b in lane.starts for x in b] == flat.st
            assert [x for b in lane.ends for x in b] == flat.en
    finally:
        contention._BLOCK = old
