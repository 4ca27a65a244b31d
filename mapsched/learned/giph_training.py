"""GiPH's training of the gpNet policy (:mod:`mapsched.learned.giph`).

Training (section 5, App. B.7): REINFORCE, one (graph, network) pair per episode drawn
from a GiPH experiment set (:func:`mapsched.generators.giph.giph_experiment`), Adam lr
0.01, reward the makespan decrease of each step, baseline the mean reward of
the steps before (the paper's words; GiPH's code includes the step's own reward, which
cancels the credit of the first move and, on one seed, left the policy at 26% of cases no
worse than HEFT against 66% with the paper's baseline), one update per episode. Deliberate
deviations: rewards are divided by the instance's critical path (SLR units), so that
instances of any time scale train together; the seed's extra ``gamma^t`` factor on step t
is left out, as in the code; the discount is 0.8, not GiPH's 0.97: over GiPH's 2|V| =
22-98 steps a return at 0.97 sums some 30 later moves' rewards and credits each move with
its successors' luck (one seed each, 50 held-out cases: 62% of cases no worse than HEFT at
0.97, 74% at 0.9, 76% at 0.8, and the evaluation SLR plateaued at episode 40 instead of 60-120).
SLR's denominator is Topcuoglu's critical path, as the paper says (the code's shortest path
inflates its SLRs). Plain REINFORCE collapses after ~100 episodes (the GiPH notes), so the policy kept is
the one with the best mean SLR on held-out evaluation cases, checked every
``eval_every`` episodes.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

import numpy as np
import torch

from mapsched.engine import interrupt
from mapsched.errors import OptionError, shown
from mapsched.learned.giph import (
    EDGE_FEATURES,
    Config,
    GiphNet,
    _config,
    _Static,
    search,
)
from mapsched.learned.reinforce import (
    Diverged,
    discounted_returns,
    reading,
    seeded,
    snapshot,
)
from mapsched.learned.starts import random_placement

__all__ = ["Trainer", "advantages"]


def advantages(rewards: list[float], gamma: float) -> np.ndarray:
    """Per step t, the discounted return from t minus the mean reward of the steps before t
    (0 at t = 0), GiPH's REINFORCE baseline as the paper states it. GiPH's code averages steps
    0..t, so step t's own reward offsets its return (all of it at t = 0): a baseline that
    depends on the action taken, hence a biased gradient. O(len(rewards))."""
    r = np.asarray(rewards, dtype=np.float64)
    return discounted_returns(r, gamma) - np.concatenate([[0.0], np.cumsum(r)[:-1] / np.arange(1, len(r))])[:len(r)]


def _eval_specs(suite: str, cases: int) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Held-out evaluation cases of an experiment set: graphs of its grid with seeds 50 on (no
    split uses them), on its training networks where it tests on those, else on networks of its
    sizes with seeds past its test seeds."""
    from mapsched.generators.giph import _GRID, giph_experiment

    e = giph_experiment(suite)
    grid = [dict(v=v, alpha=a, conn_prob=c) for a in _GRID["alphas"] for v in _GRID["vs"] for c in _GRID["conn_probs"]]
    if e.train_networks == e.test_networks:
        nets = list(e.train_networks)
    else:
        top = max(n["seed"] for n in e.test_networks) + 1
        sizes = sorted({n["m"] for n in e.train_networks})
        nets = [dict(m=m, seed=top + k) for k, m in enumerate(sizes)]
    return [(dict(grid[k % len(grid)], seed=50 + k // len(grid)), nets[k % len(nets)]) for k in range(cases)]


class Trainer:
    """REINFORCE on a GiPH experiment set (module docstring), with evaluation and checkpoints.

    Parameters
    ----------
    config : Config
    suite : str
        ``single``, ``multi`` or ``multi-diff`` (:func:`~mapsched.generators.giph.giph_experiment`).
    seed : int
        Seeds the network's initialisation (in a forked torch generator) and the episodes' draws.

    Notes
    -----
    An episode is one :func:`search` with gradients, O(ratio n (gpNet edges + (n + E) log n)),
    plus its backward pass; an evaluation is ``eval_cases`` searches without gradients.
    """

    def __init__(self, config: Config, suite: str, seed: int) -> None:
        from mapsched.generators.giph import giph_experiment

        self.cfg, self.suite, self.seed = config, suite, seed
        self.exp = giph_experiment(suite)
        self.eval_specs = _eval_specs(suite, config.eval_cases)
        self.net = seeded(seed, lambda: GiphNet(config))
        self.opt = torch.optim.Adam(self.net.parameters(), lr=config.lr)
        self.rng = np.random.default_rng(seed)
        self.done = 0
        self.eval_slr, self.best_policy = math.inf, None
        self.curve: list[tuple[int, float]] = []
        self.seconds = 0.0
        self.evaluated = len(self.eval_specs)  # cases in the best policy's evaluation
        self._cache: dict[str, _Static] = {}

    def _problem(self, graph: dict[str, Any], network: dict[str, Any]) -> _Static:
        from mapsched.generators.giph import giph_graph, giph_network, giph_problem

        key = json.dumps([graph, network], sort_keys=True)
        if key not in self._cache:
            if len(self._cache) > 64:
                self._cache.clear()
            self._cache[key] = _Static(giph_problem(giph_graph(**graph), giph_network(**network)))
        return self._cache[key]

    def episode(self) -> float:
        """One training episode on a random training pair; returns its best SLR."""
        e, rng = self.exp, self.rng
        graph = e.train_graphs[int(rng.integers(len(e.train_graphs)))]
        network = e.train_networks[int(rng.integers(len(e.train_networks)))]
        st = self._problem(graph, network)
        self.net.train()
        res = search(st, self.net, random_placement(st.p, rng), max(1, round(self.cfg.ratio * st.p.n)), rng,
                     train=True)
        if res.log_probs:
            adv = torch.tensor(advantages(res.rewards, self.cfg.gamma), dtype=torch.float32)
            loss = -(torch.stack(res.log_probs) * adv).sum()
            if self.cfg.entropy:
                loss = loss - self.cfg.entropy * torch.stack(res.entropies).sum()
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
        self.done += 1
        return st.slr(res.makespan)

    def evaluate(self, deadline: float = math.inf) -> float:
        """Mean best SLR of the current policy on the evaluation cases (each from its seed-20
        random start, actions drawn from a fixed seed); keeps the policy if it is the best so far.
        Past ``deadline`` (``time.perf_counter()``) no further case starts: the first policy's
        evaluation keeps the cases done (:attr:`evaluated`), a later one is dropped (NaN), as it
        does not compare with whole ones; a whole one replaces a cut best where its mean over
        the cut one's cases is no higher."""
        self.net.eval()
        slrs = []
        with torch.no_grad():
            for k, (graph, network) in enumerate(self.eval_specs):
                if slrs and (time.perf_counter() >= deadline or interrupt.requested()):
                    break
                st = self._problem(graph, network)
                res = search(st, self.net, random_placement(st.p, np.random.default_rng(20)),
                             max(1, round(self.cfg.ratio * st.p.n)), np.random.default_rng(k))
                slrs.append(st.slr(res.makespan))
        value = float(np.mean(slrs))
        if len(slrs) < len(self.eval_specs) and self.best_policy is not None:
            return math.nan
        self.curve.append((self.done, value))
        # A best from a cut first evaluation compares on its own cases, and gives way to a
        # whole evaluation at least as good there.
        prefix = float(np.mean(slrs[:self.evaluated]))
        if (self.best_policy is None or prefix < self.eval_slr
                or (len(slrs) > self.evaluated and prefix <= self.eval_slr)):
            self.eval_slr, self.best_policy, self.evaluated = value, snapshot(self.net), len(slrs)
        return value

    def run(self, episodes: int, deadline: float = math.inf, progress: Callable[[int, float], None] | None = None,
            checkpoint: Callable[[], None] | None = None, checkpoint_every: int = 0,
            stop: Callable[[], bool] = lambda: False) -> None:
        """Train until ``episodes`` episodes are done (counting from the start of training),
        ``deadline`` (``time.perf_counter()``) or ``stop()``; evaluate first, every ``eval_every``
        episodes and at the end; ``progress(episodes done, best eval SLR)`` after each episode."""
        try:
            if self.best_policy is None:
                self.evaluate(deadline)
            while self.done < episodes and time.perf_counter() + self.seconds < deadline and not stop():
                started = time.perf_counter()
                self.episode()
                self.seconds = time.perf_counter() - started
                if self.done % self.cfg.eval_every == 0 or self.done == episodes:
                    self.evaluate(deadline)
                if progress is not None:
                    progress(self.done, self.eval_slr)
                if checkpoint is not None and checkpoint_every and self.done % checkpoint_every == 0:
                    checkpoint()
        except Diverged:
            raise OptionError(f"--lr: training diverged after {self.done} episodes (the policy's move probabilities "
                              f"are no longer finite); use a smaller --lr than {self.cfg.lr:g} (default 0.01)"
                              ) from None

    def checkpoint(self) -> dict[str, Any]:
        """The checkpoint data (:mod:`mapsched.learned.reinforce`): the best policy by evaluation,
        its features, the evaluation curve, and the last state to resume from."""
        return {
            "method": "giph", "config": {**asdict(self.cfg), "node_features": list(self.cfg.node_features)},
            "devices": 0, "suite": self.suite,
            "features": {"node": list(self.cfg.node_features), "edge": list(EDGE_FEATURES)},
            "policy": self.best_policy or snapshot(self.net), "eval_slr": self.eval_slr, "evaluated": self.evaluated,
            "curve": [list(c) for c in self.curve],
            "resume": {"net": snapshot(self.net), "opt": self.opt.state_dict(), "done": self.done, "seed": self.seed,
                       "rng": json.dumps(self.rng.bit_generator.state)},
        }

    @classmethod
    def resume(cls, data: dict[str, Any], suite: str, flag: str = "--resume") -> Trainer:
        """A trainer continuing a checkpoint's training, refusing a damaged file or another suite in one line."""
        if data.get("suite") != suite:
            raise OptionError(f"{flag}: the file was trained on suite {shown(data.get('suite'))}, not "
                              f"{shown(suite)}; resume "
                              "with the same --suite, or start a new file")
        with reading(flag):
            state = data["resume"]
            t = cls(_config(data), suite, state["seed"])
            t.net.load_state_dict(state["net"])
            t.opt.load_state_dict(state["opt"])
            t.rng.bit_generator.state = json.loads(state["rng"])
            t.done = state["done"]
            t.best_policy, t.eval_slr = data["policy"], data["eval_slr"]
            t.evaluated = int(data.get("evaluated", len(t.eval_specs)))  # absent from files before it was kept
            t.curve = [(int(a), float(b)) for a, b in data["curve"]]
        return t


# ---------------------------------------------------------------- the method
