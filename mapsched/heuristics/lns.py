"""``lns``: large-neighbourhood search, re-solving parts of a latency schedule with CP-SAT.

One algorithm in one module (its incumbent, neighbourhoods, sub-model and acceptance
share the same timing arrays), kept whole although it passes 600 lines.

The incumbent is a mapping and a priority order (a topological order), timed by the
append decoder (:mod:`mapsched.scheduling.decoder`): each job starts when its data has
arrived and its device is free, so each device runs its jobs in the order's order.
A step takes a stretch ``[k1, k2)`` of the order and frees a set F of the tasks in it,
the *neighbourhood*; every other task is fixed:

- the *prefix* (positions before ``k1``) keeps its devices and times, and is the same
  decode prefix afterwards; a freed task starts after the prefix's jobs on its device;
- the tasks of the stretch outside F keep their devices and times: fixed intervals on
  their devices and deadlines for the freed tasks that feed them;
- the *suffix* (positions from ``k2``) keeps its devices and order, and is summarised by
  *tails*: q(j), the longest path from the start of job j to the end of the schedule
  through the suffix's dependencies and device orders. A suffix timed as early as the
  new stretch allows ends by ``max(release(j) + q(j))`` over its entries, exactly.

The CP-SAT model of F then chooses each freed task's device (only devices that can run
it, with links to its fixed neighbours, within the memory the fixed tasks leave) and
start, and minimises that makespan. Its answer, with the stretch in the order of its
new starts before the unchanged suffix, is decoded from ``k1`` (the prefix is not
re-timed) and kept when the makespan does not grow (an equal one moves the search
on): decoding such an order is never later than the model's schedule, so a strictly
better model answer is a strictly better schedule (up to the model's rounding to ticks,
which the decode settles). The tails are kept from step to step: a change before
``k2`` leaves those from ``k2`` on as they were, so only the positions a later step
needs and a change touched are computed again.

Neighbourhoods, chosen at random with weights that follow their successes:

- ``window``: every task of a stretch of the order (a time window);
- ``critical``: tasks of the critical path in a stretch, and around them, along
  dependencies and device neighbours, the tasks of the stretch that touch them;
- ``devices``: the tasks of two devices in a longer stretch (half of the time the
  busiest and the idlest device of the stretch: an overloaded device and its relief);
- ``memory``: where some device's memory is nearly full, the tasks of the fullest
  devices in a stretch with as many of the others, so that they can swap.

The size of a neighbourhood adapts to what the solver proves: it grows by a fifth when
a sub-solve proves its optimum within its limits, and shrinks by a sixth when it does
not. Each sub-solve is one CP-SAT worker (whatever ``threads`` is) with a seed drawn
from the solve's generator, stopped after ``conflicts`` conflicts (a count, the same on
every machine) or, with a time limit, after ``slice`` seconds: a run of some ``steps``
without a time limit is repeatable. (CP-SAT's deterministic time was tried as the count: on these models it
counted 0.003 units for 0.2 s of search, and solves limited to 0.05 units ran for up to
3.5 s.) A step the fixed
part already forces to the incumbent's makespan (its entries to the suffix are late
enough) is skipped without a solve.

Where transfers take turns (:mod:`mapsched.scheduling.contention`), the incumbent is
decoded with insertion, every transfer on its resources (the prefix's times still stay),
each decode whole; the tails run along transfers and each one-lane resource's order as well;
and each neighbourhood's model has the transfers into the stretch and out of it take turns
(:class:`_Turns`). On the real-model suite with every accelerator's copies on the
accelerator, 30 s of it take ``inception-v3-op`` from its contention-free placement re-timed,
539.3, to 482.3.

Latency only: a throughput problem is refused (its jobs batch inputs, which the decoder
here does not model).
"""

from __future__ import annotations

import math
import time

import numpy as np
from ortools.sat.python import cp_model

from mapsched.engine import interrupt
from mapsched.engine.context import SolveContext
from mapsched.engine.registry import Option, register
from mapsched.errors import OptionError
from mapsched.model.problem import Problem
from mapsched.model.scales import default_resolution, memory_row, start_ticks
from mapsched.model.schedule import Schedule
from mapsched.scheduling.best_list import best_start
from mapsched.scheduling.contention import Resources
from mapsched.scheduling.decoder import Builder, _to_schedule, as_owner

__all__ = ["improve_lns"]

KINDS = ("window", "critical", "devices", "memory")
MIN_SIZE, MAX_SIZE = 6, 1500
"""Least and most tasks of a neighbourhood."""


class _Incumbent:
    """A mapping and an order, timed by append decoding, with what the steps need of them."""

    def __init__(self, p: Problem, dev: np.ndarray, order: np.ndarray) -> None:
        self.p = p
        self.pe = [[(int(p.src[e]), e) for e in p.in_edges[i]] for i in range(p.n)]
        self.se = [[(int(p.dst[e]), e) for e in p.out_edges[i]] for i in range(p.n)]
        self.llat, self.mpb, self.nb = p.link_latency.tolist(), p.link_ms_per_byte.tolist(), p.nbytes.tolist()
        self.durl = p.dur.tolist()
        self.need = p.weight + p.act
        self.dev = dev.astype(np.int64).copy()
        self.order = order.astype(np.int64).copy()
        self.pos = np.empty(p.n, dtype=np.int64)
        self.pos[self.order] = np.arange(p.n)
        self.start = np.zeros(p.n)
        self.end = np.zeros(p.n)
        if p.contended:  # the resources transfers take turns on; each edge's times come with a decode
            self.res = Resources(p)
            self.capacity = [lanes.capacity for lanes in self.res.lanes]
        self.send = False
        began = time.perf_counter()
        ok, c, starts, ends = self.decode(0, self.order.tolist(), self.dev.tolist(), math.inf)
        self.decode_s = time.perf_counter() - began
        if p.contended and p.L == 1:  # every decode then sends transfers as the one that times the start better
            late, self.send = self._pending, True
            sent = self.decode(0, self.order.tolist(), self.dev.tolist(), math.inf)
            if sent[1] < c:
                ok, c, starts, ends = sent
            else:
                self.send, self._pending = False, late
        self.start[self.order], self.end[self.order] = starts, ends
        self.kept()
        self.cmax = c
        self._dirty = True
        self.q_list = [0.0] * p.n
        self.q = np.zeros(p.n)
        self.q_from = p.n  # the tails are right from this position on

    def decode(self, k1: int, tail: list[int], dev: list[int], cap: float
               ) -> tuple[bool, float, list[float], list[float]]:
        """Time ``tail``, the order from position k1 on, after the unchanged prefix; False
        as soon as a job ends past ``cap``. Returns (ok, makespan, starts, ends of tail)."""
        p = self.p
        if p.contended:
            return self._decode_contended(k1, tail, dev, cap)
        free = [0.0] * p.m
        c = 0.0
        if k1:
            pre = self.order[:k1]
            f = np.zeros(p.m)
            np.maximum.at(f, self.dev[pre], self.end[pre])
            free = f.tolist()
            c = float(self.end[pre].max())
        end = self.end.tolist()
        llat, mpb, nb, pe, durl = self.llat, self.mpb, self.nb, self.pe, self.durl
        starts, ends = [], []
        for i in tail:
            u = dev[i]
            ready = free[u]
            for q, e in pe[i]:
                v = dev[q]
                t = end[q] if v == u else end[q] + llat[v][u] + nb[e] * mpb[v][u]
                if t > ready:
                    ready = t
            e_ = ready + durl[i][u]
            if e_ > cap:
                return False, math.inf, starts, ends
            end[i] = e_
            free[u] = e_
            starts.append(ready)
            ends.append(e_)
            if e_ > c:
                c = e_
        return True, c, starts, ends

    def _decode_contended(self, k1: int, tail: list[int], dev: list[int], cap: float
                          ) -> tuple[bool, float, list[float], list[float]]:
        """:meth:`decode` where transfers take turns: the whole order decoded with insertion,
        transfers on their resources' lanes. A later task never moves an earlier one, so the
        prefix keeps its times and only the tail's are new (but sending ahead, where the tail's
        devices move the prefix's transfers out); the resources' state after the prefix is not
        kept, so each decode is whole, O(n + E) and the lanes' insertions.
        Insertion: appending, copies wait behind every copy decoded before them, and a
        re-timed placement decoded so ends 16% later (``gnmt-layer``, 385.7 against 332.6)."""
        b = self.builder(self.order[:k1].tolist() + tail, dev)
        ends = [b.placed[i][0][3] for i in tail]
        c = max(b.finish, 0.0)
        ts, te = np.full(self.p.E, np.nan), np.full(self.p.E, np.nan)
        for e, _, a, z in b.transfers:
            ts[e], te[e] = a, z
        # Sending ahead (send), a task of the tail on another device moves the prefix's transfers
        # out to it, and those can move the prefix's jobs: every time is kept, not only the tail's.
        times = (np.array([b.placed[i][0][2] for i in range(self.p.n)]),
                 np.array([b.placed[i][0][3] for i in range(self.p.n)])) if self.send else None
        self._pending = ts, te, times
        return c <= cap, c if c <= cap else math.inf, [b.placed[i][0][2] for i in tail], ends

    def kept(self) -> None:
        """The last decode was kept: its transfers' times (sending ahead, every job's too) are the
        incumbent's."""
        if self.p.contended:
            self.ts, self.te, times = self._pending
            if times is not None:
                self.start, self.end = times

    def builder(self, order: list[int], dev: list[int]) -> Builder:
        """The schedule of ``order`` and ``dev``, job by job (and transfer by transfer), with insertion."""
        b = Builder(self.p, insertion=True, check=False)
        for i in order:
            b.commit(i, b.trial(i, [(dev[i], 1)]))
            if self.send:
                b.send(i, dev)
        return b

    def refresh(self) -> None:
        """The incumbent's edge times and memory use, after a change."""
        if not self._dirty:
            return
        p = self.p
        self.comm_inc = p.comm[np.arange(p.E), self.dev[p.src], self.dev[p.dst]] if p.E else np.zeros(0)
        self.used = np.bincount(self.dev, weights=self.need, minlength=p.m)
        self._dirty = False

    def tails(self, k: int) -> np.ndarray:
        """The tails q, right for every task at position k or later.

        q(i) is the longest path from the start of job i to the end of the schedule, along
        dependencies (with the incumbent's transfer times) and device orders. It depends
        only on what follows i in the order, so a change at positions before k2 leaves the
        tails from k2 on as they were: only positions from k up to the first right one are
        computed, O(those tasks and their edges)."""
        self.refresh()
        if k >= self.q_from:
            return self.q
        p = self.p
        if p.contended:
            self.q, self.q_from = self._contended_tails(), 0
            return self.q
        ci = self.comm_inc.tolist() if len(self.comm_inc) else []
        dev, durl, se = self.dev, self.durl, self.se
        q = self.q_list
        nxt = [-1] * p.m
        if self.q_from < p.n:
            rest = self.order[self.q_from:]
            us, first = np.unique(dev[rest], return_index=True)
            for u, f in zip(us.tolist(), first.tolist()):
                nxt[u] = int(rest[f])
        devl = dev.tolist()
        for i in reversed(self.order[k:self.q_from].tolist()):
            u = devl[i]
            best = q[nxt[u]] if nxt[u] >= 0 else 0.0
            for j, e in se[i]:
                t = ci[e] + q[j]
                if t > best:
                    best = t
            q[i] = durl[i][u] + best
            nxt[u] = i
        self.q = np.array(q)
        self.q_from = k
        return self.q

    def changed(self, k2: int) -> None:
        """Positions before k2 changed (devices, order or times)."""
        self._dirty = True
        # Where transfers take turns a decode inserts into gaps, and every tail may change.
        self.q_from = self.p.n if self.p.contended else max(self.q_from, k2)

    def _contended_tails(self) -> np.ndarray:
        """The tails where transfers take turns: longest paths to the end of the schedule
        over its jobs and transfers, along dependencies and each resource of one lane's
        order (of many lanes, the order is the decode's choice, and is left out).
        O((n + E) log(n + E))."""
        p, n = self.p, self.p.n
        cross = np.flatnonzero(np.isfinite(self.ts))
        src, dst = p.src[cross], p.dst[cross]
        starts = np.concatenate([self.start, self.ts[cross]])
        ends = np.concatenate([self.end, self.te[cross]])
        # A job before its transfers out, a transfer before its destination (ties of length 0).
        tp = np.empty(n, dtype=np.int64)
        tp[p.topo] = np.arange(n)
        rank = np.concatenate([2 * tp, 2 * tp[src] + 1])
        order = np.lexsort((rank, ends, starts))
        succ: list[list[int]] = [[] for _ in range(len(starts))]
        same = ~np.isfinite(self.ts)
        for a, b in zip(p.src[same].tolist(), p.dst[same].tolist()):
            succ[a].append(b)
        for k, (a, b) in enumerate(zip(src.tolist(), dst.tolist())):
            succ[a].append(n + k)
            succ[n + k].append(b)
        on: list[list[int]] = [[] for _ in self.capacity]
        devl = self.dev.tolist()
        for x in order.tolist():
            rs = (devl[x],) if x < n else self.res.route(devl[int(src[x - n])], devl[int(dst[x - n])])
            for r in rs:
                if self.capacity[r] == 1:
                    if on[r]:
                        succ[on[r][-1]].append(x)
                    on[r].append(x)
        dur = (ends - starts).tolist()
        q = [0.0] * len(starts)
        for x in reversed(order.tolist()):
            q[x] = dur[x] + max((q[y] for y in succ[x]), default=0.0)
        return np.array(q[:n])

    def critical(self) -> np.ndarray:
        """Tasks on a longest path (start + tail = makespan)."""
        q = self.tails(0)
        length = self.start + q
        crit = np.flatnonzero(length >= self.cmax * (1 - 1e-12) - 1e-12)
        return crit if len(crit) else np.array([int(np.argmax(length))])


def _pick(inc: _Incumbent, kind: str, size: int, rng: np.random.Generator) -> tuple[int, int, np.ndarray] | None:
    """A neighbourhood: (k1, k2, freed tasks), or None where the kind does not apply."""
    p, n = inc.p, inc.p.n
    size = min(size, n)

    def stretch(span: int, centre: int | None = None) -> tuple[int, int]:
        span = min(span, n)
        k1 = int(rng.integers(0, n - span + 1)) if centre is None else min(max(0, centre - span // 2), n - span)
        return k1, k1 + span

    if kind == "window":
        k1, k2 = stretch(size)
        return k1, k2, inc.order[k1:k2].copy()
    if kind == "critical":
        crit = inc.critical()
        c = int(crit[rng.integers(len(crit))])
        k1, k2 = stretch(3 * size, int(inc.pos[c]))
        inside = inc.order[k1:k2]
        on_path = np.zeros(n, dtype=bool)
        on_path[crit] = True
        seeds = [int(i) for i in inside if on_path[i]]
        chosen = dict.fromkeys(seeds[:size])
        frontier = list(chosen)
        # Device neighbours: the jobs before and after each one on its device in the stretch.
        by_dev: dict[int, list[int]] = {}
        for i in inside.tolist():
            by_dev.setdefault(int(inc.dev[i]), []).append(i)
        at = {i: (u, k) for u, lst in by_dev.items() for k, i in enumerate(lst)}
        while frontier and len(chosen) < size:
            nxt = []
            for i in frontier:
                u, k = at[i]
                lst = by_dev[u]
                around = [*p.pred[i], *p.succ[i], *lst[max(0, k - 1):k + 2]]
                for j in around:
                    if k1 <= inc.pos[j] < k2 and j not in chosen and len(chosen) < size:
                        chosen[j] = None
                        nxt.append(j)
            rng.shuffle(nxt)
            frontier = nxt
        return k1, k2, np.array(sorted(chosen), dtype=np.int64)
    if p.m < 2:
        return None
    if kind == "devices":
        k1, k2 = stretch(max(size, size * p.m // 2))
        inside = inc.order[k1:k2]
        d = inc.dev[inside]
        if rng.random() < 0.5:
            busy = np.bincount(d, weights=inc.end[inside] - inc.start[inside], minlength=p.m)
            pair = [int(np.argmax(busy)), int(np.argmin(busy))]
        else:
            pair = rng.choice(p.m, size=2, replace=False).tolist()
        f = inside[np.isin(d, pair)]
        return k1, k2, f[:size] if len(f) > size else f
    if kind == "memory":
        inc.refresh()
        full = np.where(np.isfinite(p.room), inc.used / np.where(np.isfinite(p.room), p.room, 1.0), 0.0)
        if full.max() < 0.9:
            return None
        tight = np.flatnonzero(full >= 0.9)
        k1, k2 = stretch(max(size, size * p.m // 2))
        inside = inc.order[k1:k2]
        mine = np.isin(inc.dev[inside], tight)
        a, b = inside[mine], inside[~mine]
        half = max(1, size // 2)
        f = np.concatenate([a[:half], b[:max(half, size - min(len(a), half))]])
        return k1, k2, f
    raise ValueError(kind)


class _Turns:
    """Where transfers take turns, the part of a neighbourhood's model that has them do so.

    Each transfer into a task of the stretch is an interval on the resources its devices'
    route takes (:class:`~mapsched.scheduling.contention.Resources`): a fixed one where
    both ends are fixed, at the incumbent's times; else one optional interval per pair of
    devices its ends can take, present when they take it, from a start after the source
    ends, which the destination waits for (or, for a fixed destination, which ends by its
    start). The prefix's transfers hold each resource until the last of them ends.
    Transfers into the suffix are appended after the stretch's when decoded, and stay in
    its tails. The decode of the answer, with every transfer taking its turn, decides."""

    def __init__(self, inc: _Incumbent, k1: int, free: np.ndarray) -> None:
        p = inc.p
        self.inc, self.k1 = inc, k1
        self.held = np.zeros(len(inc.capacity))  # when the prefix's transfers leave each resource
        if k1:
            e_pre = np.flatnonzero((inc.pos[p.dst] < k1) & np.isfinite(inc.te))
            for e in e_pre.tolist():
                for r in inc.res.route(int(inc.dev[p.src[e]]), int(inc.dev[p.dst[e]])):
                    self.held[r] = max(self.held[r], inc.te[e])
        np.maximum(free, self.held[:p.m], out=free)  # a device's copies and jobs take turns
        self.free = free

    def add(self, sub: _Sub, k2: int, inF: np.ndarray, ends: dict, intervals: list[list], tk, ln) -> None:
        inc, p, mdl = self.inc, self.inc.p, sub.model
        res, dev, pos = inc.res, inc.dev, inc.pos
        using: list[list] = [[] for _ in inc.capacity]
        for r in range(p.m, len(using)):
            if self.held[r] > 0:
                using[r].append(mdl.new_fixed_size_interval_var(0, tk(self.held[r]), f"held{r}"))
        for u in range(p.m):  # the prefix's jobs and copies on each device
            if self.free[u] > 0:
                using[u].append(mdl.new_fixed_size_interval_var(0, tk(self.free[u]), f"pre{u}"))
        horizon = tk(inc.cmax) + 4
        linked = np.isfinite(p.link_latency)
        on: dict[int, list[int]] = {}
        for i, u in sub.x:
            on.setdefault(i, []).append(u)
        q = inc.tails(k2)
        near = np.flatnonzero((pos[p.dst] >= self.k1) & (pos[p.src] < k2)) if p.E else np.zeros(0, dtype=np.int64)
        for e in near.tolist():
            a, b = int(p.src[e]), int(p.dst[e])
            late = pos[b] >= k2  # into the suffix: the suffix waits for it, through its tail
            if not (inF[a] or inF[b] or late):  # into a fixed task of the stretch
                if math.isfinite(inc.ts[e]):
                    x0, x1 = tk(inc.ts[e]), tk(inc.te[e])
                    if x1 > x0:
                        iv = mdl.new_fixed_size_interval_var(x0, x1 - x0, f"ft{e}")
                        for r in res.route(int(dev[a]), int(dev[b])):
                            using[r].append(iv)
                continue
            us = on[a] if inF[a] else [int(dev[a])]
            vs = on[b] if inF[b] else [int(dev[b])]
            pairs = [(u, v) for u in us for v in vs if u != v and linked[u, v] and res.route(u, v)]
            if not pairs:
                continue
            t = mdl.new_int_var(0, horizon, f"ts{e}")
            mdl.add(t >= (ends[a] if inF[a] else tk(inc.end[a])))
            if math.isfinite(inc.ts[e]):
                mdl.add_hint(t, tk(inc.ts[e]))
            for u, v in pairs:
                dt = ln(p.comm[e, u, v])
                if inF[a] and inF[b]:
                    y = mdl.new_bool_var(f"y{e}_{u}_{v}")
                    mdl.add_bool_and([sub.x[a, u], sub.x[b, v]]).only_enforce_if(y)
                    mdl.add_bool_or([sub.x[a, u].Not(), sub.x[b, v].Not(), y])
                else:  # one end free, or (into the suffix) neither: the pair is known when present
                    y = sub.x[a, u] if inF[a] else sub.x[b, v] if inF[b] else mdl.new_constant(1)
                if late:
                    mdl.add(t + dt + ln(q[b]) <= sub.M).only_enforce_if(y)
                elif inF[b]:
                    mdl.add(sub.s[b] >= t + dt).only_enforce_if(y)
                else:
                    mdl.add(t + dt <= tk(inc.start[b]) + 2).only_enforce_if(y)
                iv = mdl.new_optional_fixed_size_interval_var(t, dt, y, f"t{e}_{u}_{v}")
                for r in res.route(u, v):
                    using[r].append(iv)
        for r, ivs in enumerate(using):
            if r < p.m:
                intervals[r] += ivs
            elif len(ivs) > 1:
                if inc.capacity[r] == 1:
                    mdl.add_no_overlap(ivs)
                else:
                    mdl.add_cumulative(ivs, [1] * len(ivs), inc.capacity[r])


class _Sub:
    """The CP-SAT model of one neighbourhood (module docstring)."""

    def __init__(self, inc: _Incumbent, k1: int, k2: int, free_tasks: np.ndarray) -> None:
        p = inc.p
        inc.refresh()
        self.ok = False
        n, m = p.n, p.m
        self.F = F = [int(i) for i in free_tasks]
        inF = np.zeros(n, dtype=bool)
        inF[F] = True
        self.res = res = default_resolution(max(inc.cmax, 1e-9))
        self.contended = p.contended

        # Times past the horizon (a transfer of 1e21 ms over a slow link) are cut to just
        # beyond it: they rule the same choices out, and every coefficient fits 64 bits.
        cut = start_ticks(inc.cmax, res) + 8

        def tk(x: float) -> int:  # a time of the incumbent (or a sum of them)
            return start_ticks(x, res) if x * res < cut else cut

        def ln(x: float) -> int:  # a length: rounded down, so that the incumbent stays a solution
            return math.floor(x * res) if x * res < cut else cut

        def lengths(x: np.ndarray) -> np.ndarray:  # ln of every entry at once
            scaled = x * res
            return np.where(scaled < cut, np.floor(scaled), cut).astype(np.int64)

        self.tk = tk
        order, pos, dev, start, end = inc.order, inc.pos, inc.dev, inc.start, inc.end
        mid = order[k1:k2]
        fixed_mid = mid[~inF[mid]]
        # The prefix's last job on each device; the fixed tasks' makespan.
        free = np.zeros(m)
        if k1:
            pre = order[:k1]
            np.maximum.at(free, dev[pre], end[pre])
        turns = _Turns(inc, k1, free) if p.contended else None  # updates free: copies on devices
        lb = float(free.max()) if k1 else 0.0
        if len(fixed_mid):
            lb = max(lb, float(end[fixed_mid].max()))
        fixed_last = free.copy()  # the last fixed end before the suffix, per device
        if len(fixed_mid):
            np.maximum.at(fixed_last, dev[fixed_mid], end[fixed_mid])
        # The suffix: its first job per device, and its entries' tails.
        qt = inc.tails(k2)
        suf = order[k2:]
        qdev = np.full(m, -np.inf)
        if len(suf):
            us, first = np.unique(dev[suf], return_index=True)
            qdev[us] = qt[suf[first]]
            lb = max(lb, float(np.max(np.where(np.isfinite(qdev), fixed_last + qdev, -np.inf))))
        if p.E:
            e_in = (pos[p.src] < k2) & ~inF[p.src] & (pos[p.dst] >= k2)
            if e_in.any():
                lb = max(lb, float(np.max(end[p.src[e_in]] + inc.comm_inc[e_in] + qt[p.dst[e_in]])))
        self.lb = lb
        self.cmax = inc.cmax
        if tk(lb) >= tk(inc.cmax):
            return  # the fixed part alone forces the makespan
        self.model = mdl = cp_model.CpModel()
        horizon = tk(inc.cmax) + 4
        self.M = mdl.new_int_var(tk(lb), horizon, "M")
        self.x: dict[tuple[int, int], cp_model.IntVar] = {}
        self.s = {}
        self.d: dict[tuple[int, int], int] = {}  # ticks
        ends = {}
        opts: dict[int, list[int]] = {}  # each free task's devices, in the order of its x
        intervals: list[list] = [[] for _ in range(m)]
        for j in fixed_mid.tolist():
            a, b = tk(start[j]), tk(end[j])
            if b > a:
                intervals[int(dev[j])].append(mdl.new_fixed_size_interval_var(a, b - a, f"f{j}"))
        linked = np.isfinite(p.link_latency)
        dl = p.dur
        weighted = cp_model.LinearExpr.weighted_sum
        for i in F:
            rel = np.maximum(free, 0.0).copy()
            allow = p.can_run[i].copy()
            tail = np.where(np.isfinite(qdev), qdev, 0.0)
            deadlines = []  # (fixed successor's start, edge)
            for q, e in inc.pe[i]:
                if inF[q]:
                    continue
                v = int(dev[q])
                allow &= linked[v]
                rel = np.maximum(rel, end[q] + np.where(linked[v], p.comm[e, v], 0.0))
            for j, e in inc.se[i]:
                if inF[j]:
                    continue
                v = int(dev[j])
                allow &= linked[:, v]
                c = np.where(linked[:, v], p.comm[e, :, v], 0.0)
                if pos[j] >= k2:
                    tail = np.maximum(tail, c + qt[j])
                else:
                    deadlines.append((float(start[j]), c))
            on = opts[i] = np.flatnonzero(allow).tolist()
            if not on:
                return  # its fixed neighbours leave it no device (cannot happen from a valid incumbent)
            si = self.s[i] = mdl.new_int_var(0, horizon, f"s{i}")
            xs = []
            dt = [ln(dl[i, u]) for u in on]
            for u, du in zip(on, dt):
                xu = self.x[i, u] = mdl.new_bool_var(f"x{i}_{u}")
                xs.append(xu)
                intervals[u].append(mdl.new_optional_fixed_size_interval_var(si, du, xu, f"i{i}_{u}"))
                self.d[i, u] = du
            mdl.add_exactly_one(xs)
            # Each sum over the task's devices as one weighted sum: quicker to build than a chain of terms
            ends[i] = si + weighted(xs, dt)
            mdl.add(si >= weighted(xs, [tk(rel[u]) for u in on]))
            mdl.add(si + weighted(xs, [du + ln(tail[u]) for u, du in zip(on, dt)]) <= self.M)
            for sj, c in deadlines:
                mdl.add(si + weighted(xs, [du + ln(c[u]) for u, du in zip(on, dt)]) <= tk(sj) + 2)
        if turns is not None:
            turns.add(self, k2, inF, ends, intervals, tk, ln)
        for u in range(m):
            if len(intervals[u]) > 1:
                mdl.add_no_overlap(intervals[u])
        # Edges inside F: data crosses devices at a cost, and missing links forbid pairs. From
        # each device u of the source, the least cost to any other device holds wherever the
        # destination is not on u (one row), and only dearer pairs need rows of their own:
        # on systems whose transfers cost the same between any two devices (staged through
        # the host) an edge takes O(m) rows, not O(m^2).
        for i in F:
            for j, e in inc.se[i]:
                if not inF[j]:
                    continue
                mdl.add(self.s[j] >= ends[i])
                cost = lengths(p.comm[e])
                to = np.array(opts[j])
                for u in opts[i]:
                    others = to[to != u]
                    near = linked[u, others]
                    for v in others[~near].tolist():
                        mdl.add_bool_or([self.x[i, u].Not(), self.x[j, v].Not()])
                    vs = others[near]
                    if not len(vs):
                        continue
                    cs = cost[u, vs]
                    least = int(cs.min())
                    if least > 0:
                        away = [self.x[i, u], self.x[j, u].Not()] if (j, u) in self.x else [self.x[i, u]]
                        mdl.add(self.s[j] >= ends[i] + least).only_enforce_if(away)
                    for v, c in zip(vs[cs > least].tolist(), cs[cs > least].tolist()):
                        mdl.add(self.s[j] >= ends[i] + c).only_enforce_if([self.x[i, u], self.x[j, v]])
        # Memory: what the fixed tasks leave on each limited device.
        for u in range(m):
            if not math.isfinite(p.mem[u]):
                continue
            on = [i for i in F if (i, u) in self.x]
            if not on:
                continue
            need = inc.need[on]
            fixed_use = float(inc.used[u] - inc.need[[i for i in F if dev[i] == u]].sum())
            cap = max(0.0, (p.room[u] - fixed_use)) / (1 + 1e-9)
            sizes, room = memory_row(need, cap, float(need.sum()))
            mdl.add(cp_model.LinearExpr.weighted_sum([self.x[i, u] for i in on], sizes) <= room)
        mdl.minimize(self.M)
        # The incumbent as a hint.
        for (i, u), xv in self.x.items():
            mdl.add_hint(xv, u == dev[i])
        for i in F:
            mdl.add_hint(self.s[i], tk(start[i]))
        mdl.add_hint(self.M, tk(inc.cmax))
        self.ok = True

    def solve(self, wall: float, conflicts: int, seed: int) -> tuple[int, dict | None]:
        solver = cp_model.CpSolver()
        prm = solver.parameters
        prm.num_workers = 1
        prm.linearization_level = 0
        prm.cp_model_presolve = False  # as formulations.cpsat: its presolve proved wrong optima
        prm.max_number_of_conflicts = conflicts
        if self.contended:
            # With the transfers' intervals the default search lowers the makespan a tick a
            # solution, hardly conflicting (10 s for 200 conflicts on a 40-task neighbourhood);
            # the fixed search reaches a lower one within its conflicts in about 1 s.
            prm.search_branching = cp_model.FIXED_SEARCH
        if math.isfinite(wall):
            prm.max_time_in_seconds = max(wall, 0.001)
        prm.random_seed = int(seed)
        prm.catch_sigint_signal = False
        with interrupt.on_stop(solver.stop_search):
            status = solver.solve(self.model)
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return status, None
        out = {"M": solver.value(self.M),
               "dev": {i: u for (i, u), xv in self.x.items() if solver.boolean_value(xv)},
               "d": {i: self.d[i, u] for (i, u), xv in self.x.items() if solver.boolean_value(xv)},
               "s": {i: solver.value(v) for i, v in self.s.items()}}
        return status, out


def improve_lns(problem: Problem, start: Schedule, ctx: SolveContext, steps: int = 0,
                size: int = 40, slice_: float = 0.2, conflicts: int = 200) -> Schedule:
    """Improve a valid latency schedule by large-neighbourhood search (module docstring).

    Parameters
    ----------
    problem : Problem
        A latency problem.
    start : Schedule
        A valid schedule of it.
    ctx : SolveContext
        Its time limit ends the search (never past it, but for the last decode); its
        generator draws the neighbourhoods and the seeds; improvements go to its callback.
    steps : int
        Neighbourhoods to try at most; 0: until the time limit (50 without one).
    size : int
        Tasks of the first neighbourhoods; it then adapts.
    slice_ : float
        Seconds per sub-solve at most, with a time limit.
    conflicts : int
        CP-SAT conflicts per sub-solve at most: without a time limit the only limit, which
        makes a run of some ``steps`` repeatable.

    Returns
    -------
    Schedule
        ``start`` itself unless a better one was found; the search stops early once the
        makespan meets ``ctx.fast_bound``.

    Notes
    -----
    A step costs a model of the neighbourhood, its solve (within its limits), and a decode
    of the order from the stretch on, O(n + E) at most.

    Examples
    --------
    >>> import mapsched
    >>> from mapsched.heuristics.lns import improve_lns
    >>> from mapsched.solve import SolveContext
    >>> p = mapsched.generators.random_dag(200, 3, seed=2)
    >>> s = mapsched.solve(p, "heft")
    >>> better = improve_lns(p, s, SolveContext(), steps=10)
    >>> better.makespan < s.makespan, mapsched.validate(p, better)
    (True, [])
    """
    p = problem
    if p.L != 1:
        raise OptionError("lns: the latency objective only (objective.batch 1)")
    dev0 = as_owner(p, start.mapping())[:, 0]
    topo_pos = np.empty(p.n, dtype=np.int64)
    topo_pos[p.topo] = np.arange(p.n)
    first = {j.task: (j.start, j.end) for j in start.jobs}
    starts0 = np.array([first[name] for name in p.task_names])
    # By start; of jobs that start together, zero-length ones first (after a long one they
    # would wait for its end), then in topological order: decoded appending, every job then
    # starts no later than in ``start``.
    order0 = np.lexsort((topo_pos, starts0[:, 1], starts0[:, 0]))
    inc = _Incumbent(p, dev0, order0)
    decode_s = inc.decode_s
    if steps <= 0:
        steps = 50 if ctx.time_limit is None else 2**62
    sizes = {k: size for k in KINDS}
    weight = {k: 1.0 for k in KINDS}
    tried = solved = kept = proved = skipped = 0
    counts = {k: 0 for k in KINDS}
    best_at_start = best = start.makespan

    def reserve() -> float:
        # The schedule's jobs are built at the end: about two decodes' time.
        return 0.02 + 3 * decode_s

    while tried < steps and not ctx.optimal(inc.cmax):
        left = ctx.remaining() - reserve()
        if left <= 0.01:
            break
        kinds = [k for k in KINDS if not (k in ("devices", "memory") and p.m < 2)]
        w = np.array([weight[k] for k in kinds])
        kind = kinds[int(_draw(ctx.rng, w))]
        tried += 1
        pick = _pick(inc, kind, int(sizes[kind]), ctx.rng)
        seed = int(ctx.rng.integers(2**31 - 1))
        if pick is None or len(pick[2]) == 0:
            if pick is None:
                weight[kind] = 0.01
            continue
        k1, k2, f = pick
        sub = _Sub(inc, k1, k2, f)
        if not sub.ok:
            skipped += 1
            continue
        solved += 1
        wall = math.inf if ctx.time_limit is None else min(slice_, left)
        status, out = sub.solve(wall, conflicts, seed)
        whole = len(f) == p.n  # the whole problem, solved exactly: nothing is left to find
        if status == cp_model.OPTIMAL:
            proved += 1
            sizes[kind] = min(MAX_SIZE, sizes[kind] * 1.2 + 1)
        elif status in (cp_model.FEASIBLE, cp_model.UNKNOWN):  # a limit ran out
            sizes[kind] = max(MIN_SIZE, sizes[kind] / 1.2)
        if out is not None and out["M"] <= sub.tk(inc.cmax):
            c = _apply(inc, k1, k2, out, sub.tk)
            if c is not None:
                kept += 1
                counts[kind] += 1
                if c < best:
                    best = c
                    weight[kind] = min(8.0, weight[kind] * 1.5)
                    ctx.improved(c)
                else:
                    weight[kind] = max(0.25, weight[kind] * 0.95)
        if whole and status == cp_model.OPTIMAL:
            break
    if inc.cmax >= best_at_start:
        start.log += (f"lns: {tried} neighbourhoods, {solved} solved ({proved} proved), {skipped} skipped, "
                      "no better schedule\n")
        return start
    # The decoder's own timing of this order and mapping, to the bit (_Incumbent.decode).
    o = inc.order.tolist()
    if p.contended:
        s = inc.builder(o, inc.dev.tolist()).schedule()
    else:
        s = _to_schedule(p, list(zip(o, inc.dev[o].tolist(), inc.start[o].tolist(), inc.end[o].tolist(), [1] * p.n)))
    s.log = (start.log + f"lns: {tried} neighbourhoods, {solved} solved ({proved} proved), {skipped} skipped, "
             f"{kept} kept ({', '.join(f'{k} {v}' for k, v in counts.items())}), "
             f"{start.makespan:.6g} -> {s.makespan:.6g}\n")
    return s


def _apply(inc: _Incumbent, k1: int, k2: int, out: dict, tk) -> float | None:
    """Write a sub-solve's answer back into the incumbent if the decoded makespan does not
    grow (and something changed); its new makespan, or None."""
    p = inc.p
    # The stretch in the order of the new starts (fixed tasks at theirs), ties as before.
    mid = inc.order[k1:k2]
    key = np.array([out["s"][i] if i in out["s"] else tk(inc.start[i]) for i in mid.tolist()])
    key_end = np.array([out["s"][i] + out["d"][i] if i in out["s"] else tk(inc.end[i]) for i in mid.tolist()])
    mid_new = mid[np.lexsort((inc.pos[mid], key_end, key))]  # zero-length jobs first, as in improve_lns
    dev = inc.dev.copy()
    for i, u in out["dev"].items():
        dev[i] = u
    if np.array_equal(mid_new, mid) and np.array_equal(dev[mid], inc.dev[mid]):
        return None
    newpos = inc.pos.copy()
    newpos[mid_new] = np.arange(k1, k2)
    if p.E and (newpos[p.src] >= newpos[p.dst]).any():
        return None  # ties of the model's rounding; never from its constraints alone
    used = np.bincount(dev, weights=inc.need, minlength=p.m)
    if (used > p.room).any():
        return None
    tail = np.concatenate([mid_new, inc.order[k2:]])
    ok, c, st, en = inc.decode(k1, tail.tolist(), dev.tolist(), inc.cmax)
    if not ok or c > inc.cmax:
        return None
    inc.dev, inc.order[k1:k2], inc.pos = dev, mid_new, newpos
    inc.start[tail], inc.end[tail] = st, en
    inc.cmax = c
    inc.kept()
    inc.changed(k2)
    return c


def _draw(rng: np.random.Generator, weights: np.ndarray) -> int:
    """An index drawn with probability proportional to ``weights``."""
    return int(rng.choice(len(weights), p=weights / weights.sum()))


@register(
    "lns",
    "large-neighbourhood search: parts of the best list schedule re-solved exactly by CP-SAT",
    objectives=("latency",),
    options=(
        Option("steps", int, 0, "neighbourhoods to try at most (0: until the time limit; 50 without one)"),
        Option("size", int, 40, "tasks of the first neighbourhoods (then adapted)", positive=True),
        Option("slice", float, 0.2, "seconds per neighbourhood's solve at most, with a time limit", positive=True,
               most=60.0),
        Option("conflicts", int, 200, "CP-SAT conflicts per neighbourhood's solve at most (repeatable)",
               positive=True),
    ),
    initial=True,
)
def lns(problem: Problem, ctx: SolveContext, steps: int, size: int, slice: float,  # noqa: A002
        conflicts: int) -> Schedule:
    """O(list schedulers) + per step a CP-SAT model of the neighbourhood and O(n + E)."""
    start = best_start(problem, ctx.initial, ctx)
    ctx.improved(start.makespan)
    return improve_lns(problem, start, ctx, steps, size, slice, conflicts)
