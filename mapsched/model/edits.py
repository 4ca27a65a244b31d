"""Edits of a problem: each returns a new, checked :class:`~mapsched.model.problem.Problem`
(another objective, a subproblem, devices taken away or copied) and leaves the problem it
was made from as it was. The :class:`~mapsched.model.problem.Problem` methods of the same
names call these.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeVar

import numpy as np

from mapsched.errors import ProblemError, shown
from mapsched.model.records import Link, Objective, System, Task

__all__ = ["Edits"]

P = TypeVar("P", bound="Edits")


class Edits:
    """What :class:`~mapsched.model.problem.Problem` can be turned into: each edit returns a
    new, checked problem and leaves this one as it was."""

    def with_objective(self: P, objective: Objective) -> P:
        """The same graph and system under another objective."""
        p = self
        if not isinstance(objective, Objective):
            raise ProblemError(f"objective: expected an Objective (e.g. Objective('throughput', 4)), got "
                               f"{shown(objective)}")
        return p._derived(p.tasks, p.edges, p.system, objective, p.name, p.calibration)

    def restrict(self: P, tasks: Sequence[int], fix: Mapping[int, int | Collection[int]] | None = None,
                 name: str | None = None, devices: Sequence[int] | None = None) -> P:
        """The subproblem induced by ``tasks`` (indices), with the same system and objective.

            Edges from or to tasks outside are dropped; ``fix`` maps a task index to the
            only device it may use, or to the devices it may use; ``devices``, if given, are
            the only devices any task may use. O((n + E) m).
            """
        p = self
        for i in tasks:  # -1 gave the last task
            if isinstance(i, bool) or not isinstance(i, (int, np.integer)) or not 0 <= i < p.n:
                raise ProblemError(f"tasks: expected task indices from 0 to {p.n - 1}, got {shown(i)}")
        keep = sorted({int(i) for i in tasks})
        fix = dict(fix or {})
        names = {p.task_names[i] for i in keep}
        allowed = set(range(p.m) if devices is None else devices)
        out = []
        for i in keep:
            t = p.tasks[i]
            on = allowed if i not in fix else (
                {fix[i]} if isinstance(fix[i], (int, np.integer)) else set(fix[i])) & allowed
            if len(on) < p.m:
                t = Task(t.name, {d: lat for d, lat in t.latency.items() if p.device_index[d] in on},
                         t.weight_bytes, t.input_bytes, t.output_bytes)
            out.append(t)
        edges = [e for e in p.edges if e.src in names and e.dst in names]
        return p._derived(out, edges, p.system, p.objective, name or f"{p.name}[{len(keep)}]", p.calibration)

    def without_devices(self: P, names: Iterable[str]) -> P:
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
        p = self
        if isinstance(names, str) or not isinstance(names, Iterable):
            raise ProblemError(f"--remove: expected a list of device names, got {shown(names)}")
        gone = set(names)
        for d in gone:
            if d not in p.device_index:
                raise ProblemError(f"--remove: unknown device {shown(d)}; expected one of {sorted(p.device_index)}")
        for t in p.tasks:
            if not set(t.latency) - gone:
                raise ProblemError(f"--remove: task {shown(t.name)} runs only on {sorted(t.latency)}, all removed; "
                                   "keep one of them")
        devices = tuple(d for d in p.system.devices if d.name not in gone)
        links = tuple(ln for ln in p.system.links if ln.a not in gone and ln.b not in gone)
        tasks = [Task(t.name, {d: v for d, v in t.latency.items() if d not in gone}, t.weight_bytes,
                      t.input_bytes, t.output_bytes) for t in p.tasks]
        cal = p.calibration
        if cal is not None:
            cal = replace(cal, overhead={d: v for d, v in cal.overhead.items() if d not in gone},
                          sync={ab: v for ab, v in cal.sync.items() if not gone & set(ab)})
        # Another problem, so another name: a schedule names its problem, and a bound proved
        # here must not pass for one of the problem before (mapsched simulate keeps it by name).
        name = f"{p.name} without {', '.join(d for d in p.device_names if d in gone)}"
        return p._derived(tasks, p.edges, System(devices, links), p.objective, name, cal)

    def with_devices(self: P, like: Mapping[str, str]) -> P:
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
        p = self
        if not isinstance(like, Mapping) or not all(isinstance(x, str) for pair in like.items() for x in pair):
            raise ProblemError(f"--add: expected a mapping of new device name to the device it copies, got "
                               f"{shown(like)}")
        for new, old in like.items():
            if old not in p.device_index:
                raise ProblemError(f"--add: {new}={old}: unknown device {shown(old)}; "
                                   f"expected one of {sorted(p.device_index)}")
            if new in p.device_index:
                raise ProblemError(f"--add: {new}={old}: device {shown(new)} exists already; choose a new name")
        of = {d.name: d for d in p.system.devices}
        devices = p.system.devices + tuple(replace(of[old], name=new) for new, old in like.items())

        def between(x: str, y: str, ox: str, oy: str) -> list[Link]:
            """Links for x and y, whose originals are ox and oy: copies of the originals'."""
            if ox == oy:  # a copy and its original, or two copies of one device
                mine = [ln for ln in p.system.links if ox in (ln.a, ln.b)]
                best = max(mine, key=lambda ln: (ln.bandwidth, -ln.latency), default=None)
                return [] if best is None else [Link(x, y, best.bandwidth, best.latency)]
            return [replace(ln, a=x if ln.a == ox else y, b=y if ln.b == oy else x)
                    for ln in p.system.links if {ln.a, ln.b} == {ox, oy}]

        links = list(p.system.links)
        added = list(like.items())
        for k, (new, old) in enumerate(added):
            for d in p.system.devices:
                links += between(new, d.name, old, d.name)
            for new2, old2 in added[k + 1:]:
                links += between(new, new2, old, old2)
        tasks = [Task(t.name, {**t.latency, **{new: t.latency[old] for new, old in like.items() if old in t.latency}},
                      t.weight_bytes, t.input_bytes, t.output_bytes) for t in p.tasks]
        cal = p.calibration
        if cal is not None:
            # A copy's links are copies of its original's, and so are their syncs.
            copies = {**{d.name: d.name for d in p.system.devices}, **like}
            sync = {(x, y): cal.sync[copies[x], copies[y]] for x in copies for y in copies
                    if (copies[x], copies[y]) in cal.sync}
            cal = replace(cal, overhead={**cal.overhead, **{new: cal.overhead[old] for new, old in like.items()
                                                             if old in cal.overhead}}, sync=sync)
        name = f"{p.name} with {', '.join(like)}"  # another problem: see without_devices
        return p._derived(tasks, p.edges, System(devices, tuple(links)), p.objective, name, cal)

    def with_contention(self: P, copy_engines: int | None | Mapping[str, int | None] = None,
                        concurrency: int | None | Mapping[tuple[str, str], int | None] = None,
                        duplex: bool = True) -> P:
        """The problem whose transfers take turns (:mod:`mapsched.scheduling.contention`): every
            device's ``copy_engines`` and every link's ``concurrency`` set to the value given, or
            to its entry in a mapping by device name or by a link's ``(a, b)`` (None: unlimited;
            names left out: unlimited), and every link's ``duplex``. With neither given, the
            problem without contention. Its name is this one's with ``" (contended)"``, or the
            original name when nothing is contended. O((n + E) m).

            Examples
            --------
            >>> from mapsched import instances
            >>> p = instances.load("topcuoglu2002").with_contention(copy_engines=0)
            >>> p.contended, p.name, p.with_contention().name
            (True, 'topcuoglu-2002 (contended)', 'topcuoglu-2002')
            """
        p = self

        def value(table: Any, key: Any) -> Any:
            return table.get(key) if isinstance(table, Mapping) else table

        if isinstance(copy_engines, Mapping):
            for d in copy_engines:
                if d not in p.device_index:
                    raise ProblemError(f"copy_engines: unknown device {shown(d)}; expected one of "
                                       f"{sorted(p.device_index)}")
        devices = tuple(replace(d, copy_engines=value(copy_engines, d.name))
                        for d in p.system.devices)
        links = tuple(replace(ln, concurrency=value(concurrency, (ln.a, ln.b)), duplex=duplex)
                      for ln in p.system.links)
        base = p.name.removesuffix(" (contended)")
        q = p._derived(p.tasks, p.edges, System(devices, links), p.objective, base, p.calibration)
        if q.contended:
            q.name = f"{base} (contended)"
        return q
