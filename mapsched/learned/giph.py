"""GiPH (Hu et al., MLSys 2023): a learned placement-improvement policy over gpNet.

A state is a full placement; an action moves one task to one device that can run it.
The policy scores every node of **gpNet**, the graph with one node per feasible
(task, device) pair, and samples one move per step; a search of ``ratio x |V|`` steps
(GiPH: 2) from a start placement returns the best placement seen. Every placement is
timed by the work-conserving runtime model (:func:`mapsched.scheduling.simulate.simulate`, GiPH's
FIFO-by-readiness simulator), optionally with GiPH's noise.

gpNet (paper section 4.2.1): for each task edge (a, b), an edge from a's *pivot* (the node
of its current device) to every option of b, and from every other option of a to b's
pivot: ``sum_i |D_i|`` nodes and ``sum_i |D_i| deg_i - |E|`` edges. Every node of a task
sits at the task's level, so the two passes run level by level.

Features (paper App. B.7, its ``--feature 1``: 4 node and 4 edge features; the code's
default adds a fifth "criticality" feature, not used here), each min-max scaled to
[-1, 1] per gpNet (a constant feature gives 0), as the public code does:

- node (task i, device k): the task's compute ``C_i`` (its mean latency over its
  devices: mapsched stores only latencies), the device's time per unit of compute
  (median over tasks of ``dur[i, k] / min_k' dur[i, k']``, GiPH's ``1 / SP_k``), the
  latency ``dur[i, k]``, and the start-time potential: data-ready time of i on k minus
  i's current start (0 for pivots and for tasks without parents);
- edge (a on k, b on l): bytes, ms per byte of the link k-l, its start-up delay, and
  the transfer time (all 0 when k = l; a missing link counts as the worst one present).

A deliberate addition (:data:`NODE_FEATURES` after GiPH's 4, :data:`GIPH_NODE_FEATURES`): three
node features that give the policy HEFT's earliest-finish view of each move: the finish-time
potential (data-ready time of i on k plus its latency there, minus i's current end; 0 for
pivots; k's queue ignored), the task's slack in the current run (how much later it could end,
devices and device orders kept, without delaying the makespan: 0 on the critical path), and
the rank of their sum among gpNet's nodes, scaled to [-1, 1] (min-max scaling leaves the few
best moves indistinguishable when some moves are far worse). GiPH's code adds a
"criticality" feature for a like reason (its default ``--feature 0``). Why: with GiPH's 4
features the trained policy stayed behind HEFT (34% of the goal's cases no worse, as the
GiPH notes' prototype); a near-greedy hand rule taking the move of least (finish potential +
slack) was no worse than HEFT on 80% of 50 held-out cases, and with these features the policy
learns such moves (:func:`gpnet`).

Network (paper eq. 1, Tables 4-5): node transform ``NT = Linear(dn, dn)-ReLU-Linear(dn, 5)``;
a forward pass over gpNet in topological order, ``y_u = ReLU(W2 mean_v ReLU(W1 [y_v | x_vu]))
+ NT(x_u)``, and a backward pass with its own weights on the reversed graph; the policy
``Linear(10, 16)-ReLU-Linear(16, 1)`` on ``[y_fwd | y_bwd]``, a softmax over the unmasked
nodes. About 520 weights (570 with the EFT features above).

Mask (section 4.2.3): the pivots (no-op moves), every option of the task moved at the
previous step, and moves that would overflow a device's memory or cross a missing link
(mapsched has both; GiPH does not). Recomputed at every step as the paper says (the
code freezes it after |V| steps). If everything is masked one pivot is offered, so
the mask is never empty.

Variants (:class:`Config`): ``rounds`` k > 0 is GiPH-k, k synchronous rounds of both
passes over all nodes at once instead of one sweep over the depth; ``variant="ne"`` is
GiPH-NE (no edge features; each node gets the mean of its incoming edges' features,
dn = node features + 4); ``variant="task-eft"`` is GiPH-task-EFT (the network on the task graph, with the
pivots' features, picks a task; it goes to its earliest-finish device as in ``random-eft``).

Training: :mod:`mapsched.learned.giph_training`.

Examples
--------
>>> import mapsched
>>> from mapsched.generators import giph_instance
>>> p = giph_instance(10, 0.3, 0.1, seed=3, m=6)
>>> r = mapsched.solve(p, "giph", seed=0)
>>> mapsched.validate(p, r), r.method
([], 'giph')
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from mapsched.bounds.simple import critical_path_bound
from mapsched.engine import interrupt
from mapsched.engine.relocation import RelocationCosts
from mapsched.errors import InfeasibleError, OptionError, shown
from mapsched.learned.reinforce import (
    Diverged,
    file_config,
    load_checkpoint,
    one_thread,
    pick,
    reading,
)
from mapsched.learned.starts import SHIPPED_GIPH, giph_start, shipped_file
from mapsched.model.problem import Problem
from mapsched.model.schedule import Schedule
from mapsched.scheduling.simulate import simulate

__all__ = ["NODE_FEATURES", "GIPH_NODE_FEATURES", "EDGE_FEATURES", "VARIANTS", "Config", "GiphNet", "GpNet",
           "Search", "gpnet", "load_policy", "search", "shipped_policy", "solve_giph"]

NODE_FEATURES = ("compute", "time_per_unit", "latency", "start_potential", "finish_potential", "slack", "gain_rank")
GIPH_NODE_FEATURES = NODE_FEATURES[:4]  # the paper's (App. B.7, the code's --feature 1)
EDGE_FEATURES = ("bytes", "ms_per_byte", "delay", "transfer")
VARIANTS = ("giph", "ne", "task-eft")
EMBED, POLICY_HIDDEN = 5, 16
MASKED = -1e9


@dataclass(frozen=True)
class Config:
    """Hyper-parameters (GiPH notes, section 2.5) and the variant."""

    variant: str = "giph"
    rounds: int = 0  # 0: two-way passing over the graph's depth; k > 0: GiPH-k
    lr: float = 0.01
    gamma: float = 0.8  # GiPH's is 0.97 (module docstring)
    entropy: float = 0.0
    ratio: float = 2.0  # search steps per task
    eval_every: int = 10
    eval_cases: int = 20
    node_features: tuple[str, ...] = NODE_FEATURES

    def __post_init__(self) -> None:
        if self.variant not in VARIANTS:
            raise OptionError(f"--variant: expected one of {', '.join(VARIANTS)}, got {shown(self.variant)}")
        object.__setattr__(self, "node_features", tuple(self.node_features))
        unknown = set(self.node_features) - set(NODE_FEATURES)
        if unknown or not self.node_features:
            raise OptionError(f"node_features: expected some of {', '.join(NODE_FEATURES)}, got "
                              f"{', '.join(self.node_features)}")


# ---------------------------------------------------------------- gpNet (numpy)


def _minmax(x: np.ndarray) -> np.ndarray:
    """Per column, min-max to [-1, 1]; a constant column gives 0, and a non-finite value counts
    as its column's largest finite one (a missing link as the worst link present). O(size)."""
    if not len(x):
        return x
    bad = ~np.isfinite(x)
    if bad.any():
        top = np.where(bad, -np.inf, x).max(axis=0)
        x = np.where(bad, np.where(np.isfinite(top), top, 0.0), x)
    lo, span = x.min(axis=0), np.ptp(x, axis=0)
    return np.where(span > 0, 2 * (x - lo) / np.where(span > 0, span, 1.0) - 1, 0.0)


@dataclass
class GpNet:
    """gpNet for one placement: node ``u`` is (``task[u]``, ``device[u]``); ``src -> dst`` its
    edges; ``x`` (nodes, 7: :data:`NODE_FEATURES`) and ``xe`` (edges, 4) normalised features; ``mask`` true on the
    moves the policy may take; ``level`` / ``rlevel`` each node's task level from the entries
    and from the exits."""

    task: np.ndarray
    device: np.ndarray
    pivot: np.ndarray  # per task: its pivot node
    src: np.ndarray
    dst: np.ndarray
    x: np.ndarray
    xe: np.ndarray
    mask: np.ndarray
    level: np.ndarray
    rlevel: np.ndarray


class _Static:
    """What gpNet needs of a problem that no placement changes, and the ``unit`` its makespans
    are measured in for rewards and evaluation (default: the critical path, GiPH's SLR). O(n m + E)."""

    def __init__(self, p: Problem, unit: float | None = None) -> None:
        self.p = p
        can = p.can_run
        self.node_task, self.node_dev = (a.astype(np.int64) for a in np.nonzero(can))
        self.first = np.concatenate([[0], np.cumsum(can.sum(axis=1))]).astype(np.int64)
        self.node_of = np.full(can.shape, -1, dtype=np.int64)
        self.node_of[self.node_task, self.node_dev] = np.arange(len(self.node_task))
        dur = np.where(can, p.dur, np.nan)
        least = np.nanmin(dur, axis=1)
        compute = np.nanmean(dur, axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            rel = dur / np.where(least > 0, least, 1.0)[:, None]
        per_unit = np.nan_to_num(np.nanmedian(np.where(np.isnan(rel).all(axis=0), 1.0, rel), axis=0), nan=1.0)
        self.static_x = _minmax(np.stack([compute[self.node_task], per_unit[self.node_dev],
                                          p.dur[self.node_task, self.node_dev]], axis=1))
        self.llat = np.where(np.eye(p.m, dtype=bool), 0.0, p.link_latency)
        self.mpb = np.where(np.eye(p.m, dtype=bool), 0.0, p.link_ms_per_byte)
        self.need = p.weight + p.act
        self.mem = p.room
        # per task edge e = (a, b): the options of b (type-1 edges) and of a (type-2 edges)
        src, dst, first = p.src, p.dst, self.first
        nb = first[dst + 1] - first[dst]
        na = first[src + 1] - first[src]
        self.e1 = np.repeat(np.arange(p.E), nb)
        self.opt1 = _ranges(first[dst], nb)
        self.e2 = np.repeat(np.arange(p.E), na)
        self.opt2 = _ranges(first[src], na)
        level = np.zeros(p.n, dtype=np.int64)
        for i in p.topo:
            for j in p.succ[i]:
                level[j] = max(level[j], level[i] + 1)
        rlevel = np.zeros(p.n, dtype=np.int64)
        for i in p.topo[::-1]:
            for j in p.succ[i]:
                rlevel[i] = max(rlevel[i], rlevel[j] + 1)
        self.level, self.rlevel = level, rlevel
        self.has_parent = np.bincount(p.dst, minlength=p.n) > 0
        self.node_dur = p.dur[self.node_task, self.node_dev]
        self.pos = np.empty(p.n, dtype=np.int64)
        self.pos[np.asarray(p.topo, dtype=np.int64)] = np.arange(p.n)
        self.cp = critical_path_bound(p)
        self.unit = self.cp if unit is None else unit
        self.start: np.ndarray | None = None  # where training's searches start (None: a random placement)

    def slr(self, makespan: float) -> float:
        """``makespan`` over the critical path (GiPH's SLR); 1 where both are 0 ms."""
        return makespan / self.cp if self.cp > 0 else (1.0 if makespan <= 0 else math.inf)

    def score(self, makespan: float) -> float:
        """``makespan`` in :attr:`unit`; 1 where both are 0 ms."""
        return makespan / self.unit if self.unit > 0 else (1.0 if makespan <= 0 else math.inf)


def _slack(st: _Static, owner: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per task, how much later it could end without delaying the makespan, its device order
    and every task's device kept (the latest finish by a backward pass, minus its end). O(n + E)."""
    p = st.p
    span = end.max() if p.n else 0.0
    took = end - start
    c = np.where(owner[p.src] == owner[p.dst], 0.0,
                 st.llat[owner[p.src], owner[p.dst]] + p.nbytes * st.mpb[owner[p.src], owner[p.dst]])
    byd = np.lexsort((st.pos, start, owner))  # each device's tasks in the order they ran
    nxt = np.full(p.n, -1, dtype=np.int64)
    same = owner[byd[1:]] == owner[byd[:-1]]
    nxt[byd[:-1][same]] = byd[1:][same]
    latest = np.full(p.n, span)
    for i in np.lexsort((st.pos, start))[::-1].tolist():  # children and device successors first
        v = span
        for e in p.out_edges[i]:
            j = p.dst[e]
            v = min(v, latest[j] - took[j] - c[e])
        if nxt[i] >= 0:
            v = min(v, latest[nxt[i]] - took[nxt[i]])
        latest[i] = v
    return latest - end


def _ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The concatenation of ``range(s, s + c)`` for each pair, vectorised."""
    total = int(counts.sum())
    if not total:
        return np.zeros(0, dtype=np.int64)
    offsets = np.repeat(np.cumsum(counts) - counts, counts)
    return np.repeat(starts, counts) + np.arange(total) - offsets


def gpnet(st: _Static, owner: np.ndarray, start: np.ndarray, end: np.ndarray, last: int = -1) -> GpNet:
    """gpNet of placement ``owner`` (device per task) whose run started and ended the tasks at
    ``start`` / ``end``; ``last`` the task moved at the previous step (-1: none). O(sum_i |D_i| deg_i)."""
    p = st.p
    pivot = st.node_of[np.arange(p.n), owner]
    # type 1: pivot(a) -> every option of b; type 2: every other option of a -> pivot(b)
    a1, b2 = p.src[st.e2], p.dst[st.e2]
    keep = st.opt2 != pivot[a1]
    src = np.concatenate([pivot[p.src[st.e1]], st.opt2[keep]])
    dst = np.concatenate([st.opt1, pivot[b2[keep]]])
    edge = np.concatenate([st.e1, st.e2[keep]])
    k, l_ = st.node_dev[src], st.node_dev[dst]
    nbytes = p.nbytes[edge]
    delay, rate = st.llat[k, l_], st.mpb[k, l_]
    transfer = delay + nbytes * rate
    xe = _minmax(np.stack([nbytes, rate, delay, transfer], axis=1))
    # start-time potential: over type-1 edges into an option, data-ready time there
    n1 = len(st.e1)
    ready = np.zeros(len(st.node_task))
    np.maximum.at(ready, dst[:n1], end[p.src[st.e1]] + transfer[:n1])
    potential = np.where(st.has_parent[st.node_task], ready - start[st.node_task], 0.0)
    potential[pivot] = 0.0
    # finish-time potential (the change of the task's finish time, its new device's queue
    # ignored) and the task's slack: together HEFT's earliest-finish view of each move
    finish = np.where(st.has_parent[st.node_task], ready, 0.0) + st.node_dur - end[st.node_task]
    finish[pivot] = 0.0
    slack = _slack(st, owner, start, end)[st.node_task]
    rank = np.empty(len(finish))
    rank[np.argsort(finish + slack, kind="stable")] = np.arange(len(finish))
    x = np.concatenate([st.static_x, _minmax(np.stack([potential, finish, slack], axis=1)),
                        (2 * rank / max(len(rank) - 1, 1) - 1)[:, None]], axis=1)
    mask = np.ones(len(st.node_task), dtype=bool)
    mask[pivot] = False
    if last >= 0:
        mask[st.first[last]:st.first[last + 1]] = False
    used = np.bincount(owner, weights=st.need, minlength=p.m)
    mask &= used[st.node_dev] + st.need[st.node_task] <= st.mem[st.node_dev]
    broken = ~np.isfinite(transfer)
    mask[src[broken]] = mask[dst[broken]] = False
    if not mask.any():
        mask[pivot[0]] = True
    return GpNet(st.node_task, st.node_dev, pivot, src, dst, x.astype(np.float32), xe.astype(np.float32), mask,
                 st.level[st.node_task], st.rlevel[st.node_task])


# ---------------------------------------------------------------- the network (torch)


def _sweeps(src: np.ndarray, dst: np.ndarray, level: np.ndarray) -> list[tuple[torch.Tensor, ...]]:
    """The edges grouped by their head's level, in increasing level: per group the edge ids,
    the heads (unique) and each edge's head position among them."""
    lev = level[dst]
    order = np.argsort(lev, kind="stable")
    out = []
    bounds = np.flatnonzero(np.diff(lev[order])) + 1
    for ids in np.split(order, bounds) if len(order) else []:
        heads, local = np.unique(dst[ids], return_inverse=True)
        out.append((torch.from_numpy(ids), torch.from_numpy(heads), torch.from_numpy(local)))
    return out


class GiphNet(nn.Module):
    """GiPH's GNN and policy head (module docstring); ``config.variant`` and ``config.rounds`` pick the variant."""

    def __init__(self, config: Config) -> None:
        super().__init__()
        self.cfg = config
        ne = config.variant == "ne"
        self.cols = torch.tensor([NODE_FEATURES.index(f) for f in config.node_features])
        dn, de = (len(self.cols) + 4, 0) if ne else (len(self.cols), 4)
        self.de = de
        self.nt = nn.Sequential(nn.Linear(dn, dn), nn.ReLU(), nn.Linear(dn, EMBED))
        self.w1, self.w2 = nn.Linear(EMBED + de, EMBED + de), nn.Linear(EMBED + de, EMBED)
        self.v1, self.v2 = nn.Linear(EMBED + de, EMBED + de), nn.Linear(EMBED + de, EMBED)
        self.policy = nn.Sequential(nn.Linear(2 * EMBED, POLICY_HIDDEN), nn.ReLU(), nn.Linear(POLICY_HIDDEN, 1))

    def _update(self, y: torch.Tensor, y0: torch.Tensor, src: torch.Tensor, xe: torch.Tensor, group: tuple,
                w1: nn.Linear, w2: nn.Linear) -> torch.Tensor:
        """Eq. 1 for the heads of one group of edges: ``ReLU(w2 mean ReLU(w1 [y_src | x_e])) + y0``."""
        ids, heads, local = group
        inp = y[src[ids]] if not self.de else torch.cat([y[src[ids]], xe[ids]], 1)
        msg = F.relu(w1(inp))
        agg = torch.zeros(len(heads), msg.shape[1]).index_add(0, local, msg)
        agg = agg / torch.bincount(local, minlength=len(heads)).unsqueeze(1)
        return F.relu(w2(agg)) + y0[heads]

    def _pass(self, y0: torch.Tensor, src: torch.Tensor, xe: torch.Tensor, sweeps: list, w1: nn.Linear,
              w2: nn.Linear) -> torch.Tensor:
        """One pass in topological order, level by level (nodes without in-edges keep ``y0``)."""
        y = y0
        for group in sweeps:
            y = y.index_copy(0, group[1], self._update(y, y0, src, xe, group, w1, w2))
        return y

    def forward(self, g: GpNet) -> torch.Tensor:
        """Logits over ``g``'s nodes (masked ones at -1e9). O(edges) per pass and round, in levels
        (depth) or ``rounds`` steps."""
        x, xe = torch.from_numpy(g.x)[:, self.cols], torch.from_numpy(g.xe)
        src, dst = torch.from_numpy(g.src), torch.from_numpy(g.dst)
        if self.cfg.variant == "ne":  # the incoming edges' mean features join the node's
            inc = torch.zeros(len(x), xe.shape[1]).index_add(0, dst, xe)
            cnt = torch.bincount(dst, minlength=len(x)).clamp(min=1).unsqueeze(1)
            x = torch.cat([x, inc / cnt], 1)
        y0 = self.nt(x)
        if self.cfg.rounds:  # GiPH-k: every node at once, k times
            ids = torch.arange(len(g.src))
            one = (ids, *map(torch.from_numpy, np.unique(g.dst, return_inverse=True)))
            rev = (ids, *map(torch.from_numpy, np.unique(g.src, return_inverse=True)))
            fwd = bwd = y0
            for _ in range(self.cfg.rounds if len(ids) else 0):
                fwd = y0.index_copy(0, one[1], self._update(fwd, y0, src, xe, one, self.w1, self.w2))
                bwd = y0.index_copy(0, rev[1], self._update(bwd, y0, dst, xe, rev, self.v1, self.v2))
        else:
            fwd = self._pass(y0, src, xe, _sweeps(g.src, g.dst, g.level), self.w1, self.w2)
            bwd = self._pass(y0, dst, xe, _sweeps(g.dst, g.src, g.rlevel), self.v1, self.v2)
        q = self.policy(torch.cat([fwd, bwd], 1)).squeeze(1)
        return q.masked_fill(~torch.from_numpy(g.mask), MASKED)


# ---------------------------------------------------------------- the search


def _times(p: Problem, s: Schedule) -> tuple[np.ndarray, np.ndarray]:
    start, end = np.zeros(p.n), np.zeros(p.n)
    for j in s.jobs:
        i = p.task_index[j.task]
        start[i], end[i] = j.start, j.end
    return start, end


def _task_view(st: _Static, g: GpNet, last: int) -> GpNet:
    """GiPH-task-EFT's graph: the task graph with its pivots' features; a task may be picked if
    one of its moves is allowed and it was not moved last."""
    p = st.p
    movable = np.zeros(p.n, dtype=bool)
    allowed = g.mask.copy()
    allowed[g.pivot] = False
    movable[g.task[allowed]] = True
    if last >= 0:
        movable[last] = False
    if not movable.any():
        movable[0] = True
    between = np.isin(g.dst, g.pivot) & np.isin(g.src, g.pivot)
    return GpNet(np.arange(p.n), g.device[g.pivot], g.pivot, g.task[g.src[between]], g.task[g.dst[between]],
                 g.x[g.pivot], g.xe[between], movable, st.level, st.rlevel)


def _eft(st: _Static, g: GpNet, owner: np.ndarray, end: np.ndarray, i: int, rng: np.random.Generator) -> int:
    """The allowed device where task i would finish first: data-ready time + its latency there
    (the queue ignored, as GiPH's code); a random allowed one without parents."""
    p = st.p
    nodes = np.arange(st.first[i], st.first[i + 1])
    nodes = nodes[g.mask[nodes] | (nodes == g.pivot[i])]
    can = st.node_dev[nodes]
    if not p.pred[i]:
        return int(rng.choice(can))
    ready = np.zeros(len(can))
    for e in p.in_edges[i]:
        q = int(p.src[e])
        ready = np.maximum(ready, end[q] + st.llat[owner[q], can] + p.nbytes[e] * st.mpb[owner[q], can])
    return int(can[np.argmin(ready + p.dur[i, can])])


@dataclass
class Search:
    """One search: the best placement seen (device per task) and its makespan (as the search
    saw it: noisy with noise; plus the relocation cost with one), the best-so-far makespan
    after each step (``history[0]``: the start), and for training the log-probability of each
    action taken, the step rewards in the problem's unit (:attr:`_Static.unit`: SLR by default) and
    the policy's entropies."""

    owner: np.ndarray
    makespan: float
    history: list[float] = field(default_factory=list)
    log_probs: list[torch.Tensor] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    entropies: list[torch.Tensor] = field(default_factory=list)


def search(st: _Static, net: GiphNet, owner: np.ndarray, steps: int, rng: np.random.Generator, noise: float = 0.0,
           train: bool = False, greedy: bool = False, deadline: float = math.inf,
           improved: Callable[[float], None] | None = None,
           relocation: RelocationCosts | None = None) -> Search:
    """``steps`` moves of the policy from placement ``owner``, each run by the runtime model
    (GiPH's noise with ``noise``, drawn from ``rng``, which also draws the actions). O(steps x
    (gpNet edges + (n + E) log n)). ``train`` keeps the autograd graph of each action's
    log-probability; ``improved(makespan)`` is told each new best (noiseless runs only).
    With ``relocation`` the makespan of each placement has its relocation cost added, as
    GiPH's §5.3 adds it to the reward."""
    p = st.p
    owner = np.array(owner, dtype=np.int64)

    def run(o: np.ndarray) -> Schedule:
        return simulate(p, o, noise, rng, "giph") if noise else simulate(p, o)

    def value(s: Schedule) -> float:
        return s.makespan if relocation is None else s.makespan + relocation.of_owner(owner)

    s = run(owner)
    start, end = _times(p, s)
    cur = value(s)
    out = Search(owner.copy(), cur, [cur])
    last = -1
    for _ in range(steps):
        if time.perf_counter() >= deadline or interrupt.requested():
            break
        g = gpnet(st, owner, start, end, last)
        view = _task_view(st, g, last) if net.cfg.variant == "task-eft" else g
        with torch.set_grad_enabled(train):
            logp = F.log_softmax(net(view), 0)
        probs = logp.detach().double().exp().numpy()
        a = pick(probs, rng, greedy)
        if train:
            out.log_probs.append(logp[a])
            out.entropies.append(-(logp.exp() * logp).masked_fill(~torch.from_numpy(view.mask), 0.0).sum())
        if net.cfg.variant == "task-eft":
            i, d = a, _eft(st, g, owner, end, a, rng)
        else:
            i, d = int(g.task[a]), int(g.device[a])
        old, owner[i], last = owner[i], d, i
        try:
            s = run(owner)
        except InfeasibleError:  # cannot happen (the mask checks memory and links); undo the move
            owner[i] = old
            out.rewards.append(0.0)
            out.history.append(out.makespan)
            continue
        start, end = _times(p, s)
        now = value(s)
        out.rewards.append((cur - now) / st.unit if st.unit > 0 else 0.0)
        cur = now
        if cur < out.makespan:
            out.owner, out.makespan = owner.copy(), cur
            if improved is not None and not noise:
                improved(cur)
        out.history.append(out.makespan)
    return out


# ---------------------------------------------------------------- policies on file


def shipped_policy(name: str = "mixture") -> str:
    """Path of a policy shipped with mapsched: ``mixture`` (the default, trained on a mixture of
    problem families) or ``multi-diff`` (trained on GiPH's ``multi-diff`` set)."""
    return shipped_file(name)


def _config(data: dict[str, Any]) -> Config:
    """A file's :class:`Config`, its node features from the file: one written before the
    EFT features (GiPH's 4 node features only) loads as it was trained."""
    return file_config(Config, data["config"], node_features=tuple(data["features"]["node"]))


def load_policy(path: str = "", flag: str = "--policy") -> tuple[GiphNet, dict[str, Any]]:
    """The best policy of a ``mapsched train giph`` file or of a shipped policy by name (default:
    :func:`shipped_policy`), and the file's data; a file of another method, features or network
    sizes is refused in one line."""
    path = shipped_policy(path) if path in SHIPPED_GIPH else path or shipped_policy()
    data = load_checkpoint(path, "giph", None, flag=flag)
    where = repr(path)
    features = data.get("features")
    if (not isinstance(features, dict) or features.get("edge") != list(EDGE_FEATURES)
            or not set(features.get("node") or ["?"]) <= set(NODE_FEATURES)):
        raise OptionError(f"{flag}: {where} uses other features ({shown(features)}); this giph reads node features of "
                          f"{','.join(NODE_FEATURES)} and edge {','.join(EDGE_FEATURES)}: train it again")
    with reading(flag, f"{where} does not fit the giph network"):
        net = GiphNet(_config(data))
        net.load_state_dict(data["policy"])
    net.eval()
    return net, data


# ---------------------------------------------------------------- training


def solve_giph(problem: Problem, ctx: Any, policy: str, ratio: float, noise: float, greedy: bool,
               start: str = "best-list", episodes: int = 0, fine_tune: Callable | None = None) -> Schedule:
    """The ``giph`` method (registered in :mod:`mapsched.learned`): see its option help.

    With ``episodes``, the policy is first fine-tuned on this problem by ``fine_tune``
    (:func:`mapsched.learned.giph_training.fine_tune`, which trains this module's network and so
    is passed in rather than imported): REINFORCE episodes, each a search from the start
    placement, the policy kept the one whose search from that start (actions of a fixed seed)
    ends lowest; training stops in time for the final search. Never
    worse than its start: the best placement the search saw (and fine-tuning's best) and the
    start placement are each timed by the work-conserving model (what the search saw) and by
    mapsched's list schedule of the placement (upward rank, insertion), and the start's own
    schedule (a list scheduler's, or the initial one) joins them; the best of all is returned,
    the search's where it ties."""
    p = problem
    deadline = time.perf_counter() + ctx.remaining()
    with one_thread():
        net, data = load_policy(policy)
        owner, origin, own = giph_start(p, ctx, start)
        st = _Static(p)
        steps = max(1, round(ratio * p.n))
        try:
            tuned, note = (fine_tune(p, net, _config(data), owner, ctx, episodes, deadline)
                           if episodes and fine_tune is not None else (None, ""))
            with torch.no_grad():
                res = search(st, net, owner, steps, ctx.rng, noise, greedy=greedy, deadline=deadline,
                             improved=ctx.improved, relocation=ctx.relocation)
        except Diverged:
            raise OptionError(f"--policy: {policy or 'the shipped policy'} gives no finite move probabilities on "
                              "this problem; train it again with a smaller --lr") from None
    found = [simulate(p, res.owner, method="giph"), listed(p, res.owner)]
    if tuned is not None:
        found += [simulate(p, tuned, method="giph"), listed(p, tuned)]
    starts = [simulate(p, owner), listed(p, owner), *([own] if own is not None else [])]
    s = min(found, key=ctx.objective)
    first = min(starts, key=ctx.objective)
    kept = "the search's best"
    if ctx.objective(first) < ctx.objective(s):
        s, kept = first, f"its start (no move found beat {ctx.objective(first):.6g})"
    s = replace(s)  # a copy: the initial schedule, or a list scheduler's, is not changed
    s.log += (f"{note}giph: {len(res.history) - 1} of {steps} steps from {origin} "
              f"placement ({res.history[0]:.6g}), policy {policy or 'shipped'}; best seen {res.makespan:.6g}, SLR "
              f"{st.slr(res.makespan):.4g}; returned {kept}, {s.makespan:.6g}\n")
    ctx.improved(ctx.objective(s))
    return s


def listed(p: Problem, owner: np.ndarray) -> Schedule:
    """mapsched's list schedule of a placement: decoded in upward-rank order, with insertion."""
    from mapsched.scheduling.decoder import Decoder
    from mapsched.scheduling.ranks import rank_order, upward_rank

    return Decoder(p, rank_order(p, upward_rank(p)), insertion=True).schedule(np.asarray(owner)[:, None],
                                                                             method="giph")
