"""Hypothesis strategies for random problems that always admit a schedule.

Each problem is built around a hidden ("planted") mapping that is feasible by
construction: its devices can run its tasks at its batch sizes, its crossings
have links and its memory fits. Everything else is random: missing latencies,
missing links, tight memory, odd batch sizes.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from mapsched import Device, Edge, Link, Objective, Problem, System, Task


@st.composite
def problems(draw, max_tasks: int = 8, max_devices: int = 3, throughput: bool | None = False,
             max_batch: int = 4, min_tasks: int = 1, transfers: float = 1.0, tight: bool = False) -> Problem:
    """A random problem; ``transfers`` divides every link's bandwidth (20: transfers as long as
    the tasks), and ``tight`` leaves one device (the slowest) unlimited and every other one
    just the memory of its planted tasks and a little more: the fast devices cannot hold
    much else."""
    n = draw(st.integers(min_tasks, max_tasks))
    m = draw(st.integers(1, max_devices))
    thr = draw(st.booleans()) if throughput is None else throughput
    L = draw(st.integers(2, max_batch)) if thr else 1
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    integral = draw(st.booleans())  # integer times make ties, floats make rounding

    density = rng.uniform(0.1, 0.6)
    edges = [(i, j) for i in range(n) for j in range(i + 1, n) if rng.random() < density]

    # Batch sizes: each device a random subset of 1..L; at least one device runs L.
    sizes = [sorted({int(b) for b in rng.integers(1, L + 1, size=rng.integers(1, 3))}) for _ in range(m)]
    full = int(rng.integers(m))
    if L not in sizes[full]:
        sizes[full] = sorted({*sizes[full], L})
    hosts = [u for u in range(m) if L in sizes[u]]
    planted = rng.choice(hosts, size=n)

    speed = rng.uniform(0.5, 3.0, size=m)
    tasks = []
    weight = rng.integers(0, 100, size=n).astype(float)
    act = rng.integers(0, 50, size=n).astype(float)
    for i in range(n):
        lat = {}
        base = rng.uniform(1, 20)
        for u in range(m):
            if u != planted[i] and rng.random() < 0.3:
                continue  # this device cannot run task i
            table = {}
            for b in sizes[u]:
                t = base * speed[u] * b ** rng.uniform(0.5, 1.0)
                table[str(b)] = float(round(t)) if integral else float(t)
            lat[f"d{u}"] = table
        tasks.append(Task(f"t{i}", lat, weight[i], act[i] / 2, act[i] / 2))

    # Links: every pair the planted mapping crosses, plus random others.
    linked = {tuple(sorted((int(planted[i]), int(planted[j])))) for i, j in edges
              if planted[i] != planted[j]}
    for u in range(m):
        for v in range(u + 1, m):
            if rng.random() < 0.6:
                linked.add((u, v))
    links = [Link(f"d{u}", f"d{v}", float(rng.choice([100.0, 1000.0, 5000.0])) / transfers,
                  float(rng.choice([0.0, 0.5])))
             for u, v in sorted(linked)]

    # Memory: some devices limited to what the planted mapping needs, plus slack.
    need = np.zeros(m)
    for i in range(n):
        need[planted[i]] += act[i] * L + weight[i]
    devices = []
    biggest = float((act * L + weight).max())
    for u in range(m):
        mem = float("inf")
        if tight:
            if u != int(np.argmax(speed)):
                mem = float(need[u] + rng.uniform(0.0, 1.0) * biggest) + 1.0
        elif rng.random() < 0.5:
            mem = float(max(need[u], 1.0) * rng.uniform(1.0, 1.5)) + 1.0
        devices.append(Device(f"d{u}", mem, tuple(sizes[u])))

    objective = Objective("throughput", L) if thr else Objective()
    edge_list = [Edge(f"t{i}", f"t{j}", float(rng.integers(0, 200))) for i, j in edges]
    p = Problem(tasks, edge_list, System(tuple(devices), tuple(links)), objective, name=f"rand-{seed}")
    p.planted = np.repeat(planted[:, None], L, axis=1)  # a feasible owner array, for tests
    return p


def random_owner(problem: Problem, rng: np.random.Generator) -> np.ndarray:
    """An owner array where every job's device can run its task at batch size 1 or,
    for throughput, one task at a time moved off its planted devices at random."""
    if problem.L == 1:
        return np.array([rng.choice(np.flatnonzero(np.isfinite(problem.dur[i]))) for i in range(problem.n)])[:, None]
    owner = problem.planted.copy()
    for i in range(problem.n):
        if rng.random() < 0.5:
            owner[i] = rng.integers(problem.m, size=problem.L)
    return owner
