"""DOPPLER's four workloads (issue 28), built from the paper's description and sharded
over N identical GPUs.

Yao et al. (2025) assign the ops of already-sharded tensor programs: ChainMM
``(A x B) + (C x (D x E))`` on 10000 x 10000 matrices; FFNN
``softmax(relu(X W1 + b1) W2 + b2)`` with X 2^15 x 2^5, W1 2^5 x 2^16, W2 2^16 x 2^5;
a Llama-7B block (sequence 4096, embedding 4096, 32 heads, FFN 11008, batch 1) and a
Llama layer (the block between the token embedding and the final RMSNorm: DOPPLER's
Llama-layer adds only light ops to its block; we read them as these two). Graph
inputs (matrices, weights, tokens) are not tasks: they are on every device from the
start, as in DOPPLER's graphs.

Sharding (the paper's Fig. 1 and its EnumerativeOptimizer: an op of N shards on N
devices, at most N aggregations):

- A matmul is cut into N block products over a 3-D grid ``pi x pj x pk = N`` (prime
  factors of N dealt to the smallest side: 4 -> 2 x 2 x 1, 8 -> 2 x 2 x 2); with
  ``pk > 1`` the partial products are summed by N reduction ops, each over a slice of
  the rows of one output block. Llama's projections are cut like Megatron's: Q, K, V,
  gate and up by output columns (whole heads), the attention output and down
  projections by the contraction, then summed.
- Elementwise ops keep their input's blocks; row-wise ops (softmax, RMSNorm, the
  embedding lookup) cut the rows N ways; attention runs per group of heads (scores,
  softmax, times V), one group per block of Q's columns.
- Each edge carries the bytes of the overlap between the producer's block and the
  region the consumer reads (fp32), so re-blocking between ops is paid in transfers.

Each op's time is the roofline of :mod:`.networks` (``max(FLOPs / 19.5 TFLOP/s,
bytes / 1.5 TB/s) + 10 us``, bytes counting the graph inputs read, the edges in and the
output), times the seeded lognormal jitter of :mod:`.costs` (sigma 0.15), the same on
every GPU. ``docs/cost-model.md`` lists the sizes.

Examples
--------
>>> p = chainmm(4)
>>> p.n, p.m, p.E  # 3 matmuls of 4 block products (2 x 2 x 1), 4 adds
(16, 4, 16)
>>> p.task_names[:3]
('AB[0,0]', 'AB[0,1]', 'AB[1,0]')
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from mapsched.generators.costs import DeviceProfile, Platform, _pcie
from mapsched.generators.networks import F32, _Net
from mapsched.model.problem import Problem

__all__ = ["chainmm", "ffnn", "identical_gpus", "llama_block", "llama_layer"]


def identical_gpus(devices: int = 4) -> Platform:
    """``devices`` identical GPUs (the reference device of the roofline; memory unbounded, as
    in DOPPLER's model), every pair joined by PCIe 4.0 x16 (25 GB/s, 10 us)."""
    if devices < 1:
        raise ValueError(f"devices: expected at least 1, got {devices}")
    gpus = tuple(DeviceProfile(f"gpu{k}", 1.0, 0.55, math.inf) for k in range(devices))
    return Platform(f"{devices}-gpus", gpus, tuple(_pcie(a.name, b.name) for k, a in enumerate(gpus)
                                                   for b in gpus[k + 1:]))


def _split3(n: int) -> tuple[int, int, int]:
    """``pi, pj, pk`` with product n: n's prime factors, largest first, each to the smallest side."""
    sides, f, rest = [1, 1, 1], [], n
    p = 2
    while p * p <= rest:
        while rest % p == 0:
            f.append(p)
            rest //= p
        p += 1
    if rest > 1:
        f.append(rest)
    for q in sorted(f, reverse=True):
        sides[sides.index(min(sides))] *= q
    return sides[0], sides[1], sides[2]


def _cuts(size: int, parts: int, unit: int = 1) -> list[int]:
    """Boundaries cutting ``size`` into ``parts`` near-equal pieces at multiples of ``unit``."""
    whole = size // unit
    return [unit * round(whole * k / parts) if k < parts else size for k in range(parts + 1)]


def _overlaps(cuts: Sequence[int], lo: int, hi: int) -> list[tuple[int, int]]:
    """``(block, length)`` of the blocks between ``cuts`` that meet ``[lo, hi)``."""
    return [(a, min(hi, cuts[a + 1]) - max(lo, cuts[a])) for a in range(len(cuts) - 1)
            if cuts[a] < hi and lo < cuts[a + 1]]


@dataclass
class _Tensor:
    """A matrix cut into blocks by row and column boundaries; a block's op, or None for a
    graph input (on every device)."""

    rows: list[int]
    cols: list[int]
    blocks: dict[tuple[int, int], str | None]


Region = tuple[_Tensor, int, int, int, int]  # a tensor and the rows and columns read


class _Graph(_Net):
    """A sharded tensor program: ops read regions of tensors, each overlapped block an edge."""

    def __init__(self, name: str, devices: int) -> None:
        if devices < 1:
            raise ValueError(f"devices: expected at least 1, got {devices}")
        super().__init__(name)
        self.devices = devices

    @staticmethod
    def input(rows: int, cols: int) -> _Tensor:
        return _Tensor([0, rows], [0, cols], {(0, 0): None})

    def block(self, name: str, reads: Sequence[Region], flops: float, out: float,
              after: Sequence[tuple[str, float]] = ()) -> str:
        """An op reading ``reads`` (a tensor of one row or column is broadcast) and the
        ``(op, bytes)`` pairs ``after``."""
        weight, bytes_from = 0.0, dict(after)
        for t, r0, r1, c0, c1 in reads:
            if t.rows[-1] == 1:
                r0, r1 = 0, 1
            if t.cols[-1] == 1:
                c0, c1 = 0, 1
            for a, lr in _overlaps(t.rows, r0, r1):
                for b, lc in _overlaps(t.cols, c0, c1):
                    q = t.blocks[a, b]
                    if q is None:
                        weight += F32 * lr * lc
                    else:
                        bytes_from[q] = bytes_from.get(q, 0.0) + F32 * lr * lc
        return self.op(name, flops, weight, out, list(bytes_from), list(bytes_from.values()))

    def matmul(self, name: str, x: _Tensor, y: _Tensor, split: tuple[int, int, int] | None = None,
               unit: int = 1) -> _Tensor:
        """``x @ y`` as ``pi pj pk`` block products (default: the 3-D split of N), then, for
        ``pk > 1``, ``pi pj pk`` reductions, each summing a slice of rows of one output block."""
        pi, pj, pk = split or _split3(self.devices)
        m, k, n = x.rows[-1], x.cols[-1], y.cols[-1]
        rc, cc, kc = _cuts(m, pi, unit), _cuts(n, pj, unit), _cuts(k, pk, unit)
        rows, blocks = [0], {}
        for i in range(pi):
            sub = [rc[i] + c for c in _cuts(rc[i + 1] - rc[i], pk)] if pk > 1 else [rc[i], rc[i + 1]]
            rows += sub[1:]
            for j in range(pj):
                mi, nj = rc[i + 1] - rc[i], cc[j + 1] - cc[j]
                parts = [self.block(f"{name}[{i},{j},{c}]" if pk > 1 else f"{name}[{i},{j}]",
                                    [(x, rc[i], rc[i + 1], kc[c], kc[c + 1]), (y, kc[c], kc[c + 1], cc[j], cc[j + 1])],
                                    2 * mi * (kc[c + 1] - kc[c]) * nj, F32 * mi * nj) for c in range(pk)]
                if pk == 1:
                    blocks[i, j] = parts[0]
                    continue
                for s in range(pk):  # reduce-scatter: slice s of the rows, from every partial product
                    h = sub[s + 1] - sub[s]
                    blocks[i * pk + s, j] = self.op(f"{name}.sum[{i * pk + s},{j}]", (pk - 1) * h * nj, 0,
                                                    F32 * h * nj, parts, [F32 * h * nj] * pk)
        return _Tensor(rows, cc, blocks)

    def elementwise(self, name: str, xs: Sequence[_Tensor], per: float, rows: list[int] | None = None,
                    cols: list[int] | None = None) -> _Tensor:
        """An op per block (the first input's blocks, or ``rows`` x ``cols``) of ``per`` FLOPs an element."""
        x = xs[0]
        rows, cols = rows or x.rows, cols or x.cols
        blocks = {}
        for a in range(len(rows) - 1):
            for b in range(len(cols) - 1):
                region = (rows[a], rows[a + 1], cols[b], cols[b + 1])
                area = (rows[a + 1] - rows[a]) * (cols[b + 1] - cols[b])
                blocks[a, b] = self.block(f"{name}[{a},{b}]" if len(rows) + len(cols) > 4 else name,
                                          [(t, *region) for t in xs], per * area, F32 * area)
        return _Tensor(rows, cols, blocks)

    def rowwise(self, name: str, x: _Tensor, per: float) -> _Tensor:
        """An op over whole rows (softmax, a norm), the rows cut N ways."""
        return self.elementwise(name, [x], per, _cuts(x.rows[-1], self.devices), [0, x.cols[-1]])


def chainmm(devices: int = 4, size: int = 10000, platform: Platform | None = None, seed: int = 0) -> Problem:
    """ChainMM: ``(A x B) + (C x (D x E))`` on ``size`` x ``size`` matrices, three sharded matmuls
    and a blockwise add (N = 4: 16 ops).

    Examples
    --------
    >>> chainmm(8).n  # 3 x (8 products (2 x 2 x 2) + 8 sums) + 8 adds
    56
    """
    g = _Graph(f"chainmm-{devices}gpu", devices)
    a, b, c, d, e = (g.input(size, size) for _ in range(5))
    ab = g.matmul("AB", a, b)
    cde = g.matmul("CDE", c, g.matmul("DE", d, e))
    g.elementwise("add", [ab, cde], 1)
    return g.problem(platform or identical_gpus(devices), None, seed)


def ffnn(devices: int = 4, batch: int = 2**15, features: int = 2**5, hidden: int = 2**16,
         platform: Platform | None = None, seed: int = 0) -> Problem:
    """FFNN: ``softmax(relu(X W1 + b1) W2 + b2)`` (the paper's Appendix C shapes by default): two
    sharded matmuls, blockwise bias adds and ReLU, a row-wise softmax (N = 4: 24 ops)."""
    g = _Graph(f"ffnn-{devices}gpu", devices)
    x, w1, b1 = g.input(batch, features), g.input(features, hidden), g.input(1, hidden)
    w2, b2 = g.input(hidden, features), g.input(1, features)
    h = g.elementwise("relu", [g.elementwise("add_b1", [g.matmul("XW1", x, w1), b1], 1)], 1)
    z = g.elementwise("add_b2", [g.matmul("HW2", h, w2), b2], 1)
    g.rowwise("softmax", z, 5)
    return g.problem(platform or identical_gpus(devices), None, seed)


def _block(g: _Graph, x: _Tensor, seq: int, emb: int, heads: int, ffn: int) -> _Tensor:
    """A Llama block on the activations ``x`` (seq x emb); returns its output."""
    n, dh = g.devices, emb // heads
    cols, rows = (1, n, 1), (1, 1, n)  # Megatron: column-parallel, then row-parallel and summed
    h = g.rowwise("norm1", x, 5)
    q = g.elementwise("rope_q", [g.matmul("wq", h, g.input(emb, emb), cols, dh)], 6)
    k = g.elementwise("rope_k", [g.matmul("wk", h, g.input(emb, emb), cols, dh)], 6)
    v = g.matmul("wv", h, g.input(emb, emb), cols, dh)
    out = {}
    for j in range(len(q.cols) - 1):
        c0, c1 = q.cols[j], q.cols[j + 1]
        hs = (c1 - c0) // dh  # heads in this group
        s = g.block(f"scores[{j}]", [(q, 0, seq, c0, c1), (k, 0, seq, c0, c1)], 2 * seq * seq * (c1 - c0),
                    F32 * hs * seq * seq)
        p = g.op(f"softmax[{j}]", 5 * hs * seq * seq, 0, F32 * hs * seq * seq, [s], [F32 * hs * seq * seq])
        out[0, j] = g.block(f"pv[{j}]", [(v, 0, seq, c0, c1)], 2 * seq * seq * (c1 - c0), F32 * seq * (c1 - c0),
                            after=[(p, F32 * hs * seq * seq)])
    attn = g.matmul("wo", _Tensor([0, seq], q.cols, out), g.input(emb, emb), rows, dh)
    r1 = g.elementwise("residual1", [attn, x], 1)
    h2 = g.rowwise("norm2", r1, 5)
    gate = g.matmul("w1", h2, g.input(emb, ffn), cols, dh)
    up = g.matmul("w3", h2, g.input(emb, ffn), cols, dh)
    act = g.elementwise("swiglu", [gate, up], 5)
    down = g.matmul("w2", act, g.input(ffn, emb), rows, dh)
    return g.elementwise("residual2", [down, r1], 1)


def llama_block(devices: int = 4, seq: int = 4096, emb: int = 4096, heads: int = 32, ffn: int = 11008,
                platform: Platform | None = None, seed: int = 0) -> Problem:
    """A Llama-7B block (RMSNorm, Q/K/V with RoPE, attention per head group, output projection
    and residual, RMSNorm, SwiGLU FFN and residual) on ``seq`` tokens (N = 4: 76 ops)."""
    g = _Graph(f"llama-block-{devices}gpu", devices)
    _block(g, g.input(seq, emb), seq, emb, heads, ffn)
    return g.problem(platform or identical_gpus(devices), None, seed)


def llama_layer(devices: int = 4, seq: int = 4096, emb: int = 4096, heads: int = 32, ffn: int = 11008,
                platform: Platform | None = None, seed: int = 0) -> Problem:
    """A Llama layer: the token embedding lookup (each of N ops reads its tokens' rows of the
    table, a graph input), a block and the final RMSNorm (N = 4: 84 ops). Like DOPPLER's
    Llama-layer, it adds light ops to the block."""
    g = _Graph(f"llama-layer-{devices}gpu", devices)
    cuts = _cuts(seq, devices)
    blocks: dict[tuple[int, int], str | None] = {
        (a, 0): g.op(f"embed[{a}]", 0, F32 * (cuts[a + 1] - cuts[a]) * (emb + 1), F32 * (cuts[a + 1] - cuts[a]) * emb)
        for a in range(devices)}
    g.rowwise("final_norm", _block(g, _Tensor(cuts, [0, emb], blocks), seq, emb, heads, ffn), 5)
    return g.problem(platform or identical_gpus(devices), None, seed)
