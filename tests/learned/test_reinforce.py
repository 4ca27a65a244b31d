"""What the per-problem learners (``doppler``, ``placeto``) share through
:class:`mapsched.learned.reinforce.ProblemTrainer`: rollouts that stop at solve's deadline."""

import importlib
import math
import time

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from mapsched import OptionError, solve, validate  # noqa: E402
from mapsched.cli import main  # noqa: E402
from mapsched.generators import random_dag  # noqa: E402
from mapsched.learned.reinforce import Cut, Diverged, one_thread, pick, save_checkpoint  # noqa: E402


@pytest.mark.parametrize("method", ["doppler", "placeto"])
def test_a_rollout_stops_at_the_deadline(method):
    # Every Placeto step simulates the placement, and a DOPPLER step embeds its candidates: one
    # rollout of 400 (Placeto) or 2,000 (DOPPLER) tasks outlasted a 1 s time limit on a slow
    # machine (tests/engine/test_time_limits.py checks the limits on 400 tasks).
    learner = importlib.import_module(f"mapsched.learned.{method}")
    problem = random_dag(40, 3, seed=1)
    with one_thread():
        t = learner.Trainer(problem, learner.Config(hidden=16, rounds=2), seed=5)
        t.until = time.perf_counter()
        with pytest.raises(Cut):
            t.evaluate()
        assert t.rollouts == 0 and t.best_policy is None and t.eval_makespan == math.inf  # nothing evaluated
        with pytest.raises(Cut):
            t.episode("sim", 0, 10)
        assert t.done["sim"] == 0  # no update, none counted
        t.until = math.inf
        assert t.evaluate() < math.inf and t.rollouts == 1 and t.best_policy is not None
    r = solve(problem, method, time_limit=1e-9, hidden=16, rounds=2)
    assert validate(problem, r) == []


def test_pick_refuses_probabilities_that_are_not_finite():
    rng = np.random.default_rng(0)
    assert pick(np.array([0.0, 2.0, 0.0]), rng) == 1 and pick(np.array([3.0, 1.0]), rng, greedy=True) == 0
    for bad in ([0.5, float("nan")], [float("inf"), 1.0]):
        for greedy in (False, True):  # argmax would have taken a NaN as the largest
            with pytest.raises(Diverged):
                pick(np.array(bad), rng, greedy)


def _nan(tree):
    if isinstance(tree, dict):
        return {k: _nan(v) for k, v in tree.items()}
    return torch.full_like(tree, float("nan")) if isinstance(tree, torch.Tensor) and tree.is_floating_point() else tree


@pytest.mark.parametrize("method", ["doppler", "placeto"])
def test_a_diverged_policy_is_refused_in_one_line(tmp_path, capsys, method):
    """What training at too high a rate leaves: weights past float32, probabilities NaN (these
    solves raised numpy's 'Probabilities contain NaN', or for DOPPLER's greedy policy took
    the NaN as its argmax)."""
    problem = random_dag(12, 3, seed=2)
    prob, good = str(tmp_path / "p.json"), str(tmp_path / "good.pt")
    problem.write(prob)
    assert main(["train", method, prob, "-o", good, "--episodes", "1", "--hidden", "8", "--rounds", "1"]) == 0
    data = {k: v for k, v in torch.load(good, weights_only=True).items() if k not in ("format", "version")}
    bad, resumed = str(tmp_path / "bad.pt"), str(tmp_path / "resumed.pt")
    save_checkpoint(bad, {**data, "policy": _nan(data["policy"])})
    save_checkpoint(resumed, {**data, "resume": _nan(data["resume"])})
    for more in ({}, {"episodes": 2}):  # as loaded, and fine-tuned
        with pytest.raises(OptionError, match=f"--policy: {bad} gives no finite action probabilities"):
            solve(problem, method, policy=bad, **more)
    capsys.readouterr()
    before = (tmp_path / "resumed.pt").read_bytes()
    assert main(["train", method, prob, "-o", resumed, "--resume", "--episodes", "3"]) == 2
    err = capsys.readouterr().err
    assert f"{method}'s policy diverged after" in err and err.count("\n") == 1
    assert (tmp_path / "resumed.pt").read_bytes() == before  # nothing written over it


@pytest.mark.parametrize("method", ["doppler", "placeto"])
@pytest.mark.parametrize("edit, says", [
    ({"eval_every": 0}, "config eval_every: 0 is out of range"),  # ZeroDivisionError in training
    ({"hidden": 8.5}, "config hidden: 8.5 is out of range"),
    ({"gamma": float("nan")}, "config gamma: nan is out of range"),
    ({"gamma": 2.0}, "config gamma: 2.0 is out of range"),
])
def test_a_policy_file_with_settings_out_of_range_is_refused_in_one_line(tmp_path, method, edit, says):
    problem = random_dag(12, 3, seed=2)
    prob, good, bad = str(tmp_path / "p.json"), str(tmp_path / "good.pt"), str(tmp_path / "bad.pt")
    problem.write(prob)
    assert main(["train", method, prob, "-o", good, "--episodes", "1", "--hidden", "8", "--rounds", "1"]) == 0
    data = {k: v for k, v in torch.load(good, weights_only=True).items() if k not in ("format", "version")}
    save_checkpoint(bad, {**data, "config": {**data["config"], **edit}})
    with pytest.raises(OptionError, match=f"--policy: the policy file is damaged \\({says}\\)"):
        solve(problem, method, policy=bad, episodes=2)


def test_doppler_samples_zero_is_refused():
    from mapsched.learned.doppler import Config
    from mapsched.learned.reinforce import file_config

    assert file_config(Config, {"hidden": 8}) == Config(hidden=8)
    with pytest.raises(ValueError, match="config sim_samples: 0"):  # min() of no samples in training
        file_config(Config, {"sim_samples": 0})
    with pytest.raises(ValueError, match="expected a mapping"):
        file_config(Config, None)


def test_a_policy_file_whose_devices_are_no_count_is_damaged(tmp_path):
    # "was trained for 3 devices and this problem has 3": '3', a string
    problem = random_dag(12, 3, seed=2)
    prob, good, bad = str(tmp_path / "p.json"), str(tmp_path / "good.pt"), str(tmp_path / "bad.pt")
    problem.write(prob)
    assert main(["train", "doppler", prob, "-o", good, "--episodes", "1", "--hidden", "8", "--rounds", "1"]) == 0
    data = {k: v for k, v in torch.load(good, weights_only=True).items() if k not in ("format", "version")}
    save_checkpoint(bad, {**data, "devices": "3"})
    with pytest.raises(OptionError, match="is damaged \\(devices '3'\\)"):
        solve(problem, "doppler", policy=bad)


@pytest.mark.parametrize("method", ["doppler", "placeto"])
def test_solves_in_threads_at_once_give_their_seeds_schedules(method):
    # Each seeded torch's one global generator for its networks: two solves building at once
    # drew from each other's seed, and the same seed gave another schedule.
    import threading
    from concurrent.futures import ThreadPoolExecutor

    p = random_dag(25, 3, seed=2)
    alone = {s: solve(p, method, seed=s, episodes=4).jobs for s in (0, 1)}
    threads = torch.get_num_threads()
    start = threading.Barrier(2)

    def run(seed):
        start.wait()
        return solve(p, method, seed=seed, episodes=4).jobs

    for _ in range(3):
        with ThreadPoolExecutor(2) as pool:
            assert dict(zip((0, 1), pool.map(run, (0, 1)))) == alone
    assert torch.get_num_threads() == threads  # one_thread's setting undone by the last to finish
