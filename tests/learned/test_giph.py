"""``giph``: GiPH's gpNet policy (issue 29), its search, training, checkpoints and commands."""

import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from strategies import problems  # noqa: E402

from mapsched import InfeasibleError, OptionError, solve, validate  # noqa: E402
from mapsched.cli import main  # noqa: E402
from mapsched.generators.giph import GiphExperiment, giph_instance  # noqa: E402
from mapsched.learned.giph import (  # noqa: E402
    GIPH_NODE_FEATURES,
    NODE_FEATURES,
    Config,
    GiphNet,
    _slack,
    _Static,
    gpnet,
    load_policy,
    search,
    shipped_policy,
)
from mapsched.learned.giph_training import FamilyMix, GiphSet, Trainer, advantages, generalization  # noqa: E402
from mapsched.learned.reinforce import load_checkpoint, one_thread, save_checkpoint  # noqa: E402
from mapsched.learned.starts import random_placement  # noqa: E402
from mapsched.scheduling.simulate import simulate  # noqa: E402


def _state(p, owner):
    s = simulate(p, owner)
    start, end = np.zeros(p.n), np.zeros(p.n)
    for j in s.jobs:
        start[p.task_index[j.task]], end[p.task_index[j.task]] = j.start, j.end
    return start, end


@settings(max_examples=25, deadline=None)
@given(problems(max_tasks=10, max_devices=4), st.integers(0, 2**31), st.integers(-1, 9))
def test_gpnet_sizes_features_and_mask(p, seed, last):
    owner = p.planted[:, 0]
    start, end = _state(p, owner)
    g = gpnet(_Static(p), owner, start, end, min(last, p.n - 1))
    D = p.can_run.sum(axis=1)
    deg = np.bincount(p.src, minlength=p.n) + np.bincount(p.dst, minlength=p.n)
    assert len(g.task) == D.sum()  # one node per feasible (task, device)
    assert len(g.src) == (D * deg).sum() - p.E  # the paper's edge count
    # every edge touches a pivot and joins the options of a task edge's ends
    pivots = set(g.pivot.tolist())
    assert all(u in pivots or v in pivots for u, v in zip(g.src.tolist(), g.dst.tolist()))
    assert {(a, b) for a, b in zip(g.task[g.src].tolist(), g.task[g.dst].tolist())} == set(
        zip(p.src.tolist(), p.dst.tolist()))
    assert g.x.shape == (D.sum(), len(NODE_FEATURES)) and g.xe.shape == (len(g.src), 4)
    assert np.isfinite(g.x).all() and (np.abs(g.x) <= 1 + 1e-6).all() and (np.abs(g.xe) <= 1 + 1e-6).all()
    assert g.mask.any()  # never empty
    moves = np.flatnonzero(g.mask & ~np.isin(np.arange(len(g.task)), g.pivot))
    for u in moves:  # every move offered keeps the placement feasible
        o = owner.copy()
        o[g.task[u]] = g.device[u]
        simulate(p, o)


def _retime(p, owner, order, took):
    """Makespan of the run with each device's order fixed (``order``: tasks by start) and durations ``took``."""
    end, free = np.zeros(p.n), np.zeros(p.m)
    for i in order:
        ready = max([end[p.src[e]] + (0.0 if owner[p.src[e]] == owner[i] else p.link_latency[owner[p.src[e]], owner[i]]
                     + p.nbytes[e] * p.link_ms_per_byte[owner[p.src[e]], owner[i]]) for e in p.in_edges[i]] + [0.0])
        end[i] = free[owner[i]] = max(ready, free[owner[i]]) + took[i]
    return end.max()


@settings(max_examples=25, deadline=None)
@given(problems(max_tasks=10, max_devices=4))
def test_slack_is_how_much_later_a_task_may_end(p):
    owner = p.planted[:, 0]
    start, end = _state(p, owner)
    st_ = _Static(p)
    slack = _slack(st_, owner, start, end)
    order = np.lexsort((st_.pos, start))
    took = end - start
    span = _retime(p, owner, order, took)
    assert np.isclose(span, end.max()) and np.isclose(slack.min(), 0.0) and (slack >= -1e-9).all()
    for i in range(p.n):  # lengthening a task by its slack keeps the makespan, by a little more delays it
        longer = took.copy()
        longer[i] += slack[i]
        assert _retime(p, owner, order, longer) <= span * (1 + 1e-9) + 1e-9
        longer[i] += 1e-3 * (1 + span)
        assert _retime(p, owner, order, longer) > span


@settings(max_examples=10, deadline=None)
@given(problems(max_tasks=8, max_devices=3), st.integers(0, 100),
       st.sampled_from([Config(), Config(rounds=2), Config(variant="ne"), Config(variant="task-eft")]))
def test_every_variant_searches_feasible_placements(p, seed, cfg):
    with one_thread():
        torch.manual_seed(seed)
        st_ = _Static(p)
        res = search(st_, GiphNet(cfg), random_placement(p, np.random.default_rng(seed)), 2 * p.n,
                     np.random.default_rng(seed))
    s = simulate(p, res.owner)
    assert validate(p, s) == [] and s.makespan == res.makespan
    assert res.history == sorted(res.history, reverse=True) and len(res.history) == 2 * p.n + 1


@settings(max_examples=12, deadline=None)
@given(problems(max_tasks=8, max_devices=4), st.integers(0, 100))
def test_solve_is_valid_also_after_device_removal(p, seed):
    r = solve(p, "giph", seed=seed)
    assert validate(p, r) == [] and r.method == "giph"
    gone = p.device_names[seed % p.m]
    if p.m > 1 and all(p.can_run[i].sum() > 1 or not p.can_run[i, seed % p.m] for i in range(p.n)):
        q = p.without_devices([gone])
        try:
            r2 = solve(q, "giph", seed=seed, initial=r)
        except InfeasibleError:  # memory or links may leave the smaller system no placement at all
            return
        assert validate(q, r2) == [] and gone not in {j.device for j in r2.jobs}


def test_shipped_policy_is_deterministic_and_warm_start_never_worse():
    p = giph_instance(10, 0.3, 0.1, seed=7, m=8)
    net, data = load_policy()
    assert data["features"]["node"] and sum(t.numel() for t in net.parameters()) < 1000
    a = solve(p, "giph", seed=4)
    b = solve(p, "giph", seed=4)
    assert a.jobs == b.jobs and validate(p, a) == []
    h = solve(p, "heft")
    w = solve(p, "giph", seed=1, initial=h)
    assert w.makespan <= h.makespan and validate(p, w) == []
    s = solve(p, "giph", seed=1, start="heft")  # from heft's placement, as the runtime model runs it
    assert s.makespan <= simulate(p, h.mapping()).makespan and validate(p, s) == []


@settings(max_examples=15, deadline=None)
@given(problems(max_tasks=9, max_devices=4, transfers=5.0), st.integers(0, 100), st.sampled_from(["best-list", "heft"]),
       st.sampled_from([0, 2]))
def test_giph_is_never_worse_than_its_start(p, seed, start, episodes):
    """Issue 70: the result, fine-tuned on the problem or not, is never above the start's own
    schedule (the better of heft's and peft's by default), nor above the start's placement as
    the runtime model runs it."""
    starts = [solve(p, "heft")] + ([solve(p, "peft")] if start == "best-list" else [])
    first = min(starts, key=lambda s: s.makespan)
    r = solve(p, "giph", seed=seed, start=start, ratio=0.5, episodes=episodes)
    assert validate(p, r) == []
    assert r.makespan <= first.makespan + 1e-9
    assert r.makespan <= simulate(p, first.mapping()).makespan + 1e-9
    assert "returned " in r.log


@pytest.mark.parametrize("variant,rounds,features", [("giph", 0, NODE_FEATURES), ("giph", 3, NODE_FEATURES),
                                                     ("ne", 0, NODE_FEATURES), ("task-eft", 0, NODE_FEATURES),
                                                     ("giph", 0, GIPH_NODE_FEATURES)])
def test_five_training_episodes_change_the_weights(tmp_path, variant, rounds, features):
    small = GiphExperiment("small", tuple(dict(v=4, alpha=0.6, conn_prob=0.2, seed=s) for s in range(3)), (),
                           tuple(dict(m=m, seed=s) for m, s in ((4, 0), (5, 1))), ())
    with one_thread():
        src = GiphSet("multi", 2)
        src.exp, src.specs = small, [(small.train_graphs[0], small.train_networks[0])]
        t = Trainer(Config(variant, rounds, eval_cases=2, eval_every=5, node_features=features), src, seed=3)
        before = {k: v.clone() for k, v in t.net.state_dict().items()}
        started = time.perf_counter()
        t.run(5)
        assert time.perf_counter() - started < 20
    assert t.done == 5 and len(t.curve) == 2
    assert any(not torch.equal(before[k], v) for k, v in t.net.state_dict().items())
    path = str(tmp_path / "p.pt")
    save_checkpoint(path, t.checkpoint())
    net, data = load_policy(path)  # a file of GiPH's 4 node features (as shipped before) loads as trained
    assert net.cfg.node_features == features and data["features"]["node"] == list(features)
    assert all(torch.equal(t.best_policy[k], v) for k, v in net.state_dict().items())


def test_a_cut_first_evaluation_compares_on_its_own_cases(tmp_path):
    small = GiphExperiment("small", tuple(dict(v=4, alpha=0.6, conn_prob=0.2, seed=s) for s in range(3)), (),
                           tuple(dict(m=m, seed=s) for m, s in ((4, 0), (5, 1))), ())
    with one_thread():
        src = GiphSet("multi", 3)
        src.exp, src.specs = small, [(small.train_graphs[g], small.train_networks[g % 2]) for g in range(3)]
        t = Trainer(Config(eval_cases=3), src, seed=3)
        first = t.evaluate(deadline=0.0)  # past the deadline: one case, which is kept
        assert t.evaluated == 1 and t.eval_slr == first
        path = str(tmp_path / "cut.pt")
        save_checkpoint(path, t.checkpoint())
        again = Trainer.resume(load_checkpoint(path, "giph", None), src)
        assert again.evaluated == 1 and again.eval_slr == first
        t.eval_slr = first - 0.5  # a cut best better on its one case: a whole evaluation does not replace it
        whole = t.evaluate()
        assert t.evaluated == 1 and t.eval_slr == first - 0.5 and t.curve == [(0, first), (0, whole)]
        t.eval_slr = first  # as good on that case, and evaluated on all three: replaces it
        assert t.evaluate() == whole and t.evaluated == 3 and t.eval_slr == whole
        assert np.isnan(t.evaluate(deadline=0.0))  # a cut later evaluation does not compare: dropped
        assert t.evaluated == 3 and t.eval_slr == whole


def test_cli_train_resume_solve_and_refusals(tmp_path, capsys):
    prob, pt, out = str(tmp_path / "p.json"), str(tmp_path / "g.pt"), str(tmp_path / "s.json")
    p = giph_instance(10, 0.3, 0.1, seed=2, m=6)
    p.write(prob)
    args = ["--suite", "single", "--eval-cases", "1", "--eval-every", "1", "--seed", "1"]
    assert main(["train", "giph", "--episodes", "1", "-o", pt, "--giph-features", "--gamma", "0.9", *args]) == 0
    assert "1/1 episodes on single" in capsys.readouterr().out
    assert main(["train", "giph", "--episodes", "2", "-o", pt, "--resume", *args]) == 0
    assert "2/2 episodes" in capsys.readouterr().out
    # a time limit within the first evaluation: the cases done count, and the line says how many
    cut = str(tmp_path / "cut.pt")
    assert main(["train", "giph", "--episodes", "5", "-o", cut, "--time-limit", "0.05", "--suite", "single",
                 "--eval-cases", "5"]) == 0
    said = capsys.readouterr().out
    assert "best evaluation SLR" in said and "on 1 of 5 cases (the time limit)" in said
    cfg = load_policy(pt)[0].cfg  # kept by --resume
    assert cfg.node_features == GIPH_NODE_FEATURES and cfg.gamma == 0.9
    assert main(["solve", prob, "-m", "giph", "--policy", pt, "-o", out]) == 0
    assert main(["validate", prob, out]) == 0
    # a checkpoint of other features, and one of other sizes
    data = torch.load(pt, weights_only=True)
    other = str(tmp_path / "other.pt")
    save_checkpoint(other, {**{k: v for k, v in data.items() if k not in ("format", "version")},
                            "features": {"node": ["compute"], "edge": []}})
    sizes = str(tmp_path / "sizes.pt")
    save_checkpoint(sizes, {**{k: v for k, v in data.items() if k not in ("format", "version")},
                            "config": {**data["config"], "variant": "ne"}})
    corrupt = tmp_path / "corrupt.pt"
    corrupt.write_bytes(b"junk")
    diverged = str(tmp_path / "nan.pt")  # what training at too high a rate left (now refused as it trains)
    save_checkpoint(diverged, {**{k: v for k, v in data.items() if k not in ("format", "version")},
                               "policy": {k: torch.full_like(v, float("nan")) for k, v in data["policy"].items()}})
    capsys.readouterr()
    for argv, message in [
        (["solve", prob, "-m", "giph", "--policy", other], "uses other features"),
        (["solve", prob, "-m", "giph", "--policy", sizes], "does not fit the giph network"),
        (["solve", prob, "-m", "giph", "--policy", str(corrupt)], "not a readable policy file"),
        (["solve", prob, "-m", "giph", "--policy", diverged], "gives no finite move probabilities"),
        (["train", "giph", "-o", str(tmp_path / "x.pt"), "--episodes", "20", "--lr", "10", *args],
         "--lr: training diverged after"),
        (["train", "giph", prob, "-o", str(tmp_path / "x.pt")], "--suite"),
        (["train", "giph", "--episodes", "3", "-o", pt, "--resume", "--gamma", "0.5", *args],
         f"--gamma: {pt} keeps 0.9"),  # was silently kept
        (["solve", prob, "-m", "giph", "--noise", "5"], "from 0 to 1"),  # GiPH's noise, a fraction of each time
    ]:
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1
    assert not (tmp_path / "x.pt").exists()


def test_advantage_is_the_return_minus_the_mean_reward_before_the_step():
    assert np.allclose(advantages([1.0, 0.0, 2.0], 1.0), [3.0, 1.0, 1.5])  # returns 3, 2, 2; baselines 0, 1, 0.5
    assert np.allclose(advantages([1.0, 1.0], 0.5), [1.5, 0.0])  # returns 1.5, 1
    assert advantages([], 0.97).shape == (0,)


def test_shipped_file_is_package_data():
    assert shipped_policy().endswith(".pt")
    with pytest.raises(OptionError, match="no file"):
        load_policy(shipped_policy() + ".missing")


@settings(max_examples=10, deadline=None)
@given(problems(max_tasks=8, max_devices=3), st.integers(0, 3))
def test_a_valid_initial_schedule_is_never_made_worse_nor_changed(p, seed):
    import mapsched

    start = mapsched.decode(p, p.planted)
    before = start.to_json()
    r = solve(p, "giph", seed=seed, initial=start)
    assert validate(p, r) == [] and r.makespan <= start.makespan + 1e-9
    assert start.to_json() == before


def test_giph_when_every_task_takes_no_time():
    # its log divided by the critical path, 0 ms here: ZeroDivisionError
    from mapsched import Device, Problem, System, Task

    p = Problem([Task("t0", {"d0": 0.0}), Task("t1", {"d0": 0.0, "d1": 0.0})], [],
                System((Device("d0"), Device("d1")), ()))
    s = solve(p, "giph", seed=0, time_limit=5)
    assert validate(p, s) == [] and s.makespan == 0.0 and "SLR 1;" in s.log


def test_a_requested_stop_ends_the_search_with_the_best_so_far():
    # the search looked only at its deadline: Ctrl-C let 'solve -m giph' run to the time limit
    import threading

    from mapsched.engine import interrupt
    from mapsched.generators import random_dag

    p = random_dag(60, 3, seed=1)
    timer = threading.Timer(1.0, interrupt.request)
    began = time.perf_counter()
    with interrupt.graceful():
        timer.start()
        try:
            s = solve(p, "giph", ratio=1e5, time_limit=600)  # six million steps
        finally:
            timer.cancel()
    assert time.perf_counter() - began < 30
    assert s.interrupted and s.status == "feasible" and validate(p, s) == []


def test_training_on_two_families_then_scoring_a_third_reports_the_columns(tmp_path):
    """Issue 70: a training run on two tiny families, then evaluation on a third (the CI-sized
    version of ``benchmarks/bench_giph_families.py``)."""
    with one_thread():
        t = Trainer(Config(eval_cases=2, eval_every=2), FamilyMix(("random", "layered"), 2, tasks=(5, 8)), seed=0)
        before = {k: v.clone() for k, v in t.net.state_dict().items()}
        started = time.perf_counter()
        t.run(4)
        assert time.perf_counter() - started < 30
    assert t.done == 4 and t.suite == "families:random,layered"
    assert any(not torch.equal(before[k], v) for k, v in t.net.state_dict().items())
    path = str(tmp_path / "mix.pt")
    save_checkpoint(path, t.checkpoint())
    rows = generalization(path, ["random", "giph-alt"], 2, trained=["random", "layered"], tasks=(5, 8))
    assert [(r.family, r.trained, r.cases) for r in rows] == [("random", True, 2), ("giph-alt", False, 2)]
    for r in rows:
        assert 0 <= r.no_worse <= 1 and r.mean_ratio > 0
        assert 0 <= r.worst_gain <= r.median_gain < 1  # never worse than its start
    again = Trainer.resume(load_checkpoint(path, "giph", None), FamilyMix(("random", "layered"), 2, tasks=(5, 8)))
    assert again.done == 4
    with pytest.raises(OptionError, match="trained on 'families:random,layered'"):
        Trainer.resume(load_checkpoint(path, "giph", None), "multi")


def test_fine_tuning_is_never_worse_than_its_start_and_reproducible():
    p = giph_instance(10, 0.3, 0.1, seed=5, m=6)
    first = min(solve(p, m).makespan for m in ("heft", "peft"))
    a = solve(p, "giph", seed=3, episodes=4)
    b = solve(p, "giph", seed=3, episodes=4)
    assert validate(p, a) == [] and a.jobs == b.jobs
    assert a.makespan <= first + 1e-9
    assert "fine-tuned 4 of 4 episodes" in a.log
    started = time.perf_counter()
    c = solve(p, "giph", seed=3, episodes=10**6, time_limit=3)  # stops in time for its search
    assert time.perf_counter() - started < 4.5 and validate(p, c) == [] and c.makespan <= first + 1e-9
    assert "fine-tuned" in c.log and "of 1000000 episodes" in c.log


def test_cli_train_giph_on_families_and_on_problem_files(tmp_path, capsys):
    files = []
    for k in range(2):
        files.append(str(tmp_path / f"p{k}.json"))
        giph_instance(4, 0.6, 0.2, seed=k, m=4).write(files[-1])
    pt = str(tmp_path / "mine.pt")
    small = ["--eval-cases", "1", "--eval-every", "1", "--episodes", "2"]
    assert main(["train", "giph", "--problems", *files, "-o", pt, *small]) == 0
    assert "2/2 episodes on problems:2:" in capsys.readouterr().out
    assert main(["train", "giph", "--problems", *files, "-o", pt, "--resume", *small[:4], "--episodes", "3"]) == 0
    assert "3/3 episodes" in capsys.readouterr().out
    tuned = str(tmp_path / "tuned.pt")  # the shipped policy, trained further on these problems
    assert main(["train", "giph", "--problems", *files, "--init", "multi-diff", "--lr", "0.001", "-o", tuned,
                 *small]) == 0
    assert "best evaluation ratio to heft" in capsys.readouterr().out
    net, data = load_policy(tuned)
    assert data["config"]["lr"] == 0.001 and net.cfg.node_features == load_policy("multi-diff")[0].cfg.node_features
    assert main(["solve", files[0], "-m", "giph", "--policy", pt, "--episodes", "2", "-o",
                 str(tmp_path / "s.json")]) == 0
    assert main(["validate", files[0], str(tmp_path / "s.json")]) == 0
    capsys.readouterr()
    for argv, message in [
        (["train", "giph", "--problems", files[0], "-o", pt, "--resume", *small], "trained on 'problems:2:"),
        (["train", "giph", "--suite", "multi", "--families", "random", "-o", str(tmp_path / "x.pt")],
         "--families: giph trains on one of"),
        (["train", "giph", "--families", "random,mars", "-o", str(tmp_path / "x.pt")], "--families: expected"),
        (["train", "doppler", files[0], "--families", "random", "-o", str(tmp_path / "x.pt")],
         "problem: doppler with --families trains on the families' problems"),
        (["solve", files[0], "-m", "giph", "--episodes", "-1"], "--episodes"),
        (["train", "giph", "--problems", files[0], "--init", "nope.pt", "-o", str(tmp_path / "x.pt")],
         "--init: no file"),
        (["train", "giph", "--problems", files[0], "--init", "mixture", "--variant", "ne", "-o",
          str(tmp_path / "x.pt")], "--variant: --init's policy sets the network"),
    ]:
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1
    assert not (tmp_path / "x.pt").exists()
