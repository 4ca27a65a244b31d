"""``placeto``: the Placeto baseline (per-step re-placement, REINFORCE), its checkpoints and commands.

Small networks (width 16, 2 rounds) and a 40-task graph keep each training to a few seconds.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from strategies import problems

torch = pytest.importorskip("torch")

from mapsched import OptionError, solve, validate  # noqa: E402
from mapsched.cli import main  # noqa: E402
from mapsched.generators import chainmm, ffnn, llama_block, llama_layer, random_dag  # noqa: E402
from mapsched.learned.placeto import Config, Trainer, parse_stages  # noqa: E402
from mapsched.learned.reinforce import load_checkpoint, one_thread, save_checkpoint  # noqa: E402
from mapsched.scheduling.simulate import simulate  # noqa: E402

SMALL = Config(hidden=16, rounds=2)
EPISODES = 40


@pytest.fixture(scope="module")
def problem():
    return random_dag(40, 3, seed=1)


@pytest.fixture(scope="module")
def trained(problem):
    with one_thread():
        t = Trainer(problem, SMALL, seed=5)
        t.run(("sim",), EPISODES)
    return t


def test_training_gives_valid_deterministic_schedules(problem, trained):
    r = solve(problem, "placeto", seed=3, episodes=3, hidden=16, rounds=2)
    assert validate(problem, r) == [] and r.method == "placeto"
    assert simulate(problem, r.mapping()).jobs == r.jobs  # the work-conserving run of its placement
    assert "rollouts" in r.log
    assert solve(problem, "placeto", seed=3, episodes=3, hidden=16, rounds=2).jobs == r.jobs
    with one_thread():
        again = Trainer(problem, SMALL, seed=5)
        again.run(("sim",), EPISODES)
    assert again.best_assignment == trained.best_assignment and again.eval_makespan == trained.eval_makespan
    assert trained.done == {"sim": EPISODES} and trained.rollouts > EPISODES
    assert trained.makespan(trained.best_assignment) == trained.best_makespan


def test_training_beats_the_untrained_policy(problem, trained):
    with one_thread():
        fresh = Trainer(problem, SMALL, seed=5)
        untrained = fresh.evaluate()
        start = fresh.makespan(fresh.start)
    assert trained.eval_makespan < untrained  # the policy learnt something: same start, same draws
    assert trained.best_makespan < start


def test_batched_log_probs_match_the_rollout(problem, trained):
    # The update re-embeds every recorded state in one batch: it must give the step-by-step
    # probabilities, and the recorded states must be the placements the steps saw.
    with one_thread(), torch.no_grad():
        rec = trained._rollout(0.0, trained.start, np.random.default_rng(0))
        batched = trained.log_probs(rec)
        for t in (0, len(rec.ops) // 2, len(rec.ops) - 1):
            one = trained.policy(trained._features([rec.before[t]], [rec.ops[t]]), trained.src, trained.dst,
                                 trained.groups, torch.tensor([rec.ops[t]]), torch.tensor([rec.valid[t]]))
            assert torch.allclose(one[0], batched[t], atol=1e-5)
    assert rec.ops == trained.order and len(rec.rewards) == problem.n
    final = list(rec.before[-1])
    final[rec.ops[-1]] = rec.devices[-1]
    assert rec.makespan == pytest.approx(trained.makespan(final))
    # Incremental rewards add up to the whole episode's improvement, relative to its start.
    first = trained.makespan(rec.before[0])
    assert sum(rec.rewards) == pytest.approx((first - rec.makespan) / first)
    assert torch.allclose(batched.exp().sum(1), torch.ones(len(rec.ops)))
    assert (batched.exp() * ~torch.tensor(rec.valid)).sum() == 0


@pytest.mark.parametrize("make", [chainmm, ffnn, llama_block, llama_layer])
def test_doppler_workloads(make):
    p = make(devices=4)
    r = solve(p, "placeto", seed=0, episodes=2, hidden=8, rounds=1)
    assert validate(p, r) == [] and r.makespan == simulate(p, r.mapping()).makespan


@settings(max_examples=15, deadline=None)
@given(problems(throughput=False, max_tasks=7))
def test_random_problems_keep_memory_and_links(p):
    r = solve(p, "placeto", seed=0, episodes=2, hidden=8, rounds=1)
    assert validate(p, r) == []


def test_checkpoint_round_trip(problem, trained, tmp_path):
    path = str(tmp_path / "policy.pt")
    save_checkpoint(path, trained.checkpoint(("sim",), EPISODES))
    data = load_checkpoint(path, "placeto", problem.m)
    assert data["devices"] == problem.m and data["config"]["hidden"] == 16
    assert all(t.device.type == "cpu" for t in data["policy"]["policy"].values())
    with one_thread():
        loaded = Trainer.from_checkpoint(problem, data, seed=0)
        assert loaded.evaluate() == trained.eval_makespan  # the best policy by evaluation, restored
        resumed = Trainer.from_checkpoint(problem, data, seed=0, resume=True)
    r = solve(problem, "placeto", policy=path)  # no training: the best placement its evaluation reached
    assert validate(problem, r) == [] and r.makespan <= trained.eval_makespan
    assert resumed.done == trained.done and resumed.rollouts == trained.rollouts
    assert resumed.best_makespan == trained.best_makespan and resumed.returns == trained.returns


def test_refusals_are_one_line(problem, trained, tmp_path):
    other = str(tmp_path / "other.pt")
    save_checkpoint(other, trained.checkpoint(("sim",), EPISODES))
    with pytest.raises(OptionError, match="trained for 3 devices and this problem has 4; train a policy for 4"):
        solve(random_dag(10, 4, seed=0), "placeto", policy=other)
    with pytest.raises(OptionError, match="policy of method 'placeto', not 'doppler'"):
        solve(problem, "doppler", policy=other)
    with pytest.raises(OptionError, match="one stage, sim"):
        parse_stages("il,sim")


def test_large_graphs_are_refused_in_one_line(problem, monkeypatch):
    from mapsched.learned import placeto

    monkeypatch.setattr(placeto, "MAX_TASKS", problem.n - 1)
    with pytest.raises(OptionError, match=f"{problem.n} tasks, more than the {problem.n - 1}") as err:
        solve(problem, "placeto", episodes=1)
    assert "\n" not in str(err.value)


def test_cli_train_resume_and_solve_with_policy(problem, tmp_path, capsys):
    prob, pt, out = str(tmp_path / "p.json"), str(tmp_path / "p.pt"), str(tmp_path / "s.json")
    problem.write(prob)
    small = ["--hidden", "8", "--rounds", "1", "--seed", "2"]
    assert main(["train", "placeto", prob, "--episodes", "3", "-o", pt, *small]) == 0
    assert "trained placeto sim 3/3 episodes" in capsys.readouterr().out
    assert main(["train", "placeto", prob, "--episodes", "5", "-o", pt, "--resume", *small]) == 0
    assert "sim 5/5 episodes" in capsys.readouterr().out
    assert main(["solve", prob, "-m", "placeto", "--policy", pt, "-o", out]) == 0
    assert main(["validate", prob, out]) == 0
    p4 = str(tmp_path / "p4.json")
    random_dag(10, 4, seed=0).write(p4)
    capsys.readouterr()
    for argv, message in [
        (["solve", p4, "-m", "placeto", "--policy", pt], "trained for 3 devices and this problem has 4"),
        (["train", "placeto", prob, "--stages", "il", "-o", str(tmp_path / "x.pt")], "one stage, sim"),
        (["solve", prob, "-m", "placeto", "--policy", prob], "not a readable policy file"),
    ]:
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1
    assert not (tmp_path / "x.pt").exists()


def test_cli_train_keeps_its_time_limit_within_the_first_evaluation(tmp_path, capsys):
    # One evaluation of 400 tasks re-embeds the graph 400 times (seconds): the time limit
    # stops it mid-rollout, and the file holds the policy as it started.
    import time

    prob, pt = str(tmp_path / "p.json"), str(tmp_path / "p.pt")
    random_dag(400, 3, seed=0).write(prob)
    t0 = time.perf_counter()
    assert main(["train", "placeto", prob, "--episodes", "50", "--time-limit", "1", "-o", pt]) == 0
    assert time.perf_counter() - t0 < 3.0
    out = capsys.readouterr().out
    assert "(time limit), before its first evaluation ended" in out and "sim 0/50" in out
    assert main(["solve", prob, "-m", "placeto", "--policy", pt, "--time-limit", "1", "-o",
                 str(tmp_path / "s.json")]) == 0


def test_a_requested_stop_cuts_a_rollout():
    # rollouts stopped only at the deadline: Ctrl-C took a minute at 2,000 tasks
    from mapsched.engine import interrupt
    from mapsched.learned.reinforce import Cut

    t = Trainer(ffnn(4), Config(hidden=8, rounds=1), 0)
    t.check_until()  # no deadline, no stop: on it goes
    with interrupt.graceful():
        interrupt.request()
        with pytest.raises(Cut):
            t.check_until()
