"""Owner arrays: which device runs which inputs of each task, and splitting a task's L inputs
into one supported batch per device.

Throughput methods choose, for each task, a vector ``c`` of inputs per device
with ``sum(c) == L``, each non-zero ``c[u]`` a batch size that device u runs for
that task. :func:`owner_from_counts` turns such vectors into the decoder's
owner array, giving each device a contiguous range of inputs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from mapsched.errors import InfeasibleError, shown
from mapsched.model.problem import Problem

__all__ = ["as_owner", "batch_options", "memory_use", "owner_counts", "owner_from_counts", "sample_split"]


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


def owner_counts(problem: Problem, owner: np.ndarray) -> np.ndarray:
    """Inputs of each task on each device, shape (n, m)."""
    return np.stack([(owner == u).sum(axis=1) for u in range(problem.m)], axis=1)


def memory_use(problem: Problem, counts: np.ndarray) -> np.ndarray:
    """Bytes used on each device (FORMAT.md rule 6) given inputs per task and device."""
    return problem.act @ counts + problem.weight @ (counts > 0)


def as_owner(problem: Problem, mapping: Any) -> np.ndarray:
    """Normalise a mapping to an ``(n, L)`` owner array of device indices.

    Accepts an array of shape ``(n,)`` (all inputs of a task on one device) or
    ``(n, L)``, a dict from task name to device name, or a dict from task name to
    ``{device name: inputs}``.
    """
    n, L = problem.n, problem.L
    if isinstance(mapping, Mapping):
        owner = np.full((n, L), -1, dtype=np.int64)
        for task, where in mapping.items():
            if task not in problem.task_index:
                raise InfeasibleError(f"mapping: unknown task {shown(task)}")
            i = problem.task_index[task]
            pairs = where.items() if isinstance(where, Mapping) else [(where, range(L))]
            for dev, inputs in pairs:
                if not isinstance(dev, str) or dev not in problem.device_index:
                    raise InfeasibleError(f"mapping[{shown(task)}]: unknown device {shown(dev)}")
                for lo in inputs:
                    if isinstance(lo, bool) or not isinstance(lo, (int, np.integer)) or not 0 <= lo < L:
                        raise InfeasibleError(f"mapping[{shown(task)}]: input {lo} is not in 0..{L - 1}")
                    if owner[i, lo] >= 0:  # the last device named would silently win
                        raise InfeasibleError(f"mapping[{shown(task)}]: input {lo} is on both "
                                              f"{shown(problem.device_names[owner[i, lo]])} and {shown(dev)}")
                    owner[i, lo] = problem.device_index[dev]
        missing = np.flatnonzero((owner < 0).any(axis=1))
        if len(missing):
            raise InfeasibleError(
                f"mapping: task {shown(problem.task_names[missing[0]])} has inputs on no device"
            )
        return owner
    owner = np.asarray(mapping)
    if owner.dtype.kind not in "iu":  # 1.9 was device 1, and 0.7 device 0
        raise InfeasibleError(f"mapping: expected device indices (integers), got an array of {owner.dtype}")
    owner = owner.astype(np.int64)
    if owner.ndim == 1:
        owner = np.repeat(owner[:, None], L, axis=1)
    if owner.shape != (n, L):
        raise InfeasibleError(f"mapping: expected shape ({n},) or ({n}, {L}), got {owner.shape}")
    if owner.min() < 0 or owner.max() >= problem.m:
        raise InfeasibleError(f"mapping: device indices must lie in 0..{problem.m - 1}")
    return owner
