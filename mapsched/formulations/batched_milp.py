"""Batched throughput as the seed paper's MILP (section IV-A, conditions 1-7), in Pyomo.

Variables follow the paper: ``x[i, u, l]`` (input l of task i on device u),
``b[i, u, k]`` (task i runs a batch of k on u), ``s[i, u]`` (its start), ``C``.

1. ``sum_u x[i, u, l] == 1``;
2. ``s[i, u] + D[i, u] <= C`` with ``D[i, u] = sum_k t[i, u, k] b[i, u, k]``;
3. per edge (i, j), input l and devices u, v:
   ``s[j, v] >= s[i, u] + D[i, u] + com(e, u, v) - M3 (2 - x[i, u, l] - x[j, v, l])``;
   without a link, ``x[i, u, l] + x[j, v, l] <= 1``;
4./5. ``sum_l x[i, u, l] == sum_k k b[i, u, k]`` and ``sum_k b[i, u, k] <= 1``: the paper's
   "b = 1 iff the batch has k inputs", which this pair states exactly, with no big-M;
6. ``sum_i (im + om)[i] sum_l x[i, u, l] + wm[i] sum_k b[i, u, k] <= mem[u]``, in units of
   :func:`~mapsched.model.scales.byte_unit`;
7. per device and pair of tasks that can both use it, with ``z`` the order and
   ``w = 2 - use[i, u] - use[j, u]``:
   ``s[j, u] >= s[i, u] + D[i, u] - M7 (1 - z) - M7 w`` and its mirror.

Big-M values
    A heuristic makespan ``UB`` caps C (an optimum never exceeds it), so every
    ``s`` and ``s + D`` lies in [0, UB]: ``M7 = UB`` and ``M3 = UB + com`` make a
    relaxed constraint always satisfiable, and an active one exact. Jobs and transfers
    longer than ``2 UB`` are stated as ``2 UB`` (:func:`~.common.capped`), which keeps
    the optimum.

Pairs ordered by a path still need condition 7 here: two jobs of such tasks on
one device may hold different inputs and then no precedence orders them. The
input symmetry is broken as in :mod:`.batched_cpsat`.
"""

from __future__ import annotations

import math
from typing import Any

import pyomo.environ as pyo

from mapsched.formulations.common import HIGHS_BYTES, Plugin, apply_plugins, capped, scaled
from mapsched.formulations.milp import proved_bound, run_highs
from mapsched.model.owners import batch_options
from mapsched.model.problem import Problem
from mapsched.model.scales import byte_unit, highs_time_scale
from mapsched.model.schedule import Schedule

__all__ = ["MilpBatched"]


class MilpBatched:
    """The Pyomo MILP of a throughput problem, with the same interface as the CP-SAT model."""

    def __init__(self, problem: Problem, upper_bound: float, resolution: float | None = None,
                 plugins: tuple[Plugin, ...] = ()) -> None:
        self.problem = problem
        UB = float(upper_bound) * (1 + 1e-9) + 1e-9
        # C <= UB: jobs and transfers beyond 2 UB, shortened to it, keep the optimum (see capped).
        p = capped(problem, 2 * UB)
        # Times in units of 1 / f ms (highs_time_scale): every time below, UB too, is scaled.
        self.f = highs_time_scale(2 * UB)
        p, UB = scaled(p, self.f), UB * self.f
        L = p.L
        sizes = {(i, u): batch_options(p, i, u) for i in range(p.n) for u in range(p.m)}
        X = [(i, u) for (i, u), ks in sizes.items() if ks]
        self.m = m = pyo.ConcreteModel(name=p.name)
        m.X = pyo.Set(initialize=X, dimen=2)
        m.B = pyo.Set(initialize=[(i, u, k) for (i, u) in X for k in sizes[i, u]], dimen=3)
        m.XL = pyo.Set(initialize=[(i, u, lo) for (i, u) in X for lo in range(L)], dimen=3)
        m.b = pyo.Var(m.B, within=pyo.Binary)
        m.x = pyo.Var(m.XL, within=pyo.Binary)
        m.s = pyo.Var(m.X, bounds=(0.0, UB))
        m.C = pyo.Var(bounds=(0.0, UB))
        use = {(i, u): sum(m.b[i, u, k] for k in sizes[i, u]) for (i, u) in X}
        D = {(i, u): sum(float(p.lat[i, u, p.batch_pos[k]]) * m.b[i, u, k] for k in sizes[i, u]) for (i, u) in X}
        self.uses, self.D = use, D
        on = {i: [u for u in range(p.m) if (i, u) in use] for i in range(p.n)}

        m.assign = pyo.Constraint([(i, lo) for i in range(p.n) for lo in range(L)],
                                  rule=lambda m, i, lo: sum(m.x[i, u, lo] for u in on[i]) == 1)
        m.finish = pyo.Constraint(m.X, rule=lambda m, i, u: m.s[i, u] + D[i, u] <= m.C)
        m.size = pyo.Constraint(m.X, rule=lambda m, i, u: sum(m.x[i, u, lo] for lo in range(L))
                                == sum(k * m.b[i, u, k] for k in sizes[i, u]))
        m.one_batch = pyo.Constraint(m.X, rule=lambda m, i, u: use[i, u] <= 1)
        m.device_load = pyo.Constraint(range(p.m), rule=lambda m, u: sum(
            D[i, u] for i in range(p.n) if (i, u) in use) <= m.C)

        m.prec = pyo.ConstraintList()
        for e in range(p.E):
            i, j = int(p.src[e]), int(p.dst[e])
            for u in on[i]:
                for v in on[j]:
                    c = float(p.comm[e, u, v])
                    for lo in range(L):
                        if not math.isfinite(c):
                            m.prec.add(m.x[i, u, lo] + m.x[j, v, lo] <= 1)
                        else:
                            big = UB + c
                            m.prec.add(m.s[j, v] >= m.s[i, u] + D[i, u] + c
                                       - big * (2 - m.x[i, u, lo] - m.x[j, v, lo]))
        m.memory = pyo.ConstraintList()
        for u in range(p.m):
            if not math.isfinite(p.mem[u]):
                continue
            unit = byte_unit(p.mem[u], HIGHS_BYTES)  # no input or weights that u holds take more than mem[u]
            terms = [float(p.act[i] / unit) * sum(m.x[i, u, lo] for lo in range(L))
                     + float(p.weight[i] / unit) * use[i, u] for i in range(p.n) if (i, u) in use]
            if terms:
                m.memory.add(sum(terms) <= float(p.room[u] / unit))
        pairs = [(i, j, u) for u in range(p.m) for i in range(p.n) for j in range(i + 1, p.n)
                 if (i, u) in use and (j, u) in use]
        m.Z = pyo.Set(initialize=pairs, dimen=3)
        m.z = pyo.Var(m.Z, within=pyo.Binary)
        m.disjunct = pyo.ConstraintList()
        for i, j, u in pairs:
            w = 2 - use[i, u] - use[j, u]
            m.disjunct.add(m.s[j, u] >= m.s[i, u] + D[i, u] - UB * (1 - m.z[i, j, u]) - UB * w)
            m.disjunct.add(m.s[i, u] >= m.s[j, u] + D[j, u] - UB * m.z[i, j, u] - UB * w)
        t0 = int(p.topo[0])
        owner = [sum(u * m.x[t0, u, lo] for u in on[t0]) for lo in range(L)]
        m.symmetry = pyo.Constraint(range(L - 1), rule=lambda m, lo: owner[lo] <= owner[lo + 1])
        m.plugins = pyo.ConstraintList()
        apply_plugins(self, plugins)
        m.obj = pyo.Objective(expr=m.C, sense=pyo.minimize)

    # ModelView for plugins (times in ms)
    def use(self, i: int, u: int) -> Any:
        return self.uses.get((i, u), 0)

    def count(self, i: int, u: int) -> Any:
        return sum(self.m.x[i, u, lo] for lo in range(self.problem.L)) if (i, u) in self.uses else 0

    def busy(self, u: int) -> Any:
        return sum(d for (i, uu), d in self.D.items() if uu == u)

    def add(self, constraint: Any) -> None:
        self.m.plugins.add(constraint)

    def hint(self, schedule: Schedule) -> None:
        """Load a schedule as a MIP start."""
        p, m = self.problem, self.m
        jobs = {(p.task_index[j.task], p.device_index[j.device]): j for j in schedule.jobs}
        for (i, u, k) in m.B:
            m.b[i, u, k].set_value(int((i, u) in jobs and len(jobs[i, u].inputs) == k))
        for (i, u, lo) in m.XL:
            m.x[i, u, lo].set_value(int((i, u) in jobs and lo in jobs[i, u].inputs))
        for (i, u) in m.X:
            m.s[i, u].set_value(jobs[i, u].start * self.f if (i, u) in jobs else 0.0)
        for (i, j, u) in m.Z:
            a, b = jobs.get((i, u)), jobs.get((j, u))
            m.z[i, j, u].set_value(int(a is not None and b is not None and a.start <= b.start))
        m.C.set_value(schedule.makespan * self.f)

    def solve(self, time_limit: float | None, threads: int, seed: int = 0, log: bool = False,
              on_solution: Any = None, detect_symmetry: bool = True) -> dict[str, Any]:
        """Solve with HiGHS; same result dict as the CP-SAT model (no progress callback)."""
        res, text, optimal = run_highs(self.m, time_limit, threads, True, log, detect_symmetry)
        out: dict[str, Any] = {"jobs": None, "log": text, "optimal": optimal,
                               "bound": proved_bound(res, optimal, self.f)}
        if res.best_feasible_objective is not None:
            res.solution_loader.load_vars()
            p, m = self.problem, self.m
            out["jobs"] = []
            for (i, u) in m.X:
                mask = sum(1 << lo for lo in range(p.L) if pyo.value(m.x[i, u, lo]) > 0.5)
                if mask:
                    out["jobs"].append((i, u, mask, float(pyo.value(m.s[i, u])) / self.f))
        return out
