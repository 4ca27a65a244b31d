"""The problem model: a task graph, a system of devices and links, and an objective.

A :class:`Problem` is validated once, when it is built, and then holds everything
the solvers need as dense, read-only numpy arrays (see :class:`Problem` for the
list), so that no solver does dictionary look-ups in its hot loops. It reads and
writes itself as a ``mapsched.problem/1`` document (``from_dict``, ``to_dict``,
``read``, ``write``).

Units everywhere: time in milliseconds, sizes in bytes, bandwidth in bytes per
second (the contract of ``docs/format.md``).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import networkx as nx
import numpy as np

from mapsched.errors import ProblemError, shown
from mapsched.model.jsonio import check_fields, check_format, check_list, dumps, loads, read_json, real, write_json

__all__ = ["Calibration", "Device", "Edge", "Link", "Objective", "Problem", "System", "Task"]


@dataclass(frozen=True)
class Device:
    """A processor: its memory in bytes, the batch sizes it runs, the server it sits in."""

    name: str
    memory: float = math.inf
    batch_sizes: tuple[int, ...] = (1,)
    node: str | None = None


@dataclass(frozen=True)
class Link:
    """A link between two devices; undirected unless ``directed``."""

    a: str
    b: str
    bandwidth: float
    latency: float = 0.0
    directed: bool = False


@dataclass(frozen=True)
class Task:
    """An operation of the graph.

    ``latency`` maps a device name either to a number (the time of a batch of 1)
    or to a mapping from batch size to time. A device absent from it cannot run
    the task.
    """

    name: str
    latency: Mapping[str, Any]
    weight_bytes: float = 0.0
    input_bytes: float = 0.0
    output_bytes: float = 0.0


@dataclass(frozen=True)
class Edge:
    """A data dependency; ``bytes`` defaults to the source task's ``output_bytes``."""

    src: str
    dst: str
    bytes: float | None = None


@dataclass(frozen=True)
class Objective:
    """``latency`` (one input) or ``throughput`` over a batch of ``batch`` inputs."""

    kind: str = "latency"
    batch: int = 1

    @property
    def inputs(self) -> int:
        """Number of inputs L that a schedule processes (1 for latency)."""
        return 1 if self.kind == "latency" else self.batch


@dataclass(frozen=True)
class System:
    """The hardware: devices and the links between them."""

    devices: tuple[Device, ...]
    links: tuple[Link, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class Calibration:
    """What a measurement harness folded into a problem's times beyond the kernels.

    Every latency of a task on device ``u`` is ``scale × kernel time + overhead[u]``,
    and the latency of a link from ``a`` to ``b`` is its copy latency plus
    ``sync[(a, b)]``: the terms are already in the times, and are recorded so that
    they can be seen, re-fitted (``mapsched calibrate``) and taken out again. The
    thread settings are those the times were measured under; ``mapsched run``
    refuses other ones.

    Attributes
    ----------
    threads, interop_threads : int or None
        ``torch.get_num_threads()`` and ``torch.get_num_interop_threads()`` when measured.
    overhead : mapping of str to float
        Per device, ms per job beyond its kernels (dispatch, thread hand-off, launch).
    sync : mapping of (str, str) to float
        Per directed device pair, ms per cross-device dependency beyond the copy (the
        consumer's wake-up or stream wait).
    scale : float
        Factor on the kernel times (1 unless fitted: devices that slow each other down).
    fitted : bool
        Whether the terms were fitted to measured runs rather than measured directly.
    compile : str or None
        How the harness ran each task when measured (one of :data:`COMPILE`); None
        where not recorded, which means ``none``. ``mapsched run`` refuses another.
    """

    threads: int | None = None
    interop_threads: int | None = None
    overhead: Mapping[str, float] = field(default_factory=dict)
    sync: Mapping[tuple[str, str], float] = field(default_factory=dict)
    scale: float = 1.0
    fitted: bool = False
    compile: str | None = None

    def kernel(self, latency: float, device: str) -> float:
        """The kernel time inside ``latency`` of a job on ``device``: the terms taken out."""
        return max(0.0, (latency - self.overhead.get(device, 0.0)) / self.scale)

    def copy(self, latency: float, a: str, b: str) -> float:
        """The copy latency inside a link's ``latency`` from ``a`` to ``b``: the sync taken out."""
        return max(0.0, latency - self.sync.get((a, b), 0.0))

    def summary(self) -> str:
        """One line: the terms in the times, and the thread settings.

        >>> Calibration(1, None, {"cpu:0": 0.003, "cpu:1": 0.004}, {("cpu:0", "cpu:1"): 0.04}).summary()
        'in the times: 0.003-0.004 ms per job, 0.04 ms per cross-device dependency; torch threads 1 intra-op'
        """
        def span(values: Iterable[float]) -> str:
            v = sorted(values)
            return "0" if not v else f"{v[0]:.3g}" if v[0] == v[-1] else f"{v[0]:.3g}-{v[-1]:.3g}"

        scale = f", kernels x{self.scale:.3g}" if self.scale != 1.0 else ""
        how = "fitted" if self.fitted else "in the times"
        threads = "" if self.threads is None else f"; torch threads {self.threads} intra-op"
        if self.interop_threads is not None:
            threads += f"{',' if threads else '; torch threads'} {self.interop_threads} inter-op"
        lean = "" if self.compile in (None, "none") else f"; tasks compiled {self.compile}"
        return (f"{how}: {span(self.overhead.values())} ms per job, {span(self.sync.values())} ms per cross-device "
                f"dependency{scale}{threads}{lean}")


MAX_MS = 1e12
"""Largest time a file may give, in ms (about 31 years): every method then computes in range."""
MAX_BYTES = 1e18
"""Largest size (memory, weights, activations, edge bytes), in bytes: an exabyte."""
BANDWIDTH = (1.0, 1e18)
"""Least and largest link bandwidth, in bytes per second."""
MAX_BATCH = 100_000
"""Largest number of inputs (``objective.batch``) and batch size: throughput methods index by them."""
MEMORY_SLACK = 1e-9
"""What a device may hold past its memory, relative to it: sums of float sizes round
(FORMAT.md rule 6). Every check that something fits, and every bound, uses the same
allowance (:attr:`Problem.room`), so that no bound rules out what the validator accepts."""
MAX_DEVICES = 1024
"""Most devices a problem may have: the link tables are devices x devices, and so are a list
scheduler's per-edge transfer times (5,000 devices took HEFT 2.3 GB; a 300 KB file of
20,000 would have taken some 37 GB)."""

PROBLEM_FORMAT = "mapsched.problem/1"
_PROBLEM_KEYS = {"format", "name", "objective", "devices", "links", "tasks", "edges", "calibration"}
_DEVICE_KEYS = {"name", "memory", "batch_sizes", "node"}
_LINK_KEYS = {"a", "b", "bandwidth", "latency", "directed"}
_TASK_KEYS = {"name", "latency", "weight_bytes", "input_bytes", "output_bytes"}
_EDGE_KEYS = {"src", "dst", "bytes"}
_CALIBRATION_KEYS = {"threads", "interop_threads", "overhead", "sync", "scale", "fitted", "compile"}
COMPILE = ("none", "jit", "cuda-graph")
"""How a measurement harness may run each task (``calibration.compile``): ``none``, op by op
from Python; ``jit``, a frozen TorchScript trace per task and batch size; ``cuda-graph``,
that trace captured as a CUDA graph on a GPU (``jit`` on the CPU)."""
MAX_SCALE = 1e6
"""Largest kernel-time factor a calibration may give."""


class _Table(dict):
    """A dict that refuses changes: a built problem's latency tables and calibration terms,
    which its arrays were built from (a change would reach ``to_dict`` and ``==``, and
    derived problems, but not the solvers)."""

    def _refuse(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("a Problem's tables are read-only; build another Problem (e.g. from a changed to_dict())")

    __setitem__ = __delitem__ = __ior__ = clear = pop = popitem = setdefault = update = _refuse  # type: ignore

    def __reduce__(self) -> tuple:  # pickle and copy rebuild it whole, not item by item
        return type(self), (dict(self),)


def _frozen_latency(latency: Mapping[str, Mapping[int, float]]) -> _Table:
    return _Table({d: v if type(v) is _Table else _Table(v) for d, v in latency.items()})


def _number(value: Any, where: str, *, allow_inf: bool = False, positive: bool = False,
            bounds: tuple[float, float] = (0.0, MAX_BYTES), unit: str = "") -> float:
    """Check that ``value`` is a real number in ``bounds`` (above the lower one if ``positive``;
    ``inf`` too with ``allow_inf``); otherwise a :class:`ProblemError` that names ``where`` and the range."""
    lo, hi = bounds
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ProblemError(f"{where}: expected a number, got {shown(value)}")
    v = real(value)
    if math.isnan(v) or (math.isinf(v) and not allow_inf):
        raise ProblemError(f"{where}: expected a finite number, got {shown(value)}")
    if v < lo or (positive and v == lo) or (v > hi and not (allow_inf and math.isinf(v))):
        span = f"above {lo:g} and up to {hi:g}" if positive else f"from {lo:g} to {hi:g}"
        raise ProblemError(f"{where}: expected a number {span}{unit}, got {shown(value)}")
    return v


def _plain(value: Any, hi: float) -> float | None:
    """``value`` as a float where it is a plain ``int`` or ``float`` from 0 to ``hi`` (what
    almost every number of a file is), else None: then :func:`_number` checks it and names
    the field. Spares a large problem's reading a message built for each of its numbers."""
    kind = type(value)
    return float(value) if (kind is float or kind is int) and 0 <= value <= hi else None


def _positive_int(value: Any, where: str, *, text: bool = False) -> int:
    """Check that ``value`` is an integer in 1 .. MAX_BATCH; ``text`` also takes its decimal
    string (the batch-size keys of latency tables, which JSON writes as strings)."""
    if text and isinstance(value, str):
        # Only the decimal digits str(int) writes: "01", " 1", "+1" or other scripts' digits
        # would be a second key for one batch size, of which one time silently won.
        if not (value.isascii() and value.isdigit() and str(int(value)) == value):
            raise ProblemError(f"{where}: expected a positive integer written as str(n) writes it, got "
                               f"{shown(value)}")
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 1 <= value <= MAX_BATCH:
        raise ProblemError(f"{where}: expected an integer from 1 to {MAX_BATCH}, got {shown(value)}")
    return int(value)


def _unique(names: Iterable[str], where: str) -> dict[str, int]:
    index: dict[str, int] = {}
    for k, name in enumerate(names):
        if not isinstance(name, str) or not name:
            raise ProblemError(f"{where}[{k}].name: expected a non-empty string, got {shown(name)}")
        if name in index:
            raise ProblemError(f"{where}[{k}].name: duplicate name {shown(name)}; names must be unique")
        index[name] = k
    return index


class Problem:
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
        self.objective = self._check_objective(objective or Objective())
        self.system = self._check_system(system)
        self.calibration = None if calibration is None else self._check_calibration(calibration)
        self.tasks = self._check_tasks(tasks)
        self.edges = self._check_edges(edges)
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
        q.objective = self._check_objective(objective)
        q.system = q._check_system(system)
        q.calibration = None if calibration is None else q._check_calibration(calibration)
        q.tasks = tuple(t if type(t.latency) is _Table else
                        Task(t.name, _frozen_latency(t.latency), t.weight_bytes, t.input_bytes, t.output_bytes)
                        for t in tasks)
        q.edges = tuple(edges)
        q.task_index = {t.name: i for i, t in enumerate(q.tasks)}
        q._build_arrays()
        q._check_acyclic()
        q._check_runnable()
        return q

    # ------------------------------------------------------------------ checks
    @staticmethod
    def _check_objective(obj: Objective) -> Objective:
        if obj.kind not in ("latency", "throughput"):
            raise ProblemError(
                f"objective.kind: expected 'latency' or 'throughput', got {shown(obj.kind)}"
            )
        batch = _positive_int(obj.batch, "objective.batch")
        if obj.kind == "latency" and batch != 1:  # not dropped in silence: the file likely meant throughput
            raise ProblemError(f"objective.batch: a latency objective has one input, got {batch}; "
                               "use kind 'throughput' for a batch of inputs, or leave batch out")
        return Objective(obj.kind, batch)

    def _check_system(self, system: System) -> System:
        devices = list(system.devices)
        if not devices:
            raise ProblemError("devices: expected at least one device")
        if len(devices) > MAX_DEVICES:
            raise ProblemError(f"devices: {len(devices)} devices; mapsched takes at most {MAX_DEVICES} (its link "
                               "tables are devices x devices)")
        self.device_index = _unique((d.name for d in devices), "devices")
        checked = []
        for k, d in enumerate(devices):
            mem = _number(d.memory, f"devices[{k}].memory", allow_inf=True, positive=True, unit=" bytes")
            sizes = d.batch_sizes
            if isinstance(sizes, (str, bytes)) or not isinstance(sizes, Iterable):
                raise ProblemError(
                    f"devices[{k}].batch_sizes: expected a list of positive integers, got {shown(sizes)}"
                )
            bs = tuple(sorted({_positive_int(b, f"devices[{k}].batch_sizes") for b in sizes}))
            if not bs:
                raise ProblemError(f"devices[{k}].batch_sizes: expected at least one batch size")
            if d.node is not None and not isinstance(d.node, str):
                raise ProblemError(f"devices[{k}].node: expected a string, got {shown(d.node)}")
            checked.append(Device(d.name, mem, bs, d.node))
        links, seen = [], set()
        for k, ln in enumerate(system.links):
            for end in ("a", "b"):
                if not isinstance(getattr(ln, end), str) or getattr(ln, end) not in self.device_index:
                    raise ProblemError(
                        f"links[{k}].{end}: unknown device {shown(getattr(ln, end))}; "
                        f"expected one of {sorted(self.device_index)}"
                    )
            if ln.a == ln.b:
                raise ProblemError(f"links[{k}]: a link joins two distinct devices, got {shown(ln.a)} twice")
            bw = _number(ln.bandwidth, f"links[{k}].bandwidth", bounds=BANDWIDTH, unit=" bytes/s")
            lt = _number(ln.latency, f"links[{k}].latency", bounds=(0.0, MAX_MS), unit=" ms")
            pairs = [(ln.a, ln.b)] if ln.directed else [(ln.a, ln.b), (ln.b, ln.a)]
            for pair in pairs:
                if pair in seen:
                    raise ProblemError(f"links[{k}]: duplicate link from {shown(pair[0])} to {shown(pair[1])}")
                seen.add(pair)
            links.append(Link(ln.a, ln.b, bw, lt, bool(ln.directed)))
        return System(tuple(checked), tuple(links))

    def _check_calibration(self, cal: Calibration) -> Calibration:
        where = "calibration"
        threads = []
        for f in ("threads", "interop_threads"):
            v = getattr(cal, f)
            threads.append(None if v is None else _positive_int(v, f"{where}.{f}"))
        if not isinstance(cal.overhead, Mapping):
            raise ProblemError(f"{where}.overhead: expected an object from device name to ms, "
                               f"got {shown(cal.overhead)}")
        overhead = {}
        for dev, v in cal.overhead.items():
            if dev not in self.device_index:
                raise ProblemError(f"{where}.overhead: unknown device {shown(dev)}; "
                                   f"expected one of {sorted(self.device_index)}")
            overhead[dev] = _number(v, f"{where}.overhead.{dev}", bounds=(0.0, MAX_MS), unit=" ms")
        if not isinstance(cal.sync, Mapping):
            raise ProblemError(f"{where}.sync: expected a mapping from device pairs to ms, got {shown(cal.sync)}")
        sync = {}
        for (a, b), v in cal.sync.items():
            for end in (a, b):
                if end not in self.device_index:
                    raise ProblemError(f"{where}.sync: unknown device {shown(end)}; "
                                       f"expected one of {sorted(self.device_index)}")
            if a == b:
                raise ProblemError(f"{where}.sync: a pair joins two distinct devices, got {shown(a)} twice")
            sync[(a, b)] = _number(v, f"{where}.sync ({a} -> {b})", bounds=(0.0, MAX_MS), unit=" ms")
        scale = _number(cal.scale, f"{where}.scale", positive=True, bounds=(0.0, MAX_SCALE))
        if not isinstance(cal.fitted, bool):
            raise ProblemError(f"{where}.fitted: expected true or false, got {shown(cal.fitted)}")
        if cal.compile is not None and cal.compile not in COMPILE:
            raise ProblemError(f"{where}.compile: expected one of {', '.join(COMPILE)}, got {shown(cal.compile)}")
        return Calibration(threads[0], threads[1], _Table(overhead), _Table(sync), scale, cal.fitted, cal.compile)

    def _check_tasks(self, tasks: Sequence[Task]) -> tuple[Task, ...]:
        tasks = list(tasks)
        if not tasks:
            raise ProblemError("tasks: expected at least one task")
        self.task_index = _unique((t.name for t in tasks), "tasks")
        checked = []
        for k, t in enumerate(tasks):
            where = f"tasks[{k}]"
            if not isinstance(t.latency, Mapping):
                raise ProblemError(
                    f"{where}.latency: expected an object from device name to time, got {shown(t.latency)}"
                )
            lat: dict[str, dict[int, float]] = {}
            for dev, val in t.latency.items():
                if dev not in self.device_index:
                    raise ProblemError(
                        f"{where}.latency: unknown device {shown(dev)}; "
                        f"expected one of {sorted(self.device_index)}"
                    )
                if type(val) is not float and isinstance(val, Mapping):  # the ABC's check is slow
                    lat[dev] = {}
                    for b, v in val.items():
                        size = _positive_int(b, f"{where}.latency.{dev} (batch size {shown(b)})", text=True)
                        if size in lat[dev]:  # 1 and "1" from Python
                            raise ProblemError(f"{where}.latency.{dev}: batch size {size} given twice; give it once")
                        ms = _plain(v, MAX_MS)
                        lat[dev][size] = ms if ms is not None else _number(v, f"{where}.latency.{dev}.{b}",
                                                                           bounds=(0.0, MAX_MS), unit=" ms")
                else:
                    ms = _plain(val, MAX_MS)
                    lat[dev] = {1: ms if ms is not None else _number(val, f"{where}.latency.{dev}",
                                                                     bounds=(0.0, MAX_MS), unit=" ms")}
            sizes = []
            for f in ("weight_bytes", "input_bytes", "output_bytes"):
                size = _plain(getattr(t, f), MAX_BYTES)
                sizes.append(size if size is not None else _number(getattr(t, f), f"{where}.{f}", unit=" bytes"))
            checked.append(Task(t.name, _frozen_latency(lat), *sizes))
        return tuple(checked)

    def _check_edges(self, edges: Sequence[Edge]) -> tuple[Edge, ...]:
        checked, seen = [], set()
        for k, e in enumerate(edges):
            for end in ("src", "dst"):
                if not isinstance(getattr(e, end), str) or getattr(e, end) not in self.task_index:
                    raise ProblemError(f"edges[{k}].{end}: unknown task {shown(getattr(e, end))}")
            if (e.src, e.dst) in seen:
                raise ProblemError(f"edges[{k}]: duplicate edge {shown(e.src)} -> {shown(e.dst)}")
            seen.add((e.src, e.dst))
            if e.bytes is None:
                b = self.tasks[self.task_index[e.src]].output_bytes
            else:
                b = _plain(e.bytes, MAX_BYTES)
                if b is None:
                    b = _number(e.bytes, f"edges[{k}].bytes", unit=" bytes")
            checked.append(Edge(e.src, e.dst, b))
        return tuple(checked)

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

    def with_objective(self, objective: Objective) -> Problem:
        """The same graph and system under another objective."""
        if not isinstance(objective, Objective):
            raise ProblemError(f"objective: expected an Objective (e.g. Objective('throughput', 4)), got "
                               f"{shown(objective)}")
        return self._derived(self.tasks, self.edges, self.system, objective, self.name, self.calibration)

    def restrict(self, tasks: Sequence[int], fix: Mapping[int, int] | None = None, name: str | None = None,
                 devices: Sequence[int] | None = None) -> Problem:
        """The subproblem induced by ``tasks`` (indices), with the same system and objective.

        Edges from or to tasks outside are dropped; ``fix`` maps a task index to the
        only device it may use; ``devices``, if given, are the only devices any task may
        use. O((n + E) m).
        """
        for i in tasks:  # -1 gave the last task
            if isinstance(i, bool) or not isinstance(i, (int, np.integer)) or not 0 <= i < self.n:
                raise ProblemError(f"tasks: expected task indices from 0 to {self.n - 1}, got {shown(i)}")
        keep = sorted({int(i) for i in tasks})
        fix = dict(fix or {})
        names = {self.task_names[i] for i in keep}
        allowed = set(range(self.m) if devices is None else devices)
        out = []
        for i in keep:
            t = self.tasks[i]
            on = {fix[i]} & allowed if i in fix else allowed
            if len(on) < self.m:
                t = Task(t.name, {d: lat for d, lat in t.latency.items() if self.device_index[d] in on},
                         t.weight_bytes, t.input_bytes, t.output_bytes)
            out.append(t)
        edges = [e for e in self.edges if e.src in names and e.dst in names]
        return self._derived(out, edges, self.system, self.objective, name or f"{self.name}[{len(keep)}]",
                             self.calibration)

    def without_devices(self, names: Iterable[str]) -> Problem:
        """The problem after ``names`` are taken away: their links and latencies go too. Its
        name is this one's with ``" without "`` and those devices.

        Raises :class:`ProblemError` naming the first task that no remaining device can
        run, with the devices it could use. O((n + E) m).

        Examples
        --------
        >>> from mapsched import instances
        >>> instances.load("topcuoglu2002").without_devices(["p3"]).device_names
        ('p1', 'p2')
        """
        if isinstance(names, str) or not isinstance(names, Iterable):
            raise ProblemError(f"--remove: expected a list of device names, got {shown(names)}")
        gone = set(names)
        for d in gone:
            if d not in self.device_index:
                raise ProblemError(f"--remove: unknown device {shown(d)}; expected one of {sorted(self.device_index)}")
        for t in self.tasks:
            if not set(t.latency) - gone:
                raise ProblemError(f"--remove: task {shown(t.name)} runs only on {sorted(t.latency)}, all removed; "
                                   "keep one of them")
        devices = tuple(d for d in self.system.devices if d.name not in gone)
        links = tuple(ln for ln in self.system.links if ln.a not in gone and ln.b not in gone)
        tasks = [Task(t.name, {d: v for d, v in t.latency.items() if d not in gone}, t.weight_bytes,
                      t.input_bytes, t.output_bytes) for t in self.tasks]
        cal = self.calibration
        if cal is not None:
            cal = replace(cal, overhead={d: v for d, v in cal.overhead.items() if d not in gone},
                          sync={ab: v for ab, v in cal.sync.items() if not gone & set(ab)})
        # Another problem, so another name: a schedule names its problem, and a bound proved
        # here must not pass for one of the problem before (mapsched simulate keeps it by name).
        name = f"{self.name} without {', '.join(d for d in self.device_names if d in gone)}"
        return self._derived(tasks, self.edges, System(devices, links), self.objective, name, cal)

    def with_devices(self, like: Mapping[str, str]) -> Problem:
        """The problem with new devices, each a copy of an existing one: ``{new: old}``. Its
        name is this one's with ``" with "`` and the new devices.

        A copy has the old device's memory, batch sizes and server, runs every task in
        the old device's time, and has a copy of each of its links (to the other copies
        too); between a copy and its original goes a copy of the original's fastest link
        (the highest bandwidth, then the lowest latency). O((n + E) m).

        Examples
        --------
        >>> from mapsched import instances
        >>> p = instances.load("topcuoglu2002").with_devices({"p4": "p3"})
        >>> p.device_names, float(p.dur[0, 3]) == float(p.dur[0, 2])
        (('p1', 'p2', 'p3', 'p4'), True)
        """
        if not isinstance(like, Mapping) or not all(isinstance(x, str) for pair in like.items() for x in pair):
            raise ProblemError(f"--add: expected a mapping of new device name to the device it copies, got "
                               f"{shown(like)}")
        for new, old in like.items():
            if old not in self.device_index:
                raise ProblemError(f"--add: {new}={old}: unknown device {shown(old)}; "
                                   f"expected one of {sorted(self.device_index)}")
            if new in self.device_index:
                raise ProblemError(f"--add: {new}={old}: device {shown(new)} exists already; choose a new name")
        of = {d.name: d for d in self.system.devices}
        devices = self.system.devices + tuple(replace(of[old], name=new) for new, old in like.items())

        def between(x: str, y: str, ox: str, oy: str) -> list[Link]:
            """Links for x and y, whose originals are ox and oy: copies of the originals'."""
            if ox == oy:  # a copy and its original, or two copies of one device
                mine = [ln for ln in self.system.links if ox in (ln.a, ln.b)]
                best = max(mine, key=lambda ln: (ln.bandwidth, -ln.latency), default=None)
                return [] if best is None else [Link(x, y, best.bandwidth, best.latency)]
            return [replace(ln, a=x if ln.a == ox else y, b=y if ln.b == oy else x)
                    for ln in self.system.links if {ln.a, ln.b} == {ox, oy}]

        links = list(self.system.links)
        added = list(like.items())
        for k, (new, old) in enumerate(added):
            for d in self.system.devices:
                links += between(new, d.name, old, d.name)
            for new2, old2 in added[k + 1:]:
                links += between(new, new2, old, old2)
        tasks = [Task(t.name, {**t.latency, **{new: t.latency[old] for new, old in like.items() if old in t.latency}},
                      t.weight_bytes, t.input_bytes, t.output_bytes) for t in self.tasks]
        cal = self.calibration
        if cal is not None:
            # A copy's links are copies of its original's, and so are their syncs.
            copies = {**{d.name: d.name for d in self.system.devices}, **like}
            sync = {(x, y): cal.sync[copies[x], copies[y]] for x in copies for y in copies
                    if (copies[x], copies[y]) in cal.sync}
            cal = replace(cal, overhead={**cal.overhead, **{new: cal.overhead[old] for new, old in like.items()
                                                             if old in cal.overhead}}, sync=sync)
        name = f"{self.name} with {', '.join(like)}"  # another problem: see without_devices
        return self._derived(tasks, self.edges, System(devices, tuple(links)), self.objective, name, cal)

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

    # ------------------------------------------------------------ conversion
    def to_dict(self) -> dict[str, Any]:
        """The problem as a ``mapsched.problem/1`` dictionary; ``from_dict`` of it equals ``self``."""
        obj: dict[str, Any] = {"kind": self.objective.kind}
        if self.objective.kind == "throughput":
            obj["batch"] = self.objective.batch
        devices = []
        for d in self.system.devices:
            dev: dict[str, Any] = {"name": d.name, "batch_sizes": list(d.batch_sizes)}
            if math.isfinite(d.memory):
                dev["memory"] = d.memory
            if d.node is not None:
                dev["node"] = d.node
            devices.append(dev)
        links = []
        for ln in self.system.links:
            link: dict[str, Any] = {"a": ln.a, "b": ln.b, "bandwidth": ln.bandwidth, "latency": ln.latency}
            if ln.directed:
                link["directed"] = True
            links.append(link)
        tasks = []
        for t in self.tasks:
            lat: dict[str, Any] = {}
            for dev, table in t.latency.items():
                # A plain number means "batch of 1" in the format, so it round-trips.
                lat[dev] = table[1] if set(table) == {1} else {str(b): v for b, v in sorted(table.items())}
            task: dict[str, Any] = {"name": t.name, "latency": lat}
            for f in ("weight_bytes", "input_bytes", "output_bytes"):
                if getattr(t, f):
                    task[f] = getattr(t, f)
            tasks.append(task)
        edges = [{"src": e.src, "dst": e.dst, "bytes": e.bytes} for e in self.edges]
        data = {
            "format": PROBLEM_FORMAT,
            "name": self.name,
            "objective": obj,
            "devices": devices,
            "links": links,
            "tasks": tasks,
            "edges": edges,
        }
        if self.calibration is not None:  # optional: a file without it reads and writes as before
            data["calibration"] = self._calibration_dict(self.calibration)
        return data

    @staticmethod
    def _calibration_dict(cal: Calibration) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in ("threads", "interop_threads"):
            if getattr(cal, f) is not None:
                out[f] = getattr(cal, f)
        out["overhead"] = dict(cal.overhead)
        out["sync"] = [{"a": a, "b": b, "ms": v} for (a, b), v in cal.sync.items()]
        out["scale"] = cal.scale
        out["fitted"] = cal.fitted
        if cal.compile is not None:  # written only when recorded: older readers take the file as before
            out["compile"] = cal.compile
        return out

    @staticmethod
    def _calibration_from(data: Any, err: type) -> Calibration:
        cal = check_fields(data, "calibration", _CALIBRATION_KEYS, (), err)
        overhead = cal.get("overhead", {})
        if not isinstance(overhead, dict):
            raise err(f"calibration.overhead: expected an object from device name to ms, got {shown(overhead)}")
        sync = {}
        for k, entry in enumerate(check_list(cal.get("sync", []), "calibration.sync", err)):
            entry = check_fields(entry, f"calibration.sync[{k}]", {"a", "b", "ms"}, ("a", "b", "ms"), err)
            for end in ("a", "b"):
                if not isinstance(entry[end], str):  # a pair of names keys the mapping
                    raise err(f"calibration.sync[{k}].{end}: expected a device name, got {shown(entry[end])}")
            if (entry["a"], entry["b"]) in sync:
                raise err(f"calibration.sync[{k}]: duplicate pair {shown(entry['a'])} -> {shown(entry['b'])}")
            sync[(entry["a"], entry["b"])] = entry["ms"]
        return Calibration(cal.get("threads"), cal.get("interop_threads"), overhead, sync, cal.get("scale", 1.0),
                           cal.get("fitted", False), cal.get("compile"))

    def to_json(self, indent: int | None = 1) -> str:
        return dumps(self.to_dict(), indent)

    def write(self, path: str) -> None:
        """Write the problem file atomically: a failure leaves no half-written file."""
        write_json(path, self.to_dict())

    @classmethod
    def from_dict(cls, data: Any) -> Problem:
        """Build a problem from a parsed ``mapsched.problem/1`` document (``docs/format.md``)."""
        err = ProblemError
        if not isinstance(data, dict):
            raise err(f"problem: expected a JSON object, got {type(data).__name__}")
        check_format(data, PROBLEM_FORMAT, err)
        check_fields(data, "problem", _PROBLEM_KEYS, ("format", "objective", "devices", "tasks"), err)
        obj = check_fields(data["objective"], "objective", {"kind", "batch"}, ("kind",), err)
        if obj["kind"] == "throughput" and "batch" not in obj:
            raise err("objective.batch: missing; a throughput objective needs the number of inputs L")
        objective = Objective(obj["kind"], obj.get("batch", 1))

        devices = []
        for k, d in enumerate(check_list(data["devices"], "devices", err)):
            d = check_fields(d, f"devices[{k}]", _DEVICE_KEYS, ("name",), err)
            sizes = d.get("batch_sizes", [1])
            if not isinstance(sizes, list):
                raise err(f"devices[{k}].batch_sizes: expected a list of positive integers, got {shown(sizes)}")
            memory = d.get("memory", math.inf)  # left out: unlimited
            if "memory" in d and isinstance(memory, float) and math.isinf(memory):  # Infinity or 1e400
                raise err(f"devices[{k}].memory: expected a finite number of bytes, got {shown(memory)}; "
                          "leave memory out for unlimited memory")
            devices.append(Device(d["name"], memory, tuple(sizes), d.get("node")))
        links = []
        for k, ln in enumerate(check_list(data.get("links", []), "links", err)):
            ln = check_fields(ln, f"links[{k}]", _LINK_KEYS, ("a", "b", "bandwidth"), err)
            directed = ln.get("directed", False)
            if not isinstance(directed, bool):
                raise err(f"links[{k}].directed: expected true or false, got {shown(directed)}")
            links.append(Link(ln["a"], ln["b"], ln["bandwidth"], ln.get("latency", 0.0), directed))
        tasks = []
        for k, t in enumerate(check_list(data["tasks"], "tasks", err)):
            t = check_fields(t, f"tasks[{k}]", _TASK_KEYS, ("name", "latency"), err)
            tasks.append(
                Task(
                    t["name"],
                    t["latency"],
                    t.get("weight_bytes", 0.0),
                    t.get("input_bytes", 0.0),
                    t.get("output_bytes", 0.0),
                )
            )
        edges = []
        for k, e in enumerate(check_list(data.get("edges", []), "edges", err)):
            e = check_fields(e, f"edges[{k}]", _EDGE_KEYS, ("src", "dst"), err)
            edges.append(Edge(e["src"], e["dst"], e.get("bytes")))
        calibration = cls._calibration_from(data["calibration"], err) if "calibration" in data else None
        return cls(tasks, edges, System(tuple(devices), tuple(links)), objective, data.get("name", "problem"),
                   calibration)

    @classmethod
    def from_json(cls, text: str, source: str = "problem") -> Problem:
        return cls.from_dict(loads(text, source, ProblemError))

    @classmethod
    def read(cls, path: str) -> Problem:
        """Read a problem file; every defect becomes a one-line :class:`ProblemError`."""
        return cls.from_dict(read_json(path, ProblemError))

    @classmethod
    def from_networkx(
        cls,
        graph: nx.DiGraph,
        system: System,
        objective: Objective | None = None,
        name: str = "problem",
    ) -> Problem:
        """Build a problem from a DiGraph whose nodes carry ``latency`` (as in
        :class:`Task`) and optionally ``weight_bytes``, ``input_bytes`` and
        ``output_bytes``, and whose edges may carry ``bytes``.

        Examples
        --------
        >>> import networkx as nx
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
    def from_arrays(
        cls,
        latency: Any,
        edges: Iterable[Sequence[float]],
        system: System | None = None,
        objective: Objective | None = None,
        task_names: Sequence[str] | None = None,
        name: str = "problem",
    ) -> Problem:
        """Build a latency problem from a task x device computation matrix and an edge list,
        as users of HEFT libraries pass them.

        ``latency[i][u]`` is the time of task i on device u (``inf`` or ``nan``: cannot
        run). ``edges`` holds ``(i, j)`` or ``(i, j, cost)``. Without a ``system``, the
        devices ``p0 .. p{m-1}`` are fully linked at 1000 bytes/s, so that an edge's
        cost is its communication time in milliseconds.

        Examples
        --------
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


def _readonly(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a
