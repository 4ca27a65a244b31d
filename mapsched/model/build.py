"""Problems built from what other tools hold: a NetworkX graph, or a computation matrix and an
edge list as users of HEFT libraries pass them (:meth:`Problem.from_networkx
<mapsched.model.problem.Problem.from_networkx>`, :meth:`Problem.from_arrays
<mapsched.model.problem.Problem.from_arrays>`). The problem checks what they build.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

import networkx as nx
import numpy as np

from mapsched.errors import ProblemError, shown
from mapsched.model.records import Device, Edge, Link, Objective, System, Task

__all__ = ["Builders"]

P = TypeVar("P", bound="Builders")


class Builders:
    """How a :class:`~mapsched.model.problem.Problem` is built from what other tools hold."""

    @classmethod
    def from_networkx(cls: type[P], graph: nx.DiGraph,
        system: System,
        objective: Objective | None = None,
        name: str = "problem",
    ) -> P:
        """Build a problem from a DiGraph whose nodes carry ``latency`` (as in
            :class:`Task`) and optionally ``weight_bytes``, ``input_bytes`` and
            ``output_bytes``, and whose edges may carry ``bytes``.

            Examples
            --------
            >>> import networkx as nx
            >>> from mapsched import Device, Problem, System
            >>> g = nx.DiGraph()
            >>> g.add_node("a", latency={"cpu": 2.0})
            >>> g.add_node("b", latency={"cpu": 3.0})
            >>> g.add_edge("a", "b", bytes=10)
            >>> Problem.from_networkx(g, System((Device("cpu"),))).n
            2
            """
        tasks = []
        for node, attrs in graph.nodes(data=True):
            if "latency" not in attrs:
                raise ProblemError(f"tasks[{len(tasks)}].latency: node {shown(node)} has no 'latency' attribute")
            tasks.append(
                Task(
                    str(node),
                    attrs["latency"],
                    attrs.get("weight_bytes", 0.0),
                    attrs.get("input_bytes", 0.0),
                    attrs.get("output_bytes", 0.0),
                )
            )
        edges = [Edge(str(s), str(d), a.get("bytes")) for s, d, a in graph.edges(data=True)]
        return cls(tasks, edges, system, objective, name)

    @classmethod
    def from_arrays(cls: type[P], latency: Any,
        edges: Iterable[Sequence[float]],
        system: System | None = None,
        objective: Objective | None = None,
        task_names: Sequence[str] | None = None,
        name: str = "problem",
    ) -> P:
        """Build a latency problem from a task x device computation matrix and an edge list,
            as users of HEFT libraries pass them.

            ``latency[i][u]`` is the time of task i on device u (``inf`` or ``nan``: cannot
            run). ``edges`` holds ``(i, j)`` or ``(i, j, cost)``. Without a ``system``, the
            devices ``p0 .. p{m-1}`` are fully linked at 1000 bytes/s, so that an edge's
            cost is its communication time in milliseconds.

            Examples
            --------
            >>> from mapsched import Problem
            >>> p = Problem.from_arrays([[3, 5], [2, 1]], [(0, 1, 4)])
            >>> p.device_names, float(p.comm[0, 0, 1])
            (('p0', 'p1'), 4.0)
            """
        try:
            w = np.asarray(latency, dtype=float)
        except (TypeError, ValueError):  # ragged rows, or entries that are no numbers
            raise ProblemError("latency: expected a task x device matrix of numbers (rows of one length)") from None
        if w.ndim != 2:
            raise ProblemError(f"latency: expected a task x device matrix, got shape {w.shape}")
        n, m = w.shape
        if system is None:
            devs = tuple(Device(f"p{u}") for u in range(m))
            links = tuple(
                Link(devs[u].name, devs[v].name, 1000.0) for u in range(m) for v in range(u + 1, m)
            )
            system = System(devs, links)
        if len(system.devices) != m:
            raise ProblemError(
                f"latency: the matrix has {m} columns but the system has {len(system.devices)} devices"
            )
        names = list(task_names) if task_names is not None else [f"t{i}" for i in range(n)]
        if len(names) != n:
            raise ProblemError(f"task_names: expected {n} names, got {len(names)}")
        dnames = [d.name for d in system.devices]
        tasks = [
            Task(names[i], {dnames[u]: float(w[i, u]) for u in range(m) if np.isfinite(w[i, u])})
            for i in range(n)
        ]
        elist = []
        for k, e in enumerate(edges):
            if not isinstance(e, Sequence) or len(e) not in (2, 3):
                raise ProblemError(f"edges[{k}]: expected (i, j) or (i, j, cost), got {shown(e)}")
            i, j = e[:2]  # task indices, not numbers to round (0.9 was task 0)
            if not all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) and 0 <= x < n for x in (i, j)):
                raise ProblemError(f"edges[{k}]: expected task indices from 0 to {n - 1}, got {shown(e)}")
            elist.append(Edge(names[int(i)], names[int(j)], e[2] if len(e) == 3 else 0.0))
        return cls(tasks, elist, system, objective, name)
