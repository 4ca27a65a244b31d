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
where that keeps the order topological. The first move that shortens the
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
        the best mapping, with the number of moves tried and kept in its log. The search
        stops as soon as the makespan meets ``ctx.fast_bound``: it is then optimal.

    Notes
    -----
    A move costs one decode, O(n + E), plus O(n log n) to sort the new start order when
    it is kept; walking the path is O(n). Memory and links of a move are checked in
    O(m + degree).

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
    _, end, why = path.times(order, dev)
    best = max(end)
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

    tried, kept, failed, slowest = 0, 0, set(), 0.0

    def no_time() -> bool:
        # Room for one more move and the final decode, which builds every job and so takes
        # several moves' time.
        return ctx.remaining() <= 8 * slowest

    while tried < moves and not no_time() and not ctx.optimal(best):
        moved = False
        for i in _critical(end, why):
            if i in failed:
                continue
            u0 = dev[i]
            targets = [u for u in runnable[i] if u != u0 and need[i] <= room[u]
                       and all(linked[dev[q]][u] for q in preds[i]) and all(linked[u][dev[q]] for q in p.succ[i])]
            targets.sort(key=lambda u: path.arrival(i, u, dev, end))
            # First ahead of the job it waited for on its device, then onto other devices.
            trials = [(None, u) for u in targets]
            if why[i] <= -2:
                trials.insert(0, (-2 - why[i], u0))
            for j, u in trials:
                if tried >= moves or no_time():
                    break
                began = time.perf_counter()
                o = order if j is None else earlier(i, j)
                if o is None:
                    continue
                tried += 1
                dev[i] = u
                s2, e2, w2 = path.times(o, dev)
                slowest = max(slowest, time.perf_counter() - began)
                if max(e2) < best * (1 - 1e-12):
                    best, end, why = max(e2), e2, w2
                    room[u0] += need[i]
                    room[u] -= need[i]
                    order, kept, moved = by_start(s2), kept + 1, True
                    failed.clear()
                    ctx.improved(best)
                    break
                dev[i] = u0
            if moved or tried >= moves or no_time():
                break
            failed.add(i)
        if not moved:
            break
    if not kept:
        return start
    s = Decoder(p, order).schedule(np.array(dev)[:, None])
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
