"""Exhaustive search for the latency optimum, independent of every solver.

Every schedule can be shifted left into one that list scheduling produces by
appending tasks in some topological order to the devices of some mapping, at no
greater makespan. So the minimum over all orders and mappings (here by depth-first
search, pruned only by the best makespan found) is the optimum.
"""

from __future__ import annotations

import math

import numpy as np

from mapsched import Problem


def exhaustive_optimum(p: Problem, upper: float = math.inf) -> float:
    """The optimum; ``upper`` (a makespan some valid schedule reaches) only speeds up pruning."""
    assert p.L == 1
    n, m = p.n, p.m
    dur = p.dur.tolist()
    need = (p.weight + p.act).tolist()
    tail = [0.0] * n
    dmin = [min(d for d in dur[i] if math.isfinite(d)) for i in range(n)]
    for i in reversed(p.topo.tolist()):
        tail[i] = max((tail[j] + dmin[j] for j in p.succ[i]), default=0.0)
    comm = p.comm
    pred_edges = [[(int(p.src[e]), e) for e in p.in_edges[i]] for i in range(n)]
    end = [0.0] * n
    dev = [-1] * n
    free = [0.0] * m
    mem = p.mem.tolist()
    best = [upper * (1 + 1e-9)]

    def rec(done: int, makespan: float) -> None:
        if done == (1 << n) - 1:
            best[0] = min(best[0], makespan)
            return
        for i in range(n):
            if done >> i & 1 or any(not (done >> q & 1) for q, _ in pred_edges[i]):
                continue
            for u in range(m):
                if not p.can_run[i, u] or need[i] > mem[u] + 1e-9:
                    continue
                ready = free[u]
                for q, e in pred_edges[i]:
                    ready = max(ready, end[q] + comm[e, dev[q], u])
                fin = ready + dur[i][u]
                if not math.isfinite(fin) or max(makespan, fin + tail[i]) >= best[0]:
                    continue
                saved = free[u]
                end[i], dev[i], free[u] = fin, u, fin
                mem[u] -= need[i]
                rec(done | 1 << i, max(makespan, fin))
                mem[u] += need[i]
                free[u], dev[i] = saved, -1

    rec(0, 0.0)
    return best[0]


def some_valid_makespans(p: Problem, rng: np.random.Generator, k: int = 20) -> list[float]:
    """Makespans of random valid schedules (for bound checks)."""
    from mapsched.decoder import Decoder

    out = []
    dec = Decoder(p)
    for _ in range(k):
        owner = np.array([rng.choice(np.flatnonzero(p.can_run[i])) for i in range(p.n)])[:, None]
        ms = dec.makespan(owner)
        if math.isfinite(ms):
            out.append(ms)
    return out
