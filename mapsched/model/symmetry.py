"""Identical hardware: finding it, and cutting its permutations out of exact models.

Two devices are interchangeable when swapping them maps every schedule to a
schedule of the same makespan: equal memory, batch sizes and latency for every
task and batch, and equal links to every other device. Two servers (``node`` in
the problem file) are interchangeable when a one-to-one map of their devices
does the same for whole servers. Both relations are equivalences; their classes
generate the symmetry group (a product of symmetric groups).

Symmetry breaking (the ``symmetry`` option of ``exact`` and ``split``)
    ``task``, ``batch`` and ``time`` order the devices of each class, and the
    servers of each class, by number of inputs processed, number of batches, or
    busy time, non-increasing. A comma-separated list orders by those keys
    lexicographically (one weighted sum: the first key dominates). ``lex`` instead
    makes devices of a class enter in order: a task may use device k + 1 of a class
    only if it or an earlier task (topological order) uses device k (with batching,
    one task may open several devices at once); servers of a class likewise, by any
    of their devices, for the first :data:`LEX_TASKS` tasks. None of these cuts
    off every optimum: permuting the identical servers, then inside each server its
    identical devices, of an optimal schedule into that order keeps it optimal, since
    the permutation is a symmetry and the keys are computed by the model itself (and
    permuting devices inside a server changes no server's key or first use).

    A warm start is such an optimum only by chance: :func:`lex_relabelled` permutes a
    schedule into the ``lex`` order, so that a model with those cuts can follow it as a hint.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from mapsched.errors import OptionError, shown
from mapsched.model.problem import Problem

if TYPE_CHECKING:
    from mapsched.model.schedule import Schedule

__all__ = ["CRITERIA", "LEX_TASKS", "Symmetry", "find_symmetry", "lex_relabelled", "symmetry_plugins"]

CRITERIA = ("none", "task", "batch", "time", "lex")

LEX_TASKS = 500
"""The ``lex`` cuts cover the first this many tasks in topological order. The cut at a
task sums the uses of all tasks before it, so cuts at every task would be O(n^2) terms: at
19,000 tasks, minutes and gigabytes to build. Fewer cuts keep every schedule the full set
keeps, and the first tasks decide which device of a class opens first."""


def _same(p: Problem, perm: np.ndarray) -> bool:
    """Whether relabelling device u as perm[u] preserves the whole problem."""
    if not np.array_equal(p.mem, p.mem[perm]):
        return False
    if any(p.system.devices[u].batch_sizes != p.system.devices[perm[u]].batch_sizes for u in range(p.m)):
        return False
    if not np.array_equal(np.nan_to_num(p.lat, posinf=-1), np.nan_to_num(p.lat[:, perm, :], posinf=-1)):
        return False
    ix = np.ix_(perm, perm)
    llat = np.nan_to_num(p.link_latency, posinf=-1)
    return np.array_equal(llat, llat[ix]) and np.array_equal(p.link_ms_per_byte, p.link_ms_per_byte[ix])


@dataclass(frozen=True)
class Symmetry:
    """Classes of interchangeable devices and of interchangeable servers.

    Attributes
    ----------
    devices : tuple of tuple of int
        Classes (of two or more) of interchangeable devices.
    servers : tuple of tuple of tuple of int
        Classes of interchangeable servers; each server as its devices, listed so
        that the k-th devices of two servers correspond.
    """

    devices: tuple[tuple[int, ...], ...]
    servers: tuple[tuple[tuple[int, ...], ...], ...]

    def order(self) -> float:
        """Size of the symmetry group these classes generate."""
        from math import factorial, prod

        return float(prod(factorial(len(c)) for c in self.devices)) * float(
            prod(factorial(len(c)) for c in self.servers))

    def generators(self, m: int) -> list[np.ndarray]:
        """Permutations of the ``m`` devices that generate the group: transpositions
        within each device class, and whole-server swaps within each server class."""
        gens = []
        for c in self.devices:
            for u in c[1:]:
                g = np.arange(m)
                g[[c[0], u]] = [u, c[0]]
                gens.append(g)
        for c in self.servers:
            for srv in c[1:]:
                g = np.arange(m)
                g[list(c[0])], g[list(srv)] = list(srv), list(c[0])
                gens.append(g)
        return gens

    def orbits(self, points: Iterable[tuple[int | None, ...]], m: int) -> dict[tuple, tuple[tuple, np.ndarray]]:
        """Map each tuple of devices to the representative of its orbit and a permutation
        ``g`` of the devices with ``g[rep] == point`` (``None`` entries stay ``None``).

        Only ``points`` are visited; the group must map them onto each other (true of
        all tuples over all devices). A breadth-first search over the generators:
        O(len(points) * generators * m).

        >>> sym = Symmetry(((1, 2, 3),), ())
        >>> orb = sym.orbits([(u, v) for u in range(4) for v in range(4)], 4)
        >>> len({rep for rep, _ in orb.values()})
        5
        """
        todo = list(dict.fromkeys(points))
        allowed = set(todo)
        gens = self.generators(m)
        out: dict[tuple, tuple[tuple, np.ndarray]] = {}
        for rep in todo:
            if rep in out:
                continue
            out[rep] = (rep, np.arange(m))
            queue = [rep]
            while queue:
                q = queue.pop()
                perm = out[q][1]
                for g in gens:
                    q2 = tuple(None if x is None else int(g[x]) for x in q)
                    if q2 in allowed and q2 not in out:
                        out[q2] = (rep, g[perm])
                        queue.append(q2)
        return out

    def consecutive(self) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
        """Consecutive members of each class, as groups of devices: a device alone, or a
        server's devices (servers are ordered too: whole servers are permuted). The pairs
        that symmetry breaking orders."""
        pairs = [((a,), (b,)) for c in self.devices for a, b in zip(c, c[1:])]
        return pairs + [(a, b) for c in self.servers for a, b in zip(c, c[1:])]

    def describe(self, problem: Problem) -> str:
        names = problem.device_names
        lines = [f"symmetry group of order {self.order():.4g}"]
        for c in self.devices:
            lines.append(f"  S{len(c)} on devices {{{', '.join(names[u] for u in c)}}}")
        for c in self.servers:
            nodes = [problem.system.devices[s[0]].node for s in c]
            lines.append(f"  S{len(c)} on servers {{{', '.join(map(str, nodes))}}}")
        return "\n".join(lines)


def find_symmetry(problem: Problem) -> Symmetry:
    """Interchangeable devices and servers of a problem. O(m^2 (n nb + m^2)).

    Examples
    --------
    >>> from mapsched.generators import gpu_server
    >>> from mapsched import Problem, Task
    >>> sysm = gpu_server(4).system()
    >>> p = Problem([Task("t", {d.name: 1.0 for d in sysm.devices})], [], sysm)
    >>> [len(c) for c in find_symmetry(p).devices]
    [4]
    """
    p = problem
    classes: list[list[int]] = []
    for u in range(p.m):
        for c in classes:
            perm = np.arange(p.m)
            perm[[u, c[0]]] = [c[0], u]
            if _same(p, perm):
                c.append(u)
                break
        else:
            classes.append([u])
    servers = _server_classes(p)
    return Symmetry(tuple(tuple(c) for c in classes if len(c) > 1), servers)


def _server_classes(p: Problem) -> tuple[tuple[tuple[int, ...], ...], ...]:
    nodes: dict[str, list[int]] = {}
    for u, d in enumerate(p.system.devices):
        if d.node is not None:
            nodes.setdefault(d.node, []).append(u)
    # Devices of a server in a canonical order: by a signature of what they are.
    def key(u: int) -> tuple:
        d = p.system.devices[u]
        return (d.memory, d.batch_sizes, tuple(np.nan_to_num(p.lat[:, u, :], posinf=-1).ravel()))

    ordered = [tuple(sorted(devs, key=key)) for devs in nodes.values()]
    classes: list[list[tuple[int, ...]]] = []
    for s in ordered:
        for c in classes:
            a = c[0]
            if len(a) != len(s):
                continue
            perm = np.arange(p.m)
            perm[list(a)], perm[list(s)] = list(s), list(a)
            if _same(p, perm):
                c.append(s)
                break
        else:
            classes.append([s])
    return tuple(tuple(c) for c in classes if len(c) > 1)


def _criteria(spec: str) -> list[str]:
    crit = [c.strip() for c in spec.split(",") if c.strip()]
    bad = [c for c in crit if c not in CRITERIA]
    if bad or not crit or (len(crit) > 1 and ("lex" in crit or "none" in crit)):
        raise OptionError(
            f"--symmetry: expected none, lex, or a comma-separated list of task, batch, time; got {shown(spec)}")
    return crit


def symmetry_plugins(problem: Problem, spec: str) -> tuple[Callable[[Any], None], ...]:
    """Constraint plugins breaking the symmetry of identical devices and servers."""
    crit = _criteria(spec)
    if crit == ["none"]:
        return ()
    sym = find_symmetry(problem)
    if not sym.devices and not sym.servers:
        return ()
    n, L = problem.n, problem.L

    def key(view: Any, devices: tuple[int, ...]) -> Any:
        """The lexicographic key of a set of devices, as one weighted sum."""
        parts = {"task": lambda: sum(view.count(i, u) for i in range(n) for u in devices),
                 "batch": lambda: sum(view.use(i, u) for i in range(n) for u in devices),
                 "time": lambda: sum(view.busy(u) for u in devices)}
        caps = {"task": n * L * len(devices), "batch": n * len(devices)}
        total, scale = 0, 1
        for c in reversed(crit):
            total = total + scale * parts[c]()
            if c == "time":
                # Busy time is below the serial horizon; in ticks for CP-SAT.
                scale *= int(_horizon(view)) + 1
            else:
                scale *= caps[c] + 1
        return total

    pairs = sym.consecutive()

    def plugin(view: Any) -> None:
        if crit == ["lex"]:
            order = problem.topo[:LEX_TASKS].tolist()
            for a, b in pairs:
                opened: Any = 0  # tasks up to i that group a runs, summed as i advances
                for i in order:
                    opened = opened + sum(view.use(i, u) for u in a)
                    for u in b:
                        _at_least(view, opened, view.use(i, u))
            return
        for a, b in pairs:
            _at_least(view, key(view, a), key(view, b))

    return (plugin,)


def lex_relabelled(problem: Problem, schedule: Schedule) -> Schedule:
    """``schedule`` with its identical servers, then the identical devices of each class,
    renamed in the order in which the tasks (in topological order) first use them: the
    order the ``lex`` criterion demands. The renaming is a symmetry, so the schedule stays
    valid with the same makespan; a warm start in another order breaks the ``lex`` cuts,
    and a model with them cannot follow it as a hint. Returned unchanged where there is
    nothing to rename, or where classes of devices and of servers overlap so that one
    renaming does not satisfy both (then checked, not assumed).

    Notes
    -----
    O(jobs + m^2) after :func:`find_symmetry`.

    Examples
    --------
    >>> from mapsched import Problem, Task, solve
    >>> from mapsched.generators import gpu_server
    >>> sysm = gpu_server(2).system()
    >>> p = Problem([Task("t", {d.name: 1.0 for d in sysm.devices})], [], sysm)
    >>> s = solve(p, "heft")
    >>> s.jobs = [replace(j, device=sysm.devices[-1].name) for j in s.jobs]  # the last GPU
    >>> [j.device for j in lex_relabelled(p, s).jobs] == [sysm.devices[-2].name]
    True
    """
    p = problem
    sym = find_symmetry(p)
    if not sym.devices and not sym.servers:
        return schedule
    rank = np.empty(p.n, dtype=float)
    rank[p.topo] = np.arange(p.n)
    first = np.full(p.m, np.inf)  # topological rank of the first task on each device
    for j in schedule.jobs:
        u = p.device_index[j.device]
        first[u] = min(first[u], rank[p.task_index[j.task]])
    to = np.arange(p.m)  # device u becomes device to[u]
    for c in sym.servers:  # k-th devices of two servers correspond
        by_use = sorted(range(len(c)), key=lambda k: min(first[list(c[k])]))
        for new, old in enumerate(by_use):
            to[list(c[old])] = c[new]
    moved = np.full(p.m, np.inf)
    moved[to] = first
    inside = np.arange(p.m)
    for c in sym.devices:
        for new, old in zip(c, sorted(c, key=lambda u: moved[u])):
            inside[old] = new
    to = inside[to]
    used = np.full(p.m, np.inf)
    used[to] = first
    if any(min(used[list(a)]) > min(used[list(b)]) for a, b in sym.consecutive()):
        return schedule
    names = p.device_names
    jobs = [replace(j, device=names[to[p.device_index[j.device]]]) for j in schedule.jobs]
    return replace(schedule, jobs=jobs, history=list(schedule.history))


def _at_least(view: Any, big: Any, small: Any) -> None:
    """Add ``big >= small`` unless both sides are plain numbers (a device no task can use)."""
    if isinstance(big, (int, float)) and isinstance(small, (int, float)):
        return
    view.add(big >= small)


def _horizon(view: Any) -> float:
    """An upper bound on any device's busy time in the view's time unit."""
    p = view.problem
    lat = np.where(np.isfinite(p.lat), p.lat, 0.0).max(axis=(1, 2)).sum()
    return lat * getattr(view, "res", 1.0) + 1
