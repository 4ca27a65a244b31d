"""The schedule validator: every rule of ``docs/format.md``, every violation reported.

Examples
--------
>>> from mapsched import instances, validate
>>> from mapsched.scheduling.decoder import decode
>>> p = instances.load("topcuoglu2002")
>>> validate(p, decode(p, [0] * p.n))
[]
"""

from __future__ import annotations

import heapq
import math
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from mapsched.errors import shown
from mapsched.model import arguments
from mapsched.model.owners import memory_use
from mapsched.model.problem import Problem
from mapsched.model.schedule import Job, Schedule

__all__ = ["Violation", "floating_bound", "meets", "validate", "tolerance"]


def tolerance(value: float) -> float:
    """How far two times may differ and still compare equal (FORMAT.md)."""
    return 1e-6 * max(1.0, abs(value))


def floating_bound(value: float | None) -> float | None:
    """A lower bound that HiGHS proved in floating point (an LP or MILP optimum), less a
    relative 1e-7: the solver's tolerances can put it a hair above the real optimum (seen
    at 1e-9), and 1e-7 keeps it below while staying well inside :func:`tolerance`, so a
    schedule that meets it is still recognised as optimal."""
    return value * (1.0 - 1e-7) if value is not None and value > 0 else value


def meets(makespan: float, bound: float) -> bool:
    """Whether a makespan equals a proved lower bound, within :func:`tolerance`: proved optimal."""
    return makespan <= bound + tolerance(bound)


@dataclass(frozen=True)
class Violation:
    """A broken rule (1 to 9, numbered as in docs/format.md) and what broke it."""

    rule: int
    message: str

    def __str__(self) -> str:
        return f"rule {self.rule}: {self.message}"


def validate(problem: Problem, schedule: Schedule) -> list[Violation]:
    """Check a schedule against the rules of docs/format.md: FORMAT.md's seven, and where the
    problem declares contention (or the schedule lists transfers) rules 8 and 9 on transfers.

    Returns every violation found, in rule order; an empty list means valid.

    Notes
    -----
    O(J log J + E L) for J jobs and transfers, E edges and L inputs.
    """
    p = arguments.problem(problem)
    arguments.schedule(schedule)
    out: list[Violation] = []
    L = p.L
    jobs: list[tuple[int, int, Job]] = []  # (task, device, job) of jobs with known names

    # Rule 1: known names, runnable at this batch size, supported size.
    for k, j in enumerate(schedule.jobs):
        i, u = p.task_index.get(j.task), p.device_index.get(j.device)
        if i is None or u is None:
            what = f"task {shown(j.task)}" if i is None else f"device {shown(j.device)}"
            out.append(Violation(1, f"jobs[{k}]: unknown {what}"))
            continue
        b = len(j.inputs)
        dev = p.system.devices[u]
        if b not in dev.batch_sizes:
            out.append(Violation(
                1, f"jobs[{k}]: batch size {b} is not among {shown(j.device)}'s batch_sizes {list(dev.batch_sizes)}"))
        elif not np.isfinite(p.lat[i, u, p.batch_pos[b]]):
            out.append(Violation(1, f"jobs[{k}]: {shown(j.device)} cannot run task {shown(j.task)} at batch size {b}"))
        jobs.append((i, u, j))

    # Rule 2: durations and non-negative starts.
    for i, u, j in jobs:
        if j.start < -tolerance(j.start):
            out.append(Violation(2, f"job of {shown(j.task)} on {shown(j.device)} starts at {j.start} < 0"))
        b = len(j.inputs)
        if 0 < b < len(p.batch_pos) and p.batch_pos[b] >= 0:
            want = p.lat[i, u, p.batch_pos[b]]
            # plus the rounding of the times: at 1e12 ms a double steps by 1e-4 ms, more than a
            # short job's own tolerance
            if np.isfinite(want) and abs((j.end - j.start) - want) > tolerance(want) + 4 * math.ulp(j.end):
                out.append(Violation(
                    2, f"job of {shown(j.task)} on {shown(j.device)} lasts {j.end - j.start:g} ms, "
                    f"its latency at batch size {b} is {want:g} ms"))

    # Rule 3: the inputs of each task's jobs partition 0..L-1.
    holder: dict[tuple[int, int], tuple[int, Job]] = {}
    per_task: dict[int, list[int]] = defaultdict(list)
    for i, u, j in jobs:
        for lo in j.inputs:
            per_task[i].append(lo)
            holder.setdefault((i, lo), (u, j))
    for i, name in enumerate(p.task_names):
        got = per_task.get(i, [])
        counts = np.bincount([lo for lo in got if 0 <= lo < L], minlength=L)
        outside = sorted({lo for lo in got if not 0 <= lo < L})
        missing = np.flatnonzero(counts == 0).tolist()
        twice = np.flatnonzero(counts > 1).tolist()
        for what, items in (("not in 0..L-1", outside), ("run by no job", missing), ("run more than once", twice)):
            if items:
                out.append(Violation(3, f"task {shown(name)}: inputs {items} are {what}"))

    # Rule 4: precedence and communication, per edge and input.
    for e in range(p.E):
        a, b = int(p.src[e]), int(p.dst[e])
        for lo in range(L):
            if (a, lo) not in holder or (b, lo) not in holder:
                continue
            (ua, ja), (ub, jb) = holder[(a, lo)], holder[(b, lo)]
            c = p.comm[e, ua, ub]
            if not np.isfinite(c):
                out.append(Violation(4, f"edge {shown(ja.task)} -> {shown(jb.task)}, input {lo}: "
                                        f"no link from {shown(ja.device)} to {shown(jb.device)}"))
            elif jb.start < ja.end + c - tolerance(ja.end + c):
                out.append(Violation(4, f"edge {shown(ja.task)} -> {shown(jb.task)}, input {lo}: "
                                        f"starts at {jb.start:g}, before {ja.end:g} + comm {c:g}"))

    # Rule 5: no overlap on a device.
    by_dev: dict[int, list[Job]] = defaultdict(list)
    for _, u, j in jobs:
        by_dev[u].append(j)
    for js in by_dev.values():
        js.sort(key=lambda j: (j.start, j.end))
        last = None
        for j in js:
            if last is not None and j.start < last.end - tolerance(last.end):
                out.append(Violation(5, f"on {shown(j.device)}: {shown(j.task)} [{j.start:g}, {j.end:g}] overlaps "
                                        f"{shown(last.task)} [{last.start:g}, {last.end:g}]"))
            if last is None or j.end > last.end:
                last = j

    if p.contended or schedule.transfers:
        out += _transfers(p, schedule, holder, [(u, j) for _, u, j in jobs])

    # Rule 6: memory.
    counts = np.zeros((p.n, p.m))
    for i, u, j in jobs:
        counts[i, u] += len(j.inputs)
    used = memory_use(p, counts)
    for u in np.flatnonzero(used > p.room):
        out.append(Violation(6, f"device {shown(p.device_names[u])} holds {used[u]:.0f} bytes, "
                                f"its memory is {p.mem[u]:.0f}"))

    # Rule 7: makespan and throughput.
    ms = max((j.end for j in schedule.jobs), default=0.0)
    if abs(schedule.makespan - ms) > tolerance(ms):
        out.append(Violation(7, f"makespan is {schedule.makespan:g}, the largest job end is {ms:g}"))
    if schedule.throughput is not None and schedule.makespan > 0:
        thr = 1000.0 * L / schedule.makespan
        if abs(schedule.throughput - thr) > tolerance(thr):
            out.append(Violation(7, f"throughput is {schedule.throughput:g}, 1000 * L / makespan is {thr:g}"))
    # A lower bound above a valid schedule's own objective is false (mapsched addition).
    reached = schedule.makespan + (schedule.relocation_cost or 0.0)
    if not out and schedule.lower_bound is not None and schedule.lower_bound > reached + tolerance(reached):
        out.append(Violation(7, f"lower_bound {schedule.lower_bound:g} is above what this valid schedule reaches, "
                                f"{reached:g}: it bounds nothing"))
    return out


def _transfers(p: Problem, schedule: Schedule, holder: dict[tuple[int, int], tuple[int, Job]],
               jobs: list[tuple[int, Job]]) -> list[Violation]:
    """Rules 8 (each transfer's edge, inputs, devices and times; where the problem declares
    contention, one transfer for every input of an edge whose jobs are on two devices) and 9
    (no resource carries more transfers at once than its capacity: a link's channel, a
    device's copy engines, or a device without copy engines, where its jobs count too)."""
    out: list[Violation] = []
    edge_index = {(p.task_names[a], p.task_names[b]): e for e, (a, b) in enumerate(zip(p.src.tolist(), p.dst.tolist()))}
    covered: dict[tuple[int, int], int] = defaultdict(int)
    busy: dict[tuple[str, int], list[tuple[float, float]]] = defaultdict(list)
    for k, t in enumerate(schedule.transfers):
        what = f"transfers[{k}] ({shown(t.src)} -> {shown(t.dst)})"
        e = edge_index.get((t.src, t.dst))
        if e is None:
            out.append(Violation(8, f"{what}: no such edge"))
            continue
        a, b = int(p.src[e]), int(p.dst[e])
        pairs = set()
        for lo in t.inputs:
            if (a, lo) not in holder or (b, lo) not in holder:
                out.append(Violation(8, f"{what}: input {lo} has no job of both tasks"))
                continue
            (ua, ja), (ub, jb) = holder[(a, lo)], holder[(b, lo)]
            pairs.add((ua, ub))
            covered[(e, lo)] += 1
            if t.start < ja.end - tolerance(ja.end):
                out.append(Violation(8, f"{what}: input {lo} leaves at {t.start:g}, before its source ends at "
                                        f"{ja.end:g}"))
            if jb.start < t.end - tolerance(t.end):
                out.append(Violation(8, f"{what}: input {lo} arrives at {t.end:g}, after its destination starts at "
                                        f"{jb.start:g}"))
        if len(pairs) != 1:
            if len(pairs) > 1:
                out.append(Violation(8, f"{what}: its inputs are held by jobs on different devices; one transfer "
                                        "joins one pair of devices"))
            continue
        ((ua, ub),) = pairs
        if ua == ub:
            out.append(Violation(8, f"{what}: both jobs are on {shown(p.device_names[ua])}; a transfer crosses "
                                    "devices"))
            continue
        want = p.link_latency[ua, ub] + len(t.inputs) * p.nbytes[e] * p.link_ms_per_byte[ua, ub]
        if np.isfinite(want) and abs((t.end - t.start) - want) > tolerance(want) + 4 * math.ulp(t.end):
            out.append(Violation(8, f"{what}: lasts {t.end - t.start:g} ms, its {len(t.inputs)} input(s) take "
                                    f"{want:g} ms from {shown(p.device_names[ua])} to {shown(p.device_names[ub])}"))
        c = p.channel[ua][ub]
        if c >= 0:
            busy[("channel", c)].append((t.start, t.end))
        for w in (ua, ub):
            engines = p.copy_engines[w]
            if engines is not None:
                busy[("device" if engines == 0 else "engines", w)].append((t.start, t.end))
    if p.contended:
        for e in range(p.E):
            a, b = int(p.src[e]), int(p.dst[e])
            for lo in range(p.L):
                if (a, lo) in holder and (b, lo) in holder and holder[(a, lo)][0] != holder[(b, lo)][0] \
                        and covered[(e, lo)] != 1:
                    out.append(Violation(8, f"edge {shown(p.task_names[a])} -> {shown(p.task_names[b])}, input {lo}: "
                                            f"crosses devices in {covered[(e, lo)]} transfers; it needs one"))
    for u, j in jobs:
        if ("device", u) in busy:
            busy[("device", u)].append((j.start, j.end))
    lanes = {("channel", c): cap for c, cap in enumerate(p.channel_lanes)}
    for (kind, r), intervals in sorted(busy.items()):
        cap = 1 if kind == "device" else lanes[(kind, r)] if kind == "channel" else p.copy_engines[r]
        most, when = _most_at_once(intervals)
        if most > cap:
            if kind == "channel":
                ends = [(u, v) for u in range(p.m) for v in range(p.m) if p.channel[u][v] == r]
                name = "link " + " and ".join(f"{shown(p.device_names[u])} -> {shown(p.device_names[v])}"
                                              for u, v in ends)
                out.append(Violation(9, f"{name} carries {most} transfers at {when:g}, its concurrency is {cap}"))
            elif kind == "engines":
                out.append(Violation(9, f"device {shown(p.device_names[r])} runs {most} copies at {when:g}, it has "
                                        f"{cap} copy engine(s)"))
            else:
                out.append(Violation(9, f"device {shown(p.device_names[r])} has no copy engines, and runs {most} "
                                        f"jobs and copies at once at {when:g}"))
    return out


def _most_at_once(intervals: list[tuple[float, float]]) -> tuple[int, float]:
    """The most intervals that overlap at one time (touching ends, within :func:`tolerance`, do
    not), and the first time it happens. O(k log k)."""
    ends: list[float] = []
    most, when = 0, 0.0
    for s, e in sorted(intervals):
        while ends and ends[0] <= s + tolerance(s):
            heapq.heappop(ends)
        if e > s + tolerance(s):  # a zero-length copy occupies nothing
            heapq.heappush(ends, e)
        if len(ends) > most:
            most, when = len(ends), s
    return most, when
