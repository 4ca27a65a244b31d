"""Reading and writing the ``mapsched.problem/1`` and ``mapsched.schedule/1`` formats.

This module is the contract of ``docs/format.md``: it accepts exactly those
documents and rejects anything else with a one-line error naming the field.
Unknown fields are rejected too, so that a misspelt ``memroy`` cannot silently
mean "unlimited memory".
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

from .errors import MapschedError, ProblemError, ScheduleError, shown
from .files import write_file
from .problem import Device, Edge, Link, Objective, Problem, System, Task

if TYPE_CHECKING:
    from .schedule import Schedule

PROBLEM_FORMAT = "mapsched.problem/1"
SCHEDULE_FORMAT = "mapsched.schedule/1"

_PROBLEM_KEYS = {"format", "name", "objective", "devices", "links", "tasks", "edges"}
_DEVICE_KEYS = {"name", "memory", "batch_sizes", "node"}
_LINK_KEYS = {"a", "b", "bandwidth", "latency", "directed"}
_TASK_KEYS = {"name", "latency", "weight_bytes", "input_bytes", "output_bytes"}
_EDGE_KEYS = {"src", "dst", "bytes"}
_SCHEDULE_KEYS = {
    "format", "problem", "method", "status", "makespan", "throughput",
    "lower_bound", "solve_seconds", "interrupted", "jobs",
}
_JOB_KEYS = {"task", "device", "start", "end", "inputs"}


def _fields(value: Any, where: str, allowed: set[str], required: tuple[str, ...], err: type) -> dict:
    if not isinstance(value, dict):
        raise err(f"{where}: expected an object, got {type(value).__name__}")
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise err(f"{where}: unknown field {shown(unknown[0])}; expected only {sorted(allowed)}")
    for key in required:
        if key not in value:
            raise err(f"{where}: missing field {shown(key)}")
    return value


def _list(value: Any, where: str, err: type) -> list:
    if not isinstance(value, list):
        raise err(f"{where}: expected a list, got {type(value).__name__}")
    return value


def _check_format(data: dict, expected: str, err: type) -> None:
    tag = data.get("format")
    if tag != expected:
        raise err(f"format: expected {shown(expected)}, got {shown(tag)}")


# ----------------------------------------------------------------- problems
def problem_from_dict(data: Any) -> Problem:
    """Parse a ``mapsched.problem/1`` document (already decoded from JSON)."""
    err = ProblemError
    if not isinstance(data, dict):
        raise err(f"problem: expected a JSON object, got {type(data).__name__}")
    _check_format(data, PROBLEM_FORMAT, err)
    _fields(data, "problem", _PROBLEM_KEYS, ("format", "objective", "devices", "tasks"), err)
    obj = _fields(data["objective"], "objective", {"kind", "batch"}, ("kind",), err)
    if obj["kind"] == "throughput" and "batch" not in obj:
        raise err("objective.batch: missing; a throughput objective needs the number of inputs L")
    objective = Objective(obj["kind"], obj.get("batch", 1))

    devices = []
    for k, d in enumerate(_list(data["devices"], "devices", err)):
        d = _fields(d, f"devices[{k}]", _DEVICE_KEYS, ("name",), err)
        sizes = d.get("batch_sizes", [1])
        if not isinstance(sizes, list):
            raise err(f"devices[{k}].batch_sizes: expected a list of positive integers, got {shown(sizes)}")
        devices.append(Device(d["name"], d.get("memory", math.inf), tuple(sizes), d.get("node")))
    links = []
    for k, ln in enumerate(_list(data.get("links", []), "links", err)):
        ln = _fields(ln, f"links[{k}]", _LINK_KEYS, ("a", "b", "bandwidth"), err)
        directed = ln.get("directed", False)
        if not isinstance(directed, bool):
            raise err(f"links[{k}].directed: expected true or false, got {shown(directed)}")
        links.append(Link(ln["a"], ln["b"], ln["bandwidth"], ln.get("latency", 0.0), directed))
    tasks = []
    for k, t in enumerate(_list(data["tasks"], "tasks", err)):
        t = _fields(t, f"tasks[{k}]", _TASK_KEYS, ("name", "latency"), err)
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
    for k, e in enumerate(_list(data.get("edges", []), "edges", err)):
        e = _fields(e, f"edges[{k}]", _EDGE_KEYS, ("src", "dst"), err)
        edges.append(Edge(e["src"], e["dst"], e.get("bytes")))
    return Problem(tasks, edges, System(tuple(devices), tuple(links)), objective, data.get("name", "problem"))


def problem_to_dict(p: Problem) -> dict[str, Any]:
    """Serialise a problem; ``problem_from_dict`` of the result equals ``p``."""
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
        devices.append(dev)
    links = []
    for ln in p.system.links:
        link: dict[str, Any] = {"a": ln.a, "b": ln.b, "bandwidth": ln.bandwidth, "latency": ln.latency}
        if ln.directed:
            link["directed"] = True
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
    return {
        "format": PROBLEM_FORMAT,
        "name": p.name,
        "objective": obj,
        "devices": devices,
        "links": links,
        "tasks": tasks,
        "edges": edges,
    }


# ---------------------------------------------------------------- schedules
def _num(value: Any, where: str, *, optional: bool = False) -> float | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise ScheduleError(f"{where}: expected a number, got {shown(value)}")
    return float(value)


def schedule_from_dict(data: Any) -> Schedule:
    """Parse a ``mapsched.schedule/1`` document. Well-formed is not valid: see ``validate``."""
    from .schedule import Job, Schedule

    err = ScheduleError
    if not isinstance(data, dict):
        raise err(f"schedule: expected a JSON object, got {type(data).__name__}")
    _check_format(data, SCHEDULE_FORMAT, err)
    _fields(data, "schedule", _SCHEDULE_KEYS, ("format", "makespan", "jobs"), err)
    status = data.get("status", "feasible")
    if status not in ("optimal", "feasible"):
        raise err(f"status: expected 'optimal' or 'feasible', got {shown(status)}")
    jobs = []
    for k, j in enumerate(_list(data["jobs"], "jobs", err)):
        j = _fields(j, f"jobs[{k}]", _JOB_KEYS, tuple(sorted(_JOB_KEYS)), err)
        for key in ("task", "device"):
            if not isinstance(j[key], str):
                raise err(f"jobs[{k}].{key}: expected a name, got {shown(j[key])}")
        inputs = _list(j["inputs"], f"jobs[{k}].inputs", err)
        if any(isinstance(x, bool) or not isinstance(x, int) or x < 0 for x in inputs):
            raise err(f"jobs[{k}].inputs: expected non-negative integer input indices, got {shown(inputs)}")
        jobs.append(
            Job(j["task"], j["device"], _num(j["start"], f"jobs[{k}].start"),
                _num(j["end"], f"jobs[{k}].end"), tuple(inputs))
        )
    interrupted = data.get("interrupted", False)
    if not isinstance(interrupted, bool):
        raise err(f"interrupted: expected true or false, got {shown(interrupted)}")
    for key in ("problem", "method"):
        if not isinstance(data.get(key, ""), str):
            raise err(f"{key}: expected a string, got {shown(data[key])}")
    return Schedule(
        problem=data.get("problem", ""),
        jobs=jobs,
        makespan=_num(data["makespan"], "makespan"),
        throughput=_num(data.get("throughput"), "throughput", optional=True),
        lower_bound=_num(data.get("lower_bound"), "lower_bound", optional=True),
        status=status,
        method=data.get("method", ""),
        solve_seconds=_num(data.get("solve_seconds", 0.0), "solve_seconds"),
        interrupted=interrupted,
    )


def schedule_to_dict(s: Schedule) -> dict[str, Any]:
    """Serialise a schedule; ``interrupted`` is written only when true, as version 1 readers expect."""
    out = {
        "format": SCHEDULE_FORMAT,
        "problem": s.problem,
        "method": s.method,
        "status": s.status,
        "makespan": s.makespan,
        "throughput": s.throughput,
        "lower_bound": s.lower_bound,
        "solve_seconds": s.solve_seconds,
        "jobs": [
            {"task": j.task, "device": j.device, "start": j.start, "end": j.end, "inputs": list(j.inputs)}
            for j in s.jobs
        ],
    }
    if s.interrupted:
        out["interrupted"] = True
    return out


# --------------------------------------------------------------------- files
def dumps(data: dict, indent: int | None = 1) -> str:
    return json.dumps(data, indent=indent, allow_nan=False)


def loads(text: str, source: str, err: type[MapschedError]) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise err(f"{source}: malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    except RecursionError:  # json recurses once per level: a few thousand '[' exhaust the stack
        raise err(f"{source}: JSON nested too deeply; the formats nest at most 4 levels") from None


def read_json(path: str, err: type[MapschedError]) -> Any:
    """Read a JSON file; a missing file or malformed JSON becomes a one-line ``err``."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise err(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise err(f"{path}: not a UTF-8 text file") from None
    return loads(text, path, err)


def write_json(path: str, data: dict) -> None:
    """Write JSON safely (:func:`mapsched.files.write_file`): nothing half-written, links and devices kept."""
    write_file(path, dumps(data) + "\n")
