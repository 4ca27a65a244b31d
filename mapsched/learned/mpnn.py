"""Message passing over a task graph, in plain torch (no DGL, no torch_geometric).

The encoder of DOPPLER (dgllife's ``MPNNGNN``: an NNConv edge network and a GRU update
shared across rounds), reusable by other learned methods (GiPH, issue 29): it takes
node features, an edge list and edge features, and returns one embedding per node.

A graph is a :class:`GraphTensors`: the problem's edges made bidirected (messages run
both ways; a second edge feature tells the directions apart), with static features
z-scored column-wise, as DOPPLER does at every use.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from mapsched.model.problem import Problem
from mapsched.scheduling.ranks import downward_rank, mean_comm, mean_cost, upward_rank

__all__ = ["EPS", "MPNN", "GraphTensors", "graph_tensors", "path_sums", "zscore"]

EPS = 1e-6
"""Added to a standard deviation before dividing (DOPPLER's z-scoring)."""

EDGE_LEVELS = 32
"""Distinct transfer times an edge feature takes at most: past that, each edge gets the mean of
its quantile bin (DOPPLER's graphs have at most a dozen distinct values; random graphs have one
per edge, which would cost one hidden x hidden matrix per edge)."""


def zscore(x: torch.Tensor, mask: torch.Tensor | None = None, dim: int = -2) -> torch.Tensor:
    """Column-wise z-scores over the rows along ``dim`` where ``mask`` is true (all rows without one).

    Rows outside the mask come out 0. A single row, or equal rows, give 0 (the mean, scaled by
    ``1 / (0 + EPS)``), so a constant feature carries no signal rather than a huge one.
    """
    if mask is None:
        mean = x.mean(dim=dim, keepdim=True)
        std = x.std(dim=dim, keepdim=True, unbiased=False)
        return (x - mean) / (std + EPS)
    m = mask.unsqueeze(-1).to(x.dtype)
    count = m.sum(dim=dim, keepdim=True).clamp(min=1.0)
    mean = (x * m).sum(dim=dim, keepdim=True) / count
    var = (((x - mean) * m) ** 2).sum(dim=dim, keepdim=True) / count
    return (x - mean) / (var.sqrt() + EPS) * m


@dataclass
class GraphTensors:
    """A task graph as tensors for :class:`MPNN` and the policy heads.

    Attributes
    ----------
    x : Tensor
        Static node features, shape (n, 5): mean time, b-level, t-level, the in-edges' and
        the out-edges' mean transfer times (DOPPLER's five, in its order), z-scored.
    src, dst : Tensor
        The bidirected edge list, shape (2E,): the problem's edges, then their reverses.
    edge_attr : Tensor
        Shape (2E, 2): the edge's mean transfer time (binned past ``EDGE_LEVELS`` distinct
        values), z-scored, and +1 forward / -1 reverse.
    bpath, tpath : tuple of Tensor
        Each node's longest path to an exit (b) or from an entry (t), itself included, as an
        Euler tour (:func:`_paths`) for :func:`path_sums`.
    b_level : numpy.ndarray
        Raw b-levels (the Critical Path teacher's priority).
    """

    x: torch.Tensor
    src: torch.Tensor
    dst: torch.Tensor
    edge_attr: torch.Tensor
    bpath: tuple[torch.Tensor, torch.Tensor, torch.Tensor]
    tpath: tuple[torch.Tensor, torch.Tensor, torch.Tensor]
    b_level: np.ndarray

    @property
    def n(self) -> int:
        return int(self.x.shape[0])


def _paths(n: int, nxt: list[int]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The chains v, nxt[v], nxt[nxt[v]], ... (-1 ends one) as an Euler tour of the forest whose
    parent pointers are ``nxt``: each node entered (+1) then left (-1) in depth-first order, so
    that a chain's sum is a prefix sum of the tour up to its first node's entry. O(n) memory,
    however long the chains (listing every chain's nodes would take n x depth)."""
    children: list[list[int]] = [[] for _ in range(n)]
    for v, u in enumerate(nxt):
        if u >= 0:
            children[u].append(v)
    tour: list[int] = []
    sign: list[float] = []
    entry = [0] * n
    for root in (v for v in range(n) if nxt[v] < 0):
        stack = [(root, False)]
        while stack:
            v, leaving = stack.pop()
            if leaving:
                tour.append(v)
                sign.append(-1.0)
                continue
            entry[v] = len(tour)
            tour.append(v)
            sign.append(1.0)
            stack.append((v, True))
            stack.extend((c, False) for c in reversed(children[v]))
    return torch.tensor(tour, dtype=torch.long), torch.tensor(sign).unsqueeze(1), torch.tensor(entry, dtype=torch.long)


def graph_tensors(problem: Problem) -> GraphTensors:
    """The features and paths of ``problem``'s graph (module docstring). O(n + E).

    Times are means over the devices that can run a task (and over links for transfers), as
    HEFT's ranks take them; on DOPPLER's identical GPUs they are the paper's comp and comm.
    """
    p = problem
    w = mean_cost(p)
    c = mean_comm(p) if p.E else np.zeros(0)
    b = upward_rank(p)
    t = downward_rank(p) + w  # DOPPLER's t-level counts the op itself, as its b-level does
    comm_in, comm_out = np.zeros(p.n), np.zeros(p.n)
    np.add.at(comm_in, p.dst, c)
    np.add.at(comm_out, p.src, c)
    x = torch.tensor(np.stack([w, b, t, comm_in, comm_out], axis=1), dtype=torch.float32)
    # The longest-path chains behind b and t: each op's child (parent) that attains its level,
    # the first one on ties, as DOPPLER's cp_utils does.
    cl, dst, src = c.tolist(), p.dst.tolist(), p.src.tolist()
    down = [max(p.out_edges[i], key=lambda e: cl[e] + b[dst[e]], default=-1) for i in range(p.n)]
    up = [max(p.in_edges[i], key=lambda e: cl[e] + t[src[e]], default=-1) for i in range(p.n)]
    bnext = [dst[e] if e >= 0 else -1 for e in down]
    tnext = [src[e] if e >= 0 else -1 for e in up]
    if len(np.unique(c)) > EDGE_LEVELS:  # bin means of quantile bins: few edge matrices to compute
        cuts = np.quantile(c, np.linspace(0, 1, EDGE_LEVELS + 1)[1:-1])
        bins = np.searchsorted(cuts, c, side="right")
        c = (np.bincount(bins, weights=c, minlength=EDGE_LEVELS) / np.maximum(
            np.bincount(bins, minlength=EDGE_LEVELS), 1))[bins]
    s = torch.tensor(p.src.tolist(), dtype=torch.long)
    d = torch.tensor(p.dst.tolist(), dtype=torch.long)
    comm = torch.tensor(c, dtype=torch.float32).unsqueeze(1)
    comm = zscore(comm) if p.E else comm
    attr = torch.cat([torch.cat([comm, torch.ones_like(comm)], 1), torch.cat([comm, -torch.ones_like(comm)], 1)])
    return GraphTensors(zscore(x), torch.cat([s, d]), torch.cat([d, s]), attr, _paths(p.n, bnext),
                        _paths(p.n, tnext), b)


class MPNN(nn.Module):
    """dgllife's ``MPNNGNN`` in plain torch: project, then ``rounds`` of NNConv + GRU.

    Each round sends along every edge the message ``h[src] @ W(edge_attr)``, where the edge
    network ``W`` (Linear-ReLU-Linear to a ``hidden x hidden`` matrix) depends only on the
    static edge features; sums the messages at each node, adds a bias, applies ReLU, and
    updates the node state with a GRU cell shared across rounds. Output: LeakyReLU(0.1) of the
    final states, shape (n, hidden).

    The edge matrices are computed once per forward, for the distinct edge feature rows only
    (DOPPLER's graphs have a handful; :func:`graph_tensors` keeps at most ``2 x EDGE_LEVELS``),
    not once per round and edge as dgllife does: the same maths, with far fewer small
    matrix products.

    Parameters
    ----------
    node_features, edge_features : int
        Input widths.
    hidden : int
        Embedding width (DOPPLER: 128).
    rounds : int
        Message-passing rounds (DOPPLER: 6).
    """

    def __init__(self, node_features: int, edge_features: int, hidden: int = 128, rounds: int = 6) -> None:
        super().__init__()
        self.hidden, self.rounds = hidden, rounds
        self.project = nn.Linear(node_features, hidden)
        self.edge_net = nn.Sequential(nn.Linear(edge_features, hidden), nn.ReLU(), nn.Linear(hidden, hidden * hidden))
        self.bias = nn.Parameter(torch.zeros(hidden))
        self.gru = nn.GRUCell(hidden, hidden)

    def forward(self, x: torch.Tensor, src: torch.Tensor, dst: torch.Tensor, edge_attr: torch.Tensor) -> torch.Tensor:
        """Node embeddings, shape (n, hidden), for node features ``x`` and the edges ``src -> dst``."""
        n, k = x.shape[0], self.hidden
        h = torch.relu(self.project(x))
        groups = []
        if len(src):
            # Edges grouped by their distinct feature rows: one (edges, k) x (k, k) product per
            # group and round, never an (E, k, k) tensor of per-edge matrices.
            values, inverse = torch.unique(edge_attr, dim=0, return_inverse=True)
            weights = self.edge_net(values).view(-1, k, k)
            order = torch.argsort(inverse, stable=True)
            counts = torch.bincount(inverse, minlength=len(values)).tolist()
            src, dst = src[order], dst[order]
            start = 0
            for u, c in enumerate(counts):
                groups.append((u, start, start + c))
                start += c
        for _ in range(self.rounds):
            agg = torch.zeros(n, k, dtype=h.dtype)
            if groups:
                msgs = torch.cat([h[src[a:b]] @ weights[u] for u, a, b in groups])
                agg = agg.index_add(0, dst, msgs)
            h = self.gru(torch.relu(agg + self.bias), h)
        return nn.functional.leaky_relu(h, 0.1)

    def encode(self, g: GraphTensors) -> torch.Tensor:
        """:meth:`forward` on a :class:`GraphTensors`."""
        return self(g.x, g.src, g.dst, g.edge_attr)


def path_sums(h: torch.Tensor, path: tuple[torch.Tensor, torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """Row v: the sum of ``h`` over the nodes of v's path (:attr:`GraphTensors.bpath`).

    Examples
    --------
    >>> tour = _paths(3, [1, 2, -1])  # the chain 0 -> 1 -> 2
    >>> path_sums(torch.tensor([[1.0], [10.0], [100.0]]), tour).squeeze(1).tolist()
    [111.0, 110.0, 100.0]
    """
    tour, sign, entry = path
    return (h[tour] * sign).cumsum(0)[entry]
