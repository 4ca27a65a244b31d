"""The search space shared by ``sa`` and ``ea``: a mapping string and its neighbours.

The string holds one gene per task, in the problem's breadth-first topological
order: the device of the task (latency) or the number of its inputs on each
device (throughput). Its fitness is the makespan the decoder gives it in that
order (``inf`` when memory or links rule it out), plus the solve's relocation cost
when it has one (:mod:`mapsched.engine.relocation`).
"""

from __future__ import annotations

import numpy as np

from mapsched.engine.relocation import RelocationCosts
from mapsched.model.owners import owner_from_counts, sample_split
from mapsched.model.problem import Problem
from mapsched.model.schedule import Schedule
from mapsched.scheduling.decoder import Decoder, owner_counts
from mapsched.scheduling.feasibility import feasible_counts


class MappingSpace:
    """Genes are rows of an ``(n, m)`` count matrix; for latency each row is one-hot."""

    def __init__(self, problem: Problem, relocation: RelocationCosts | None = None) -> None:
        self.p = problem
        self.decoder = Decoder(problem)
        self.relocation = relocation
        self.runnable = [np.flatnonzero(problem.can_run[i]) for i in range(problem.n)]

    def fitness(self, counts: np.ndarray) -> float:
        owner = owner_from_counts(counts)
        f = self.decoder.makespan(owner)
        return f if self.relocation is None else f + self.relocation.of_owner(owner[:, 0])

    def schedule(self, counts: np.ndarray) -> Schedule:
        return self.decoder.schedule(owner_from_counts(counts))

    def mutate_gene(self, counts: np.ndarray, i: int, rng: np.random.Generator) -> None:
        """Give task i another device (latency) or a fresh random split of its inputs."""
        p = self.p
        if p.L == 1:
            others = self.runnable[i][counts[i, self.runnable[i]] == 0]
            if p.contended and rng.random() < 0.5:  # where copies take turns, join a neighbour's device
                near = [int(np.argmax(counts[j])) for j in (*p.pred[i], *p.succ[i])]
                near = [u for u in near if p.can_run[i, u] and counts[i, u] == 0]
                if near:
                    others = np.array(near)
            if len(others):
                counts[i] = 0
                counts[i, rng.choice(others)] = 1
        else:
            counts[i] = sample_split(p, i, rng)

    def feasible(self, counts: np.ndarray) -> np.ndarray:
        """``counts`` if it fits memory and links, else the nearest mapping that does."""
        if np.isfinite(self.fitness(counts)):
            return counts
        return feasible_counts(self.p, counts)

    def from_schedule(self, schedule: Schedule) -> np.ndarray:
        from mapsched.scheduling.decoder import as_owner

        return owner_counts(self.p, as_owner(self.p, schedule.mapping()))

    def fastest(self) -> np.ndarray:
        """Every task on its fastest device (latency), or its fastest split (throughput)."""
        from mapsched.scheduling.construct import _splits

        p = self.p
        counts = np.zeros((p.n, p.m), dtype=np.int64)
        for i in range(p.n):
            if p.L == 1:
                counts[i, self.runnable[i][np.argmin(p.dur[i, self.runnable[i]])]] = 1
            else:
                counts[i] = _splits(p, i)[0]
        return counts
