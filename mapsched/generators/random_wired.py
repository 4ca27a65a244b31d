"""Random-wired modules (Xie et al., 2019) and stacks of them joined by channels.

A module is an Erdos-Renyi, Watts-Strogatz or Barabasi-Albert graph on N nodes,
resampled until connected, with every edge oriented from the lower to the higher
index. Its sources are fed by one input node and its sinks feed one output node,
so the module has a single input and output and every task lies on a path
between them (what MILP-SPLIT's exactness assumes).

A stack chains modules with ``c`` channel edges between consecutive modules:

* ``c == 1``: the output node of one module feeds the input node of the next;
* ``sdep``: each module has ``c`` input and ``c`` output nodes; every source of the
  random graph hangs off an input and every sink feeds an output, so every path
  stems from an input and converges to an output;
* ``wdep``: the ``c`` channel ends are random nodes of the random graph.
"""

from __future__ import annotations

from collections.abc import Sequence

import networkx as nx
import numpy as np

from mapsched.errors import OptionError, shown
from mapsched.generators.costs import Platform, cpu_t4_a100
from mapsched.model.problem import Edge, Objective, Problem, Task

__all__ = ["PRESETS", "module_graph", "random_wired", "stack"]

PRESETS = {"er": ("er", {"p": 0.2}), "ws": ("ws", {"k": 4, "p": 0.75}), "ba": ("ba", {"m": 5})}
"""The seed paper's settings: ER(0.2), WS(4, 0.75), BA(5)."""

MB = 2**20


PARAMS = {"er": ("p",), "ws": ("k", "p"), "ba": ("m",)}
"""The parameters of each random graph model, which ``params`` may give."""


def _check_params(kind: str, params: dict[str, float], fn: str, takes: tuple[str, ...]) -> None:
    """Refuse a keyword that ``fn`` would otherwise ignore (``**params`` takes any): a misspelt
    ``pp=0.5`` built the default graph without a word."""
    known = PARAMS.get(kind)
    for key in params:
        if known is not None and key not in known:
            raise OptionError(f"{fn}: unknown keyword {shown(key)}; it takes {', '.join(takes)} and, for kind "
                              f"{shown(kind)}, {', '.join(known)}")


def _undirected(kind: str, n: int, rng: np.random.Generator, **params: float) -> nx.Graph:
    # WS's ring joins each node to k neighbours (at most n) and BA's each new node to m (at
    # most n - 1, and at least 1: one node is a path); networkx refuses more.
    k, m = min(int(params.get("k", 4)), n), min(int(params.get("m", 5)), n - 1)
    for _ in range(1000):
        seed = int(rng.integers(2**31))
        if kind == "er":
            g = nx.erdos_renyi_graph(n, params.get("p", 0.2), seed=seed)
        elif kind == "ws":
            g = nx.connected_watts_strogatz_graph(n, k, params.get("p", 0.75), seed=seed)
        elif kind == "ba":
            g = nx.barabasi_albert_graph(n, m, seed=seed) if m >= 1 else nx.path_graph(n)
        else:
            raise ValueError(f"kind: expected 'er', 'ws' or 'ba', got {shown(kind)}")
        if n == 1 or nx.is_connected(g):
            return g
    raise ValueError(f"no connected {kind} graph on {n} nodes after 1000 draws; raise the edge probability")


def module_graph(n: int = 10, kind: str = "er", seed: int | np.random.Generator = 0, **params: float) -> nx.DiGraph:
    """The random DAG of one module, nodes ``range(n)``, edges from low to high index."""
    _check_params(kind, params, "module_graph", ("n", "kind", "seed"))
    rng = np.random.default_rng(seed)
    g = _undirected(kind, n, rng, **params)
    return nx.DiGraph((min(a, b), max(a, b)) for a, b in g.edges()) if g.number_of_edges() else nx.DiGraph(g)


def stack(
    modules: int = 10,
    n: int = 10,
    channels: int = 1,
    variant: str = "sdep",
    kind: str = "er",
    seed: int | np.random.Generator = 0,
    platform: Platform | None = None,
    objective: Objective | None = None,
    batch_sizes: Sequence[int] | None = None,
    **params: float,
) -> Problem:
    """A stack of ``modules`` random-wired modules of ``n`` nodes joined by ``channels`` edges.

    Parameters
    ----------
    variant : {"sdep", "wdep"}
        How channel ends attach (ignored with one channel).
    kind : {"er", "ws", "ba"}
        Random graph model; ``params`` override its parameters (``p``, ``k``, ``m``).
    platform : Platform, optional
        Devices and cost parameters (default: :func:`~.costs.cpu_t4_a100`).
    objective : Objective, optional
        Latency by default. For throughput with batch B, devices run the batch sizes
        B/4, B/2, 3B/4 and B unless ``batch_sizes`` says otherwise.

    Examples
    --------
    >>> p = stack(modules=3, n=10, channels=2, variant="sdep", seed=1)
    >>> p.n, len([i for i in range(p.n) if not p.pred[i]])
    (44, 1)
    """
    _check_params(kind, params, "stack", ("modules", "n", "channels", "variant", "kind", "seed", "platform",
                                          "objective", "batch_sizes"))
    if variant not in ("sdep", "wdep"):
        raise ValueError(f"variant: expected 'sdep' or 'wdep', got {shown(variant)}")
    rng = np.random.default_rng(seed)
    if kind in PRESETS and not params:
        params = dict(PRESETS[kind][1])
    plat = platform or cpu_t4_a100()
    objective = objective or Objective()
    if batch_sizes is None:
        B = objective.inputs
        batch_sizes = sorted({max(1, B * q // 4) for q in (1, 2, 3, 4)}) if B > 1 else [1]

    g = nx.DiGraph()
    names: list[str] = []

    def node(label: str) -> int:
        names.append(label)
        g.add_node(len(names) - 1)
        return len(names) - 1

    source = node("input")
    prev_outs = [source]
    for t in range(modules):
        inner = module_graph(n, kind, rng, **params)
        ids = {v: node(f"m{t}.n{v}") for v in sorted(inner.nodes)}
        g.add_edges_from((ids[a], ids[b]) for a, b in inner.edges)
        srcs = [ids[v] for v in sorted(inner) if inner.in_degree(v) == 0]
        sinks = [ids[v] for v in sorted(inner) if inner.out_degree(v) == 0]
        if channels == 1 or variant == "sdep":
            k = channels
            ins = [node(f"m{t}.in{c}") for c in range(k)]
            outs = [node(f"m{t}.out{c}") for c in range(k)]
            _attach(g, ins, srcs, rng, forward=True)
            _attach(g, outs, sinks, rng, forward=False)
        else:  # wdep: channel ends are random inner nodes; sources and sinks stay as they are
            inner_ids = list(ids.values())
            ins = [int(v) for v in rng.choice(inner_ids, size=min(channels, len(inner_ids)), replace=False)]
            outs = [int(v) for v in rng.choice(inner_ids, size=min(channels, len(inner_ids)), replace=False)]
            if t == 0:  # the stack's input feeds every source of the first module
                ins = sorted(set(ins) | set(srcs))
            if t == modules - 1:  # every sink of the last module feeds the stack's output
                outs = sorted(set(outs) | set(sinks))
        _channel(g, prev_outs, ins)
        prev_outs = outs
    sink = node("output")
    g.add_edges_from((o, sink) for o in prev_outs if o != sink)
    return _to_problem(g, names, plat, objective, batch_sizes, rng,
                       f"{kind}{n}-x{modules}-{channels}ch-{variant if channels > 1 else 'single'}")


def _attach(g: nx.DiGraph, ends: list[int], nodes: list[int], rng: np.random.Generator, forward: bool) -> None:
    """Join every node to a random end, and every end to at least one node."""
    order = list(rng.permutation(len(nodes)))
    for k, e in enumerate(ends):
        v = nodes[order[k % len(nodes)]]
        g.add_edge(*((e, v) if forward else (v, e)))
    for v in nodes:
        if (forward and not any(g.has_edge(e, v) for e in ends)) or (
                not forward and not any(g.has_edge(v, e) for e in ends)):
            e = ends[int(rng.integers(len(ends)))]
            g.add_edge(*((e, v) if forward else (v, e)))


def _channel(g: nx.DiGraph, outs: list[int], ins: list[int]) -> None:
    """Channel edges from the previous module's outputs to this module's inputs, each end used."""
    k = max(len(outs), len(ins))
    for c in range(k):
        g.add_edge(outs[c % len(outs)], ins[c % len(ins)])


def _to_problem(g: nx.DiGraph, names: list[str], plat: Platform, objective: Objective,
                batch_sizes: Sequence[int], rng: np.random.Generator, name: str) -> Problem:
    n = len(names)
    # Module nodes are ReLU-SepConv-BN blocks (~0.8 ms on the A100); input, output and
    # channel-end nodes are light aggregations (~0.1 ms).
    heavy = np.array([".n" in s for s in names])
    base = np.where(heavy, rng.lognormal(np.log(0.8), 0.4, n), rng.lognormal(np.log(0.1), 0.3, n))
    lat = plat.latencies(base, batch_sizes, rng)
    act = rng.integers(1, 9, size=n) * MB  # feature maps of 1 to 8 MB per input
    weight = np.where(heavy, rng.integers(16, 256, size=n) * 1024, 0)
    tasks = [Task(names[i], lat[i], float(weight[i]), float(act[i]), float(act[i])) for i in range(n)]
    edges = [Edge(names[a], names[b]) for a, b in sorted(g.edges)]
    return Problem(tasks, edges, plat.system(batch_sizes), objective, name)


def random_wired(n: int = 10, kind: str = "er", seed: int | np.random.Generator = 0, **kwargs) -> Problem:
    """One random-wired module with its input and output nodes (a one-module stack)."""
    given = {k: v for k, v in kwargs.items() if k not in ("variant", "platform", "objective", "batch_sizes")}
    _check_params(kind, given, "random_wired", ("n", "kind", "seed", "variant", "platform", "objective",
                                                "batch_sizes"))
    return stack(modules=1, n=n, channels=1, kind=kind, seed=seed, **kwargs)
