"""The cost of moving tasks away from an initial placement (``solve(..., relocation=...)``).

A re-placement is not free: a task that changes device must have its state migrated
and be started again. GiPH (§5.3) charges each moved task its data-migration time plus
its start-up time on the new device, divided by how many runs of the graph the new
placement will serve. With a :class:`Relocation`, the methods that weigh it minimise

    makespan + sum over moved tasks of (start-up + migration) / runs

where a task *moves* when it runs elsewhere than in the solve's initial placement, and

- its start-up time is the spec's, per task and per new device where given;
- its migration is the time to send its bytes (its ``weight_bytes`` by default) from
  the old device to the new one over their link, as an edge's data would go; between
  devices with no link, over the link of the system slowest for those bytes;
- a task whose old device is gone pays its start-up alone (there is nothing left to
  migrate from), and a task the initial placement does not mention pays nothing.

The file form is ``mapsched.relocation/1`` (``docs/format.md``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mapsched import checks
from mapsched.errors import OptionError, shown
from mapsched.model.jsonio import check_fields, check_format, read_json
from mapsched.model.problem import MAX_BYTES, MAX_MS, Problem
from mapsched.model.schedule import Schedule

__all__ = ["RELOCATION_FORMAT", "Relocation", "RelocationCosts", "relocation_costs"]

RELOCATION_FORMAT = "mapsched.relocation/1"
_KEYS = {"format", "runs", "startup", "bytes", "tasks"}
_TASK_KEYS = {"startup", "bytes"}

Startup = float | Mapping[str, float]
MIN_RUNS, MAX_RUNS = 1e-6, 1e18
"""The range of ``runs``: a cost divided by fewer overflowed (1e-320 gave inf)."""


def _amount(value: Any, where: str, most: float) -> float:
    # Capped as a problem's times and sizes are: past them a cost overflowed to inf, which
    # no schedule file can hold.
    return checks.number(value, where, 0.0, most)


def _startup(value: Any, where: str) -> Startup:
    if isinstance(value, Mapping):
        return {str(d): _amount(v, f"{where}.{d}", MAX_MS) for d, v in value.items()}
    return _amount(value, where, MAX_MS)


def _bytes(value: Any, where: str) -> float | str:
    if value == "weights":
        return value
    if isinstance(value, str):
        raise OptionError(f"{where}: expected a number of bytes or \"weights\" (the task's weight_bytes), "
                          f"got {shown(value)}")
    return _amount(value, where, MAX_BYTES)


@dataclass(frozen=True)
class Relocation:
    """What moving a task costs, in ms (see the module docstring).

    Parameters
    ----------
    startup : float or mapping of device name to float
        Start-up time of a moved task on its new device (default 0).
    bytes : float or "weights"
        Bytes migrated with a moved task; ``"weights"`` (default) takes each task's
        ``weight_bytes``.
    runs : float
        Runs of the graph the placement serves; the cost is divided by it (default 1).
    tasks : mapping of task name to {"startup": ..., "bytes": ...}
        Per-task values that replace the defaults above.

    Examples
    --------
    >>> Relocation(startup=5.0, runs=10).runs
    10.0
    """

    startup: Startup = 0.0
    bytes: float | str = "weights"
    runs: float = 1.0
    tasks: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "runs", checks.number(self.runs, "relocation.runs", MIN_RUNS, MAX_RUNS))
        object.__setattr__(self, "startup", _startup(self.startup, "relocation.startup"))
        object.__setattr__(self, "bytes", _bytes(self.bytes, "relocation.bytes"))
        if not isinstance(self.tasks, Mapping):
            raise OptionError(f"relocation.tasks: expected an object of task names, got {type(self.tasks).__name__}")
        tasks = {}
        for t, spec in self.tasks.items():
            where = f"relocation.tasks.{t}"
            check_fields(spec, where, _TASK_KEYS, (), OptionError)
            tasks[str(t)] = {**({"startup": _startup(spec["startup"], f"{where}.startup")} if "startup" in spec
                                else {}),
                             **({"bytes": _bytes(spec["bytes"], f"{where}.bytes")} if "bytes" in spec else {})}
        object.__setattr__(self, "tasks", tasks)

    @classmethod
    def from_dict(cls, data: Any) -> Relocation:
        """Parse a ``mapsched.relocation/1`` document; a defect is a one-line :class:`OptionError`."""
        check_fields(data, "relocation", _KEYS, ("format",), OptionError)
        check_format(data, RELOCATION_FORMAT, OptionError)
        return cls(**{k: v for k, v in data.items() if k != "format"})

    @classmethod
    def read(cls, path: str) -> Relocation:
        """Read a ``mapsched.relocation/1`` file; a defect is a one-line :class:`OptionError`
        that names the file and the field."""
        data = read_json(path, OptionError)
        try:
            return cls.from_dict(data)
        except OptionError as exc:
            raise OptionError(f"{shown(path, quote=False)}: {exc}") from None

    def to_dict(self) -> dict[str, Any]:
        return {"format": RELOCATION_FORMAT, "runs": self.runs, "startup": self.startup, "bytes": self.bytes,
                "tasks": {t: dict(s) for t, s in self.tasks.items()}}


def relocation_costs(problem: Problem, relocation: Relocation, origin: Mapping[str, str]) -> np.ndarray:
    """The cost of each task on each device, shape (n, m): 0 on its device in ``origin``
    (task name -> device name, perhaps of an earlier version of the problem), else its
    start-up plus migration over ``relocation.runs``. O(n m).

    Raises
    ------
    OptionError
        Naming a task of ``relocation.tasks`` that the problem does not have.

    Examples
    --------
    >>> import mapsched
    >>> p = mapsched.instances.load("topcuoglu2002")
    >>> c = relocation_costs(p, Relocation(startup=3.0, runs=2), {"t1": "p1"})
    >>> c[0].tolist(), float(c[1].sum())
    ([0.0, 1.5, 1.5], 0.0)
    """
    p, r = problem, relocation
    for t in r.tasks:
        if t not in p.task_index:
            raise OptionError(f"relocation.tasks: task {shown(t)} is not in problem {shown(p.name)}; name tasks of "
                              "this problem")
    # Between unlinked devices state goes over the slowest link for its size (or, with none,
    # costs nothing to send): the largest latency + bytes x ms per byte of one link, over the
    # links that no other beats on both terms.
    unlinked = ~np.isfinite(p.link_latency)
    links = np.isfinite(p.link_latency)
    np.fill_diagonal(links, False)
    kinds = np.unique(np.stack([p.link_latency[links], p.link_ms_per_byte[links]], axis=1), axis=0)
    slowest = [(a, b) for a, b in kinds.tolist() if not ((kinds[:, 0] >= a) & (kinds[:, 1] >= b)
                                                          & ((kinds[:, 0] > a) | (kinds[:, 1] > b))).any()]
    lat = np.where(unlinked, 0.0, p.link_latency)
    mpb = np.where(unlinked, 0.0, p.link_ms_per_byte)
    up = r.startup
    default = (np.array([up.get(d, 0.0) for d in p.device_names]) if isinstance(up, Mapping)
               else np.full(p.m, float(up)))
    cost = np.zeros((p.n, p.m))
    for t, dev in origin.items():
        i = p.task_index.get(t)
        if i is None:
            continue
        spec = r.tasks.get(t, {})
        row = default.copy()
        up = spec.get("startup")
        if isinstance(up, Mapping):  # devices it does not name keep the spec-wide start-up
            for d, v in up.items():
                if d in p.device_index:
                    row[p.device_index[d]] = v
        elif up is not None:
            row[:] = up
        u = p.device_index.get(dev)
        if u is not None:
            nbytes = spec.get("bytes", r.bytes)
            nbytes = p.weight[i] if nbytes == "weights" else nbytes
            slow = max((a + nbytes * b for a, b in slowest), default=0.0)
            row = row + np.where(unlinked[u], slow, lat[u] + nbytes * mpb[u])
            row[u] = 0.0
        cost[i] = row / r.runs
    return cost


class RelocationCosts:
    """A solve's relocation costs (:func:`relocation_costs`), for methods to add to a
    placement's makespan."""

    def __init__(self, problem: Problem, cost: np.ndarray) -> None:
        self.problem, self.cost = problem, cost
        self._rows = np.arange(problem.n)

    def of_owner(self, owner: np.ndarray) -> float:
        """The cost of a placement given as one device index per task. O(n)."""
        return float(self.cost[self._rows, owner].sum())

    def of(self, schedule: Schedule) -> float:
        """The cost of a latency schedule's placement. O(n)."""
        from mapsched.model.owners import as_owner

        return self.of_owner(as_owner(self.problem, schedule.mapping())[:, 0])
