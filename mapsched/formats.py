"""Reading and writing the ``mapsched.problem/1`` and ``mapsched.schedule/1`` formats.

This module is the contract of ``docs/format.md``: it accepts exactly those
documents and rejects anything else with a one-line error naming the field.
Unknown fields are rejected too, so that a misspelt ``memroy`` cannot silently
mean "unlimited memory".
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from .errors import ProblemError, ScheduleError, shown
from .jsonio import check_fields, check_format, check_list, dumps, loads, read_json, write_json  # noqa: F401 (the file functions stay public here)
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


# ----------------------------------------------------------------- problems
def problem_from_dict(data: Any) -> Problem:
    """Parse a ``mapsched.problem/1`` document (already decoded from JSON)."""
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
        devices.append(Device(d["name"], d.get("memory", math.inf), tuple(sizes), d.get("node")))
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
    check_format(data, SCHEDULE_FORMAT, err)
    check_fields(data, "schedule", _SCHEDULE_KEYS, ("format", "makespan", "jobs"), err)
    status = data.get("status", "feasible")
    if status not in ("optimal", "feasible"):
        raise err(f"status: expected 'optimal' or 'feasible', got {shown(status)}")
    jobs = []
    for k, j in enumerate(check_list(data["jobs"], "jobs", err)):
        j = check_fields(j, f"jobs[{k}]", _JOB_KEYS, tuple(sorted(_JOB_KEYS)), err)
        for key in ("task", "device"):
            if not isinstance(j[key], str):
                raise err(f"jobs[{k}].{key}: expected a name, got {shown(j[key])}")
        inputs = check_list(j["inputs"], f"jobs[{k}].inputs", err)
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

