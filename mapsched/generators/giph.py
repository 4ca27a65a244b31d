"""GiPH's synthetic workloads (issue 29): layered task graphs with hardware types, and
fully linked device networks with per-link start-up delay and bandwidth.

Hu et al., "GiPH: Generalizable Placement Learning for Adaptive Heterogeneous
Computing" (MLSys 2023) draw their instances with the public code
``uidmice/placement-rl`` (``env/utils.py``: ``graph_dag_structure``,
``generate_graph``, ``generate_network``; ``adaptivity.py``). The functions here
redo those draws in the same order from ``np.random.RandomState(seed)`` and
``random.Random(seed)``, so a seed gives the public code's instance value for value
(checked against it; ``tests/test_giph_workloads.py`` pins values).

Task graph (``giph_graph``): ``h = ceil(U(0.8, 1.2) sqrt(v) / alpha)`` levels, level
widths ``ceil(U(0, 2 alpha sqrt(v)))``; each new task gets an edge from every task of
the earlier levels with probability ``conn_prob``; a random chain through one task per
level (entry task 0 and exit task N-1 included) makes the depth ``h + 2``; a task
without child (parent) gets a random one from a later (earlier) level. Then, from a
fresh ``RandomState(seed)``: per task compute ``C ~ U(C(1 - b/2), C(1 + b/2))`` and a
hardware type ``U{0..types-1}``, per edge bytes ``U(B(1 - b/2), B(1 + b/2))`` (the code's
+-b/2; the paper writes +-b).

Device network (``giph_network``): start-up delay ``DL ~ U(0, 2 delay)`` and
milliseconds per byte ``R ~ U((1 - b/2)/bw, (1 + b/2)/bw)``, both symmetric (the upper
triangle copies the lower one), speed ``SP ~ U(speed (1 - b/2), speed (1 + b/2))``;
device k supports type t with probability ``type_prob`` (at least one, drawn
uniformly); a type no device supports goes to ``int(m type_prob)`` random devices.

In mapsched's format (``giph_problem``): task i on device k takes ``C_i / SP_k`` ms
where k supports i's type (other devices are absent from the task's latency); the link
k-l has ``latency = DL_kl`` ms and ``bandwidth = 1000 / R_kl`` bytes/s, so an edge of B
bytes costs ``DL_kl + B R_kl`` ms as in GiPH's eq. 3. Units are GiPH's abstract ones
(compute 100 / speed 5 = 20 "ms").

Examples
--------
>>> p = giph_problem(giph_graph(10, 0.3, 0.1, seed=0), giph_network(20, seed=1))
>>> p.n, p.m, p.E
(21, 20, 37)
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from itertools import product
from typing import Any

import numpy as np

from mapsched.errors import OptionError
from mapsched.model.problem import Device, Edge, Link, Problem, System, Task

__all__ = [
    "GIPH_SETS", "GiphChange", "GiphExperiment", "GiphGraph", "GiphNetwork", "giph_adapt", "giph_experiment",
    "giph_graph", "giph_initial", "giph_instance", "giph_network", "giph_problem",
]


@dataclass(frozen=True)
class GiphGraph:
    """A GiPH task graph: tasks 0 .. n-1 (0 the entry, n-1 the exit), its edges in the
    public code's order (``networkx`` ``G.edges``), compute per task, bytes per edge and
    the hardware type each task needs."""

    compute: np.ndarray
    types: np.ndarray
    edges: tuple[tuple[int, int], ...]
    nbytes: np.ndarray
    widths: tuple[int, ...]
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.compute)

    @property
    def depth(self) -> int:
        """Levels, entry and exit included (``h + 2``)."""
        return len(self.widths)


@dataclass(frozen=True)
class GiphNetwork:
    """A GiPH device network of m devices: ``delay[k, l]`` (ms), ``rate[k, l]`` (ms per byte,
    1 / bandwidth), ``speed[k]`` and the hardware types each device supports. A device that
    supports no type is absent (the public code's adaptivity experiment removes devices so)."""

    delay: np.ndarray
    rate: np.ndarray
    speed: np.ndarray
    types: tuple[tuple[int, ...], ...]
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def m(self) -> int:
        return len(self.speed)

    @property
    def present(self) -> tuple[str, ...]:
        """Names of the devices that support some type, in order."""
        return tuple(f"d{k}" for k in range(self.m) if self.types[k])


ALPHA = (0.01, 50.0)
"""The shapes taken: the graph is about sqrt(v) / alpha levels of alpha sqrt(v) tasks, and
beyond these a billion levels (alpha 1e-9) or a level of 1e300 tasks was drawn for ever."""


def _check(v: int, alpha: float, conn_prob: float, types: int) -> None:
    if v < 1:
        raise OptionError(f"v: expected a positive number of tasks, got {v}")
    if not ALPHA[0] <= alpha <= ALPHA[1]:
        raise OptionError(f"alpha: expected a shape from {ALPHA[0]:g} to {ALPHA[1]:g} (GiPH's: 0.1-0.3), got {alpha}")
    if not 0.0 <= conn_prob <= 1.0:
        raise OptionError(f"conn_prob: expected a probability in [0, 1], got {conn_prob}")
    if types < 1:
        raise OptionError(f"types: expected at least 1 hardware type, got {types}")


MAX_SEED = 2**32 - 1
"""The largest seed: GiPH's draws come from numpy's ``RandomState``, which takes 32 bits."""


def _seed(seed: int) -> int:
    if not 0 <= seed <= MAX_SEED:
        raise OptionError(f"seed: GiPH's generator takes a seed from 0 to {MAX_SEED}, got {seed}")
    return seed


def giph_graph(
    v: int,
    alpha: float,
    conn_prob: float = 0.1,
    seed: int = 0,
    *,
    compute: float = 100.0,
    nbytes: float = 100.0,
    b_comp: float = 0.4,
    b_comm: float = 0.4,
    types: int = 5,
) -> GiphGraph:
    """GiPH's ``generate_graph(alpha, v, conn_prob, seed, types, compute, nbytes, b_comp,
    b_comm)``: the module docstring's draws. ``v`` is a size knob, not the task count
    (alpha 0.3: 18-25 tasks for v = 10 and 15; alpha 0.1: chains of 34-41).

    Examples
    --------
    >>> g = giph_graph(10, 0.3, 0.1, seed=0)
    >>> g.n, g.depth, g.edges[0]
    (21, 13, (0, 3))
    """
    _check(v, alpha, conn_prob, types)
    rs, py = np.random.RandomState(_seed(seed)), random.Random(seed)
    h_mean = math.sqrt(v) / alpha
    height = int(np.ceil(rs.uniform(h_mean * 0.8, h_mean * 1.2)))
    w_mean = alpha * math.sqrt(v)
    widths = [int(np.ceil(rs.uniform(0, 2 * w_mean))) for _ in range(height)]
    if min(widths, default=1) == 0:  # probability ~0; the public code would fail here too
        raise ValueError(f"seed {seed}: a level of width 0 was drawn; use another seed")
    n = sum(widths) + 2
    succ: list[list[int]] = [[] for _ in range(n)]
    indeg = [0] * n

    def add(a: int, b: int) -> None:
        if b not in succ[a]:
            succ[a].append(b)
            indeg[b] += 1

    levels: list[list[int]] = [[0]]
    cnt = 1
    for w in widths:
        level, first = [], cnt
        for _ in range(w):
            for k in range(first):  # every task of the earlier levels (not this one), in index order
                if rs.rand() < conn_prob:
                    add(k, cnt)
            level.append(cnt)
            cnt += 1
        levels.append(level)
    levels.append([n - 1])
    chain = [py.choice(level) for level in levels]
    for a, b in zip(chain, chain[1:]):
        add(a, b)
    for i in range(1, height + 1):
        for t in levels[i]:
            if not succ[t]:
                add(t, py.choice([x for level in levels[i + 1:] for x in level]))
            if not indeg[t]:
                add(py.choice([x for level in levels[:i] for x in level]), t)

    rs = np.random.RandomState(seed)
    comp, kind = np.empty(n), np.empty(n, dtype=int)
    for i in range(n):
        comp[i] = rs.uniform(compute * (1 - b_comp / 2), compute * (1 + b_comp / 2))
        kind[i] = rs.choice(types)
    edges = tuple((a, b) for a in range(n) for b in succ[a])
    byt = np.array([rs.uniform(nbytes * (1 - b_comm / 2), nbytes * (1 + b_comm / 2)) for _ in edges])
    params = dict(v=v, alpha=alpha, conn_prob=conn_prob, seed=seed, compute=compute, nbytes=nbytes,
                  b_comp=b_comp, b_comm=b_comm, types=types)
    return GiphGraph(comp, kind, edges, byt, (1, *widths, 1), params)


def _network(rs: np.random.RandomState, m: int, types: int, type_prob: float, speed: float, bw: float,
             delay: float, b_bw: float, b_speed: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[list[int]]]:
    dl = rs.uniform(0, 2 * delay, (m, m))
    rate = rs.uniform((1 - b_bw / 2) / bw, (1 + b_bw / 2) / bw, (m, m))
    iu = np.triu_indices(m, 1)
    dl[iu], rate[iu] = dl.T[iu], rate.T[iu]
    np.fill_diagonal(dl, 0.0)
    np.fill_diagonal(rate, 0.0)
    sp = rs.uniform(speed * (1 - b_speed / 2), speed * (1 + b_speed / 2), m)
    sup: list[list[int]] = []
    for _ in range(m):
        mine = [t for t in range(types) if rs.rand() < type_prob]
        if not mine:
            mine.append(int(rs.choice(types)))
        sup.append(mine)
    for t in sorted(set(range(types)) - {t for s in sup for t in s}):
        # int(m type_prob) devices as the code; at least one (the code leaves the type unrunnable then)
        for d in rs.choice(m, max(1, int(m * type_prob)), replace=False).tolist():
            sup[d].append(t)
    return dl, rate, sp, sup


def giph_network(m: int, seed: int = 0, *, type_prob: float = 0.2, speed: float = 5.0, bw: float = 100.0,
                 delay: float = 10.0, b_bw: float = 0.8, b_speed: float = 0.8, types: int = 5) -> GiphNetwork:
    """GiPH's ``generate_network(m, seed, types, type_prob, speed, bw, delay, b_bw, b_speed)``
    (defaults: the paper's experiments). One deviation: where the code would give an
    unsupported type to ``int(m type_prob) = 0`` devices (tiny networks), one device gets it.

    Examples
    --------
    >>> net = giph_network(20, seed=1)
    >>> net.m, bool(net.delay[0, 1] == net.delay[1, 0]), float(net.rate[2, 2])
    (20, True, 0.0)
    """
    if m < 1:
        raise ValueError(f"m: expected at least 1 device, got {m}")
    if not 0.0 <= type_prob <= 1.0:
        raise ValueError(f"type_prob: expected a probability in [0, 1], got {type_prob}")
    if types < 1:
        raise ValueError(f"types: expected at least 1 hardware type, got {types}")
    if not (speed > 0 and bw > 0 and delay >= 0 and 0 <= b_bw < 2 and 0 <= b_speed < 2):
        raise ValueError("speed, bw: expected positive; delay: >= 0; b_bw, b_speed: in [0, 2)")
    dl, rate, sp, sup = _network(np.random.RandomState(_seed(seed)), m, types, type_prob, speed, bw, delay, b_bw,
                                 b_speed)
    params = dict(m=m, seed=seed, type_prob=type_prob, speed=speed, bw=bw, delay=delay, b_bw=b_bw,
                  b_speed=b_speed, types=types)
    return GiphNetwork(dl, rate, sp, tuple(tuple(s) for s in sup), params)


def giph_problem(graph: GiphGraph, network: GiphNetwork, name: str | None = None) -> Problem:
    """The instance (graph, network) in mapsched's format (module docstring): tasks ``t0 ..``,
    devices ``d0 ..`` (those supporting no type left out), fully linked.

    Raises ValueError when no device supports a task's hardware type."""
    names = [f"d{k}" for k in range(network.m)]
    keep = [k for k in range(network.m) if network.types[k]]
    runs: dict[int, list[int]] = {}
    for k in keep:
        for t in network.types[k]:
            runs.setdefault(t, []).append(k)
    tasks = []
    for i in range(graph.n):
        ks = runs.get(int(graph.types[i]), [])
        if not ks:
            raise ValueError(f"task t{i} needs hardware type {int(graph.types[i])}, which no device supports")
        tasks.append(Task(f"t{i}", {names[k]: float(graph.compute[i] / network.speed[k]) for k in sorted(ks)}))
    edges = [Edge(f"t{a}", f"t{b}", float(x)) for (a, b), x in zip(graph.edges, graph.nbytes)]
    links = tuple(Link(names[k], names[q], 1000.0 / float(network.rate[k, q]), float(network.delay[k, q]))
                  for i, k in enumerate(keep) for q in keep[i + 1:])
    system = System(tuple(Device(names[k]) for k in keep), links)
    gp, np_ = graph.params, network.params
    if name is None:
        name = (f"giph-v{gp.get('v')}-a{gp.get('alpha')}-p{gp.get('conn_prob')}-s{gp.get('seed')}"
                f"-m{np_.get('m')}-s{np_.get('seed')}")
    return Problem(tasks, edges, system, name=name)


def giph_initial(graph: GiphGraph, network: GiphNetwork, seed: int = 20) -> dict[str, str]:
    """GiPH's starting placement (``PlacementEnv.random_mapping``; its tests use seed 20 for
    every search method): each task on a uniformly drawn device supporting its type, from
    ``RandomState(seed)``. A mapping for ``solve(..., initial=...)`` and ``simulate``.

    Examples
    --------
    >>> g, net = giph_graph(10, 0.3, 0.1, seed=0), giph_network(20, seed=1)
    >>> m = giph_initial(g, net)
    >>> len(m), m["t0"]
    (21, 'd16')
    """
    rs = np.random.RandomState(seed)
    out = {}
    for i in range(graph.n):
        ks = [k for k in range(network.m) if int(graph.types[i]) in network.types[k]]
        if not ks:
            raise ValueError(f"task t{i} needs hardware type {int(graph.types[i])}, which no device supports")
        out[f"t{i}"] = f"d{int(rs.choice(ks))}"
    return out


def giph_instance(v: int = 10, alpha: float = 0.3, conn_prob: float = 0.1, seed: int = 0, m: int = 20,
                  network_seed: int | None = None, type_prob: float = 0.2) -> Problem:
    """``giph_problem(giph_graph(v, alpha, conn_prob, seed), giph_network(m, network_seed,
    type_prob=type_prob))`` with the paper's other defaults (``network_seed`` defaults to
    ``seed``): a one-call recipe for benchmark cases and the command line."""
    net = giph_network(m, seed if network_seed is None else network_seed, type_prob=type_prob)
    return giph_problem(giph_graph(v, alpha, conn_prob, seed), net)


# ---------------------------------------------------------------- experiment sets (parameters/*.txt)

GIPH_SETS = ("single", "multi", "multi-diff")
"""The public code's ``parameters/single_network.txt``, ``multiple_networks.txt`` and
``multiple_networks_diff.txt``."""

_GRID = dict(alphas=(0.1, 0.2, 0.3), vs=(10, 15), conn_probs=(0.1, 0.2))


@dataclass(frozen=True)
class GiphExperiment:
    """One of GiPH's experiment configurations: graph and network parameters (keyword
    arguments of :func:`giph_graph` and :func:`giph_network`) for training and testing, in
    the public code's order (graphs: alpha, v, conn_prob, then seed; networks: m, then
    seed). Build lazily with :meth:`graphs`, :meth:`networks` and :meth:`problems`."""

    name: str
    train_graphs: tuple[dict[str, Any], ...]
    test_graphs: tuple[dict[str, Any], ...]
    train_networks: tuple[dict[str, Any], ...]
    test_networks: tuple[dict[str, Any], ...]

    def graphs(self, split: str = "test") -> list[GiphGraph]:
        return [giph_graph(**kw) for kw in self.specs(split, "graphs")]

    def networks(self, split: str = "test") -> list[GiphNetwork]:
        return [giph_network(**kw) for kw in self.specs(split, "networks")]

    def problems(self, split: str = "test") -> Iterator[Problem]:
        """Every (graph, network) pair of the split, graph-major. The public code samples its
        test cases from these pairs (300 by default, seeded)."""
        nets = self.networks(split)
        for g in self.graphs(split):
            for net in nets:
                yield giph_problem(g, net)

    def specs(self, split: str, what: str) -> tuple[dict[str, Any], ...]:
        if split not in ("train", "test"):
            raise ValueError(f"split: expected 'train' or 'test', got {split!r}")
        return getattr(self, f"{split}_{what}")


def _graph_specs(seeds: Sequence[int]) -> tuple[dict[str, Any], ...]:
    return tuple(dict(v=v, alpha=a, conn_prob=p, seed=s)
                 for a, v, p in product(_GRID["alphas"], _GRID["vs"], _GRID["conn_probs"]) for s in seeds)


def _net_specs(sizes: Sequence[int], seeds: Sequence[int]) -> tuple[dict[str, Any], ...]:
    return tuple(dict(m=m, seed=s) for m in sizes for s in seeds)


def giph_experiment(name: str) -> GiphExperiment:
    """GiPH's experiment set ``name`` (one of :data:`GIPH_SETS`); graphs over the 12-point grid
    alpha in {0.1, 0.2, 0.3}, v in {10, 15}, conn_prob in {0.1, 0.2}, networks of the paper's
    defaults (type_prob 0.2, speed 5, bw 100, delay 10, b 0.8):

    - ``single``: network seed 1 (20 devices); graph seeds 0-24 train, 25-49 test.
    - ``multi``: network seeds 0-9 (20 devices) for training and testing alike (as the code);
      graph seeds 0-9 train, 25-34 test.
    - ``multi-diff``: 15-24 devices, network seeds 0-14 train, 20-29 test; graph seeds 0-14
      train, 25-34 test.

    Examples
    --------
    >>> e = giph_experiment("multi")
    >>> len(e.train_graphs), len(e.test_graphs), len(e.test_networks)
    (120, 120, 10)
    """
    if name == "single":
        return GiphExperiment(name, _graph_specs(range(25)), _graph_specs(range(25, 50)),
                              _net_specs([20], [1]), _net_specs([20], [1]))
    if name == "multi":
        return GiphExperiment(name, _graph_specs(range(10)), _graph_specs(range(25, 35)),
                              _net_specs([20], range(10)), _net_specs([20], range(10)))
    if name == "multi-diff":
        return GiphExperiment(name, _graph_specs(range(15)), _graph_specs(range(25, 35)),
                              _net_specs(range(15, 25), range(15)), _net_specs(range(15, 25), range(20, 30)))
    raise ValueError(f"experiment: expected one of {', '.join(GIPH_SETS)}, got {name!r}")


# ---------------------------------------------------------------- the device-change sequence (adaptivity.py)


@dataclass(frozen=True)
class GiphChange:
    """One network change: devices removed, or devices added back (with a fresh speed and
    fresh hardware types, so not copies of a present device)."""

    removed: tuple[str, ...] = ()
    added: tuple[str, ...] = ()

    def apply(self, problem: Problem, after: Problem) -> Problem:
        """``problem`` after this change: ``problem.without_devices(removed)`` for a removal; for an
        addition the devices come from ``after`` (the next version's full problem, e.g.
        ``giph_problem(graph, networks[k + 1])``), since they are new devices."""
        if self.removed:
            q = problem.without_devices(self.removed)
            q.name = after.name  # the next version of the network, named as GiPH's generator names it
            return q
        return after


def giph_adapt(changes: int = 20, *, m: int = 20, seed: int = 1, type_prob: float = 0.3,
               speed: float = 5.0, bw: float = 100.0, delay: float = 10.0, b_bw: float = 0.2,
               b_speed: float = 0.2, types: int = 5) -> tuple[list[GiphNetwork], list[GiphChange], list[GiphGraph]]:
    """GiPH's adaptivity experiment (``adaptivity.py``): the network versions (``changes + 1``,
    the first the full network), the changes between them and the 10 test graphs.

    Change i removes ``2`` (i mod 4 = 0) or ``4`` (= 1) random present devices, redrawn until
    every hardware type is still supported, and adds back ``2`` (= 2) or ``4`` (= 3) random
    removed devices, each with a fresh speed ``U(speed (1 - b/2), speed (1 + b/2))`` and fresh
    types; the draws continue the network's ``RandomState(seed)`` as the code's global state
    does. So 20 -> 18 -> 14 -> 16 -> 20 devices, repeated. Graphs: alpha 0.3, v 10, conn_prob
    0.1, b 0.2, seeds 0-9.

    Examples
    --------
    >>> nets, chg, graphs = giph_adapt()
    >>> [len(n.present) for n in nets[:5]], len(chg), len(graphs)
    ([20, 18, 14, 16, 20], 20, 10)
    """
    rs = np.random.RandomState(seed)
    dl, rate, sp, sup = _network(rs, m, types, type_prob, speed, bw, delay, b_bw, b_speed)
    params = dict(m=m, seed=seed, type_prob=type_prob, speed=speed, bw=bw, delay=delay, b_bw=b_bw,
                  b_speed=b_speed, types=types)
    net = GiphNetwork(dl, rate, sp, tuple(tuple(s) for s in sup), params)
    nets, log = [net], []
    # Python sets updated in the code's order, so that list(...) lists them in its (CPython's) order
    present, gone = set(range(m)), set()
    for i in range(changes):
        sp, sup = net.speed.copy(), [list(s) for s in net.types]
        if i % 4 < 2:
            k = (i % 4 + 1) * 2
            if k >= len(present):
                raise ValueError(f"change {i}: cannot remove {k} of {len(present)} devices; use a larger m")
            while True:
                pick = rs.choice(list(present), k, replace=False).tolist()
                if len({t for d in present - set(pick) for t in sup[d]}) == types:
                    break
            gone.update(pick)
            present.difference_update(pick)
            for d in pick:
                sup[d] = []
            log.append(GiphChange(removed=tuple(f"d{d}" for d in pick)))
        else:
            k = (i % 4 - 1) * 2
            pick = rs.choice(list(gone), k, replace=False).tolist()
            gone.difference_update(pick)
            present.update(pick)
            for d in pick:
                sp[d] = rs.uniform(speed * (1 - b_speed / 2), speed * (1 + b_speed / 2))
                mine = [t for t in range(types) if rs.rand() < type_prob]
                if not mine:
                    mine.append(int(rs.choice(types)))
                sup[d] = sorted(set(mine))
            log.append(GiphChange(added=tuple(f"d{d}" for d in pick)))
        net = replace(net, speed=sp, types=tuple(tuple(s) for s in sup))
        nets.append(net)
    graphs = [giph_graph(10, 0.3, 0.1, s, b_comp=0.2, b_comm=0.2) for s in range(10)]
    return nets, log, graphs
