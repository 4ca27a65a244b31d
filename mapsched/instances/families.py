"""Families of placement problems, for training learned policies broadly and testing them
on families they never saw (issue 70).

A family draws a task graph of its kind and puts it on a random device network; a seed
gives one problem. Graph kinds:

- ``giph``: GiPH's own generator (:mod:`mapsched.generators.giph`), graph and network, its
  parameters drawn over the paper's ranges (``v`` 10-40, ``alpha`` 0.1-0.5, connection
  probability 0.05-0.3, 4-30 devices, type probability 0.2-0.5).
- ``giph-alt``: GiPH-style cases drawn differently, as issue 70 reports them: 30-task random
  graphs with one entry and one exit, 20 devices of 5 hardware types each running 1-3 of
  them, per-link start-up delays of 5-15 ms at 5-15 GB/s, each task's output 50-150 MB
  (compute 5-50 ms at speed 1, device speeds 0.5-2: the issue leaves them open).
- ``random``: each task takes 1-3 parents among the ``w`` tasks before it (``w`` drawn per graph).
- ``layered``: tasks in 2 to ``2 sqrt(n)`` layers; each takes 1-3 parents in the layer before,
  and one from an earlier layer with probability 0.1.
- ``dnn``: mapsched's DNN generators (VGG, ResNet, Inception, transformer blocks) of drawn depth.
- ``traced``: a shipped real model (``mapsched.instances``, traced op by op), cut into 10-200
  intervals of its topological order, each interval one task (summed compute and bytes).
- ``wired``: a stack of RandWire modules (:func:`~mapsched.generators.random_wired.stack`).

Every graph but ``giph``'s and ``giph-alt``'s gets the same kind of network
(:func:`on_network`): 3-30 fully linked devices; a speed spread of 1-10x; 1-5 hardware
types, each device running 1-3 of them; with probability 1/2 unrelated devices (each task's
time on a device jittered by up to +-50%); per-link bandwidths within +-50% of a base and
start-up delays of up to half a mean transfer; and bytes scaled to a
communication-to-computation ratio (mean transfer time over mean task time) drawn
log-uniformly in [0.1, 10]. So no absolute scale (ms, bytes, device count) identifies a
family, and gpNet's features are min-max scaled per graph besides.

Examples
--------
>>> p = family_problem("layered", seed=3)
>>> p.n >= 10 and 3 <= p.m <= 30
True
>>> family_problem("giph-alt", seed=0).n
30
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import cache

import numpy as np

from mapsched.errors import OptionError, shown
from mapsched.model.problem import Device, Edge, Link, Problem, System, Task

__all__ = ["FAMILIES", "HELD_OUT", "TRAINING", "family_cases", "family_problem", "on_network", "parse_families"]

FAMILIES = ("giph", "giph-alt", "random", "layered", "dnn", "traced", "wired")
TRAINING = ("giph", "random", "layered", "dnn")
"""The families the shipped ``giph`` policy is trained on."""
HELD_OUT = ("giph-alt", "traced", "wired")
"""The families it is tested on, never trained on."""

Structure = tuple[int, list[tuple[int, int]], np.ndarray, np.ndarray]
"""(tasks, edges (a, b) with a < b in a topological order, work per task, bytes per edge)."""


def parse_families(text: str | Sequence[str], flag: str = "--families") -> tuple[str, ...]:
    """Family names from a comma-separated list; an unknown or repeated one is refused in one line."""
    names = [s.strip() for s in text.split(",")] if isinstance(text, str) else list(text)
    bad = [s for s in names if s not in FAMILIES]
    if bad or not names or len(set(names)) < len(names):
        raise OptionError(f"{flag}: expected distinct names among {', '.join(FAMILIES)}, got "
                          f"{shown(','.join(names))}")
    return tuple(names)


def _loguniform(rng: np.random.Generator, lo: float, hi: float) -> float:
    return float(math.exp(rng.uniform(math.log(lo), math.log(hi))))


def _size(rng: np.random.Generator, least: int, most: int) -> int:
    return int(round(_loguniform(rng, least, most)))


def _random(rng: np.random.Generator, n: int) -> Structure:
    window = int(rng.integers(2, max(3, n // 2) + 1))
    edges = []
    for j in range(1, n):
        lo = max(0, j - window)
        k = min(j - lo, int(rng.integers(1, 4)))
        edges += [(int(i), j) for i in sorted(rng.choice(np.arange(lo, j), size=k, replace=False))]
    return n, edges, rng.lognormal(0.0, 0.6, n), rng.lognormal(0.0, 0.6, len(edges))


def _layered(rng: np.random.Generator, n: int) -> Structure:
    layers = int(rng.integers(2, max(2, int(2 * math.sqrt(n))) + 1))
    cuts = np.sort(rng.choice(np.arange(1, n), size=min(layers, n) - 1, replace=False))
    bounds = [0, *cuts.tolist(), n]
    edges = set()
    for lv in range(1, len(bounds) - 1):
        prev = np.arange(bounds[lv - 1], bounds[lv])
        for j in range(bounds[lv], bounds[lv + 1]):
            for i in rng.choice(prev, size=min(len(prev), int(rng.integers(1, 4))), replace=False):
                edges.add((int(i), j))
            if lv > 1 and rng.random() < 0.1:
                edges.add((int(rng.integers(0, bounds[lv - 1])), j))
    edges_ = sorted(edges)
    return n, edges_, rng.lognormal(0.0, 0.6, n), rng.lognormal(0.0, 0.6, len(edges_))


def _of_problem(p: Problem) -> Structure:
    """A problem's graph, its tasks in a topological order: each task's least latency as its
    work, each edge's bytes (at least one, so that a zero-byte edge still costs its start-up)."""
    pos = np.empty(p.n, dtype=np.int64)
    pos[np.asarray(p.topo)] = np.arange(p.n)
    work = np.empty(p.n)
    work[pos] = np.where(p.can_run, p.dur, np.inf).min(axis=1)
    edges = [(int(pos[a]), int(pos[b])) for a, b in zip(p.src, p.dst)]
    return p.n, edges, np.maximum(work, 1e-6), np.maximum(p.nbytes.astype(float), 1.0)


def _dnn(rng: np.random.Generator, n: int) -> Structure:
    from mapsched.generators.networks import inception, resnet, transformer, vgg

    kind = int(rng.integers(4))
    if kind == 0:
        p = vgg(int(rng.choice([11, 16])))
    elif kind == 1:
        p = resnet(tuple(int(x) for x in rng.integers(1, 5, size=4)))
    elif kind == 2:
        p = inception(int(rng.integers(1, max(2, n // 8) + 1)))
    else:
        p = transformer(int(rng.integers(1, max(2, n // 12) + 1)), heads=int(rng.choice([2, 4, 8])))
    return _of_problem(p)


@cache
def _traced_graph(name: str) -> Structure:
    from mapsched import instances

    return _of_problem(instances.load(name))


def _traced(rng: np.random.Generator, n: int) -> Structure:
    from mapsched import instances

    names = sorted(x for x in instances.names() if x.startswith(instances.REAL + "/") and "gpt" not in x)
    total, edges, work, nbytes = _traced_graph(names[int(rng.integers(len(names)))])
    k = min(n, total)
    group = np.minimum(np.arange(total) * k // total, k - 1)  # contiguous intervals of the order: acyclic
    w = np.bincount(group, weights=work, minlength=k)
    merged: dict[tuple[int, int], float] = {}
    for (a, b), x in zip(edges, nbytes):
        if group[a] != group[b]:
            key = (int(group[a]), int(group[b]))
            merged[key] = merged.get(key, 0.0) + float(x)
    keys = sorted(merged)
    return k, keys, w, np.array([merged[e] for e in keys])


def _wired(rng: np.random.Generator, n: int) -> Structure:
    from mapsched.generators.random_wired import stack

    size = int(rng.integers(4, 11))
    kind = str(rng.choice(["er", "ws", "ba"]))
    return _of_problem(stack(modules=max(1, n // (size + 2)), n=size, kind=kind, seed=int(rng.integers(2**31))))


def on_network(structure: Structure, rng: np.random.Generator, *, devices: tuple[int, int] = (3, 30),
               name: str = "family") -> Problem:
    """``structure`` on a random device network (module docstring). O(n m + E + m^2)."""
    n, edges, work, nbytes = structure
    m = int(rng.integers(devices[0], devices[1] + 1))
    speed = np.exp(rng.uniform(0.0, math.log(_loguniform(rng, 1.0, 10.0)), m))
    types = int(rng.integers(1, 6))
    runs = [set(rng.choice(types, size=int(rng.integers(1, min(3, types) + 1)), replace=False).tolist())
            for _ in range(m)]
    for t in set(range(types)) - set().union(*runs):
        runs[int(rng.integers(m))].add(t)
    kind = rng.integers(types, size=n)
    jitter = rng.uniform(0.5, 1.5, (n, m)) if rng.random() < 0.5 else np.ones((n, m))
    dur = work[:, None] / speed[None, :] * jitter
    can = np.array([[int(kind[i]) in runs[k] for k in range(m)] for i in range(n)])
    mean_task = float(np.mean(dur[can]))
    ccr = _loguniform(rng, 0.1, 10.0)
    bw = np.exp(rng.uniform(math.log(0.5), math.log(1.5), (m, m)))  # relative to the base
    delay_share = rng.uniform(0.0, 0.5)
    # bytes per ms at base bandwidth such that a mean edge takes ccr x a mean task, start-up included
    mean_transfer = ccr * mean_task
    base = float(np.mean(nbytes)) / max(mean_transfer * (1 - delay_share), 1e-12) if len(nbytes) else 1.0
    delay = rng.uniform(0.0, 2 * delay_share * mean_transfer, (m, m))
    names = [f"d{k}" for k in range(m)]
    tasks = [Task(f"t{i}", {names[k]: float(dur[i, k]) for k in range(m) if can[i, k]}) for i in range(n)]
    scale = 1e6 / max(float(np.mean(nbytes)), 1e-300) if len(nbytes) else 1.0  # bytes of 1 MB mean
    links = tuple(Link(names[k], names[q], 1000.0 * base * scale * float(bw[k, q]), float(delay[k, q]))
                  for k in range(m) for q in range(k + 1, m))
    return Problem(tasks, [Edge(f"t{a}", f"t{b}", float(x * scale)) for (a, b), x in zip(edges, nbytes)],
                   System(tuple(Device(d) for d in names), links), name=name)


def _giph(rng: np.random.Generator, name: str, devices: tuple[int, int]) -> Problem:
    from mapsched.generators.giph import giph_graph, giph_network, giph_problem

    while True:  # a draw with an empty level or an unrunnable type is drawn again
        s = int(rng.integers(2**31 - 1))
        try:
            g = giph_graph(int(rng.integers(10, 41)), float(rng.uniform(0.1, 0.5)), float(rng.uniform(0.05, 0.3)),
                           seed=s)
            net = giph_network(int(rng.integers(devices[0], devices[1] + 1)), seed=s,
                               type_prob=float(rng.uniform(0.2, 0.5)))
            p = giph_problem(g, net, name=name)
            if devices[0] != devices[1] or p.m == net.m:  # a fixed count: no device without a type left out
                return p
        except ValueError:
            continue


def _giph_alt(rng: np.random.Generator, name: str, m: int = 20) -> Problem:
    n, types = 30, 5
    inner = n - 2
    p = rng.uniform(0.05, 0.2)
    edges = {(i, j) for i in range(1, inner + 1) for j in range(i + 1, inner + 1) if rng.random() < p}
    has_in = {b for _, b in edges}
    has_out = {a for a, _ in edges}
    edges |= {(0, j) for j in range(1, inner + 1) if j not in has_in}
    edges |= {(i, n - 1) for i in range(1, inner + 1) if i not in has_out}
    runs = [set(rng.choice(types, size=int(rng.integers(1, 4)), replace=False).tolist()) for _ in range(m)]
    for t in set(range(types)) - set().union(*runs):
        runs[int(rng.integers(m))].add(t)
    kind = rng.integers(types, size=n)
    speed = rng.uniform(0.5, 2.0, m)
    compute = rng.uniform(5.0, 50.0, n)
    out = rng.uniform(50e6, 150e6, n)
    names = [f"d{k}" for k in range(m)]
    tasks = [Task(f"t{i}", {names[k]: float(compute[i] / speed[k]) for k in range(m) if int(kind[i]) in runs[k]})
             for i in range(n)]
    links = tuple(Link(names[k], names[q], float(rng.uniform(5e9, 15e9)), float(rng.uniform(5.0, 15.0)))
                  for k in range(m) for q in range(k + 1, m))
    return Problem(tasks, [Edge(f"t{a}", f"t{b}", float(out[a])) for a, b in sorted(edges)],
                   System(tuple(Device(d) for d in names), links), name=name)


_GRAPHS: dict[str, Callable[[np.random.Generator, int], Structure]] = {
    "random": _random, "layered": _layered, "dnn": _dnn, "traced": _traced, "wired": _wired}


def family_problem(family: str, seed: int, *, tasks: tuple[int, int] = (10, 200), devices: int | None = None
                   ) -> Problem:
    """Problem ``seed`` of ``family`` (module docstring), its task count drawn log-uniformly
    within ``tasks`` where the family sets it (not ``giph`` and ``giph-alt``; ``dnn`` and
    ``wired`` only roughly), on exactly ``devices`` devices if given (policies trained per
    device count, such as DOPPLER's). Deterministic in (family, seed, devices)."""
    if family not in FAMILIES:
        raise OptionError(f"family: expected one of {', '.join(FAMILIES)}, got {shown(family)}")
    rng = np.random.default_rng([FAMILIES.index(family), seed])
    name = f"{family}-{seed}"
    if family == "giph":
        return _giph(rng, name, (4, 30) if devices is None else (devices, devices))
    if family == "giph-alt":
        return _giph_alt(rng, name, 20 if devices is None else devices)
    graph = _GRAPHS[family](rng, _size(rng, *tasks))
    return on_network(graph, rng, name=name, devices=(3, 30) if devices is None else (devices, devices))


def family_cases(families: Sequence[str], count: int, first_seed: int = 0, *,
                 tasks: tuple[int, int] = (10, 200), devices: int | None = None) -> list[Problem]:
    """``count`` problems of each family, seeds ``first_seed`` on, family by family."""
    return [family_problem(f, first_seed + k, tasks=tasks, devices=devices) for f in families for k in range(count)]
