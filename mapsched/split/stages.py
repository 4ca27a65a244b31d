"""Batched throughput over identical servers: one contiguous stage of modules per server.

With S interchangeable servers (see :mod:`mapsched.model.symmetry`), the chain of modules is
cut into S contiguous stages of balanced work, stage k is solved exactly on the devices
of the k-th server alone, and the stage schedules are stitched and re-timed over the
whole graph by ``split`` (a stage may start on the inputs the one before has
finished). Since the
servers are interchangeable, which server takes which stage does not matter. This
automates the common practice of scheduling one server's share of a large model and
replicating it over the servers, with each stage solved for its own tasks.

It suits models whose weights fill a server (each server then has to hold a share of
the layers anyway). A small model is often better spread over all servers at once, as
the module recursion of ``split`` does; ``split`` keeps the better of the two.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from mapsched.engine.context import SolveContext
from mapsched.errors import ProblemError
from mapsched.model.problem import Problem
from mapsched.model.symmetry import Symmetry
from mapsched.split.modules import ModuleChain

__all__ = ["balanced_stages", "server_stages"]


def balanced_stages(weights: list[float], k: int) -> list[int]:
    """Cut a sequence into ``k`` contiguous non-empty parts (fewer if it is shorter) that
    minimise the largest part's sum; returns the index each part starts at.
    Dynamic programming, O(len(weights)^2 k).

    >>> balanced_stages([1, 1, 1, 1, 4], 2)
    [0, 4]
    """
    n = len(weights)
    k = max(1, min(k, n))
    pre = np.concatenate([[0.0], np.cumsum(weights)])
    # best[j][i]: the least largest part cutting the first i items into j parts
    best = np.full((k + 1, n + 1), np.inf)
    cut = np.zeros((k + 1, n + 1), dtype=int)
    best[0, 0] = 0.0
    for j in range(1, k + 1):
        for i in range(j, n + 1):
            for c in range(j - 1, i):
                v = max(best[j - 1, c], pre[i] - pre[c])
                if v < best[j, i]:
                    best[j, i], cut[j, i] = v, c
    starts, i = [], n
    for j in range(k, 0, -1):
        i = int(cut[j, i])
        starts.append(i)
    return starts[::-1]


def server_stages(p: Problem, chain: ModuleChain, sym: Symmetry, solve_stage: Callable[[Problem, float], Any],
                  stage_time_limit: float, ctx: SolveContext) -> tuple[list[tuple[int, ...]], list[Any]] | None:
    """The stages over the largest class of identical servers and their solutions, or None (no
    such class, or a stage with no schedule on its server). ``solve_stage(sub, limit)`` solves
    a stage subproblem within ``limit`` seconds and returns a solution with its ``jobs``
    ``(task, device, inputs, start)``, or None. Each stage gets at most ``stage_time_limit``
    seconds and, with a time limit on the solve, an even share of half of what is left.
    """
    if not sym.servers:
        return None
    servers = max(sym.servers, key=len)
    first = list(servers[0])
    # Work of a task: its least time per input on one server, at the best batch size.
    per_input = p.lat[:, first, :] / p.batch_sizes[None, None, :]
    fastest = per_input.min(axis=(1, 2))
    if not np.isfinite(fastest).all():
        return None
    weights = [float(fastest[list(mod)].sum()) for mod in chain.modules]
    bounds = [*balanced_stages(weights, len(servers)), len(chain.modules)]
    groups, parts = [], []
    # What one stage leaves of its share, the next gets.
    until = None if ctx.time_limit is None else ctx.elapsed() + 0.5 * ctx.remaining()
    for k, (a, b) in enumerate(zip(bounds, bounds[1:])):
        tasks = tuple(i for mod in chain.modules[a:b] for i in mod)
        try:
            sub = p.restrict(tasks, name=f"{p.name}.stage{k}", devices=servers[k])
        except ProblemError:  # a task no device of a server can run (e.g. memory)
            return None
        limit = stage_time_limit
        if until is not None:
            limit = min(limit, max(0.2, (until - ctx.elapsed()) / (len(bounds) - 1 - k)))
        part = solve_stage(sub, limit)
        if part is None:
            return None
        groups.append(tasks)
        parts.append(part)
    return groups, parts
