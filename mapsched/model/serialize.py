"""The ``mapsched.problem/1`` format: a :class:`~mapsched.model.problem.Problem` as a JSON
document and back (the contract of ``docs/format.md``).

A document's shape is checked here (unknown fields are refused, so that a misspelt
``memroy`` cannot silently mean "unlimited memory"); its numbers and names are checked
by :class:`~mapsched.model.problem.Problem` as it is built, the same way as a problem built
in Python.
"""

from __future__ import annotations

import math
from typing import Any, TypeVar

from mapsched.errors import ProblemError, shown
from mapsched.model.jsonio import check_fields, check_format, check_list, dumps, loads, read_json, write_json
from mapsched.model.records import Calibration, Device, Edge, Link, Objective, System, Task

__all__ = ["PROBLEM_FORMAT", "Serialized", "calibration_dict", "calibration_from"]

PROBLEM_FORMAT = "mapsched.problem/1"
_PROBLEM_KEYS = {"format", "name", "objective", "devices", "links", "tasks", "edges", "calibration"}
_DEVICE_KEYS = {"name", "memory", "batch_sizes", "node", "copy_engines"}
_LINK_KEYS = {"a", "b", "bandwidth", "latency", "directed", "concurrency", "duplex"}
_TASK_KEYS = {"name", "latency", "weight_bytes", "input_bytes", "output_bytes"}
_EDGE_KEYS = {"src", "dst", "bytes"}
_CALIBRATION_KEYS = {"threads", "interop_threads", "overhead", "sync", "scale", "fitted", "compile"}


def calibration_dict(cal: Calibration) -> dict[str, Any]:
    """A calibration as the ``calibration`` object of a problem file."""
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


def calibration_from(data: Any, err: type) -> Calibration:
    """The ``calibration`` object of a problem file as a :class:`Calibration` (checked when the problem is built)."""
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

P = TypeVar("P", bound="Serialized")


class Serialized:
    """A :class:`~mapsched.model.problem.Problem` as a ``mapsched.problem/1`` document, and back."""

    def to_dict(self) -> dict[str, Any]:
        """The problem as a ``mapsched.problem/1`` dictionary; ``from_dict`` of it equals ``self``."""
        p = self
        obj: dict[str, Any] = {"kind": p.objective.kind}
        if p.objective.kind == "throughput":
            obj["batch"] = p.objective.batch
        devices = []
        for d in p.system.devices:
            dev: dict[str, Any] = {"name": d.name, "batch_sizes": list(d.batch_sizes)}
            if math.isfinite(d.memory):
                dev["memory"] = d.memory
            if d.node is not None:
                dev["node"] = d.node
            if d.copy_engines is not None:  # written only when declared: older readers take the file as before
                dev["copy_engines"] = d.copy_engines
            devices.append(dev)
        links = []
        for ln in p.system.links:
            link: dict[str, Any] = {"a": ln.a, "b": ln.b, "bandwidth": ln.bandwidth, "latency": ln.latency}
            if ln.directed:
                link["directed"] = True
            if ln.concurrency is not None:
                link["concurrency"] = ln.concurrency
            if not ln.duplex:
                link["duplex"] = False
            links.append(link)
        tasks = []
        for t in p.tasks:
            lat: dict[str, Any] = {}
            for dev, table in t.latency.items():
                # A plain number means "batch of 1" in the format, so it round-trips.
                lat[dev] = table[1] if set(table) == {1} else {str(b): v for b, v in sorted(table.items())}
            task: dict[str, Any] = {"name": t.name, "latency": lat}
            for f in ("weight_bytes", "input_bytes", "output_bytes"):
                if getattr(t, f):
                    task[f] = getattr(t, f)
            tasks.append(task)
        edges = [{"src": e.src, "dst": e.dst, "bytes": e.bytes} for e in p.edges]
        data = {
            "format": PROBLEM_FORMAT,
            "name": p.name,
            "objective": obj,
            "devices": devices,
            "links": links,
            "tasks": tasks,
            "edges": edges,
        }
        if p.calibration is not None:  # optional: a file without it reads and writes as before
            data["calibration"] = calibration_dict(p.calibration)
        return data

    @classmethod
    def from_dict(cls: type[P], data: Any) -> P:
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
            devices.append(Device(d["name"], memory, tuple(sizes), d.get("node"), d.get("copy_engines")))
        links = []
        for k, ln in enumerate(check_list(data.get("links", []), "links", err)):
            ln = check_fields(ln, f"links[{k}]", _LINK_KEYS, ("a", "b", "bandwidth"), err)
            directed = ln.get("directed", False)
            if not isinstance(directed, bool):
                raise err(f"links[{k}].directed: expected true or false, got {shown(directed)}")
            links.append(Link(ln["a"], ln["b"], ln["bandwidth"], ln.get("latency", 0.0), directed,
                              ln.get("concurrency"), ln.get("duplex", True)))
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
        calibration = calibration_from(data["calibration"], err) if "calibration" in data else None
        return cls(tasks, edges, System(tuple(devices), tuple(links)), objective, data.get("name", "problem"),
                   calibration)

    def to_json(self, indent: int | None = 1) -> str:
        """The problem as ``mapsched.problem/1`` JSON text."""
        return dumps(self.to_dict(), indent)

    def write(self, path: str) -> None:
        """Write the problem file atomically: a failure leaves no half-written file."""
        write_json(path, self.to_dict())

    @classmethod
    def from_json(cls: type[P], text: str, source: str = "problem") -> P:
        """Build a problem from ``mapsched.problem/1`` JSON text read from ``source``."""
        return cls.from_dict(loads(text, source, ProblemError))

    @classmethod
    def read(cls: type[P], path: str) -> P:
        """Read a problem file; every defect becomes a one-line :class:`ProblemError`."""
        return cls.from_dict(read_json(path, ProblemError))
