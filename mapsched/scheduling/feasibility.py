"""Finding a mapping that fits memory and links, or proving that none exists.

Constructive heuristics place tasks greedily and can paint themselves into a
corner (a device full, no link to a parent's device) even when a feasible
mapping exists. They then call :func:`feasible_counts`, a small CP-SAT model
over "task i runs a batch of b inputs on device u" that keeps as many of the
heuristic's choices as it can. When no mapping exists, the error names the
devices and edges of an infeasible core.
"""

from __future__ import annotations

import math

import numpy as np
from ortools.sat.python import cp_model

from mapsched.engine import interrupt
from mapsched.errors import InfeasibleError
from mapsched.model.owners import batch_options
from mapsched.model.problem import Problem
from mapsched.model.scales import memory_row

__all__ = ["NotFound", "feasible_counts"]


class NotFound(InfeasibleError):
    """No mapping was found in the time given (or before an interrupt): not a proof that none exists."""


REPAIR_LEAST = 1.0
"""Seconds CP-SAT gets for a mapping even past the time limit of the solve it serves
(:func:`mapsched.engine.interrupt.until`), which has nothing to return without one."""


def feasible_counts(problem: Problem, prefer: np.ndarray | None = None, time_limit: float = 30.0) -> np.ndarray:
    """Inputs per task and device, shape (n, m), that fit memory and links.

    Parameters
    ----------
    problem : Problem
    prefer : ndarray, shape (n, m), optional
        Counts to stay close to: the model maximises the number of (task, device)
        pairs whose count it keeps.
    time_limit : float
        Seconds for CP-SAT; within a solve, no more than its time limit leaves (but at
        least :data:`REPAIR_LEAST`).

    Raises
    ------
    InfeasibleError
        When no mapping fits, naming the devices whose memory and the edges whose
        missing links form an infeasible core.

    Notes
    -----
    Memory is counted in whole bytes, or in larger units where sizes are huge (a
    fractional size is rounded up and a capacity down). For throughput, a pair of
    devices without a link may not hold a parent and a child of an edge at all, which
    is stricter than needed but keeps the model small.
    """
    p = problem
    if np.isfinite(p.mem).all():
        # Every task holds its weights and its L inputs somewhere: at least that much memory
        # in all (a proof in O(n), where the model below grows too large on graphs of thousands of tasks).
        need, have = float((p.weight + p.act * p.L).sum()), float(p.room.sum())
        if need > have:
            raise InfeasibleError(f"no mapping of the {p.n} tasks exists: their weights and inputs need "
                                  f"{need:.4g} bytes of memory, and all the devices hold {have:.4g}")
    model = cp_model.CpModel()
    y: dict[tuple[int, int, int], cp_model.IntVar] = {}
    per_task: list[list[tuple[int, cp_model.IntVar]]] = [[] for _ in range(p.n)]  # (inputs, var)
    per_device: list[list[tuple[int, int, cp_model.IntVar]]] = [[] for _ in range(p.m)]  # (task, inputs, var)
    use = {}
    for i in range(p.n):
        for u in range(p.m):
            vs = []
            for b in batch_options(p, i, u):
                y[i, u, b] = var = model.new_bool_var(f"y{i}_{u}_{b}")
                per_task[i].append((b, var))
                per_device[u].append((i, b, var))
                vs.append(var)
            use[i, u] = sum(vs) if vs else 0
            if len(vs) > 1:
                model.add_at_most_one(vs)
        model.add(sum(b * var for b, var in per_task[i]) == p.L)

    assume_mem = {}
    for u in range(p.m):
        if not math.isfinite(p.mem[u]):
            continue
        need = np.array([p.weight[i] + p.act[i] * b for i, b, _ in per_device[u]])
        if len(need):  # one job of each task at most: a term per task
            sizes, room = memory_row(need, p.mem[u], terms=len({i for i, _, _ in per_device[u]}))
            lit = assume_mem[u] = model.new_bool_var(f"mem{u}")
            model.add(cp_model.LinearExpr.weighted_sum([var for _, _, var in per_device[u]], sizes)
                      <= room).only_enforce_if(lit)

    assume_link = {}
    unlinked = [(u, v) for u in range(p.m) for v in range(p.m) if u != v and not np.isfinite(p.link_latency[u, v])]
    if unlinked:
        for e in range(p.E):
            i, j = int(p.src[e]), int(p.dst[e])
            lit = assume_link[e] = model.new_bool_var(f"link{e}")
            for u, v in unlinked:
                if not isinstance(use[i, u], int) and not isinstance(use[j, v], int):
                    model.add(use[i, u] + use[j, v] <= 1).only_enforce_if(lit)

    if prefer is not None:
        keep = [y[i, u, int(prefer[i, u])] for i in range(p.n) for u in range(p.m) if (i, u, int(prefer[i, u])) in y]
        for var in keep:
            model.add_hint(var, 1)
        model.maximize(sum(keep))
    lits = list(assume_mem.values()) + list(assume_link.values())
    model.add_assumptions(lits)

    solver = cp_model.CpSolver()
    # within a solve's time limit (mapsched.engine.interrupt.until), leaving a tenth of what is left for
    # what follows (a fallback placement, the decode), but never less than REPAIR_LEAST
    time_limit = min(time_limit, max(REPAIR_LEAST, 0.9 * interrupt.seconds_left()))
    solver.parameters.max_time_in_seconds = time_limit
    solver.parameters.num_workers = 1  # assumptions cores need a single worker
    solver.parameters.catch_sigint_signal = False  # mapsched.engine.interrupt decides what an interrupt does
    with interrupt.on_stop(solver.stop_search):  # a first Ctrl-C stops it, as it stops a solve
        status = solver.solve(model)
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        counts = np.zeros((p.n, p.m), dtype=np.int64)
        for (i, u, b), var in y.items():
            if solver.value(var):
                counts[i, u] = b
        return counts
    if status == cp_model.INFEASIBLE:
        core = set(solver.sufficient_assumptions_for_infeasibility())
        devs = [p.device_names[u] for u, lit in assume_mem.items() if lit.index in core]
        edges = [f"{p.task_names[p.src[e]]}->{p.task_names[p.dst[e]]}" for e, lit in assume_link.items()
                 if lit.index in core]
        parts = []
        if devs:
            parts.append(f"the memory of {', '.join(devs)}")
        if edges:
            parts.append(f"the missing links under edges {', '.join(edges[:5])}{' ...' if len(edges) > 5 else ''}")
        why = " together with ".join(parts) or "the batch sizes the devices support"
        if edges and p.L > 1:  # the links' rule here is stricter than the format's: no proof
            raise InfeasibleError(f"no mapping of the {p.n} tasks found that keeps each edge's inputs off unlinked "
                                  f"devices altogether: {why} rule(s) every such one out")
        if not _one_job_loses_nothing(p):  # the model's one job per task and device: no proof either
            raise InfeasibleError(f"no mapping of the {p.n} tasks found with one job per task and device: {why} "
                                  "rule(s) every such one out (several jobs of a task on a device, which the "
                                  "format allows but mapsched's methods do not build, might fit)")
        raise InfeasibleError(f"no mapping of the {p.n} tasks exists: {why} rule(s) every one out")
    if interrupt.requested():
        raise NotFound("interrupted before a mapping that fits memory and links was found")
    raise NotFound(f"no feasible mapping found within {time_limit:g} s (memory and links are tight); a longer "
                   "--time-limit may find one")


def _one_job_loses_nothing(p: Problem) -> bool:
    """Whether one job per task and device loses no mapping: every count of a task's inputs
    that several jobs on a device reach, and the device holds, is one batch size it runs
    there. O(n m L nb), on the way to an error only."""
    if p.L == 1:
        return True
    reachable: dict[tuple[int, ...], np.ndarray] = {}
    for i in range(p.n):
        for u in range(p.m):
            opts = tuple(batch_options(p, i, u))
            if not opts:
                continue
            if opts not in reachable:  # counts that sums of these batch sizes make
                reach = np.zeros(p.L + 1, dtype=bool)
                reach[0] = True
                for c in range(1, p.L + 1):
                    reach[c] = any(reach[c - b] for b in opts if b <= c)
                reachable[opts] = reach
            room = p.room[u] - p.weight[i]
            most = p.L if p.act[i] == 0 or math.isinf(room) else min(p.L, int(room // p.act[i]))
            if any(reachable[opts][c] and c not in opts for c in range(1, most + 1)):
                return False
    return True
