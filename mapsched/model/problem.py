"""The problem model: a task graph, a system of devices and links, and an objective.

A :class:`Problem` is validated once, when it is built, and then holds everything
the solvers need as dense, read-only numpy arrays (see :class:`Problem` for the
list), so that no solver does dictionary look-ups in its hot loops. It reads and
writes itself as a ``mapsched.problem/1`` document (``from_dict``, ``to_dict``,
``read``, ``write``: :mod:`mapsched.model.serialize`), is built from other tools' graphs
(:mod:`mapsched.model.build`) and makes edited copies of itself (:mod:`mapsched.model.edits`);
the records it is made of are :mod:`mapsched.model.records`, checked by :mod:`mapsched.model.fields`.

Units everywhere: time in milliseconds, sizes in bytes, bandwidth in bytes per
second (the contract of ``docs/format.md``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from functools import cached_property
from typing import Any

import networkx as nx
import numpy as np

from mapsched.errors import ProblemError, shown
from mapsched.model import fields
from mapsched.model.build import Builders
from mapsched.model.edits import Edits
from mapsched.model.records import (
    BANDWIDTH,
    COMPILE,
    MAX_BATCH,
    MAX_BYTES,
    MAX_DEVICES,
    MAX_MS,
    MAX_SCALE,
    MEMORY_SLACK,
    Calibration,
    Device,
    Edge,
    Link,
    Objective,
    System,
    Task,
)
from mapsched.model.serialize import PROBLEM_FORMAT, Serialized

# The records and ranges are re-exported: callers import them from here.
__all__ = ["BANDWIDTH", "COMPILE", "MAX_BATCH", "MAX_BYTES", "MAX_DEVICES", "MAX_MS", "MAX_SCALE", "MEMORY_SLACK",
           "PROBLEM_FORMAT", "Calibration", "Device", "Edge", "Link", "Objective", "Problem", "System", "Task"]


class Problem(Edits, Serialized, Builders):
    """A mapping and scheduling problem, validated when built.

    Parameters
    ----------
    tasks, edges : sequences of :class:`Task` and :class:`Edge`
        The task graph; it must be acyclic.
    system : System
        Devices and links.
    objective : Objective, optional
        Latency (the default) or throughput over a batch.
    name : str, optional
        A name carried into schedules.
    calibration : Calibration, optional
        The overheads and thread settings a harness folded into the times (a record;
        the solvers use the latencies alone).

    Raises
    ------
    ProblemError
        With a one-line message naming the field, for a cycle, an unknown or
        duplicate name, a bad number, a task that no device can run, ...

    Attributes
    ----------
    n, m, E, L : int
        Number of tasks, devices, edges and inputs (1 for latency).
    batch_sizes : ndarray of int, shape (nb,)
        Sorted distinct batch sizes over all devices.
    lat : ndarray, shape (n, m, nb)
        Latency of task i on device u at batch ``batch_sizes[k]``; ``inf`` where
        the device cannot run it at that size.
    dur : ndarray, shape (n, m)
        Latency at batch size 1 (``inf`` where impossible); what latency solvers use.
    weight, act : ndarray, shape (n,)
        Weight bytes, and activation bytes per input (input + output bytes).
    mem : ndarray, shape (m,)
        Device memory in bytes (``inf`` when unlimited).
    room : ndarray, shape (m,)
        What the validator lets each device hold: ``mem`` and its :data:`MEMORY_SLACK`.
    src, dst, nbytes : ndarray, shape (E,)
        Edge endpoints (task indices) and bytes.
    link_latency, link_ms_per_byte : ndarray, shape (m, m)
        So that ``comm(e, u, v) = link_latency[u, v] + nbytes[e] * link_ms_per_byte[u, v]``;
        zero on the diagonal, ``inf`` latency where no link exists.
    topo : ndarray of int, shape (n,)
        A breadth-first topological order (Kahn's algorithm with a FIFO queue).
    contended : bool
        Whether transfers take turns: some link has a ``concurrency`` or some device
        ``copy_engines`` (:mod:`mapsched.scheduling.contention`). Then ``channel[u][v]``
        is the channel of transfers from u to v (-1: unlimited), ``channel_lanes[c]``
        channel c's capacity and ``copy_engines[u]`` device u's (None: unlimited).

    Examples
    --------
    >>> from mapsched import instances
    >>> p = instances.load("topcuoglu2002")
    >>> p.n, p.m, p.E
    (10, 3, 15)
    >>> float(p.dur[0, 2])
    9.0
    """

    def __init__(
        self,
        tasks: Sequence[Task],
        edges: Sequence[Edge],
        system: System,
        objective: Objective | None = None,
        name: str = "problem",
        calibration: Calibration | None = None,
    ) -> None:
        if not isinstance(name, str):
            raise ProblemError(f"name: expected a string, got {shown(name)}")
        self.name = name
        self.objective = fields.objective(objective or Objective())
        self.system, self.device_index = fields.system(system)
        self.calibration = None if calibration is None else fields.calibration(calibration, self.device_index)
        self.tasks, self.task_index = fields.tasks(tasks, self.device_index)
        self.edges = fields.edges(edges, self.tasks, self.task_index)
        self._build_arrays()
        self._check_acyclic()
        self._check_runnable()

    def _derived(self, tasks: Sequence[Task], edges: Sequence[Edge], system: System, objective: Objective,
                 name: str, calibration: Calibration | None) -> Problem:
        """A problem made of this one's checked tasks and edges (some of them, with fewer or more
        devices' times, or groups of them summed by :func:`mapsched.scheduling.coarsen.quotient`), their
        latencies as ``{device: {batch size: ms}}`` and every edge's bytes given: the system,
        calibration and objective are checked, the arrays built and every task's runnability
        checked, but the numbers of the tasks and edges are not checked again (half the time
        of reading a 20,000-task file; a sum may pass the format's ranges). O((n + E) m)."""
        if not isinstance(name, str):
            raise ProblemError(f"name: expected a string, got {shown(name)}")
        q = Problem.__new__(Problem)
        q.name = name
        q.objective = fields.objective(objective)
        q.system, q.device_index = fields.system(system)
        q.calibration = None if calibration is None else fields.calibration(calibration, q.device_index)
        q.tasks = fields.frozen(tasks)
        q.edges = tuple(edges)
        q.task_index = {t.name: i for i, t in enumerate(q.tasks)}
        q._build_arrays()
        q._check_acyclic()
        q._check_runnable()
        return q

    # ------------------------------------------------------------------ checks
    def _check_acyclic(self) -> None:
        order: list[int] = []
        indeg = np.bincount(self.dst, minlength=self.n)
        queue = deque(int(i) for i in np.flatnonzero(indeg == 0))
        succ = self.succ
        while queue:
            i = queue.popleft()
            order.append(i)
            for j in succ[i]:
                indeg[j] -= 1
                if indeg[j] == 0:
                    queue.append(j)
        if len(order) < self.n:
            cycle = nx.find_cycle(self.graph)
            names = [shown(self.task_names[u], quote=False) for u, _ in [*cycle, cycle[0]]]
            names = names if len(names) <= 12 else [*names[:6], "...", *names[-5:]]  # a 10,000-task cycle: its ends
            raise ProblemError(
                f"edges: the task graph has a cycle {' -> '.join(names)}; it must be acyclic"
            )
        self.topo = _readonly(np.array(order, dtype=np.int64))

    def _check_runnable(self) -> None:
        L = self.L
        for i, t in enumerate(self.tasks):
            if not np.isfinite(self.lat[i]).any():
                raise ProblemError(
                    f"tasks[{i}].latency: no device can run task {shown(t.name)}; give a latency "
                    "for a device at one of its batch_sizes"
                )
            if L == 1:
                if not self.can_run[i].any():
                    raise ProblemError(
                        f"tasks[{i}]: no device can run task {shown(t.name)} on one input; it needs a "
                        f"latency at batch size 1 on a device with at least "
                        f"{self.weight[i] + self.act[i]:.0f} bytes of memory"
                    )
            elif not self._splittable(i):
                raise ProblemError(
                    f"tasks[{i}]: task {shown(t.name)} cannot process objective.batch={L} inputs: no "
                    "choice of one supported batch size per device adds up to it"
                )

    def _splittable(self, i: int) -> bool:
        """Whether L inputs of task i split into one feasible batch per device (a subset-sum DP)."""
        reach = np.zeros(self.L + 1, dtype=bool)
        reach[0] = True
        for u in range(self.m):
            new = reach.copy()
            for k in np.flatnonzero(np.isfinite(self.lat[i, u])):
                b = int(self.batch_sizes[k])
                if b <= self.L and self.weight[i] + self.act[i] * b <= self.room[u]:
                    new[b:] |= reach[: self.L + 1 - b]
            reach = new
        return bool(reach[self.L])

    # ------------------------------------------------------------------ arrays
    def _build_arrays(self) -> None:
        devs, tasks = self.system.devices, self.tasks
        self.n, self.m, self.E = len(tasks), len(devs), len(self.edges)
        self.L = self.objective.inputs
        self.task_names = tuple(t.name for t in tasks)
        self.device_names = tuple(d.name for d in devs)
        self.batch_sizes = _readonly(np.array(sorted({b for d in devs for b in d.batch_sizes})))
        pos = {int(b): k for k, b in enumerate(self.batch_sizes)}
        # batch_pos[c] is the column of batch size c in `lat`, or -1.
        batch_pos = np.full(max(self.L, int(self.batch_sizes[-1])) + 1, -1, dtype=np.int64)
        for b, k in pos.items():
            batch_pos[b] = k
        self.batch_pos = _readonly(batch_pos)

        lat = np.full((self.n, self.m, len(pos)), np.inf)
        for i, t in enumerate(tasks):
            for dev, table in t.latency.items():
                u = self.device_index[dev]
                for b, v in table.items():
                    if b in devs[u].batch_sizes:
                        lat[i, u, pos[b]] = v
        self.lat = _readonly(lat)
        k1 = pos.get(1)
        self.dur = _readonly(lat[:, :, k1].copy() if k1 is not None else np.full(lat.shape[:2], np.inf))
        self.weight = _readonly(np.array([t.weight_bytes for t in tasks], dtype=float))
        self.act = _readonly(np.array([t.input_bytes + t.output_bytes for t in tasks], dtype=float))
        self.mem = _readonly(np.array([d.memory for d in devs], dtype=float))
        self.room = _readonly(self.mem * (1 + MEMORY_SLACK))
        # What a single input of a task may occupy: used by latency methods.
        self.can_run = _readonly(
            np.isfinite(self.dur) & ((self.weight + self.act)[:, None] <= self.room[None, :])
        )

        ti = self.task_index
        self.src = _readonly(np.array([ti[e.src] for e in self.edges], dtype=np.int64))
        self.dst = _readonly(np.array([ti[e.dst] for e in self.edges], dtype=np.int64))
        self.nbytes = _readonly(np.array([e.bytes for e in self.edges], dtype=float))

        llat = np.full((self.m, self.m), np.inf)
        mpb = np.zeros((self.m, self.m))
        np.fill_diagonal(llat, 0.0)
        for ln in self.system.links:
            a, b = self.device_index[ln.a], self.device_index[ln.b]
            for u, v in [(a, b)] if ln.directed else [(a, b), (b, a)]:
                llat[u, v] = ln.latency
                mpb[u, v] = 1000.0 / ln.bandwidth
        self.link_latency = _readonly(llat)
        self.link_ms_per_byte = _readonly(mpb)
        # Contention (mapsched.scheduling.contention): a channel per link direction, or one for
        # both directions of a link that is not duplex; -1 where transfers take no turns.
        channel = [[-1] * self.m for _ in range(self.m)]
        lanes: list[int] = []
        for ln in self.system.links:
            if ln.concurrency is None:
                continue
            a, b = self.device_index[ln.a], self.device_index[ln.b]
            channel[a][b] = len(lanes)
            lanes.append(ln.concurrency)
            if not ln.directed:
                if ln.duplex:
                    lanes.append(ln.concurrency)
                channel[b][a] = len(lanes) - 1
        self.channel = tuple(map(tuple, channel))
        self.channel_lanes = tuple(lanes)
        self.copy_engines = tuple(d.copy_engines for d in devs)
        self.contended = bool(lanes) or any(k is not None for k in self.copy_engines)

        self.pred: tuple[tuple[int, ...], ...]
        self.succ: tuple[tuple[int, ...], ...]
        pred: list[list[int]] = [[] for _ in range(self.n)]
        succ: list[list[int]] = [[] for _ in range(self.n)]
        self.in_edges: tuple[tuple[int, ...], ...]
        self.out_edges: tuple[tuple[int, ...], ...]
        in_edges: list[list[int]] = [[] for _ in range(self.n)]
        out_edges: list[list[int]] = [[] for _ in range(self.n)]
        for e, (s, d) in enumerate(zip(self.src.tolist(), self.dst.tolist())):
            pred[d].append(s)
            succ[s].append(d)
            in_edges[d].append(e)
            out_edges[s].append(e)
        self.pred = tuple(map(tuple, pred))
        self.succ = tuple(map(tuple, succ))
        self.in_edges = tuple(map(tuple, in_edges))
        self.out_edges = tuple(map(tuple, out_edges))

    # -------------------------------------------------------------- derived
    @cached_property
    def comm(self) -> np.ndarray:
        """Communication time per edge and device pair, shape (E, m, m); ``inf`` without a link."""
        c = self.link_latency[None, :, :] + self.nbytes[:, None, None] * self.link_ms_per_byte
        return _readonly(c)

    @cached_property
    def graph(self) -> nx.DiGraph:
        """The task graph over task indices; each edge carries its index as ``e``."""
        g = nx.DiGraph()
        g.add_nodes_from(range(self.n))
        g.add_edges_from((s, d, {"e": e}) for e, (s, d) in enumerate(zip(self.src, self.dst)))
        return g

    @property
    def objective_kind(self) -> str:
        return self.objective.kind

    def device_comm(self, nbytes: float, u: int, v: int) -> float:
        """Time to move ``nbytes`` from device u to device v (0 when u == v)."""
        return float(self.link_latency[u, v] + nbytes * self.link_ms_per_byte[u, v])


    def __repr__(self) -> str:
        obj = self.objective.kind
        if obj == "throughput":
            obj += f", L={self.L}"
        return f"<Problem {shown(self.name)}: {self.n} tasks, {self.E} edges, {self.m} devices, {obj}>"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Problem):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    __hash__ = None  # type: ignore[assignment]

    def __setstate__(self, state: dict[str, Any]) -> None:
        # pickle and deepcopy give writable arrays: a change would reach the solvers unchecked
        self.__dict__.update(state)
        for value in state.values():
            if isinstance(value, np.ndarray):
                value.setflags(write=False)

def _readonly(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a
