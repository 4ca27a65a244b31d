"""Splitting a task's L inputs into one supported batch per device.

Throughput methods choose, for each task, a vector ``c`` of inputs per device
with ``sum(c) == L``, each non-zero ``c[u]`` a batch size that device u runs for
that task. :func:`owner_from_counts` turns such vectors into the decoder's
owner array, giving each device a contiguous range of inputs.
"""

from __future__ import annotations

import numpy as np

from .problem import Problem

__all__ = ["batch_options", "owner_from_counts", "sample_split"]


def batch_options(problem: Problem, i: int, u: int) -> list[int]:
    """Batch sizes (at most L) at which device u can run task i, memory included."""
    p = problem
    return [
        int(b) for k, b in enumerate(p.batch_sizes)
        if b <= p.L and np.isfinite(p.lat[i, u, k]) and p.weight[i] + p.act[i] * b <= p.room[u]
    ]


def sample_split(problem: Problem, i: int, rng: np.random.Generator) -> np.ndarray:
    """A random feasible split of task i's L inputs over the devices, shape (m,).

    Walks devices backwards over a table of reachable partial sums, so every draw
    is feasible. O(m L nb).
    """
    p, L = problem, problem.L
    opts = [batch_options(p, i, u) for u in range(p.m)]
    reach = np.zeros((p.m + 1, L + 1), dtype=bool)
    reach[0, 0] = True
    for u in range(p.m):
        reach[u + 1] = reach[u]
        for b in opts[u]:
            reach[u + 1, b:] |= reach[u, : L + 1 - b]
    counts = np.zeros(p.m, dtype=np.int64)
    left = L
    for u in range(p.m - 1, -1, -1):
        choices = [b for b in [0, *opts[u]] if b <= left and reach[u, left - b]]
        b = choices[int(rng.integers(len(choices)))]
        counts[u] = b
        left -= b
    return counts


def owner_from_counts(counts: np.ndarray) -> np.ndarray:
    """Owner array ``(n, L)`` giving device u of task i a contiguous block of ``counts[i, u]`` inputs."""
    n, m = counts.shape
    return np.stack([np.repeat(np.arange(m), counts[i]) for i in range(n)])
