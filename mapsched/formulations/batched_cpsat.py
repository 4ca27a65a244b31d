"""Batched throughput (section IV-A with batching) as a CP-SAT model.

For each task i and device u there is at most one batch: ``b[i, u, k]`` chooses its
size k among the sizes u runs (memory allowing), ``y[i, u, l]`` says input l is in
it, and an optional interval of variable length ``sum_k t[i, u, k] b[i, u, k]``
starting at ``s[i, u]`` runs it. Each input of each task is on exactly one device,
and ``sum_l y[i, u, l] == sum_k k b[i, u, k]``, so the batch size is the number of
inputs. Per edge (i, j), input l and devices (u, v): if ``y[i, u, l]`` and
``y[j, v, l]`` then ``s[j, v] >= end[i, u] + com(e, u, v)``. Memory counts
activations per input and weights once per device used. ``AddNoOverlap`` per device.

Symmetry between inputs
    Relabelling the inputs by one permutation, applied to every task at once, maps
    a schedule to a schedule with the same makespan (every rule treats inputs
    alike). So some optimum gives the first task (in topological order) its inputs
    in device order: ``owner(t0, l) <= owner(t0, l + 1)``. That is the only input
    symmetry broken; within other tasks inputs are linked through the edges.

Times are integer ticks rounded down, and jobs and transfers past the horizon are
shortened to just beyond it, as in :mod:`.cpsat`, so the bound is sound.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from ortools.sat.python import cp_model

from ..problem import Problem
from ..schedule import Schedule
from ..splits import batch_options
from .common import Plugin, apply_plugins, capped
from .cpsat import default_resolution, memory_row, run_cpsat

__all__ = ["CpSatBatched"]


class CpSatBatched:
    """The CP-SAT model of a throughput problem (``problem.L > 1``)."""

    def __init__(self, problem: Problem, upper_bound: float, resolution: float | None = None,
                 plugins: tuple[Plugin, ...] = ()) -> None:
        self.problem = problem
        self.res = res = resolution or default_resolution(upper_bound)
        self.model = m = cp_model.CpModel()
        horizon = math.ceil(upper_bound * res)
        # Jobs and transfers past the horizon shortened to just beyond it, as in CpSatModel.
        p = capped(problem, (horizon + 2) / res)
        L = p.L
        self.C = m.new_int_var(0, horizon, "C")
        self.b: dict[tuple[int, int, int], Any] = {}
        self.x: dict[tuple[int, int], Any] = {}
        self.n: dict[tuple[int, int], Any] = {}
        self.dur: dict[tuple[int, int], Any] = {}
        self.s: dict[tuple[int, int], Any] = {}
        self.end: dict[tuple[int, int], Any] = {}
        self.y: dict[tuple[int, int, int], Any] = {}
        intervals: list[list[Any]] = [[] for _ in range(p.m)]
        options: dict[tuple[int, int], list[int]] = {}
        for i in range(p.n):
            for u in range(p.m):
                sizes = batch_options(p, i, u)
                if not sizes:
                    continue
                options[i, u] = sizes
                bs = {k: m.new_bool_var(f"b{i}_{u}_{k}") for k in sizes}
                self.b.update({(i, u, k): v for k, v in bs.items()})
                m.add_at_most_one(bs.values())
                x = self.x[i, u] = sum(bs.values())
                self.n[i, u] = sum(k * v for k, v in bs.items())
                ticks = {k: int(math.floor(p.lat[i, u, p.batch_pos[k]] * res)) for k in sizes}
                self.dur[i, u] = sum(ticks[k] * v for k, v in bs.items())
                s = self.s[i, u] = m.new_int_var(0, horizon, f"s{i}_{u}")
                self.end[i, u] = s + self.dur[i, u]
                present = m.new_bool_var(f"on{i}_{u}")
                m.add(x == present)
                size = m.new_int_var(0, max(ticks.values()), f"d{i}_{u}")
                m.add(size == self.dur[i, u])
                end = m.new_int_var(0, horizon + max(ticks.values()), f"e{i}_{u}")
                intervals[u].append(m.new_optional_interval_var(s, size, end, present, f"iv{i}_{u}"))
                m.add(end <= self.C).only_enforce_if(present)
                for lo in range(L):
                    self.y[i, u, lo] = m.new_bool_var(f"y{i}_{u}_{lo}")
                    m.add_implication(self.y[i, u, lo], present)
                m.add(sum(self.y[i, u, lo] for lo in range(L)) == self.n[i, u])
            for lo in range(L):
                m.add_exactly_one(self.y[i, u, lo] for u in range(p.m) if (i, u) in self.x)
        for u in range(p.m):
            m.add_no_overlap(intervals[u])
            m.add(sum(self.dur[i, u] for i in range(p.n) if (i, u) in self.x) <= self.C)
            if math.isfinite(p.mem[u]):
                on = [i for i in range(p.n) if (i, u) in self.x]
                # CP-SAT sums the row over every batch-size literal
                most = sum(p.act[i] * k + p.weight[i] for i in on for k in options[i, u])
                sizes, room = memory_row(np.concatenate([p.act[on], p.weight[on]]), p.mem[u], most)
                m.add(cp_model.LinearExpr.weighted_sum([self.n[i, u] for i in on] + [self.x[i, u] for i in on],
                                                       sizes) <= room)

        for e in range(p.E):
            i, j = int(p.src[e]), int(p.dst[e])
            for u in range(p.m):
                for v in range(p.m):
                    if (i, u) not in self.x or (j, v) not in self.x:
                        continue
                    c = p.comm[e, u, v]
                    for lo in range(L):
                        both = [self.y[i, u, lo], self.y[j, v, lo]]
                        if not math.isfinite(c):
                            m.add_bool_or([both[0].Not(), both[1].Not()])
                        else:
                            m.add(self.s[j, v] >= self.end[i, u] + int(math.floor(c * res))).only_enforce_if(both)

        # Inputs are interchangeable: the first task takes them in device order (see module doc).
        t0 = int(p.topo[0])
        owner = [sum(u * self.y[t0, u, lo] for u in range(p.m) if (t0, u) in self.x) for lo in range(L)]
        for lo in range(L - 1):
            m.add(owner[lo] <= owner[lo + 1])
        apply_plugins(self, plugins)
        m.minimize(self.C)

    # ModelView for plugins (times in ticks)
    def use(self, i: int, u: int) -> Any:
        return self.x.get((i, u), 0)

    def count(self, i: int, u: int) -> Any:
        return self.n.get((i, u), 0)

    def busy(self, u: int) -> Any:
        return sum(d for (i, uu), d in self.dur.items() if uu == u)

    def add(self, constraint: Any) -> None:
        self.model.add(constraint)

    def hint(self, schedule: Schedule) -> None:
        """Hint a schedule whose inputs follow the symmetry order (else CP-SAT repairs it)."""
        p, m = self.problem, self.model
        m.clear_hints()
        jobs = {(p.task_index[j.task], p.device_index[j.device]): j for j in schedule.jobs}
        for (i, u, k), var in self.b.items():
            m.add_hint(var, (i, u) in jobs and len(jobs[i, u].inputs) == k)
        for (i, u, lo), var in self.y.items():
            m.add_hint(var, (i, u) in jobs and lo in jobs[i, u].inputs)
        for (i, u), s in self.s.items():
            if (i, u) in jobs:
                m.add_hint(s, int(math.floor(jobs[i, u].start * self.res)))

    def solve(self, time_limit: float | None, threads: int, seed: int = 0, log: bool = False,
              on_solution: Any = None, detect_symmetry: bool = True) -> dict[str, Any]:
        """Solve; returns ``jobs`` [(task, device, mask, start ms)], ``bound`` (ms), ``optimal``, ``log``."""
        solver, status, text = run_cpsat(self, time_limit, threads, seed, log, on_solution,
                                         detect_symmetry=detect_symmetry)
        out: dict[str, Any] = {"jobs": None, "log": text, "optimal": status == cp_model.OPTIMAL,
                               "bound": solver.best_objective_bound / self.res}
        if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            out["jobs"] = self.read(solver)
        return out

    def read(self, solver: Any) -> list[tuple[int, int, int, float]]:
        jobs = []
        for (i, u) in self.x:
            mask = sum(1 << lo for lo in range(self.problem.L) if solver.boolean_value(self.y[i, u, lo]))
            if mask:
                jobs.append((i, u, mask, solver.value(self.s[i, u]) / self.res))
        return jobs

