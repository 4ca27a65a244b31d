"""``cp-search``: local search on the critical path of a list schedule.

The schedule is re-timed by appending each job on its device in the order of its
start times, which keeps every job where it was or earlier. The *critical path*
of that timing is walked back from the last job: each job started either when
its data arrived (its latest-arriving parent is the previous link) or when its
device became free (the job before it on the device is). Only changing a job of
this path can shorten the makespan at once, so the moves tried are those: each
task of the path, and each job a path task waited for on its device, is tried
on the other devices in the order its data would reach them; a task that waited
for its device is first tried ahead of the job it waited for, on the same device,
where that keeps the order topological. Last, a task is tried on each device whose
memory is full, with tasks of that device off the critical path (and not next to it) moved
to their fastest other device at once, those that lose the least time per byte freed
first, until it has room: on memory-tight systems the fast devices fill up early, and
single moves can then only take tasks off them. The first move that shortens the
makespan is kept (first improvement), the order is taken again from the new
start times, and the path is walked again. A task whose moves all failed is not
tried again until some move succeeds.

Single moves cannot shorten a path through a join that waits for several
equally late branches, so on wide graphs (traced training steps) the search ends early,
little better than its start.

Only moves that keep memory (rule 6), device restrictions and links are tried,
so every schedule of the search is valid; the result is never worse than its start.
"""

from __future__ import annotations

import time

import numpy as np

from mapsched.engine.context import SolveContext
from mapsched.engine.registry import Option, register
from mapsched.errors import OptionError
from mapsched.model.problem import Problem
from mapsched.model.schedule import Schedule
from mapsched.scheduling.best_list import best_start
from mapsched.scheduling.decoder import Decoder, as_owner

__all__ = ["improve"]


class _Path:
    """Append-decoding of a latency mapping that records why each job starts when it does."""

    def __init__(self, p: Problem) -> None:
        self.p = p
        self.pred = [[(int(p.src[e]), int(e)) for e in p.in_edges[i]] for i in range(p.n)]
        self.dur = p.dur.tolist()
        self.llat, self.mpb, self.nb = p.link_latency.tolist(), p.link_ms_per_byte.tolist(), p.nbytes.tolist()

    def times(self, order: list[int], dev: list[int]) -> tuple[list[float], list[float], list[int]]:
        """Starts, ends and the link back of each job: ``k >= 0`` the parent whose data it
        waited for, ``-2 - k`` the job k before it on its device, -1 neither."""
        free, last = [0.0] * self.p.m, [-1] * self.p.m
        start, end, why = [0.0] * self.p.n, [0.0] * self.p.n, [-1] * self.p.n
        dur, llat, mpb, nb = self.dur, self.llat, self.mpb, self.nb
        for i in order:
            u = dev[i]
            ready, par = 0.0, -1
            for q, e in self.pred[i]:
                v = dev[q]
                t = end[q] if v == u else end[q] + llat[v][u] + nb[e] * mpb[v][u]
                if t > ready:
                    ready, par = t, q
            if free[u] > ready:
                s, why[i] = free[u], -2 - last[u]
            else:
                s, why[i] = ready, par
            start[i], end[i] = s, s + dur[i][u]
            free[u], last[u] = end[i], i
        return start, end, why

    def arrival(self, i: int, u: int, dev: list[int], end: list[float]) -> float:
        """When the data of task i's parents would reach device u."""
        ready = 0.0
        for q, e in self.pred[i]:
            v = dev[q]
            t = end[q] if v == u else end[q] + self.llat[v][u] + self.nb[e] * self.mpb[v][u]
            ready = max(ready, t)
        return ready


def _critical(end: list[float], why: list[int]) -> list[int]:
    """The tasks to try moving: the critical path's tasks, last first, each followed by the
    job it waited for on its device, if it did."""
    i = int(np.argmax(end))
    out = []
    while i >= 0:
        out.append(i)
        w = why[i]
        if w <= -2:
            out.append(-2 - w)
            i = -2 - w
        else:
            i = w
    return list(dict.fromkeys(out))


def improve(problem: Problem, start: Schedule, ctx: SolveContext, moves: int) -> Schedule:
    """Improve a latency schedule by moving jobs of its critical path to other devices.

    Parameters
    ----------
    problem : Problem
        A latency problem.
    start : Schedule
        A valid schedule of ``problem``.
    ctx : SolveContext
        Its time limit stops the search; improvements go to its callback.
    moves : int
        At most this many moves are evaluated.

    Returns
    -------
    Schedule
        ``start`` itself when no move shortened it; otherwise the re-timed schedule of
        the best mapping, with the number of moves tried and kept in its log. Where
        transfers take turns, moves are found on the timing without them and each is
        judged by the decode with them (one more decode a move). The search
        stops as soon as the makespan meets ``ctx.fast_bound``: it is then optimal.

    Notes
    -----
    A move costs one decode, O(n + E), plus O(n log n) to sort the new start order when
    it is kept; walking the path is O(n). Memory and links of a move are checked in
    O(m + degree); a move that clears room on a full device chooses among its k tasks in
    O(k m log k).

    Examples
    --------
    >>> import mapsched
    >>> from mapsched.heuristics.critical_path_search import improve
    >>> from mapsched.solve import SolveContext
    >>> p = mapsched.generators.random_dag(200, 3, seed=2)
    >>> s = mapsched.solve(p, "cpop")
    >>> better = improve(p, s, SolveContext(), moves=500)
    >>> better.makespan <= s.makespan, mapsched.validate(p, better)
    (True, [])
    """
    p = problem
    if p.L != 1:
        raise OptionError("improve: the latency objective only")
    path = _Path(p)
    dev = as_owner(p, start.mapping())[:, 0].tolist()
    topo_pos = np.empty(p.n, dtype=np.int64)
    topo_pos[p.topo] = np.arange(p.n)
    first = {j.task: j.start for j in start.jobs}
    starts = [first[name] for name in p.task_names]

    def by_start(starts: list[float]) -> list[int]:
        # Ties in topological order: a zero-length parent starts with its child.
        return np.lexsort((topo_pos, np.asarray(starts))).tolist()

    order = by_start(starts)
    # Where transfers take turns, _Path's timing without them only points at the moves to try;
    # each move is judged by the decode with the turns, which the result is.
    turns = p.contended

    def timed(o: list[int], e: list[float]) -> float:
        return Decoder(p, o).makespan(np.array(dev)[:, None]) if turns else max(e)

    _, end, why = path.times(order, dev)
    best = timed(order, end)
    need = (p.weight + p.act).tolist()
    used = np.zeros(p.m)
    np.add.at(used, dev, need)
    room = (p.room - used).tolist()
    linked = np.isfinite(p.link_latency).tolist()
    runnable = [np.flatnonzero(p.can_run[i]).tolist() for i in range(p.n)]
    preds = [[q for q, _ in path.pred[i]] for i in range(p.n)]

    def earlier(i: int, j: int) -> list[int] | None:
        """The order with i moved just before j, if that keeps it topological."""
        pos = {k: x for x, k in enumerate(order)}
        if any(pos[q] >= pos[j] for q, _ in path.pred[i]):
            return None
        rest = [k for k in order if k != i]
        at = rest.index(j)
        return rest[:at] + [i] + rest[at:]

    members = [set() for _ in range(p.m)]
    for k, u in enumerate(dev):
        members[u].add(k)

    def fits(i: int, u: int, dev: list[int]) -> bool:
        """Whether task i on device u keeps its links to its parents and children."""
        return all(linked[dev[q]][u] for q in preds[i]) and all(linked[u][dev[q]] for q in p.succ[i])

    def evictions(i: int, u: int, critical: set[int]) -> list[tuple[int, int]]:
        """Tasks of device u, off the critical path and not next to i, each with another
        device to go to, that free room for i on u: those that lose the least time per byte
        freed first. Empty where they cannot free enough. O(n + k m log k) for k tasks on u."""
        near = critical | set(preds[i]) | set(p.succ[i])
        options = []
        for k in members[u]:
            if k in near or need[k] <= 0:
                continue
            alts = [v for v in runnable[k] if v != u and fits(k, v, dev)]
            if alts:
                v = min(alts, key=lambda v: path.dur[k][v])
                options.append(((path.dur[k][v] - path.dur[k][u]) / need[k], k, alts))
        options.sort()  # by cost, then task: the order of the set does not matter
        short, left, out = need[i] - room[u], dict(enumerate(room)), []
        moved: set[int] = set()
        for _, k, alts in options:
            v = next((v for v in sorted(alts, key=lambda v: path.dur[k][v]) if need[k] <= left[v]), None)
            if v is None or moved & ({*preds[k], *p.succ[k]}):  # links were checked where the others are
                continue
            left[v] -= need[k]
            out.append((k, v))
            moved.add(k)
            short -= need[k]
            if short <= 0:
                return out
        return []

    tried, kept, failed, slowest = 0, 0, set(), 0.0

    def no_time() -> bool:
        # Room for one more move and the final decode, which builds every job and so takes
        # several moves' time.
        return ctx.remaining() <= 8 * slowest

    while tried < moves and not no_time() and not ctx.optimal(best):
        moved = False
        path_tasks = _critical(end, why)
        critical = set(path_tasks)
        for i in path_tasks:
            if i in failed:
                continue
            u0 = dev[i]
            targets = [u for u in runnable[i] if u != u0 and need[i] <= room[u] and fits(i, u, dev)]
            targets.sort(key=lambda u: path.arrival(i, u, dev, end))
            # First ahead of the job it waited for on its device, then onto other devices,
            # then onto faster devices that are full, some of their other tasks moved out
            trials: list[tuple[int | None, int, list[tuple[int, int]]]] = [(None, u, []) for u in targets]
            if why[i] <= -2:
                trials.insert(0, (-2 - why[i], u0, []))
            full = [u for u in runnable[i] if u != u0 and need[i] > room[u] and fits(i, u, dev)]
            for u in sorted(full, key=lambda u: path.arrival(i, u, dev, end) + path.dur[i][u]):
                out = evictions(i, u, critical)
                if out:
                    trials.append((None, u, out))
            for j, u, out in trials:
                if tried >= moves or no_time():
                    break
                began = time.perf_counter()
                o = order if j is None else earlier(i, j)
                if o is None:
                    continue
                tried += 1
                dev[i] = u
                for k, v in out:
                    dev[k] = v
                s2, e2, w2 = path.times(o, dev)
                now = timed(o, e2)
                slowest = max(slowest, time.perf_counter() - began)
                if now < best * (1 - 1e-12):
                    best, end, why = now, e2, w2
                    room[u0] += need[i]
                    room[u] -= need[i]
                    members[u0].discard(i)
                    members[u].add(i)
                    for k, v in out:
                        room[u] += need[k]
                        room[v] -= need[k]
                        members[u].discard(k)
                        members[v].add(k)
                    order, kept, moved = by_start(s2), kept + 1, True
                    failed.clear()
                    ctx.improved(best)
                    break
                dev[i] = u0
                for k, _ in out:
                    dev[k] = u
            if moved or tried >= moves or no_time():
                break
            failed.add(i)
        if not moved:
            break
    if not kept:
        return start
    s = Decoder(p, order).schedule(np.array(dev)[:, None])
    if s.makespan >= start.makespan:  # the start's own timing (insertion, the turns) can beat its decode
        return start
    s.log = (start.log + f"critical-path search: {kept} of {tried} moves kept, "
             f"{start.makespan:.6g} -> {s.makespan:.6g}\n")
    return s


@register(
    "cp-search",
    "local search on the critical path, from the best list schedule (or the initial placement)",
    objectives=("latency",),
    options=(Option("moves", int, 2000, "moves to evaluate at most"),),
    initial=True,
)
def cp_search(problem: Problem, ctx: SolveContext, moves: int) -> Schedule:
    """O(list schedulers) + O(moves (n + E))."""
    start = best_start(problem, ctx.initial, ctx)
    ctx.improved(start.makespan)
    return improve(problem, start, ctx, moves)
