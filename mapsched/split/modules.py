"""Finding the modules of a task graph: the chain MILP-SPLIT solves module by module.

Single channel
    On the undirected view, bridges and articulation points cut the graph. An
    articulation point that ends no bridge becomes a *node channel*: it closes one
    module and, as a zero-time copy tied to its device, opens the next (the dummy
    node and zero-cost edge of the seed paper). Removing the bridges leaves the
    modules.

Several channels
    The k-edge-connected components (k = channels + 1) are the modules, joined by
    at most ``channels`` edges.

Making a chain
    A component need not be convex in the DAG, so the quotient graph is first
    condensed (components on a cycle of the quotient merge). Its components are then
    laid out in a topological order (ties: smallest task index first), and a cut is
    kept between two consecutive components only where at most ``channels`` edges
    (one node, for a node channel) cross it; components between kept cuts merge into
    one module. A cut that an edge jumps over on its way to a later module is
    dropped too, so that every channel joins consecutive modules: the quotient of
    the result is a path.
"""

from __future__ import annotations

import heapq
import math
import time
from dataclasses import dataclass, replace

import networkx as nx
import numpy as np

from mapsched.errors import OptionError, ProblemError
from mapsched.model.problem import Problem, System

__all__ = ["ModuleChain", "detect_modules", "k_edge_classes", "step_problem"]


@dataclass(frozen=True)
class ModuleChain:
    """Modules in chain order and the channels between consecutive modules.

    Attributes
    ----------
    modules : tuple of tuple of int
        Task indices of each module.
    channels : tuple of tuple of int
        ``channels[t]``: indices of the edges from module t to module t + 1 (empty
        for a node channel).
    nodes : tuple of int or None
        ``nodes[t]``: the articulation point shared by modules t and t + 1, which
        belongs to module t and opens module t + 1 as a zero-time copy; None for
        edge channels.
    """

    modules: tuple[tuple[int, ...], ...]
    channels: tuple[tuple[int, ...], ...]
    nodes: tuple[int | None, ...]

    @property
    def width(self) -> int:
        """The most edges between two consecutive modules (1 for a single-channel chain)."""
        return max((len(c) for c in self.channels), default=0) or 1

    def inputs(self, problem: Problem, t: int) -> list[int]:
        """Tasks of module t that receive its incoming channel (the node copy for a node channel)."""
        if t == 0:
            return sorted({i for i in self.modules[0] if not any(q in self.modules[0] for q in problem.pred[i])})
        if self.nodes[t - 1] is not None:
            return [self.nodes[t - 1]]
        return sorted({int(problem.dst[e]) for e in self.channels[t - 1]})

    def outputs(self, problem: Problem, t: int) -> list[int]:
        """Tasks of module t that feed its outgoing channel."""
        if t == len(self.modules) - 1:
            mod = set(self.modules[t])
            return sorted(i for i in mod if not any(j in mod for j in problem.succ[i]))
        if self.nodes[t] is not None:
            return [self.nodes[t]]
        return sorted({int(problem.src[e]) for e in self.channels[t]})

    def describe(self, problem: Problem) -> str:
        """A readable account: one line per module and channel."""
        lines = [f"{len(self.modules)} modules, at most {self.width} channel(s) between consecutive modules"]
        for t, mod in enumerate(self.modules):
            names = [problem.task_names[i] for i in mod]
            shown = ", ".join(names[:6]) + (f", ... ({len(names)} tasks)" if len(names) > 6 else "")
            lines.append(f"  M{t}: {shown}")
            if t < len(self.channels):
                if self.nodes[t] is not None:
                    lines.append(f"    node channel {problem.task_names[self.nodes[t]]}")
                else:
                    edges = [f"{problem.task_names[problem.src[e]]}->{problem.task_names[problem.dst[e]]}"
                             for e in self.channels[t]]
                    lines.append(f"    channel {', '.join(edges)}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return f"ModuleChain({len(self.modules)} modules, sizes {[len(m) for m in self.modules]}, width {self.width})"


def detect_modules(problem: Problem, channels: int = 1, min_size: int = 3,
                   deadline: float = math.inf) -> ModuleChain:
    """Split the task graph into a chain of modules joined by at most ``channels`` edges.

    Parameters
    ----------
    problem : Problem
    channels : int
        1: bridges and articulation points; more: k-edge-connected components
        with ``k = channels + 1``.
    min_size : int
        With several channels, smaller k-edge components (typically a module's
        channel ends) join the component they share most edges with.
    deadline : float
        A ``time.perf_counter()`` time: the k-edge components raise ``TimeoutError`` past
        it (seconds on graphs of a thousand tasks with no module structure).

    Notes
    -----
    O(n + E) for one channel (bridges, articulation points); O(n k E) for the
    k-edge components (:func:`k_edge_classes`).

    Examples
    --------
    >>> from mapsched.generators import stack
    >>> chain = detect_modules(stack(modules=3, n=10, seed=1))
    >>> len(chain.modules) >= 3, chain.width
    (True, 1)
    """
    p = problem
    # Without the edges' data: to_undirected() deep-copies it, seconds at tens of thousands of tasks.
    und = nx.Graph()
    und.add_nodes_from(range(p.n))
    und.add_edges_from(zip(p.src.tolist(), p.dst.tolist()))
    if channels <= 1:
        return _chain(p, _bridged_parts(p, und), 1)
    parts = _absorb_fragments(p, k_edge_classes(und, channels + 1, deadline), min_size)
    by_components = _chain(p, parts, channels)
    # Sparse modules are not (channels+1)-edge-connected and crumble; cutting the
    # task order itself then finds the boundaries. Keep whichever chain is longer.
    by_order = _chain(p, [{i} for i in range(p.n)], channels, min_size)
    return by_order if len(by_order.modules) > len(by_components.modules) else by_components


def k_edge_classes(graph: nx.Graph, k: int, deadline: float = math.inf) -> list[set]:
    """The k-edge-connected components of an undirected graph: the classes of "at least k
    edge-disjoint paths join u and v", as :func:`networkx.k_edge_components` gives them.

    networkx finds every pairwise edge connectivity in full (n - 1 maximum flows to the
    end); only whether it reaches k matters here, so each flow stops after k augmenting
    paths. Every flow either joins t to s's class (k paths) or ends below k, and then
    the nodes its minimum cut leaves on t's side can be in no class with s: they are
    split off and treated alike. At most n - 1 flows of at most k augmenting paths each:
    O(n k E), against seconds for networkx on a few hundred tasks. Past ``deadline`` (a
    ``time.perf_counter()`` time) it raises ``TimeoutError``.

    Examples
    --------
    >>> g = nx.disjoint_union(nx.complete_graph(4), nx.complete_graph(4))
    >>> g.add_edges_from([(0, 4), (1, 5)])
    >>> sorted(map(sorted, k_edge_classes(g, 3)))
    [[0, 1, 2, 3], [4, 5, 6, 7]]
    """
    if k < 1:
        raise OptionError(f"k: expected at least 1, got {k}")
    nodes = list(graph)
    index = {v: i for i, v in enumerate(nodes)}
    adj = [[index[w] for w in graph[v] if w != v] for v in nodes]
    # flow[a][b] = -flow[b][a] in {-1, 0, 1} on each edge of capacity 1 either way: the
    # residual capacity from a to b is 1 - flow[a][b].
    flow = [dict.fromkeys(a, 0) for a in adj]
    classes: list[set] = []
    pending = [list(range(len(nodes)))]
    while pending:
        avail = pending.pop()
        s, group, rest = avail[0], {avail[0]}, set(avail[1:])
        for t in avail[1:]:
            if t not in rest:
                continue
            rest.discard(t)
            if time.perf_counter() > deadline:
                raise TimeoutError(f"k_edge_classes: past the deadline with k = {k}")
            reach = _cut_below(adj, flow, s, t, k)
            if reach is None:
                group.add(t)
                continue
            other = [v for v in avail if v == t or (v in rest and v not in reach)]
            rest.difference_update(other)
            pending.append(other)
        classes.append({nodes[i] for i in group})
    return classes


def _cut_below(adj: list[list[int]], flow: list[dict[int, int]], s: int, t: int, k: int) -> dict | None:
    """None if k edge-disjoint paths join s and t; else the flow from s to t is maximum
    below k, and this is what s reaches in its residual: s's side of the minimum cut
    nearest s (the same for every maximum flow). Augmenting paths by breadth-first
    search, O(k E); ``flow`` is all zeros again on return."""
    pushed: list[tuple[int, int]] = []
    try:
        for _ in range(k):
            parent = {s: s}
            queue = [s]
            for a in queue:  # grows as it is read: breadth-first
                fa = flow[a]
                for b in adj[a]:
                    if fa[b] < 1 and b not in parent:
                        parent[b] = a
                        queue.append(b)
                if t in parent:
                    break
            else:
                return parent  # t out of reach: the flow is maximum, below k
            b = t
            while b != s:
                a = parent[b]
                flow[a][b] += 1
                flow[b][a] -= 1
                pushed.append((a, b))
                b = a
        return None
    finally:
        for a, b in pushed:
            flow[a][b] = flow[b][a] = 0


def _absorb_fragments(p: Problem, parts: list[set[int]], min_size: int) -> list[set[int]]:
    """Merge each part smaller than ``min_size`` into the part it shares most edges with.

    Channel ends (a module's input and output tasks) have few edges, so k-edge
    components leave them alone; they belong with the module they attach to most.
    """
    label = {v: k for k, part in enumerate(parts) for v in part}
    # Smallest first, ties by smallest task: a heap of (size, first task, part), entries
    # gone stale when their part grew or merged away skipped. O(P log P + E) for P parts.
    heap = [(len(part), min(part), k) for k, part in enumerate(parts) if part and len(part) < min_size]
    heapq.heapify(heap)
    while heap:
        size, first, k = heapq.heappop(heap)
        if len(parts[k]) != size or min(parts[k]) != first:
            continue
        links: dict[int, int] = {}
        for v in parts[k]:
            for w in (*p.pred[v], *p.succ[v]):
                if label[w] != k:
                    links[label[w]] = links.get(label[w], 0) + 1
        if not links:  # a small part with no edge to another part: nothing to join, ever
            continue
        target = max(links, key=lambda t: (links[t], -t))
        for v in parts[k]:
            label[v] = target
        parts[target] |= parts[k]
        parts[k] = set()
        if len(parts[target]) < min_size:
            heapq.heappush(heap, (len(parts[target]), min(parts[target]), target))
    return [part for part in parts if part]


def _bridged_parts(p: Problem, und: nx.Graph) -> list[set[int]]:
    """The pieces of the task graph between its bridges, each further cut at its articulation
    points (those not at a bridge's end), which stay with their predecessors.

    One depth-first search (networkx's biconnected components): a bridge is a component of
    one edge, an articulation point a task in two components or more. O(n + E).
    """
    seen = np.zeros(p.n, dtype=np.int64)
    bridges = set()
    for edges in nx.biconnected_component_edges(und):
        seen[list({v for e in edges for v in e})] += 1
        if len(edges) == 1:
            bridges.add(frozenset(edges[0]))
    end = np.zeros(p.n, dtype=bool)
    end[[v for b in bridges for v in b]] = True
    cut = (seen >= 2) & ~end
    # Without the bridges, and without the out-edges of the articulation points: each keeps
    # its in-side.
    keep = [e for e, (a, b) in enumerate(zip(p.src.tolist(), p.dst.tolist()))
            if not cut[a] and frozenset((a, b)) not in bridges]
    pieces = nx.Graph()
    pieces.add_nodes_from(range(p.n))
    pieces.add_edges_from(zip(p.src[keep].tolist(), p.dst[keep].tolist()))
    return [set(c) for c in nx.connected_components(pieces)]


def _chain(p: Problem, parts: list[set[int]], width: int, min_size: int = 1) -> ModuleChain:
    label = np.empty(p.n, dtype=np.int64)
    for k, part in enumerate(parts):
        label[list(part)] = k
    q = nx.DiGraph()
    q.add_nodes_from(range(len(parts)))
    q.add_edges_from((int(a), int(b)) for a, b in zip(label[p.src], label[p.dst]) if a != b)
    cond = nx.condensation(q)
    groups = [sorted(set().union(*(parts[k] for k in cond.nodes[c]["members"]))) for c in cond.nodes]
    first = [g[0] for g in groups]
    order = list(nx.lexicographical_topological_sort(cond, key=lambda c: first[c]))
    pos = np.empty(p.n, dtype=np.int64)
    for rank, c in enumerate(order):
        pos[groups[c]] = rank
    # crossing[k]: edges from positions <= k to positions > k.
    a, b = pos[p.src], pos[p.dst]
    cuts: list[tuple[int, tuple[int, ...], int | None]] = []
    size = np.cumsum([len(groups[c]) for c in order])
    for k in range(len(order) - 1):
        if size[k] - (size[cuts[-1][0]] if cuts else 0) < min_size or size[-1] - size[k] < min_size:
            continue
        crossing = np.flatnonzero((a <= k) & (b > k))
        if 0 < len(crossing) <= width:
            cuts.append((k, tuple(int(e) for e in crossing), None))
        elif len(crossing) > 0 and len(srcs := np.unique(p.src[crossing])) == 1:
            cuts.append((k, (), int(srcs[0])))  # a node channel: every crossing edge leaves one task
    # An edge may not jump a module: drop the later of two kept cuts it crosses.
    while True:
        ks = [k for k, _, _ in cuts]
        jump = next((j for j in range(1, len(ks)) if np.any((a <= ks[j - 1]) & (b > ks[j]))), None)
        if jump is None:
            break
        del cuts[jump]
    modules, chans, nodes = [], [], []
    lo = 0
    for k, crossing, node in cuts:
        modules.append(tuple(sorted(i for c in order[lo:k + 1] for i in groups[c])))
        chans.append(crossing)
        nodes.append(node)
        lo = k + 1
    modules.append(tuple(sorted(i for c in order[lo:] for i in groups[c])))
    return ModuleChain(tuple(modules), tuple(chans), tuple(nodes))


def step_problem(p: Problem, tasks: list[int], used: np.ndarray) -> Problem | None:
    """The subproblem of ``tasks`` (in this order) on what is left of each device's memory
    once ``used`` bytes are taken, for a step of a walk down the chain (the rolling horizon,
    the pipelined walk); None when some device no longer holds a task it could run."""
    system = System(tuple(replace(d, memory=d.memory - used[u]) for u, d in enumerate(p.system.devices)),
                    p.system.links)
    inside = set(tasks)
    try:
        return Problem([p.tasks[i] for i in tasks], [e for e in p.edges if p.task_index[e.src] in inside
                                                     and p.task_index[e.dst] in inside], system, p.objective)
    except ProblemError:  # what is left of some device's memory no longer fits a task
        return None
