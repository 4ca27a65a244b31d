"""Checks of the records a :class:`~mapsched.model.problem.Problem` is built from, done once
as it is built: each returns checked copies (numbers as floats, batch sizes sorted,
latency tables read-only) or raises a one-line :class:`~mapsched.errors.ProblemError`
that names the field, for an unknown or duplicate name or a number out of its range
(:mod:`mapsched.model.records`). What needs the problem's arrays (a cycle, a task no
device can run) the problem checks itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from mapsched import checks
from mapsched.errors import ProblemError, shown
from mapsched.model.records import (
    BANDWIDTH,
    COMPILE,
    MAX_BATCH,
    MAX_BYTES,
    MAX_DEVICES,
    MAX_LANES,
    MAX_MS,
    MAX_SCALE,
    Calibration,
    Device,
    Edge,
    Link,
    Objective,
    System,
    Task,
)

__all__ = ["calibration", "edges", "frozen", "objective", "system", "tasks"]


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


def frozen(tasks: Iterable[Task]) -> tuple[Task, ...]:
    """Checked tasks with read-only latency tables: those of a problem as they are, others
    (latencies as ``{device: {batch size: ms}}``, made by an edit) with their tables frozen."""
    return tuple(t if type(t.latency) is _Table else
                 Task(t.name, _frozen_latency(t.latency), t.weight_bytes, t.input_bytes, t.output_bytes)
                 for t in tasks)


def _plain(value: Any, hi: float) -> float | None:
    """``value`` as a float where it is a plain ``int`` or ``float`` from 0 to ``hi`` (what
    almost every number of a file is), else None: then :func:`mapsched.checks.number` checks it and names
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
    return checks.integer(value, where, 1, MAX_BATCH, err=ProblemError)


def _unique(names: Iterable[str], where: str) -> dict[str, int]:
    index: dict[str, int] = {}
    for k, name in enumerate(names):
        if not isinstance(name, str) or not name:
            raise ProblemError(f"{where}[{k}].name: expected a non-empty string, got {shown(name)}")
        if name in index:
            raise ProblemError(f"{where}[{k}].name: duplicate name {shown(name)}; names must be unique")
        index[name] = k
    return index


def objective(obj: Objective) -> Objective:
    """A checked copy of the objective."""
    if obj.kind not in ("latency", "throughput"):
        raise ProblemError(
            f"objective.kind: expected 'latency' or 'throughput', got {shown(obj.kind)}"
        )
    batch = _positive_int(obj.batch, "objective.batch")
    if obj.kind == "latency" and batch != 1:  # not dropped in silence: the file likely meant throughput
        raise ProblemError(f"objective.batch: a latency objective has one input, got {batch}; "
                           "use kind 'throughput' for a batch of inputs, or leave batch out")
    return Objective(obj.kind, batch)


def system(system: System) -> tuple[System, dict[str, int]]:
    """A checked copy of the system, and the index of each device name."""
    devices = list(system.devices)
    if not devices:
        raise ProblemError("devices: expected at least one device")
    if len(devices) > MAX_DEVICES:
        raise ProblemError(f"devices: {len(devices)} devices; mapsched takes at most {MAX_DEVICES} (its link "
                           "tables are devices x devices)")
    device_index = _unique((d.name for d in devices), "devices")
    checked = []
    for k, d in enumerate(devices):
        mem = checks.number(d.memory, f"devices[{k}].memory", 0.0, MAX_BYTES, above=True, infinite=True,
                            unit=" bytes", err=ProblemError)
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
        engines = None if d.copy_engines is None else checks.integer(
            d.copy_engines, f"devices[{k}].copy_engines", 0, MAX_LANES, err=ProblemError)
        checked.append(Device(d.name, mem, bs, d.node, engines))
    links, seen = [], set()
    for k, ln in enumerate(system.links):
        for end in ("a", "b"):
            if not isinstance(getattr(ln, end), str) or getattr(ln, end) not in device_index:
                raise ProblemError(
                    f"links[{k}].{end}: unknown device {shown(getattr(ln, end))}; "
                    f"expected one of {sorted(device_index)}"
                )
        if ln.a == ln.b:
            raise ProblemError(f"links[{k}]: a link joins two distinct devices, got {shown(ln.a)} twice")
        bw = checks.number(ln.bandwidth, f"links[{k}].bandwidth", *BANDWIDTH, unit=" bytes/s", err=ProblemError)
        lt = checks.number(ln.latency, f"links[{k}].latency", 0.0, MAX_MS, unit=" ms", err=ProblemError)
        pairs = [(ln.a, ln.b)] if ln.directed else [(ln.a, ln.b), (ln.b, ln.a)]
        for pair in pairs:
            if pair in seen:
                raise ProblemError(f"links[{k}]: duplicate link from {shown(pair[0])} to {shown(pair[1])}")
            seen.add(pair)
        lanes = None if ln.concurrency is None else checks.integer(
            ln.concurrency, f"links[{k}].concurrency", 1, MAX_LANES, err=ProblemError)
        if not isinstance(ln.duplex, bool):
            raise ProblemError(f"links[{k}].duplex: expected true or false, got {shown(ln.duplex)}")
        links.append(Link(ln.a, ln.b, bw, lt, bool(ln.directed), lanes, ln.duplex))
    return System(tuple(checked), tuple(links)), device_index


def calibration(cal: Calibration, device_index: Mapping[str, int]) -> Calibration:
    """A checked copy of a calibration of the devices ``device_index``."""
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
        if dev not in device_index:
            raise ProblemError(f"{where}.overhead: unknown device {shown(dev)}; "
                               f"expected one of {sorted(device_index)}")
        overhead[dev] = checks.number(v, f"{where}.overhead.{dev}", 0.0, MAX_MS, unit=" ms", err=ProblemError)
    if not isinstance(cal.sync, Mapping):
        raise ProblemError(f"{where}.sync: expected a mapping from device pairs to ms, got {shown(cal.sync)}")
    sync = {}
    for (a, b), v in cal.sync.items():
        for end in (a, b):
            if end not in device_index:
                raise ProblemError(f"{where}.sync: unknown device {shown(end)}; "
                                   f"expected one of {sorted(device_index)}")
        if a == b:
            raise ProblemError(f"{where}.sync: a pair joins two distinct devices, got {shown(a)} twice")
        sync[(a, b)] = checks.number(v, f"{where}.sync ({a} -> {b})", 0.0, MAX_MS, unit=" ms", err=ProblemError)
    scale = checks.number(cal.scale, f"{where}.scale", 0.0, MAX_SCALE, above=True, err=ProblemError)
    if not isinstance(cal.fitted, bool):
        raise ProblemError(f"{where}.fitted: expected true or false, got {shown(cal.fitted)}")
    if cal.compile is not None and cal.compile not in COMPILE:
        raise ProblemError(f"{where}.compile: expected one of {', '.join(COMPILE)}, got {shown(cal.compile)}")
    return Calibration(threads[0], threads[1], _Table(overhead), _Table(sync), scale, cal.fitted, cal.compile)


def tasks(tasks: Sequence[Task], device_index: Mapping[str, int]) -> tuple[tuple[Task, ...], dict[str, int]]:
    """Checked copies of the tasks, with read-only latency tables, and the index of each task name."""
    tasks = list(tasks)
    if not tasks:
        raise ProblemError("tasks: expected at least one task")
    task_index = _unique((t.name for t in tasks), "tasks")
    checked = []
    for k, t in enumerate(tasks):
        where = f"tasks[{k}]"
        if not isinstance(t.latency, Mapping):
            raise ProblemError(
                f"{where}.latency: expected an object from device name to time, got {shown(t.latency)}"
            )
        lat: dict[str, dict[int, float]] = {}
        for dev, val in t.latency.items():
            if dev not in device_index:
                raise ProblemError(
                    f"{where}.latency: unknown device {shown(dev)}; "
                    f"expected one of {sorted(device_index)}"
                )
            if type(val) is not float and isinstance(val, Mapping):  # the ABC's check is slow
                lat[dev] = {}
                for b, v in val.items():
                    size = _positive_int(b, f"{where}.latency.{dev} (batch size {shown(b)})", text=True)
                    if size in lat[dev]:  # 1 and "1" from Python
                        raise ProblemError(f"{where}.latency.{dev}: batch size {size} given twice; give it once")
                    ms = _plain(v, MAX_MS)
                    lat[dev][size] = ms if ms is not None else checks.number(
                        v, f"{where}.latency.{dev}.{b}", 0.0, MAX_MS, unit=" ms", err=ProblemError)
            else:
                ms = _plain(val, MAX_MS)
                lat[dev] = {1: ms if ms is not None else checks.number(
                    val, f"{where}.latency.{dev}", 0.0, MAX_MS, unit=" ms", err=ProblemError)}
        sizes = []
        for f in ("weight_bytes", "input_bytes", "output_bytes"):
            size = _plain(getattr(t, f), MAX_BYTES)
            sizes.append(size if size is not None else checks.number(
                getattr(t, f), f"{where}.{f}", 0.0, MAX_BYTES, unit=" bytes", err=ProblemError))
        checked.append(Task(t.name, _frozen_latency(lat), *sizes))
    return tuple(checked), task_index


def edges(edges: Sequence[Edge], tasks: Sequence[Task], task_index: Mapping[str, int]) -> tuple[Edge, ...]:
    """Checked copies of the edges, each with its bytes (its source's ``output_bytes`` where not given)."""
    checked, seen = [], set()
    for k, e in enumerate(edges):
        for end in ("src", "dst"):
            if not isinstance(getattr(e, end), str) or getattr(e, end) not in task_index:
                raise ProblemError(f"edges[{k}].{end}: unknown task {shown(getattr(e, end))}")
        if (e.src, e.dst) in seen:
            raise ProblemError(f"edges[{k}]: duplicate edge {shown(e.src)} -> {shown(e.dst)}")
        seen.add((e.src, e.dst))
        if e.bytes is None:
            b = tasks[task_index[e.src]].output_bytes
        else:
            b = _plain(e.bytes, MAX_BYTES)
            if b is None:
                b = checks.number(e.bytes, f"edges[{k}].bytes", 0.0, MAX_BYTES, unit=" bytes", err=ProblemError)
        checked.append(Edge(e.src, e.dst, b))
    return tuple(checked)
