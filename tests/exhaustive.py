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
    from mapsched.scheduling.decoder import Decoder

    out = []
    dec = Decoder(p)
    for _ in range(k):
        owner = np.array([rng.choice(np.flatnonzero(p.can_run[i])) for i in range(p.n)])[:, None]
        ms = dec.makespan(owner)
        if math.isfinite(ms):
            out.append(ms)
    return out


def _partitions(items: list[int]):
    """Every partition of ``items`` into non-empty blocks."""
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for part in _partitions(rest):
        yield [[first]] + part
        for k in range(len(part)):
            yield part[:k] + [[first] + part[k]] + part[k + 1:]


def exhaustive_batched_optimum(p: Problem) -> float:
    """The throughput optimum of a tiny problem (a few tasks, inputs and devices).

    Every task's inputs are split into jobs in every way (a partition of ``0 .. L-1``, each
    block on a device that runs its size), memory is checked as the validator does, and
    the jobs are appended in every order that respects the inputs' precedences, each as
    early as its device and its inputs' predecessors allow. A schedule shifted left is
    such an appending in the order of its starts, at no greater makespan, so the minimum
    is the optimum. Exponential: keep n * L to 6 or so.
    """
    import itertools

    n, m, L = p.n, p.m, p.L
    room = p.mem * (1 + 1e-9)
    options = []
    for i in range(n):
        found = []
        for part in _partitions(list(range(L))):
            cols = [p.batch_pos[len(b)] for b in part]
            if min(cols) < 0:
                continue
            for devs in itertools.product(range(m), repeat=len(part)):
                times = [float(p.lat[i, u, k]) for u, k in zip(devs, cols)]
                if all(math.isfinite(t) for t in times):
                    found.append([(tuple(b), u, t) for b, u, t in zip(part, devs, times)])
        options.append(found)
    pred_edges = [[(int(p.src[e]), e) for e in p.in_edges[i]] for i in range(n)]
    best = [math.inf]
    for choice in itertools.product(*options):
        use = np.zeros((n, m))
        for i, task_jobs in enumerate(choice):
            for b, u, _ in task_jobs:
                use[i, u] += len(b)
        need = ((use * p.act[:, None]) + (use > 0) * p.weight[:, None]).sum(axis=0)
        if np.any(need > room):
            continue
        jobs = [(i, b, u, t) for i, js in enumerate(choice) for b, u, t in js]
        holder = {(i, x): k for k, (i, b, _, _) in enumerate(jobs) for x in b}
        deps = [{(holder[(q, x)], e) for q, e in pred_edges[i] for x in b} for i, b, _, _ in jobs]
        _append_jobs(p, [(u, t) for _, _, u, t in jobs], deps, best)
    return best[0]


def _append_jobs(p: Problem, jobs: list[tuple[int, float]], deps: list[set[tuple[int, int]]], best: list[float]) -> None:
    """Lower ``best[0]`` to the least makespan of appending ``jobs`` (device, duration) in
    every order that puts each after the jobs in ``deps`` (job, edge) it waits for."""
    end = [0.0] * len(jobs)
    free = [0.0] * p.m

    def rec(done: int, makespan: float) -> None:
        if makespan >= best[0]:
            return
        if done == (1 << len(jobs)) - 1:
            best[0] = makespan
            return
        for k, (u, t) in enumerate(jobs):
            if done >> k & 1 or any(not (done >> d & 1) for d, _ in deps[k]):
                continue
            ready = free[u]
            for d, e in deps[k]:
                ready = max(ready, end[d] + (0.0 if jobs[d][0] == u else float(p.comm[e, jobs[d][0], u])))
            if not math.isfinite(ready):
                continue
            saved = free[u]
            end[k] = free[u] = ready + t
            rec(done | 1 << k, max(makespan, ready + t))
            free[u] = saved

    rec(0, 0.0)


def contended_optimum(p: Problem) -> float:
    """The latency optimum where transfers take turns (:mod:`mapsched.scheduling.contention`).

    Every valid schedule shifts left into one that appends its jobs and transfers, in the
    order they start, each to the lane of each resource it uses that frees first, as soon as
    its predecessors end; so the minimum over all mappings that fit memory and links and all
    such orders is the optimum. Tiny problems only (a depth-first search over orders)."""
    import itertools

    from mapsched.scheduling.contention import Resources

    assert p.L == 1
    res = Resources(p)
    caps = [lanes.capacity for lanes in res.lanes]
    need = (p.weight + p.act).tolist()
    best = [math.inf]
    choices = [np.flatnonzero(p.can_run[i]).tolist() for i in range(p.n)]
    for dev in itertools.product(*choices):
        used = np.zeros(p.m)
        for i, u in enumerate(dev):
            used[u] += need[i]
        if (used > p.room).any():
            continue
        cross = [e for e in range(p.E) if dev[p.src[e]] != dev[p.dst[e]]]
        if any(not math.isfinite(p.comm[e, dev[p.src[e]], dev[p.dst[e]]]) for e in cross):
            continue
        acts = [(float(p.dur[i, dev[i]]), (dev[i],)) for i in range(p.n)]
        acts += [(float(p.comm[e, dev[p.src[e]], dev[p.dst[e]]]), res.route(dev[p.src[e]], dev[p.dst[e]]))
                 for e in cross]
        before = [[] for _ in acts]
        for k, e in enumerate(cross):
            before[p.n + k].append(int(p.src[e]))
            before[int(p.dst[e])].append(p.n + k)
        for e in range(p.E):
            if e not in cross:
                before[int(p.dst[e])].append(int(p.src[e]))
        _best_order(acts, before, caps, best)
    return best[0]


def _best_order(acts: list[tuple[float, tuple[int, ...]]], before: list[list[int]], caps: list[int],
                best: list[float]) -> None:
    """Lower ``best[0]`` to the least makespan of appending the activities ``(duration,
    resources)`` in any order that keeps ``before``, each to the lane of each resource that
    frees first (see :func:`contended_optimum`)."""
    end = [0.0] * len(acts)
    lanes = [[0.0] * c for c in caps]

    def rec(done: int, makespan: float) -> None:
        if done == (1 << len(acts)) - 1:
            best[0] = min(best[0], makespan)
            return
        for a, (d, rs) in enumerate(acts):
            if done >> a & 1 or any(not done >> b & 1 for b in before[a]):
                continue
            start = max([0.0, *(end[b] for b in before[a]), *(min(lanes[r]) for r in rs)])
            if max(makespan, start + d) >= best[0]:
                continue
            saved = [(r, lanes[r].index(min(lanes[r])), min(lanes[r])) for r in rs]
            for r, k, _ in saved:
                lanes[r][k] = start + d
            end[a] = start + d
            rec(done | 1 << a, max(makespan, start + d))
            for r, k, old in saved:
                lanes[r][k] = old

    rec(0, 0.0)
