"""What the per-problem learners (``doppler``, ``placeto``) share through
:class:`mapsched.learned.reinforce.ProblemTrainer`: rollouts that stop at solve's deadline."""

import importlib
import math
import time

import pytest

torch = pytest.importorskip("torch")

from mapsched import solve, validate  # noqa: E402
from mapsched.generators import random_dag  # noqa: E402
from mapsched.learned.reinforce import Cut, one_thread  # noqa: E402


@pytest.mark.parametrize("method", ["doppler", "placeto"])
def test_a_rollout_stops_at_the_deadline(method):
    # Every Placeto step simulates the placement, and a DOPPLER step embeds its candidates: one
    # rollout of 400 (Placeto) or 2,000 (DOPPLER) tasks outlasted a 1 s time limit on a slow
    # machine (tests/test_time_limits.py checks the limits on 400 tasks).
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
