"""DOPPLER's dual policy (Yao et al. 2025), Stages I and II: learned device assignment.

An assignment is built one op at a time (an episode of n steps): SEL picks the next op
among the candidates (unassigned ops whose parents are all assigned), PLC picks its
device. Only the assignment matters: the work-conserving runtime model
(:func:`mapsched.scheduling.simulate.simulate`) times it, and its makespan is the episode's cost.

Networks (two, no shared weights; ``hidden`` 128 and ``rounds`` 6 as in the paper):

- an :class:`~mapsched.learned.mpnn.MPNN` each, run once per episode over the static graph;
- SEL scores candidate v from ``[Z_v | H_v | z(sum of H over v's longest path to an exit)
  | z(... from an entry)]``, Z an embedding of the candidates' static features z-scored
  among the candidates;
- PLC scores device d for the selected v from ``[Y_d | Z_v | H_v | z(sum of H over the ops
  already on d)]``, Y an embedding of seven device features z-scored over the devices:
  DOPPLER's five (time already on d, time of v's parents on d, their earliest start and
  latest end there, v's earliest start on d in the list schedule built so far) and two
  for heterogeneous devices (v's time on d, and its earliest finish there).

Devices that cannot run v, hold it in memory or receive its parents' data are masked out.

Stages (``stages``, in order; ``episodes`` each; one Adam step per policy per episode):

- ``il`` (Stage I): imitate the Critical Path teacher (:mod:`mapsched.heuristics.critical_path`)
  on the states the learner's own epsilon-greedy rollouts visit: the SEL target is the
  candidates of highest b-level, every tie a target; the PLC target weighs device d by
  ``exp(-(EST_d - min EST) / (il_temperature x v's mean time))``, 1 on every tie, so the
  policy learns how much later each device would start v. lr 1e-3, epsilon 1 -> 0, entropy
  weight 1e-3 (the released configuration).
- ``sim`` (Stage II): REINFORCE against the simulated makespan; reward at the last step,
  discounted by gamma 0.99 back to each step; ``sim_samples`` (8) rollouts per episode, each
  action drawn from the policies' softmax at a temperature falling linearly over the stage
  (1 -> 0.1, as the paper's epsilon falls), each rollout's reward relative to the mean
  makespan of the others (leave-one-out); lr 1e-4, no entropy term.
- ``real`` (Stage III, measured runs) is not implemented.

Where this departs from DOPPLER, and why. The paper imitates only the teacher's exact ties,
then explores Stage II epsilon-greedily (the argmax, a uniform action with probability
0.2 -> 0) with one rollout per episode and the mean makespan so far as baseline. On graphs
where a transfer costs many op times (FFNN: 86 ms to move a 2 ms op's output) that search
is stuck: the teacher spreads the sources over idle devices and then pays a transfer at
every join; a uniform action breaks the chain it lands in; and the better assignments
(both halves of a join on one device) need two coordinated changes, so no single change
improves and the gradient has nothing to follow. The trained policy then stayed on the
teacher's assignment or collapsed to one device (FFNN: 96.5 or 40.1 against 21.1 for the
best mapping). With soft teacher targets the policy keeps a probability on nearly-as-early
devices (co-locating a source costs its neighbour's 2 ms) and almost none on devices that
cost a transfer; sampling from it, rather than taking its argmax, explores there, and is
what the REINFORCE gradient assumes (the falling temperature ends the stage searching near
the argmax, as the paper's falling epsilon does); several samples per episode with a
leave-one-out baseline keep a rare good rollout's advantage large and do not reward the
common ones (the running mean, which counts the poor early episodes, rewards nearly every
later rollout). Measured on FFNN (400 + 400 episodes, Stage II sampled at temperature 1):
the paper's scheme 95.8; exact ties, 8 samples 96.5; soft targets, one sample and epsilon
0.2, 95.8; soft targets, 8 samples 21.1 (``exact``'s mapping: 21.15). The paper's scheme is
``Config(il_temperature=0, sim_temperature_start=0, sim_temperature_end=0, sim_samples=1,
sim_eps_start=0.2)``.

Speed: an episode records no-grad rollouts (candidates, device features, actions), then
recomputes every step's log-probabilities in padded batches for the update; the
message passing runs once per episode and serves both (its parameters do not change in
between). The best policy by greedy (epsilon 0) evaluation is kept, and so is the best
assignment any rollout produced.

Examples
--------
>>> import mapsched
>>> from mapsched.generators import chainmm
>>> p = chainmm(2)
>>> r = mapsched.solve(p, "doppler", seed=0, episodes=4, hidden=16, rounds=2)
>>> mapsched.validate(p, r), r.method
([], 'doppler')
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from mapsched.errors import InfeasibleError, OptionError, shown
from mapsched.learned.mpnn import MPNN, GraphTensors, graph_tensors, path_sums, zscore
from mapsched.learned.reinforce import (
    Baseline,
    Cut,
    ProblemTrainer,
    diverged_note,
    entropy_term,
    epsilon,
    file_config,
    imitation_loss,
    one_thread,
    pick,
    policy_gradient_loss,
    reading,
    seeded,
    snapshot,
    step_returns,
    train_here,
)
from mapsched.learned.starts import fallback_ctx, load_seconds, no_time_to_load
from mapsched.model.problem import Problem
from mapsched.model.schedule import Schedule
from mapsched.scheduling.simulate import simulate

__all__ = ["STAGES", "Config", "FamilyTrainer", "Placer", "Selector", "Trainer", "parse_stages", "solve_doppler",
           "teacher_makespan"]

NODE_FEATURES, EDGE_FEATURES, DEVICE_FEATURES = 5, 2, 7
STAGES = ("il", "sim")
MASKED = -1e9  # the logit of an invalid action: finite, so that 0 * log p stays 0 in the gradients

SAMPLE_TEMPERATURE = 0.3
"""Temperature of the softmax that ``doppler``'s samples after training are drawn from: on
held-out families (4 devices, 10-60 tasks, the shipped policy, 128 samples) 0.3 gave a median
0.852 and 0.914 of ``critical-path`` on ``giph-alt`` and ``wired``, where 0.5 gave 0.843 and
0.930, and 1.0 0.869 and 1.000."""


@dataclass(frozen=True)
class Config:
    """Hyper-parameters (the DOPPLER notes, section 3.4: the released configuration), but for
    ``il_temperature``, ``sim_temperature_start``, ``sim_temperature_end``, ``sim_samples`` and
    ``sim_eps_start`` (the module docstring says why; the paper's values: 0, 0 (the argmax), 0,
    1 and 0.2)."""

    hidden: int = 128
    rounds: int = 6
    head_hidden: int = 64
    gamma: float = 0.99
    il_lr: float = 1e-3
    il_eps_start: float = 1.0
    il_eps_end: float = 0.0
    il_entropy: float = 1e-3
    sim_lr: float = 1e-4
    sim_eps_start: float = 0.0
    sim_eps_end: float = 0.0
    sim_entropy: float = 0.0
    il_temperature: float = 1.0
    sim_temperature_start: float = 1.0
    sim_temperature_end: float = 0.1
    sim_samples: int = 8
    eval_every: int = 10


def parse_stages(text: str | tuple[str, ...]) -> tuple[str, ...]:
    """``"il,sim"`` as a tuple, refusing in one line an unknown stage, a repeated one, or ``real``."""
    names = tuple(s.strip() for s in text.split(",")) if isinstance(text, str) else tuple(text)
    for s in names:
        if s == "real":
            raise OptionError("--stages: 'real' (Stage III, rewards measured by running each assignment) is not "
                              "implemented yet; use il, sim or il,sim")
        if s not in STAGES:
            raise OptionError(f"--stages: unknown stage {shown(s)}; expected il, sim or il,sim")
    if not names or len(set(names)) != len(names):
        raise OptionError(f"--stages: expected il, sim or il,sim (each once), got {shown(','.join(names))}")
    return names


def _linear(inputs: int, outputs: int) -> nn.Linear:
    """A head layer: orthogonal weights, zero bias (as DOPPLER's heads)."""
    layer = nn.Linear(inputs, outputs)
    nn.init.orthogonal_(layer.weight)
    nn.init.zeros_(layer.bias)
    return layer


def _leaky(x: torch.Tensor) -> torch.Tensor:
    return F.leaky_relu(x, 0.1)


class Selector(nn.Module):
    """SEL: a score per candidate op. Its first head layer is split in two: the part of the
    per-node inputs (``H``, path sums) is computed once per episode (:meth:`node_part`), the
    part of the candidates' features at every step (:meth:`logits`); the same sum."""

    def __init__(self, cfg: Config) -> None:
        super().__init__()
        h = self.h = cfg.hidden
        self.mpnn = MPNN(NODE_FEATURES, EDGE_FEATURES, h, cfg.rounds)
        self.embed = _linear(NODE_FEATURES, h)
        self.hidden = _linear(4 * h, cfg.head_hidden)  # [Z | H | z(hb) | z(ht)]
        self.out = _linear(cfg.head_hidden, 1)

    def node_part(self, g: GraphTensors) -> torch.Tensor:
        """Shape (n, head_hidden)."""
        H = self.mpnn.encode(g)
        per_node = torch.cat([H, zscore(path_sums(H, g.bpath)), zscore(path_sums(H, g.tpath))], 1)
        return per_node @ self.hidden.weight[:, self.h:].T + self.hidden.bias

    def logits(self, part: torch.Tensor, x: torch.Tensor, cand: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Scores of ``cand`` (B, K) padded, ``mask`` (B, K) true on real candidates: (B, K)."""
        z = _leaky(self.embed(zscore(x[cand], mask)))
        hid = _leaky(part[cand] + z @ self.hidden.weight[:, :self.h].T)
        return self.out(hid).squeeze(-1).masked_fill(~mask, MASKED)


class Placer(nn.Module):
    """PLC: a score per device for the selected op (split first layer as in :class:`Selector`)."""

    def __init__(self, cfg: Config) -> None:
        super().__init__()
        h = self.h = cfg.hidden
        self.mpnn = MPNN(NODE_FEATURES, EDGE_FEATURES, h, cfg.rounds)
        self.embed = _linear(NODE_FEATURES, h)
        self.embed_device = _linear(DEVICE_FEATURES, h)
        self.hidden = _linear(4 * h, cfg.head_hidden)  # [Y | Z | H | z(h_d)]
        self.out = _linear(cfg.head_hidden, 1)

    def node_part(self, g: GraphTensors) -> tuple[torch.Tensor, torch.Tensor]:
        """Shape (n, head_hidden), and the embeddings H (n, hidden) that :meth:`logits` sums per device."""
        H = self.mpnn.encode(g)
        z = _leaky(self.embed(g.x))
        part = torch.cat([z, H], 1) @ self.hidden.weight[:, self.h:3 * self.h].T + self.hidden.bias
        return part, H

    def logits(self, part: torch.Tensor, ops: torch.Tensor, feats: torch.Tensor, valid: torch.Tensor,
               placed: torch.Tensor) -> torch.Tensor:
        """Scores (B, D) of the devices for ``ops`` (B,): device features (B, D, 7), ``valid`` (B, D),
        ``placed`` (B, D, hidden) the sum of H over the ops already on each device."""
        w = self.hidden.weight
        y = _leaky(self.embed_device(zscore(feats, valid)))
        hid = _leaky(part[ops].unsqueeze(1) + y @ w[:, :self.h].T + zscore(placed) @ w[:, 3 * self.h:].T)
        return self.out(hid).squeeze(-1).masked_fill(~valid, MASKED)


@dataclass
class Record:
    """One rollout: what the batched update needs. Step t selected ``ops[t]``, candidate
    ``picked[t]`` of ``cands[t]``, and put it on ``devices[t]``."""

    cands: list[list[int]] = field(default_factory=list)
    picked: list[int] = field(default_factory=list)
    sel_ties: list[list[int]] = field(default_factory=list)
    ops: list[int] = field(default_factory=list)
    feats: list[list[list[float]]] = field(default_factory=list)
    valid: list[list[bool]] = field(default_factory=list)
    devices: list[int] = field(default_factory=list)
    plc_target: list[list[float]] = field(default_factory=list)
    assignment: list[int] | None = None  # None: a dead end (memory or links left an op no device)


class _Env:
    """The assignment MDP on a problem, with the Critical Path bookkeeping (a list schedule
    without insertion: each op starts at its earliest start on its device) that the device
    features and the teacher read."""

    def __init__(self, p: Problem, b_level: np.ndarray, temperature: float = 0.0) -> None:
        self.n, self.m = p.n, p.m
        self.temperature = temperature
        self.dur = np.where(p.can_run, p.dur, 0.0).tolist()
        self.ok = p.can_run.tolist()
        self.need = (p.weight + p.act).tolist()
        self.mem = p.room.tolist()
        self.llat, self.mpb = p.link_latency.tolist(), p.link_ms_per_byte.tolist()
        nb, src, dst = p.nbytes.tolist(), p.src.tolist(), p.dst.tolist()
        self.ins = [[(src[e], nb[e]) for e in p.in_edges[i]] for i in range(p.n)]
        self.outs = [[dst[e] for e in p.out_edges[i]] for i in range(p.n)]
        self.b = b_level.tolist()

    def rollout(self, select: Callable[[list[int]], int], place: Callable[[int, list, list[bool]], int]) -> Record:
        """Run one episode: ``select(cands)`` returns an index into the candidates,
        ``place(v, feats, valid)`` a valid device."""
        n, m, dur, llat, mpb = self.n, self.m, self.dur, self.llat, self.mpb
        dev, st, en = [-1] * n, [0.0] * n, [0.0] * n
        avail, load, used = [0.0] * m, [0.0] * m, [0.0] * m
        missing = [len(x) for x in self.ins]
        cands = [i for i in range(n) if not missing[i]]
        rec = Record()
        for _ in range(n):
            levels = [self.b[c] for c in cands]
            top = max(levels)
            sel_ties = [k for k, x in enumerate(levels) if x >= top - 1e-9 * max(1.0, abs(top))]
            k = select(cands)
            v = cands[k]
            feats, valid, est = [], [], []
            for d in range(m):
                ok = self.ok[v][d] and used[d] + self.need[v] <= self.mem[d]
                arrive, comp, first, last = 0.0, 0.0, math.inf, 0.0
                for u, nbytes in self.ins[v]:
                    du = dev[u]
                    if du == d:
                        arrive = max(arrive, en[u])
                        comp += dur[u][d]
                        first, last = min(first, st[u]), max(last, en[u])
                    elif llat[du][d] == math.inf:
                        ok = False
                    else:
                        arrive = max(arrive, en[u] + llat[du][d] + nbytes * mpb[du][d])
                start = max(arrive, avail[d])
                valid.append(ok)
                est.append(start if ok else math.inf)
                feats.append([load[d], comp, first if first < math.inf else 0.0, last, start, dur[v][d],
                              start + dur[v][d]] if ok else [0.0] * DEVICE_FEATURES)
            if not any(valid):
                return rec
            best = min(est)
            tol = 1e-9 * max(1.0, abs(best))
            tau = self.temperature * sum(dur[v][d] for d in range(m) if valid[d]) / sum(valid)
            plc_target = [1.0 if est[d] <= best + tol else math.exp(-(est[d] - best) / tau) if tau > 0 and valid[d]
                          else 0.0 for d in range(m)]
            d = place(v, feats, valid)
            rec.cands.append(list(cands))
            rec.picked.append(k)
            rec.sel_ties.append(sel_ties)
            rec.ops.append(v)
            rec.feats.append(feats)
            rec.valid.append(valid)
            rec.devices.append(d)
            rec.plc_target.append(plc_target)
            cands.pop(k)
            dev[v], st[v], en[v] = d, est[d], est[d] + dur[v][d]
            avail[d], load[d], used[d] = en[v], load[d] + dur[v][d], used[d] + self.need[v]
            for w in self.outs[v]:
                missing[w] -= 1
                if not missing[w]:
                    cands.append(w)
        rec.assignment = dev
        return rec


class Trainer(ProblemTrainer):
    """DOPPLER's policies on one problem: rollouts, Stage I and II updates, evaluation, checkpoints.

    Parameters
    ----------
    problem : Problem
        A latency problem.
    config : Config
    seed : int
        Seeds the networks' initialisation (:func:`~.reinforce.seeded`) and the rollouts' numpy generator.
    """

    def __init__(self, problem: Problem, config: Config, seed: int) -> None:
        self.p, self.cfg, self.seed = problem, config, seed
        self.g = graph_tensors(problem)
        self.env = _Env(problem, self.g.b_level, config.il_temperature)
        self.sel, self.plc = seeded(seed, lambda: (Selector(config), Placer(config)))
        self.opt = {"sel": torch.optim.Adam(self.sel.parameters(), lr=config.il_lr),
                    "plc": torch.optim.Adam(self.plc.parameters(), lr=config.il_lr)}
        self.rng = np.random.default_rng(seed)
        self.baseline = Baseline()
        self._reset(STAGES)

    # ------------------------------------------------------------- acting
    def _parts(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        sel_part = self.sel.node_part(self.g)
        plc_part, H = self.plc.node_part(self.g)
        return sel_part, plc_part, H

    def _rollout(self, parts: tuple[torch.Tensor, ...], eps: float, temperature: float = 0.0) -> tuple[Record, float]:
        """A rollout with exploration ``eps``, and its makespan (``inf`` on a dead end); the actions
        not explored are the policies' argmax, or with ``temperature > 0`` drawn from their
        softmax at that temperature. Stops at :meth:`check_until`."""
        sel_part, plc_part, H = (t.detach() for t in parts)
        x, rng = self.g.x, self.rng
        placed = torch.zeros(self.p.m, self.cfg.hidden)

        def act(logits: torch.Tensor) -> int:
            if temperature <= 0:
                return pick(logits.flatten().numpy(), rng, greedy=True)
            return pick(torch.softmax(logits.double().flatten() / temperature, 0).numpy(), rng)

        def select(cands: list[int]) -> int:
            self.check_until()
            if len(cands) == 1:
                return 0
            if eps > 0 and rng.random() < eps:
                return int(rng.integers(len(cands)))
            c = torch.tensor([cands])
            return act(self.sel.logits(sel_part, x, c, torch.ones_like(c, dtype=torch.bool)))

        def place(v: int, feats: list, valid: list[bool]) -> int:
            if eps > 0 and rng.random() < eps:
                allowed = [d for d, ok in enumerate(valid) if ok]
                d = allowed[int(rng.integers(len(allowed)))]
            else:
                logits = self.plc.logits(plc_part, torch.tensor([v]), torch.tensor([feats], dtype=torch.float32),
                                         torch.tensor([valid]), placed.unsqueeze(0))
                d = act(logits)
            placed[d] += H[v]
            return d

        with torch.no_grad():
            rec = self.env.rollout(select, place)
        self.rollouts += 1
        value = math.inf if rec.assignment is None else self.makespan(rec.assignment)
        if value < self.best_makespan:
            self.best_makespan, self.best_assignment = value, list(rec.assignment)
        return rec, value

    def sample(self, count: int, temperature: float = SAMPLE_TEMPERATURE) -> None:
        """``count`` rollouts of the kept policy (the best by greedy evaluation) drawn from its
        softmax at ``temperature``, the best assignment kept (:attr:`best_makespan`). Stops at
        :meth:`check_until` (raises :class:`~.reinforce.Cut`)."""
        if self.best_policy is not None:
            self.sel.load_state_dict(self.best_policy["sel"])
            self.plc.load_state_dict(self.best_policy["plc"])
        with torch.no_grad():
            parts = self._parts()
            for _ in range(count):
                self._rollout(parts, 0.0, temperature)

    def makespan(self, assignment: list[int]) -> float:
        """The work-conserving makespan of an assignment (device index per task)."""
        return simulate(self.p, np.asarray(assignment, dtype=np.int64)).makespan

    def evaluate(self) -> float:
        """Greedy (epsilon 0) rollout of the current policy; keeps the policy if it is the best so far.
        Returns its makespan (``inf`` on a dead end)."""
        started = time.perf_counter()
        with torch.no_grad():
            _, value = self._rollout(self._parts(), 0.0)
        self.seconds = max(self.seconds, time.perf_counter() - started)  # an episode takes longer
        if value < self.eval_makespan or self.best_policy is None:
            self.eval_makespan = value
            self.best_policy = {"sel": snapshot(self.sel), "plc": snapshot(self.plc)}
        return value

    def first_episode_seconds(self, stage: str) -> float:
        """A Stage II episode draws ``sim_samples`` rollouts and updates on each: that many times
        an imitation episode or an evaluation."""
        return self.seconds * (self.cfg.sim_samples if stage == "sim" else 1)

    # ------------------------------------------------------------- learning
    def log_probs(self, rec: Record, parts: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
        """Every step's log-probabilities in one padded batch: SEL's (T, most candidates), its
        mask and teacher targets, PLC's (T, devices) and its mask."""
        sel_part, plc_part, H = parts
        T = len(rec.ops)
        K = max(len(c) for c in rec.cands)
        cand = np.zeros((T, K), dtype=np.int64)
        mask = np.zeros((T, K), dtype=bool)
        sel_target = np.zeros((T, K), dtype=bool)
        for t, c in enumerate(rec.cands):
            cand[t, :len(c)] = c
            mask[t, :len(c)] = True
            sel_target[t, rec.sel_ties[t]] = True
        mask_t = torch.from_numpy(mask)
        sel_logp = F.log_softmax(self.sel.logits(sel_part, self.g.x, torch.from_numpy(cand), mask_t), dim=1)
        ops = torch.tensor(rec.ops)
        devices = torch.tensor(rec.devices)
        valid = torch.tensor(rec.valid)
        onehot = F.one_hot(devices, self.p.m).to(H.dtype)
        contrib = onehot.unsqueeze(2) * H[ops].unsqueeze(1)
        placed = contrib.cumsum(0) - contrib  # before step t: the ops of steps < t, per device
        plc_logits = self.plc.logits(plc_part, ops, torch.tensor(rec.feats, dtype=torch.float32), valid, placed)
        plc_logp = F.log_softmax(plc_logits, dim=1)
        return sel_logp, mask_t, torch.from_numpy(sel_target), plc_logp, valid

    def _loss(self, rec: Record, parts: tuple[torch.Tensor, ...], stage: str, advantage: float | None) -> torch.Tensor:
        """Both policies' losses on a rollout (DOPPLER's Eq. 2 and 3, plus the entropy term)."""
        T, cfg = len(rec.ops), self.cfg
        sel_logp, mask_t, sel_target, plc_logp, valid = self.log_probs(rec, parts)
        devices = torch.tensor(rec.devices)
        if stage == "il":
            plc_target = torch.tensor(rec.plc_target, dtype=plc_logp.dtype)
            loss = imitation_loss(sel_logp, sel_target) + imitation_loss(plc_logp, plc_target)
            weight = cfg.il_entropy
        else:
            returns = step_returns(T, advantage or 0.0, cfg.gamma)
            loss = (policy_gradient_loss(sel_logp, torch.tensor(rec.picked), returns)
                    + policy_gradient_loss(plc_logp, devices, returns))
            weight = cfg.sim_entropy
        if weight:
            loss = loss + weight * (entropy_term(sel_logp, mask_t) + entropy_term(plc_logp, valid))
        return loss

    def _advantages(self, runs: list[tuple[Record, float]]) -> list[tuple[Record, float | None]]:
        """The rollouts of a Stage II episode that update, with their advantages. One rollout: relative
        to the mean makespan so far (DOPPLER's baseline). Several: relative to the mean of the
        others (leave-one-out, Kool et al. 2019), divided by their count so that the learning rate
        means the same per episode. Dead ends have no reward and do not update."""
        ok = [(rec, v) for rec, v in runs if v < math.inf]
        if len(runs) == 1:
            return [(rec, self.baseline.advantage(v)) for rec, v in ok]
        total = sum(v for _, v in ok)
        out: list[tuple[Record, float | None]] = []
        for rec, v in ok if len(ok) > 1 else ():
            base = (total - v) / (len(ok) - 1)
            out.append((rec, (base - v) / base / len(ok) if base > 0 else 0.0))
        return out

    def episode(self, stage: str, index: int, episodes: int) -> float:
        """One episode of ``stage`` (index ``index`` of ``episodes``): rollouts, one update. Returns the
        best makespan of its rollouts (``inf`` on dead ends, which update only by imitation: they
        have no reward)."""
        cfg = self.cfg
        lr = cfg.il_lr if stage == "il" else cfg.sim_lr
        eps = epsilon(cfg.il_eps_start, cfg.il_eps_end, index, episodes) if stage == "il" else \
            epsilon(cfg.sim_eps_start, cfg.sim_eps_end, index, episodes)
        for opt in self.opt.values():
            for group in opt.param_groups:
                group["lr"] = lr
        parts = self._parts()
        if stage == "il":
            rec, value = self._rollout(parts, eps)
            batch: list[tuple[Record, float | None]] = [(rec, None)] if rec.ops else []
        else:
            temperature = epsilon(cfg.sim_temperature_start, cfg.sim_temperature_end, index, episodes)
            runs = [self._rollout(parts, eps, temperature) for _ in range(cfg.sim_samples)]
            batch = self._advantages(runs)
            value = min(v for _, v in runs)
        if batch:
            for opt in self.opt.values():
                opt.zero_grad()
            sum(self._loss(rec, parts, stage, adv) for rec, adv in batch).backward()
            for opt in self.opt.values():
                opt.step()
        self.done[stage] = index + 1
        return value

    # ------------------------------------------------------------- files
    def checkpoint(self, stages: tuple[str, ...], episodes: int) -> dict[str, Any]:
        """The checkpoint data (:mod:`mapsched.learned.reinforce`): the best policy by evaluation,
        and the state to resume from."""
        p = self.p
        return {
            "method": "doppler", "config": asdict(self.cfg), "devices": p.m,
            "policy": self.best_policy or {"sel": snapshot(self.sel), "plc": snapshot(self.plc)},
            **self.results(),
            "resume": {"sel": snapshot(self.sel), "plc": snapshot(self.plc),
                       "opt_sel": self.opt["sel"].state_dict(), "opt_plc": self.opt["plc"].state_dict(),
                       "rng": json.dumps(self.rng.bit_generator.state), "baseline": self.baseline.state(),
                       "done": dict(self.done), "stages": list(stages), "episodes": episodes, "seed": self.seed,
                       "rollouts": self.rollouts},
        }

    @classmethod
    def from_checkpoint(cls, problem: Problem, data: dict[str, Any], seed: int, resume: bool = False,
                        flag: str = "--policy") -> Trainer:
        """A trainer holding a checkpoint's best policy (``resume``: its last state, optimisers,
        generator and counters, to continue training), refusing a damaged file in one line."""
        with reading(flag):
            cfg = file_config(Config, data["config"])
            state = data["resume"] if resume else data["policy"]
            t = cls(problem, cfg, state["seed"] if resume else seed)
            t.sel.load_state_dict(state["sel"])
            t.plc.load_state_dict(state["plc"])
            if resume:
                t.restore(data, state)
                t.opt["sel"].load_state_dict(state["opt_sel"])
                t.opt["plc"].load_state_dict(state["opt_plc"])
                t.rng.bit_generator.state = json.loads(state["rng"])
                t.baseline = Baseline(**state["baseline"])
        return t


class FamilyTrainer(Trainer):
    """DOPPLER's policies for one device count, trained across problems (issue 70): each episode
    on a problem drawn from a uniform mixture of families (:mod:`mapsched.instances.families`,
    ``tasks`` in size, on exactly ``devices`` devices), the kept policy the one whose greedy
    rollouts end lowest relative to ``critical-path`` (its mapping run by the same model) on
    ``cases`` fixed evaluation problems, with seeds that training never draws. Its checkpoint is
    a policy file for any problem on that many devices; it does not resume."""

    def __init__(self, families: tuple[str, ...], devices: int, config: Config, seed: int, cases: int = 8,
                 tasks: tuple[int, int] = (10, 60)) -> None:
        from mapsched.instances.families import family_problem

        self.families, self.devices, self.tasks = families, devices, tasks
        evals = [family_problem(families[k % len(families)], EVAL_SEED + k // len(families), tasks=tasks,
                                devices=devices) for k in range(cases)]
        super().__init__(evals[0], config, seed)
        self.evals = [(p, teacher_makespan(p)) for p in evals]

    def _use(self, p: Problem) -> None:
        self.p, self.g = p, graph_tensors(p)
        self.env = _Env(p, self.g.b_level, self.cfg.il_temperature)

    def episode(self, stage: str, index: int, episodes: int) -> float:
        """One episode of ``stage`` on a drawn problem; returns its makespan."""
        from mapsched.instances.families import family_problem

        family = self.families[int(self.rng.integers(len(self.families)))]
        self._use(family_problem(family, int(self.rng.integers(EVAL_SEED)), tasks=self.tasks, devices=self.devices))
        return super().episode(stage, index, episodes)

    def evaluate(self) -> float:
        """Mean over the evaluation problems of the greedy rollout's makespan over ``critical-path``'s;
        keeps the policy if it is the best so far."""
        started = time.perf_counter()
        ratios = []
        with torch.no_grad():
            for p, ref in self.evals:
                self._use(p)
                _, value = self._rollout(self._parts(), 0.0)
                ratios.append(value / ref)
        self.seconds = max(self.seconds, (time.perf_counter() - started) / len(self.evals))
        mean = float(np.mean(ratios))
        if mean < self.eval_makespan or self.best_policy is None:
            self.eval_makespan = mean
            self.best_policy = {"sel": snapshot(self.sel), "plc": snapshot(self.plc)}
        return mean

    def checkpoint(self, stages: tuple[str, ...], episodes: int) -> dict[str, Any]:
        """A policy file for problems on :attr:`devices` devices: the best policy, its
        evaluation (mean ratio to ``critical-path``) and what it was trained on."""
        return {"method": "doppler", "config": asdict(self.cfg), "devices": self.devices,
                "policy": self.best_policy or {"sel": snapshot(self.sel), "plc": snapshot(self.plc)},
                "eval_ratio": self.eval_makespan, "families": list(self.families),
                "episodes": dict(self.done), "seed": self.seed}


def teacher_makespan(p: Problem) -> float:
    """``critical-path``'s makespan on ``p`` (its default 50 runs, seed 0), its mapping run by the
    work-conserving model."""
    from mapsched.solve import solve

    return simulate(p, solve(p, "critical-path", seed=0).mapping()).makespan


EVAL_SEED = 10**9
"""Family seeds of :class:`FamilyTrainer`'s evaluation problems start here; its training draws seeds below."""


def solve_doppler(problem: Problem, ctx: Any, policy: str, episodes: int | None, stages: str, hidden: int,
                  rounds: int, samples: int) -> Schedule:
    """The ``doppler`` method (registered in :mod:`mapsched.learned`): see its option help."""
    p = problem
    names = parse_stages(stages)

    def fallback(runs: int) -> Schedule:
        """Critical Path's assignment (its best of ``runs``; repaired where it dead-ends on memory
        or links), on a generator of its own, so that finding it does not change the training's draws."""
        from mapsched.heuristics.critical_path import critical_path

        return critical_path(p, fallback_ctx(ctx), runs=runs)

    # Under a time limit one run is found first, so that it is in hand at the deadline.
    first = None if ctx.time_limit is None else fallback(1)
    if first is not None and no_time_to_load(ctx, train=True):  # its repair took the time (tight memory)
        first.log += (f"doppler: finding Critical Path's assignment left less than the {load_seconds(True):g} s "
                      "that loading the optimizer may take; that assignment, with no learning\n")
        return first
    trainer = train_here(Trainer, p, ctx, "doppler", policy, episodes, names,
                         Config(hidden=hidden, rounds=rounds), DEFAULT_EPISODES)
    if samples and not trainer.diverged:
        with one_thread(), contextlib.suppress(Cut):  # Cut: the time limit; the best rollout so far stands
            trainer.sample(samples)
    assignment, note = trainer.best_assignment, None
    if assignment is None:  # no rollout finished: the time limit, or memory and links left an op no device
        assignment = (first if first is not None else fallback(1)).mapping()
        note = "no rollout of the policy finished; Critical Path's assignment"
    if not ctx.expired():  # never worse than the teacher: Critical Path's best of its method's runs
        best = fallback(CRITICAL_PATH_RUNS)
        first = best if first is None or best.makespan <= first.makespan else first
    try:
        placed = assignment if isinstance(assignment, dict) else np.asarray(assignment)
        s = simulate(p, placed, method="doppler")
        if first is not None and note is None:
            # The best rollout can be worse than the teacher (an untrained policy's one greedy
            # rollout at 2,000 tasks, cut short by a limit: 4.3 times Critical Path's).
            start = simulate(p, first.mapping(), method="doppler")
            if start.makespan < s.makespan:
                s, note = start, "Critical Path's assignment beat every rollout of the policy"
    except InfeasibleError as exc:  # cannot happen: every device was checked before being offered
        raise InfeasibleError(f"doppler: {exc}") from None
    trained = ", ".join(f"{trainer.done[stage]} {stage}" for stage in names)
    s.log += (f"doppler: {trainer.rollouts} rollouts ({trained} episodes, then up to {samples} sampled"
              f"{', from ' + policy if policy else ''}); greedy policy {trainer.eval_makespan:.6g}, "
              f"best assignment {s.makespan:.6g}\n" + (f"{note}\n" if note else "")
              + diverged_note(trainer, "doppler"))
    return s


CRITICAL_PATH_RUNS = 50
"""Runs of Critical Path (its method's default) that ``doppler`` is never worse than (issue 70),
where its training leaves time for them."""


DEFAULT_EPISODES = 100
"""Episodes per stage of ``doppler`` without a policy (the paper trains 2,000 to 4,000)."""
