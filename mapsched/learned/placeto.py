"""Placeto (Addanki et al. 2019), the learned baseline of DOPPLER's Table 2: iterative re-placement.

An episode starts from a complete placement and visits every task once, in a fixed
topological order (the problem's breadth-first ``topo``). At each step the policy sees the
whole graph under the current placement and re-places the current task on one device; the
step's reward is the improvement of the simulated makespan
(:func:`mapsched.scheduling.simulate.simulate`, the work-conserving runtime model) that the move made,
Placeto's incremental reward. Every intermediate placement is complete, so each step's
makespan is a candidate: the best placement seen over all rollouts is the result.

Followed from the paper and DOPPLER's port of it (the DOPPLER notes, section 2):

- node features: cost features (:func:`~mapsched.learned.mpnn.graph_tensors`' five: mean time,
  b-level, t-level, in- and out-transfer times, z-scored; Placeto has the op's time and its
  output size), a one-hot of the node's current device, is-current and is-visited flags,
  updated after every step;
- embedding: a linear projection, then ``rounds`` rounds of message passing from parents to
  children and, separately, ``rounds`` from children to parents (each round a message network
  and an update network, sum aggregation), the two results concatenated (width 2 x hidden);
  the current node's embedding is concatenated with mean-pools over its ancestors, its
  descendants and its parallel nodes (neither; DOPPLER's port pools the immediate parents
  and children, through small aggregator networks), 8 x hidden, then a 32-unit layer and a
  softmax over the devices (devices that cannot run the task, hold it in memory or reach
  its neighbours' devices masked out);
- the whole graph is re-embedded at every step (the cost DOPPLER's design avoids);
- REINFORCE on the incremental rewards, a baseline per step (the mean return at that step
  over the episodes so far), entropy weight 1e-2, Adam with lr 1e-3 decaying linearly to
  1e-6, exploration 0.5 -> 0 (DOPPLER's settings for Placeto, 000 section 7.1): with that
  probability a uniformly random allowed device, otherwise one drawn from the softmax.

Simplified or changed: rewards are divided by the episode's initial makespan (unitless, as
the project's other learners); returns are undiscounted (gamma 1); each training episode
starts from a new uniformly random placement, the evaluation from one fixed random placement
(:data:`EVALUATION`, :meth:`Trainer.evaluate`); actions are drawn from the softmax, as
Placeto's stochastic policy is, where DOPPLER's port takes the argmax outside exploration (on
a small graph that argmax put every task on the device fastest for it alone, however long the
training); no grouping of ops (the graphs here have at most a few hundred); the update
re-embeds every step's state in one batch (same maths as step by step; the rollout records
the states without gradients). DOPPLER's port of Placeto (its public code) differs from the
paper in ways not followed here: it starts each episode from no placement and rewards only
the final makespan, against the running mean.

Cost: an episode is n steps, each an O(rounds (n + E) hidden^2) embedding and (when the
device changes) an O((n + E) log n) simulation; the ancestor masks take O(n^2) memory.

Examples
--------
>>> import mapsched
>>> from mapsched.generators import chainmm
>>> p = chainmm(2)
>>> r = mapsched.solve(p, "placeto", seed=0, episodes=3, hidden=8, rounds=1)
>>> mapsched.validate(p, r), r.method
([], 'placeto')
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from mapsched.errors import InfeasibleError, OptionError, shown
from mapsched.learned.mpnn import graph_tensors
from mapsched.learned.reinforce import (
    ProblemTrainer,
    discounted_returns,
    diverged_note,
    entropy_term,
    epsilon,
    file_config,
    pick,
    policy_gradient_loss,
    reading,
    seeded,
    snapshot,
    train_here,
)
from mapsched.model.problem import Problem
from mapsched.model.schedule import Schedule
from mapsched.scheduling.decoder import Decoder, as_owner
from mapsched.scheduling.simulate import simulate

__all__ = ["STAGES", "Config", "Policy", "Trainer", "parse_stages", "solve_placeto"]

STATIC_FEATURES = 5
STAGES = ("sim",)
MASKED = -1e9  # the logit of an invalid device (finite: 0 * log p stays 0 in the gradients)
MAX_TASKS = 4000
"""Largest graph accepted: the group masks take 12 n^2 bytes (190 MB here), and each episode
re-embeds the graph n times."""
EVALUATION = 0
"""Seeds the evaluation's initial placement and draws, the same for every seed and policy: a
policy file's evaluation on a problem is reproducible, whoever trained it."""


@dataclass(frozen=True)
class Config:
    """Hyper-parameters (DOPPLER's Placeto settings, 000 section 7.1; widths smaller by default)."""

    hidden: int = 32
    rounds: int = 3
    head_hidden: int = 32
    gamma: float = 1.0
    lr_start: float = 1e-3
    lr_end: float = 1e-6
    eps_start: float = 0.5
    eps_end: float = 0.0
    entropy: float = 1e-2
    eval_every: int = 10


def parse_stages(text: str | tuple[str, ...]) -> tuple[str, ...]:
    """Placeto trains in one stage, ``sim`` (REINFORCE on the simulated makespan): anything else
    is refused in one line."""
    names = tuple(s.strip() for s in text.split(",")) if isinstance(text, str) else tuple(text)
    if names != STAGES:
        raise OptionError(f"--stages: placeto has one stage, sim (no imitation stage); got {shown(','.join(names))}")
    return names


class _Passes(nn.Module):
    """``rounds`` rounds of sum-aggregated message passing along ``src -> dst`` on a batch of
    states: ``h_v <- relu(U [h_v | sum_u relu(M h_u)])``."""

    def __init__(self, hidden: int, rounds: int) -> None:
        super().__init__()
        self.rounds = rounds
        self.message = nn.Linear(hidden, hidden)
        self.update = nn.Linear(2 * hidden, hidden)

    def forward(self, h: torch.Tensor, src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
        for _ in range(self.rounds):
            agg = torch.zeros_like(h).index_add(1, dst, torch.relu(self.message(h))[:, src])
            h = torch.relu(self.update(torch.cat([h, agg], -1)))
        return h


class Policy(nn.Module):
    """Placeto's network: node embeddings by a downward and an upward pass, pooled per group
    of the current node, scored per device. Its output width is the number of devices, so a
    policy serves problems with that many devices only."""

    def __init__(self, devices: int, cfg: Config) -> None:
        super().__init__()
        h = cfg.hidden
        self.project = nn.Linear(STATIC_FEATURES + devices + 2, h)
        self.down, self.up = _Passes(h, cfg.rounds), _Passes(h, cfg.rounds)
        self.head = nn.Sequential(nn.Linear(8 * h, cfg.head_hidden), nn.ReLU(), nn.Linear(cfg.head_hidden, devices))

    def forward(self, x: torch.Tensor, src: torch.Tensor, dst: torch.Tensor, groups: torch.Tensor,
                ops: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        """Log-probabilities (B, devices) of placing ``ops`` (B,) given node features ``x``
        (B, n, features); ``groups`` (3, n, n) are the row-normalised ancestor, descendant and
        parallel masks, ``valid`` (B, devices) the allowed devices."""
        h0 = torch.relu(self.project(x))
        e = torch.cat([self.down(h0, src, dst), self.up(h0, dst, src)], -1)  # (B, n, 2h)
        batch = torch.arange(len(ops))
        pooled = torch.einsum("gbn,bnk->bgk", groups[:, ops], e).flatten(1)  # (B, 3 x 2h)
        logits = self.head(torch.cat([e[batch, ops], pooled], -1)).masked_fill(~valid, MASKED)
        return F.log_softmax(logits, -1)


def _groups(p: Problem) -> torch.Tensor:
    """Ancestor, descendant and parallel masks (3, n, n), each row divided by its count
    (a mean-pool as a matrix product). O(n^2) memory, O(n (n + E) / 64) time."""
    n = p.n
    anc = np.zeros((n, n), dtype=bool)
    for v in p.topo.tolist():
        for e in p.in_edges[v]:
            u = int(p.src[e])
            anc[v] |= anc[u]
            anc[v, u] = True
    desc = anc.T
    par = ~(anc | desc | np.eye(n, dtype=bool))
    g = np.stack([anc, desc, par]).astype(np.float32)
    return torch.from_numpy(g / np.maximum(g.sum(2, keepdims=True), 1.0))


@dataclass
class Record:
    """One rollout: step t re-placed ``ops[t]`` from the placement ``before[t]`` onto
    ``devices[t]`` among ``valid[t]``, earning ``rewards[t]``."""

    before: list[list[int]] = field(default_factory=list)
    ops: list[int] = field(default_factory=list)
    valid: list[list[bool]] = field(default_factory=list)
    devices: list[int] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    makespan: float = math.inf  # of the final placement


class Trainer(ProblemTrainer):
    """Placeto's policy on one problem: rollouts, REINFORCE updates, evaluation, checkpoints.

    The interface of :class:`mapsched.learned.doppler.Trainer` (one stage, ``sim``), so that
    ``mapsched train`` drives both.

    Parameters
    ----------
    problem : Problem
        A latency problem.
    config : Config
    seed : int
        Seeds the network's initialisation (:func:`~.reinforce.seeded`) and the
        training rollouts' numpy generator (not the evaluation: :data:`EVALUATION`).
    """

    def __init__(self, problem: Problem, config: Config, seed: int) -> None:
        p = self.p = problem
        if p.n > MAX_TASKS:
            raise OptionError(f"placeto: the problem has {p.n} tasks, more than the {MAX_TASKS} Placeto handles (its "
                              "memory grows with the square); use doppler or critical-path")
        self.cfg, self.seed = config, seed
        self.x = graph_tensors(p).x
        self.src = torch.tensor(p.src.tolist(), dtype=torch.long)
        self.dst = torch.tensor(p.dst.tolist(), dtype=torch.long)
        self.groups = _groups(p)
        self.order = p.topo.tolist()
        self.rank = torch.empty(p.n, dtype=torch.long)  # each task's step in an episode
        self.rank[p.topo.tolist()] = torch.arange(p.n)
        self.ok = p.can_run.tolist()
        self.need = (p.weight + p.act).tolist()
        self.mem = p.room.tolist()
        self.link = np.isfinite(p.link_latency).tolist()
        self.parents = [[int(p.src[e]) for e in p.in_edges[i]] for i in range(p.n)]
        self.children = [[int(p.dst[e]) for e in p.out_edges[i]] for i in range(p.n)]
        self.policy = seeded(seed, lambda: Policy(p.m, config))
        self.opt = torch.optim.Adam(self.policy.parameters(), lr=config.lr_start)
        self.rng = np.random.default_rng(seed)
        self.start = self.initial(np.random.default_rng([EVALUATION, 1]))  # the evaluation's start
        self.returns = [0.0] * p.n  # per step: the sum of returns so far (the baseline's numerator)
        self.episodes_seen = 0
        self._reset(STAGES)

    # ------------------------------------------------------------- environment
    def initial(self, rng: np.random.Generator) -> list[int]:
        """A uniformly random placement over the devices each task can run on, repaired by
        :func:`mapsched.scheduling.construct.repair_placement` if memory or links rule it out."""
        owner = np.array([rng.choice(np.flatnonzero(row)) for row in self.p.can_run], dtype=np.int64)
        if Decoder(self.p).infeasibility(owner[:, None]) is not None:
            from mapsched.scheduling.construct import repair_placement

            owner = as_owner(self.p, repair_placement(self.p, owner).mapping())[:, 0]
        return owner.tolist()

    def makespan(self, owner: list[int]) -> float:
        """The work-conserving makespan of a placement (device index per task)."""
        return simulate(self.p, np.asarray(owner, dtype=np.int64)).makespan

    def _valid(self, v: int, owner: list[int], used: list[float]) -> list[bool]:
        """The devices ``v`` may move to: it runs there, fits in memory and its neighbours'
        devices have links to and from it (its current device always qualifies)."""
        out = []
        for d in range(self.p.m):
            ok = self.ok[v][d] and (d == owner[v] or used[d] + self.need[v] <= self.mem[d])
            ok = ok and all(self.link[owner[u]][d] for u in self.parents[v]) \
                and all(self.link[d][owner[w]] for w in self.children[v])
            out.append(ok)
        return out

    def _features(self, owners: list[list[int]], ops: list[int]) -> torch.Tensor:
        """Node features (B, n, 5 + devices + 2) of the states before each step of ``ops``."""
        B, n, m = len(ops), self.p.n, self.p.m
        onehot = F.one_hot(torch.tensor(owners, dtype=torch.long), m).float()
        step = self.rank[torch.tensor(ops)]
        current = F.one_hot(torch.tensor(ops), n).float().unsqueeze(-1)
        visited = (self.rank.unsqueeze(0) < step.unsqueeze(1)).float().unsqueeze(-1)
        return torch.cat([self.x.expand(B, n, STATIC_FEATURES), onehot, current, visited], -1)

    def _rollout(self, eps: float, start: list[int], rng: np.random.Generator) -> Record:
        """One episode from placement ``start``: every task re-placed once, in topological order,
        on a device drawn from the policy (uniformly among the allowed ones with probability
        ``eps``). Keeps the best placement any step reached. Stops at :meth:`check_until` (each
        step simulates the placement: a rollout of 400 tasks takes seconds)."""
        owner = list(start)
        used = [0.0] * self.p.m
        for i, d in enumerate(owner):
            used[d] += self.need[i]
        rec = Record()
        value = first = self.makespan(owner)
        self._keep(value, owner)
        with torch.no_grad():
            for v in self.order:
                self.check_until()
                valid = self._valid(v, owner, used)
                if eps > 0 and rng.random() < eps:
                    allowed = [d for d, ok in enumerate(valid) if ok]
                    d = allowed[int(rng.integers(len(allowed)))]
                else:
                    logp = self.policy(self._features([owner], [v]), self.src, self.dst, self.groups,
                                       torch.tensor([v]), torch.tensor([valid]))[0]
                    prob = logp.exp().double().numpy()  # sampled with numpy: torch's generator untouched
                    d = pick(prob, rng)
                rec.before.append(list(owner))
                rec.ops.append(v)
                rec.valid.append(valid)
                rec.devices.append(d)
                old = owner[v]
                if d != old:
                    used[old] -= self.need[v]
                    used[d] += self.need[v]
                    owner[v] = d
                    after = self.makespan(owner)
                    self._keep(after, owner)
                else:
                    after = value
                rec.rewards.append((value - after) / first if first > 0 else 0.0)
                value = after
        rec.makespan = value
        self.rollouts += 1
        return rec

    def _keep(self, value: float, owner: list[int]) -> None:
        if value < self.best_makespan:
            self.best_makespan, self.best_assignment = value, list(owner)

    def evaluate(self) -> float:
        """A rollout of the policy (epsilon 0) from the fixed initial placement, its draws from a
        generator seeded the same at every evaluation (common random numbers: policies compared
        on equal luck); keeps the policy if its final makespan is the best so far. Returns that
        makespan. (Placeto's policy is stochastic: its argmax alone tends to put every task on
        the device that is best for it in isolation.)"""
        started = time.perf_counter()
        value = self._rollout(0.0, self.start, np.random.default_rng([EVALUATION, 2])).makespan
        self.seconds = max(self.seconds, time.perf_counter() - started)  # an episode takes longer
        if value < self.eval_makespan or self.best_policy is None:
            self.eval_makespan = value
            self.best_policy = {"policy": snapshot(self.policy)}
        return value

    # ------------------------------------------------------------- learning
    def log_probs(self, rec: Record) -> torch.Tensor:
        """Every step's log-probabilities (T, devices), the states re-embedded in one batch."""
        return self.policy(self._features(rec.before, rec.ops), self.src, self.dst, self.groups,
                           torch.tensor(rec.ops), torch.tensor(rec.valid))

    def _advantages(self, rec: Record) -> torch.Tensor:
        """Returns minus the per-step baseline (the mean return at that step over the episodes
        so far, this one included)."""
        returns = discounted_returns(rec.rewards, self.cfg.gamma)
        self.episodes_seen += 1
        for t, r in enumerate(returns):
            self.returns[t] += float(r)
        baseline = np.asarray(self.returns[:len(returns)]) / self.episodes_seen
        return torch.tensor(returns - baseline, dtype=torch.float32)

    def episode(self, stage: str, index: int, episodes: int) -> float:
        """Training episode ``index`` of ``episodes``: a rollout from a random placement, one Adam
        step. Returns its final makespan."""
        cfg = self.cfg
        for group in self.opt.param_groups:
            group["lr"] = epsilon(cfg.lr_start, cfg.lr_end, index, episodes)
        rec = self._rollout(epsilon(cfg.eps_start, cfg.eps_end, index, episodes), self.initial(self.rng), self.rng)
        advantages = self._advantages(rec)
        logp = self.log_probs(rec)
        loss = policy_gradient_loss(logp, torch.tensor(rec.devices), advantages)
        if cfg.entropy:
            loss = loss + cfg.entropy * entropy_term(logp, torch.tensor(rec.valid))
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        self.done[stage] = index + 1
        return rec.makespan

    def first_episode_seconds(self, stage: str) -> float:
        """An episode also re-embeds its states in one batch and back-propagates, so it is
        taken as twice an evaluation's rollout."""
        return 2 * self.seconds

    def run(self, stages: tuple[str, ...], *args: Any, **kwargs: Any) -> None:
        """:meth:`ProblemTrainer.run` on Placeto's one stage, ``sim`` (anything else refused in one line)."""
        super().run(parse_stages(stages), *args, **kwargs)

    # ------------------------------------------------------------- files
    def checkpoint(self, stages: tuple[str, ...], episodes: int) -> dict[str, Any]:
        """The checkpoint data (:mod:`mapsched.learned.reinforce`): the best policy by evaluation,
        and the state to resume from."""
        p = self.p
        return {
            "method": "placeto", "config": asdict(self.cfg), "devices": p.m,
            "policy": self.best_policy or {"policy": snapshot(self.policy)},
            **self.results(),
            "resume": {"policy": snapshot(self.policy), "opt": self.opt.state_dict(),
                       "rng": json.dumps(self.rng.bit_generator.state), "returns": list(self.returns),
                       "episodes_seen": self.episodes_seen, "done": dict(self.done), "stages": list(stages),
                       "episodes": episodes, "seed": self.seed, "rollouts": self.rollouts},
        }

    @classmethod
    def from_checkpoint(cls, problem: Problem, data: dict[str, Any], seed: int, resume: bool = False,
                        flag: str = "--policy") -> Trainer:
        """A trainer holding a checkpoint's best policy (``resume``: its last state, optimiser,
        generator and counters), refusing a damaged file in one line."""
        with reading(flag):
            cfg = file_config(Config, data["config"])
            state = data["resume"] if resume else data["policy"]
            t = cls(problem, cfg, state["seed"] if resume else seed)
            t.policy.load_state_dict(state["policy"])
            if resume:
                t.restore(data, state)
                t.opt.load_state_dict(state["opt"])
                t.rng.bit_generator.state = json.loads(state["rng"])
                t.returns = [float(r) for r in state["returns"]]
                t.episodes_seen = state["episodes_seen"]
        return t


def solve_placeto(problem: Problem, ctx: Any, policy: str, episodes: int | None, hidden: int,
                  rounds: int) -> Schedule:
    """The ``placeto`` method (registered in :mod:`mapsched.learned`): see its option help."""
    p = problem
    trainer = train_here(Trainer, p, ctx, "placeto", policy, episodes, STAGES,
                         Config(hidden=hidden, rounds=rounds), DEFAULT_EPISODES)
    assignment = trainer.best_assignment
    if assignment is None:  # the time limit came before the first rollout: its initial placement
        assignment = trainer.start
    try:
        s = simulate(p, np.asarray(assignment, dtype=np.int64), method="placeto")
    except InfeasibleError as exc:  # cannot happen: every move was checked before being offered
        raise InfeasibleError(f"placeto: {exc}") from None
    s.log += (f"placeto: {trainer.rollouts} rollouts ({trainer.done['sim']} training episodes"
              f"{', from ' + policy if policy else ''}); policy {trainer.eval_makespan:.6g}, "
              f"best placement {s.makespan:.6g}\n" + diverged_note(trainer, "placeto"))
    return s


DEFAULT_EPISODES = 100
"""Training episodes of ``placeto`` without a policy (DOPPLER gave it 4,000 to 8,000)."""
