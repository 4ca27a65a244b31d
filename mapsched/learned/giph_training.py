"""GiPH's training of the gpNet policy (:mod:`mapsched.learned.giph`).

Training (section 5, App. B.7): REINFORCE, one (graph, network) pair per episode, Adam lr
0.01, reward the makespan decrease of each step, baseline the mean reward of
the steps before (the paper's words; GiPH's code includes the step's own reward, which
cancels the credit of the first move and, on one seed, left the policy at 26% of cases no
worse than HEFT against 66% with the paper's baseline), one update per episode. Deliberate
deviations: rewards are divided by a unit of the instance (:attr:`~mapsched.learned.giph._Static.unit`),
so that instances of any time scale train together; the seed's extra ``gamma^t`` factor on step t
is left out, as in the code; the discount is 0.8, not GiPH's 0.97: over GiPH's 2|V| =
22-98 steps a return at 0.97 sums some 30 later moves' rewards and credits each move with
its successors' luck (one seed each, 50 held-out cases: 62% of cases no worse than HEFT at
0.97, 74% at 0.9, 76% at 0.8, and the evaluation SLR plateaued at episode 40 instead of 60-120).
Plain REINFORCE collapses after ~100 episodes (the GiPH notes), so the policy kept is
the one with the best mean score on the evaluation cases, checked every ``eval_every`` episodes.

Where the cases come from (:class:`Source`):

- :class:`GiphSet`, one of GiPH's experiment sets
  (:func:`mapsched.generators.giph.giph_experiment`), as the paper trains: the unit is the
  critical path (SLR's denominator, Topcuoglu's, as the paper says; the code's shortest path
  inflates its SLRs), and searches start from random placements;
- :class:`FamilyMix`, a mixture of problem families (:mod:`mapsched.instances.families`),
  so that the policy learns placement rather than one generator (issue 70), and
  :class:`ProblemSet`, a user's problems: the unit is ``heft``'s makespan (its placement run
  by the work-conserving model), so that a reward is the share of it a move gains whatever
  the family's scale and communication-to-computation ratio, and the evaluation is the mean
  ratio to ``heft``; half of a mixture's episodes, and every other evaluation case, start
  from the best list schedule's placement (``solve``'s default start), the others from a
  random one (GiPH's protocol).

:func:`generalization` scores a policy per family, on seeds that neither training nor its
evaluation draws.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
import torch

from mapsched.engine import interrupt
from mapsched.errors import OptionError, shown
from mapsched.learned.giph import (
    EDGE_FEATURES,
    Config,
    GiphNet,
    Search,
    _config,
    _Static,
    load_policy,
    search,
)
from mapsched.learned.reinforce import (
    Diverged,
    discounted_returns,
    one_thread,
    reading,
    seeded,
    snapshot,
)
from mapsched.learned.starts import random_placement
from mapsched.model.problem import Problem
from mapsched.scheduling.simulate import simulate

__all__ = ["EVAL_SEED", "TEST_SEED", "FamilyMix", "FamilyScore", "GiphSet", "ProblemSet", "Source", "Trainer",
           "advantages", "fine_tune", "generalization", "make_source"]


def advantages(rewards: list[float], gamma: float) -> np.ndarray:
    """Per step t, the discounted return from t minus the mean reward of the steps before t
    (0 at t = 0), GiPH's REINFORCE baseline as the paper states it. GiPH's code averages steps
    0..t, so step t's own reward offsets its return (all of it at t = 0): a baseline that
    depends on the action taken, hence a biased gradient. O(len(rewards))."""
    r = np.asarray(rewards, dtype=np.float64)
    return discounted_returns(r, gamma) - np.concatenate([[0.0], np.cumsum(r)[:-1] / np.arange(1, len(r))])[:len(r)]


class Source(ABC):
    """Where training draws its episodes and evaluation its cases: a GiPH experiment set
    (:class:`GiphSet`), a mixture of problem families (:class:`FamilyMix`) or given problems
    (:class:`ProblemSet`). ``label`` names it in a checkpoint, so that a resume uses the same."""

    label: str

    @abstractmethod
    def draw(self, rng: np.random.Generator) -> _Static:
        """A training case."""

    @abstractmethod
    def evaluation(self) -> list[_Static]:
        """The evaluation cases, the same at every call."""

    def start(self, st: _Static, rng: np.random.Generator) -> np.ndarray:
        """A search's start placement on ``st``: the one the source set (``st.start``), else a
        random one, as GiPH trains and tests."""
        return st.start.copy() if st.start is not None else random_placement(st.p, rng)


class GiphSet(Source):
    """One of GiPH's experiment sets (:func:`~mapsched.generators.giph.giph_experiment`): training
    pairs drawn uniformly; held-out evaluation cases from graphs of its grid with seeds 50 on (no
    split uses them), on its training networks where it tests on those, else on networks of its
    sizes with seeds past its test seeds."""

    def __init__(self, suite: str, cases: int) -> None:
        from mapsched.generators.giph import _GRID, giph_experiment

        self.label, self.exp = suite, giph_experiment(suite)
        e = self.exp
        grid = [dict(v=v, alpha=a, conn_prob=c) for a in _GRID["alphas"] for v in _GRID["vs"]
                for c in _GRID["conn_probs"]]
        if e.train_networks == e.test_networks:
            nets = list(e.train_networks)
        else:
            top = max(n["seed"] for n in e.test_networks) + 1
            sizes = sorted({n["m"] for n in e.train_networks})
            nets = [dict(m=m, seed=top + k) for k, m in enumerate(sizes)]
        self.specs = [(dict(grid[k % len(grid)], seed=50 + k // len(grid)), nets[k % len(nets)])
                      for k in range(cases)]
        self._cache: dict[str, _Static] = {}

    def _problem(self, graph: dict[str, Any], network: dict[str, Any]) -> _Static:
        from mapsched.generators.giph import giph_graph, giph_network, giph_problem

        key = json.dumps([graph, network], sort_keys=True)
        if key not in self._cache:
            if len(self._cache) > 64:
                self._cache.clear()
            self._cache[key] = _Static(giph_problem(giph_graph(**graph), giph_network(**network)))
        return self._cache[key]

    def draw(self, rng: np.random.Generator) -> _Static:
        e = self.exp
        graph = e.train_graphs[int(rng.integers(len(e.train_graphs)))]
        return self._problem(graph, e.train_networks[int(rng.integers(len(e.train_networks)))])

    def evaluation(self) -> list[_Static]:
        return [self._problem(g, n) for g, n in self.specs]


def heft_scaled(p: Problem, list_start: bool = False) -> _Static:
    """``p`` measured in ``heft``'s makespan, its placement run by the work-conserving model:
    across families of any scale and communication-to-computation ratio, a reward is the share
    of that makespan a move gains, and an evaluation the mean ratio to ``heft`` (the critical
    path, GiPH's unit, is far below any makespan where transfers dominate, so those cases
    outweighed the rest). With ``list_start`` its searches start from the better of ``heft``'s
    and ``peft``'s placements, as ``solve -m giph`` does by default. O(heft + peft)."""
    from mapsched.scheduling.decoder import as_owner
    from mapsched.solve import solve

    heft = solve(p, "heft")
    st = _Static(p, unit=simulate(p, as_owner(p, heft.mapping())[:, 0]).makespan)
    if list_start:
        best = min((heft, solve(p, "peft")), key=lambda s: s.makespan)
        st.start = as_owner(p, best.mapping())[:, 0]
    return st


EVAL_SEED = 10**9
"""Family seeds of evaluation cases start here; training draws seeds below it."""
LIST_STARTS = 0.5
"""The share of :class:`FamilyMix`'s episodes that start from the best list schedule's placement."""


class FamilyMix(Source):
    """A uniform mixture of problem families (:mod:`mapsched.instances.families`): each episode
    a family, then a seed below :data:`EVAL_SEED`; ``cases`` evaluation cases spread over the
    families, seeds from :data:`EVAL_SEED` on. ``tasks`` bounds the graphs' sizes. A share
    ``list_starts`` of the episodes, and every other evaluation case, search from the best
    list schedule's placement (``solve``'s default start) instead of a random one (GiPH's)."""

    def __init__(self, families: tuple[str, ...], cases: int, tasks: tuple[int, int] = (10, 100),
                 list_starts: float = LIST_STARTS) -> None:
        self.families, self.tasks, self.list_starts = families, tasks, list_starts
        self.label = "families:" + ",".join(families)
        self.cases = cases
        self._eval: list[_Static] | None = None

    def draw(self, rng: np.random.Generator) -> _Static:
        from mapsched.instances.families import family_problem

        family = self.families[int(rng.integers(len(self.families)))]
        p = family_problem(family, int(rng.integers(EVAL_SEED)), tasks=self.tasks)
        return heft_scaled(p, bool(rng.random() < self.list_starts))

    def evaluation(self) -> list[_Static]:
        from mapsched.instances.families import family_problem

        if self._eval is None:
            f = self.families
            self._eval = [heft_scaled(family_problem(f[k % len(f)], EVAL_SEED + k // len(f), tasks=self.tasks),
                                      self.list_starts > 0 and k % 2 == 1) for k in range(self.cases)]
        return self._eval


class ProblemSet(Source):
    """Given problems: episodes draw one uniformly, evaluation runs the first ``cases`` of them.
    ``starts`` (one placement per problem) replaces the random start placements: fine-tuning a
    policy for the start a solve will search from. The label holds the problems' digest."""

    def __init__(self, problems: list[Problem], cases: int, starts: list[np.ndarray] | None = None) -> None:
        import hashlib

        self.statics = [heft_scaled(p) for p in problems] if starts is None else []
        for p, s in zip(problems, starts or ()):
            self.statics.append(_Static(p, unit=simulate(p, s).makespan))
            self.statics[-1].start = s
        digest = hashlib.sha256("".join(sorted(hashlib.sha256(p.to_json(None).encode()).hexdigest()
                                               for p in problems)).encode()).hexdigest()
        self.label = f"problems:{len(problems)}:{digest[:16]}"
        self.cases = min(cases, len(problems))

    def draw(self, rng: np.random.Generator) -> _Static:
        return self.statics[int(rng.integers(len(self.statics)))]

    def evaluation(self) -> list[_Static]:
        return self.statics[:self.cases]


def make_source(label: str, cases: int) -> Source:
    """The source a checkpoint's label names: a GiPH set or a family mixture (problems are
    given again by their files: :class:`ProblemSet`)."""
    from mapsched.instances.families import parse_families

    if label.startswith("families:"):
        return FamilyMix(parse_families(label.split(":", 1)[1], "--families"), cases)
    return GiphSet(label, cases)


class Trainer:
    """REINFORCE over a :class:`Source` (module docstring), with evaluation and checkpoints.

    Parameters
    ----------
    config : Config
    source : Source or str
        Where episodes and evaluation cases come from; a string is a GiPH experiment set
        (``single``, ``multi`` or ``multi-diff``) or ``families:NAME,...`` (:func:`make_source`).
    seed : int
        Seeds the network's initialisation (in a forked torch generator) and the episodes' draws.
    net : GiphNet, optional
        A policy to train further (fine-tuning) instead of a new one.

    Notes
    -----
    An episode is one :func:`search` with gradients, O(ratio n (gpNet edges + (n + E) log n)),
    plus its backward pass; an evaluation is ``eval_cases`` searches without gradients.
    """

    def __init__(self, config: Config, source: Source | str, seed: int, net: GiphNet | None = None) -> None:
        self.cfg, self.seed = config, seed
        self.source = make_source(source, config.eval_cases) if isinstance(source, str) else source
        self.suite = self.source.label
        self.eval_cases = self.source.evaluation()
        self.net = net if net is not None else seeded(seed, lambda: GiphNet(config))
        self.opt = torch.optim.Adam(self.net.parameters(), lr=config.lr)
        self.rng = np.random.default_rng(seed)
        self.done = 0
        self.eval_slr, self.best_policy = math.inf, None
        self.curve: list[tuple[int, float]] = []
        self.seconds = 0.0
        self.evaluated = len(self.eval_cases)  # cases in the best policy's evaluation
        self.seen: Callable[[_Static, Search], None] | None = None  # told of every search (fine-tuning keeps the best)

    def _search(self, st: _Static, rng: np.random.Generator, start_rng: np.random.Generator,
                train: bool = False) -> Search:
        res = search(st, self.net, self.source.start(st, start_rng), max(1, round(self.cfg.ratio * st.p.n)), rng,
                     train=train)
        if self.seen is not None:
            self.seen(st, res)
        return res

    def episode(self) -> float:
        """One training episode on a drawn training case; returns its best makespan in the case's unit."""
        st = self.source.draw(self.rng)
        self.net.train()
        res = self._search(st, self.rng, self.rng, train=True)
        if res.log_probs:
            adv = torch.tensor(advantages(res.rewards, self.cfg.gamma), dtype=torch.float32)
            loss = -(torch.stack(res.log_probs) * adv).sum()
            if self.cfg.entropy:
                loss = loss - self.cfg.entropy * torch.stack(res.entropies).sum()
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
        self.done += 1
        return st.score(res.makespan)

    def evaluate(self, deadline: float = math.inf) -> float:
        """Mean best score (makespan in the case's unit) of the current policy on the evaluation
        cases (each from its start, or a random one drawn from seed 20; actions drawn from a fixed
        seed); keeps the policy if it is the best so far. Past ``deadline``
        (``time.perf_counter()``) no further case starts: the first policy's evaluation keeps
        the cases done (:attr:`evaluated`), a later one is dropped (NaN), as it does not compare
        with whole ones; a whole one replaces a cut best where its mean over the cut one's cases
        is no higher."""
        self.net.eval()
        slrs = []
        with torch.no_grad():
            for k, st in enumerate(self.eval_cases):
                if slrs and (time.perf_counter() >= deadline or interrupt.requested()):
                    break
                res = self._search(st, np.random.default_rng(k), np.random.default_rng(20))
                slrs.append(st.score(res.makespan))
        value = float(np.mean(slrs))
        if len(slrs) < len(self.eval_cases) and self.best_policy is not None:
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
        episodes and at the end; ``progress(episodes done, best evaluation score)`` after each episode."""
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
    def resume(cls, data: dict[str, Any], suite: Source | str, flag: str = "--resume") -> Trainer:
        """A trainer continuing a checkpoint's training, refusing a damaged file or another suite in one line."""
        label = suite if isinstance(suite, str) else suite.label
        if data.get("suite") != label:
            raise OptionError(f"{flag}: the file was trained on {shown(data.get('suite'))}, not "
                              f"{shown(label)}; resume with the same --suite, --families or --problems, or start a "
                              "new file")
        with reading(flag):
            state = data["resume"]
            t = cls(_config(data), suite, state["seed"])
            t.net.load_state_dict(state["net"])
            t.opt.load_state_dict(state["opt"])
            t.rng.bit_generator.state = json.loads(state["rng"])
            t.done = state["done"]
            t.best_policy, t.eval_slr = data["policy"], data["eval_slr"]
            t.evaluated = int(data.get("evaluated", len(t.eval_cases)))  # absent from files before it was kept
            t.curve = [(int(a), float(b)) for a, b in data["curve"]]
        return t


TEST_SEED = 2 * 10**9
"""Family seeds of :func:`generalization`'s cases start here, apart from training's and evaluation's."""


@dataclass(frozen=True)
class FamilyScore:
    """A policy on one family (:func:`generalization`).

    Attributes
    ----------
    family : str
    trained : bool
        Whether the policy was trained on the family.
    cases : int
    no_worse : float
        Share of cases where GiPH's protocol (2 |V| moves from a random placement) ends at or
        below ``heft``'s placement, both run by the work-conserving model.
    mean_ratio : float
        Mean of that search's best makespan over ``heft``'s.
    median_gain : float
        Median of ``1 - giph / its start`` with ``solve``'s defaults (the better of ``heft``'s
        and ``peft``'s schedules as the start); NaN where not asked for.
    worst_gain : float
        The least of those gains (negative: worse than its start).
    """

    family: str
    trained: bool
    cases: int
    no_worse: float
    mean_ratio: float
    median_gain: float
    worst_gain: float


def generalization(policy: str, families: Sequence[str], cases: int, trained: Sequence[str] = (), *,
                   tasks: tuple[int, int] = (10, 200), defaults: bool = True,
                   first_seed: int = TEST_SEED) -> list[FamilyScore]:
    """Score policy file ``policy`` (``""``: the shipped one) on ``cases`` problems of each family,
    seeds ``first_seed`` on, which neither training nor its evaluation draws (:class:`FamilyScore`).
    O(cases x families x one search); ``defaults`` adds a ``solve`` with the defaults a case.
    One thread; deterministic."""
    from mapsched.instances.families import family_problem
    from mapsched.solve import solve

    net, _ = load_policy(policy)
    out = []
    with one_thread(), torch.no_grad():
        for family in families:
            ratios, gains = [], []
            for k in range(cases):
                p = family_problem(family, first_seed + k, tasks=tasks)
                st = heft_scaled(p)
                heft = st.unit
                res = search(st, net, random_placement(p, np.random.default_rng(20)), max(1, round(2 * p.n)),
                             np.random.default_rng(k))
                ratios.append(res.makespan / heft if heft > 0 else 1.0)
                if defaults:
                    first = min(solve(p, m).makespan for m in ("heft", "peft"))
                    found = solve(p, "giph", policy=policy, seed=k).makespan
                    gains.append(1 - found / first if first > 0 else 0.0)
            r = np.asarray(ratios)
            out.append(FamilyScore(family, family in trained, cases, float(np.mean(r <= 1 + 1e-9)), float(r.mean()),
                                   float(np.median(gains)) if gains else math.nan,
                                   float(np.min(gains)) if gains else math.nan))
    return out


FINE_TUNE_EVAL_EVERY = 5
"""Fine-tuning episodes between evaluations of the policy on the problem."""


def fine_tune(p: Problem, net: GiphNet, config: Config, owner: np.ndarray, ctx: Any, episodes: int,
              deadline: float) -> tuple[np.ndarray | None, str]:
    """Fine-tune ``net`` (of ``config``) in place on ``p`` from start ``owner``, for
    :func:`~mapsched.learned.giph.solve_giph`: until ``episodes`` episodes or the time one more
    search needs before ``deadline``. Returns the best placement any training search saw (None
    if none ran) and a log line. Training's searches leave out noise and relocation costs; the
    final search has them."""
    cfg = replace(config, eval_cases=1, eval_every=FINE_TUNE_EVAL_EVERY)
    trainer = Trainer(cfg, ProblemSet([p], 1, starts=[owner]), int(ctx.rng.integers(2**31 - 1)), net=net)
    best: list[Any] = [math.inf, None]

    def seen(_: _Static, res: Search) -> None:
        if res.makespan < best[0]:
            best[:] = [res.makespan, res.owner.copy()]
            if ctx.relocation is None:  # else the objective adds a cost these makespans leave out
                ctx.improved(res.makespan)

    trainer.seen = seen
    started = time.perf_counter()
    trainer.evaluate()
    unit = trainer.eval_cases[0].unit  # the start's makespan
    before = trainer.eval_slr * unit
    one_search = time.perf_counter() - started
    with contextlib.suppress(OptionError):  # diverged: the best policy by evaluation stands
        trainer.run(episodes, deadline - one_search, stop=lambda: interrupt.requested())
    net.load_state_dict(trainer.best_policy)
    net.eval()
    return best[1], (f"giph: fine-tuned {trainer.done} of {episodes} episodes on this problem; the policy's "
                     f"search from the start {before:.6g} before, {trainer.eval_slr * unit:.6g} after\n")
