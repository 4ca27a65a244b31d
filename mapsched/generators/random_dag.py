"""Random DAGs of any size, for scaling benchmarks and property tests.

Each task draws ``degree`` parents uniformly among the ``window`` tasks before it,
so the graph is connected in practice, has depth about ``n / window * degree``
and any width. Device k is ``speeds[k]`` times slower than the fastest, with a
per-task jitter, so that no device wins every task.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mapsched.model.problem import Device, Edge, Link, Objective, Problem, System, Task


def random_dag(
    n: int,
    m: int = 4,
    seed: int | np.random.Generator = 0,
    *,
    degree: int = 2,
    window: int = 20,
    speeds: Sequence[float] | None = None,
    bandwidth: float = 16e9,
    jitter: float = 0.3,
    objective: Objective | None = None,
) -> Problem:
    """A random DAG of ``n`` tasks on ``m`` fully linked devices.

    Task times are around 1 ms on the fastest device; each edge carries 1 to 8 MB,
    so a transfer costs about as much as a task at 16 GB/s. Each task's time on
    each device is scaled by a factor drawn from ``1 +- jitter``; with ``jitter=0``
    devices of equal speed are identical (interchangeable). With a throughput
    objective of B inputs, every device runs batches of B/4, B/2, 3B/4 and B, as
    ``stack``'s do, a batch of b taking ``b ** 0.8`` times a batch of 1.

    Examples
    --------
    >>> p = random_dag(100, 4, seed=1)
    >>> p.n, p.m, p.E > 100
    (100, 4, True)
    """
    if not 0.0 <= jitter < 1.0:
        raise ValueError(f"jitter: expected a fraction in [0, 1), got {jitter}")
    rng = np.random.default_rng(seed)
    speeds = np.asarray(speeds if speeds is not None else np.linspace(1.0, 2.5, m), dtype=float)
    names = [f"d{u}" for u in range(m)]
    B = objective.inputs if objective is not None else 1
    sizes = sorted({max(1, B * q // 4) for q in (1, 2, 3, 4)}) if B > 1 else [1]
    devices = tuple(Device(d, batch_sizes=tuple(sizes)) for d in names)
    links = tuple(Link(names[u], names[v], bandwidth) for u in range(m) for v in range(u + 1, m))
    base = rng.lognormal(0.0, 0.5, size=n)
    factor = rng.uniform(1.0 - jitter, 1.0 + jitter, size=(n, m))
    times = base[:, None] * speeds[None, :] * factor
    if B > 1:
        tasks = [Task(f"t{i}", {names[u]: {b: float(times[i, u] * b**0.8) for b in sizes} for u in range(m)})
                 for i in range(n)]
    else:
        tasks = [Task(f"t{i}", {names[u]: float(times[i, u]) for u in range(m)}) for i in range(n)]
    edges = []
    for j in range(1, n):
        lo = max(0, j - window)
        for i in sorted(set(rng.integers(lo, j, size=min(degree, j)).tolist())):
            edges.append(Edge(f"t{i}", f"t{j}", float(rng.integers(1, 9) * 2**20)))
    return Problem(tasks, edges, System(devices, links), objective, name=f"random-dag-{n}x{m}")
