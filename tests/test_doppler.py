"""``doppler``: DOPPLER's learned SEL/PLC policy (Stages I and II), its checkpoints and commands.

Small networks (width 16, 2 rounds) and a 40-task graph keep each training to a second or two.
"""

import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from mapsched import OptionError, solve, validate  # noqa: E402
from mapsched.cli import main  # noqa: E402
from mapsched.generators import random_dag  # noqa: E402
from mapsched.learned.doppler import Config, Trainer, parse_stages  # noqa: E402
from mapsched.learned.reinforce import load_checkpoint, one_thread, save_checkpoint  # noqa: E402
from mapsched.simulate import simulate  # noqa: E402

SMALL = Config(hidden=16, rounds=2)


@pytest.fixture(scope="module")
def problem():
    return random_dag(40, 3, seed=1)


@pytest.fixture(scope="module")
def trained(problem):
    with one_thread():
        t = Trainer(problem, SMALL, seed=5)
        t.run(("il", "sim"), 20)
    return t


def test_training_gives_valid_deterministic_schedules(problem, trained):
    r = solve(problem, "doppler", seed=3, episodes=4, hidden=16, rounds=2)
    assert validate(problem, r) == [] and r.method == "doppler"
    assert simulate(problem, r.mapping()).jobs == r.jobs  # the work-conserving run of its assignment
    assert "rollouts" in r.log
    assert solve(problem, "doppler", seed=3, episodes=4, hidden=16, rounds=2).jobs == r.jobs
    with one_thread():
        again = Trainer(problem, SMALL, seed=5)
        again.run(("il", "sim"), 20)
    assert again.best_assignment == trained.best_assignment and again.eval_makespan == trained.eval_makespan
    assert trained.done == {"il": 20, "sim": 20}


def test_training_beats_the_untrained_policy(problem, trained):
    # The untrained policy, given as many rollouts (greedy, then uniformly random: epsilon 1).
    with one_thread():
        fresh = Trainer(problem, SMALL, seed=5)
        fresh.evaluate()
        with torch.no_grad():
            for _ in range(trained.rollouts):
                fresh._rollout(fresh._parts(), 1.0)
    assert trained.eval_makespan < fresh.eval_makespan  # the greedy policy learnt something
    assert trained.best_makespan <= fresh.best_makespan


def test_batched_log_probs_match_the_rollout(problem, trained):
    # The update re-scores a recorded rollout in one padded batch; on a greedy rollout, every
    # step's batched argmax must be the action the step-by-step rollout took.
    with one_thread(), torch.no_grad():
        t = Trainer.from_checkpoint(problem, trained.checkpoint(("il", "sim"), 20), seed=0)  # leaves the fixture be
        parts = t._parts()
        rec, value = t._rollout(parts, 0.0)
        sel_logp, mask, _, plc_logp, valid = t.log_probs(rec, parts)
    assert value < float("inf") and len(rec.ops) == problem.n
    assert sel_logp.argmax(1).tolist() == rec.picked and plc_logp.argmax(1).tolist() == rec.devices
    assert torch.allclose(sel_logp.exp().sum(1), torch.ones(len(rec.ops)))
    assert (plc_logp.exp() * ~valid).sum() == 0 and (sel_logp.exp() * ~mask).sum() == 0


def test_checkpoint_round_trip(problem, trained, tmp_path):
    path = str(tmp_path / "policy.pt")
    save_checkpoint(path, trained.checkpoint(("il", "sim"), 20))
    data = load_checkpoint(path, "doppler", problem.m)
    assert data["devices"] == problem.m and data["config"]["hidden"] == 16
    assert all(t.device.type == "cpu" for t in data["policy"]["sel"].values())
    with one_thread():
        loaded = Trainer.from_checkpoint(problem, data, seed=0)
        assert loaded.evaluate() == trained.eval_makespan  # the best policy by evaluation, restored
    r = solve(problem, "doppler", policy=path)  # greedy only: its assignment, simulated
    assert validate(problem, r) == [] and r.makespan == trained.eval_makespan
    # Resuming restores the counters, the optimisers and the generator.
    with one_thread():
        resumed = Trainer.from_checkpoint(problem, data, seed=0, resume=True)
    assert resumed.done == trained.done and resumed.rollouts == trained.rollouts
    assert resumed.best_makespan == trained.best_makespan


def test_refusals_are_one_line(problem, trained, tmp_path):
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a checkpoint")
    cases = [(str(bad), "is not a readable policy file"), (str(tmp_path / "none.pt"), "no file")]
    other = str(tmp_path / "other.pt")
    save_checkpoint(other, trained.checkpoint(("il",), 20))
    p4 = random_dag(10, 4, seed=0)
    for path, message in cases:
        with pytest.raises(OptionError, match=message) as err:
            solve(problem, "doppler", policy=path)
        assert "\n" not in str(err.value)
    with pytest.raises(OptionError, match="trained for 3 devices and this problem has 4; train a policy for 4"):
        solve(p4, "doppler", policy=other)
    torch.save({"format": "mapsched.policy", "version": 1, "method": "doppler", "config": {"width": 3},
                "devices": 3, "policy": {}}, str(bad))
    with pytest.raises(OptionError, match="damaged"):
        solve(problem, "doppler", policy=str(bad))
    with pytest.raises(OptionError, match="'real'.*not implemented yet"):
        solve(problem, "doppler", stages="il,real")
    with pytest.raises(OptionError, match="unknown stage"):
        parse_stages("il,rl")


def test_cli_train_resume_and_solve_with_policy(problem, tmp_path, capsys):
    prob, pt, out = str(tmp_path / "p.json"), str(tmp_path / "p.pt"), str(tmp_path / "s.json")
    problem.write(prob)
    small = ["--hidden", "8", "--rounds", "1", "--seed", "2"]
    assert main(["train", "doppler", prob, "--episodes", "3", "-o", pt, *small]) == 0
    assert "il 3/3, sim 3/3 episodes" in capsys.readouterr().out
    assert main(["train", "doppler", prob, "--episodes", "5", "-o", pt, "--resume", *small]) == 0
    assert "il 5/5, sim 5/5 episodes" in capsys.readouterr().out
    assert main(["solve", prob, "-m", "doppler", "--policy", pt, "-o", out]) == 0
    assert main(["validate", prob, out]) == 0
    capsys.readouterr()
    for argv, message in [
        (["train", "doppler", prob, "--stages", "real", "-o", str(tmp_path / "x.pt")], "'real'"),
        (["train", "doppler", prob, "-o", str(tmp_path / "y.pt"), "--resume"], "--resume: no policy file"),
        (["solve", prob, "-m", "doppler", "--policy", prob], "not a readable policy file"),
    ]:
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1
    assert not (tmp_path / "x.pt").exists() and not (tmp_path / "y.pt").exists()


def test_dead_ends_are_avoided_or_repaired():
    # No link between the devices and y runs on b only: x must go to b too. A rollout that puts x
    # on a dead-ends (y has no device left); the result is valid either way.
    from mapsched import Device, Edge, Problem, System, Task

    p = Problem([Task("x", {"a": 1, "b": 1}), Task("y", {"b": 1})], [Edge("x", "y", 10)],
                System((Device("a"), Device("b")), ()))
    for seed in range(3):
        r = solve(p, "doppler", seed=seed, episodes=2, hidden=8, rounds=1)
        assert validate(p, r) == [] and r.makespan == 2


def test_without_torch_the_method_says_how_to_install_it():
    code = ("import sys\n"
            "class NoTorch:\n"  # as if torch were not installed (None in sys.modules upsets SciPy)
            "    def find_spec(self, name, path, target=None):\n"
            "        if name.split('.')[0] == 'torch':\n"
            "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
            "sys.meta_path.insert(0, NoTorch())\n"
            "import mapsched\n"
            "assert 'doppler' in mapsched.methods()\n"
            "try:\n"
            "    mapsched.solve(mapsched.instances.load('topcuoglu2002'), 'doppler')\n"
            "except mapsched.OptionError as e:\n"
            "    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "pip install 'mapsched[torch]'" in out and out.count("\n") == 1
