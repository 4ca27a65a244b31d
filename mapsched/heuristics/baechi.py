"""``m-topo``, ``m-etf`` and ``m-sct``: Baechi's memory-constrained placers (Jeon et al., SoCC 2020).

* ``m-topo`` walks the breadth-first topological order and fills device 0 up to a
  memory cap, then device 1, and so on; by default the cap is Baechi's uniform one,
  the memory of all tasks over the number of devices plus the largest task's.
* ``m-etf`` is Earliest Task First (Hwang et al. 1989) under memory: among the ready
  tasks (every parent placed) and the devices that can still hold them, it places the
  pair that starts earliest, ties to the higher upward rank.
* ``m-sct`` is Hanen and Munier's small-communication-time algorithm: an LP relaxation
  marks at most one favourite child per task and one favourite parent per task, and
  the ETF loop then keeps a device that has just run a task for its favourite child,
  unless an *urgent* task (one whose data has reached every device that could run it)
  can go first.

All three then re-time the placement with the insertion decoder, so the schedule is
valid by construction: ``m-etf`` and ``m-sct`` in the order they placed the tasks (no
job then starts later than in their own simulation), ``m-topo`` by upward rank.

How this differs from Baechi's code (``beomyeol/baechi``, ``placer/m_*.py``):

* Memory is mapsched's static rule: a task holds its weight and activation bytes on
  its device for the whole run. Baechi frees an op's outputs once its consumers have
  run, so a placement that fits here fits there too, not the reverse.
* Devices may differ: ranks and the LP use each task's mean time over the devices that
  can run it and each edge's mean time over the links (as :func:`.common.upward_rank`),
  a task is offered only to devices that can run it and that every parent's device has
  a link to, and ETF breaks a tie in start time by rank, then (one task offered by two
  devices) by the earlier finish.
* ``m-topo`` never fills a device past its real memory (Baechi's uniform cap ignores
  it). When the caps leave a task nowhere, it goes to the first device whose memory
  still holds it (Baechi raises "N operators cannot be placed").
* The ETF loop is in list form: with ready meaning "every parent placed", the pair that
  starts earliest is the one Baechi's event-driven simulation runs next, up to ties. A
  device is kept for a favourite child once the child is ready when the device's next
  task is chosen (Baechi checks only at the parent's finish), and urgent tasks are those
  whose data reaches every device no later than the child could start.
* ``m-sct`` solves its LP with HiGHS, not MOSEK, and rounds a conflict (two favourite
  children or parents) greedily by the smallest LP value, where Baechi keeps the last
  edge in edge order.
* No co-location groups, grouping or fusion.
* When a placer dead-ends (memory or links leave a ready task no device), the tasks
  placed so far seed the feasibility repair of :mod:`mapsched.scheduling.feasibility`; a problem
  that fails the memory check of :func:`memory_shortfall` raises at once, naming the
  devices and the bytes they lack.
"""

from __future__ import annotations

import heapq
import math

import numpy as np

from mapsched.engine import interrupt
from mapsched.engine.context import SolveContext
from mapsched.engine.registry import Option, register
from mapsched.errors import InfeasibleError, OptionError
from mapsched.model.problem import Problem
from mapsched.model.schedule import Schedule
from mapsched.scheduling.construct import Placement, repair_placement, topo_placement
from mapsched.scheduling.decoder import Decoder
from mapsched.scheduling.ranks import mean_comm, mean_cost, rank_order, upward_rank

__all__ = ["Placement", "etf_placement", "favourite_children", "favourite_lp", "memory_shortfall", "topo_placement"]

_HALL_DEVICES = 16  # up to this many devices, memory_shortfall checks every set of devices
_CHECK_EVERY = 256  # placements between two looks at the clock
_INF = math.inf


def memory_shortfall(problem: Problem) -> str | None:
    """Why no mapping can fit memory, or None when this check finds no reason.

    For every set S of devices, the tasks that only devices of S can run must fit in
    the memory of S (weight plus activation bytes per task, rule 6 of the format).

    Notes
    -----
    A necessary condition, not a sufficient one (links, and the packing of tasks into
    devices, may still rule every mapping out). Every set is checked up to 16 devices,
    in O(n + 2^m m); above, single devices and the whole system, in O(n m).

    Examples
    --------
    >>> from mapsched import Device, Problem, System, Task
    >>> devices = System((Device("a", memory=100), Device("b", memory=200)))
    >>> tasks = [Task("x", {"a": 1}, weight_bytes=80), Task("y", {"a": 1}, weight_bytes=70)]
    >>> memory_shortfall(Problem(tasks, [], devices))
    "device 'a' has 100 bytes of memory, the tasks only it can run need 150: 50 bytes short"
    """
    p = problem
    need = p.weight + p.act
    room = p.room
    if p.m <= _HALL_DEVICES:
        sets = list(range(1 << p.m))
        idx = np.arange(1 << p.m)
        masks = p.can_run.astype(np.int64) @ (1 << np.arange(p.m))
        load = np.bincount(masks, weights=need, minlength=1 << p.m)
        cap = np.zeros(1 << p.m)
        for u in range(p.m):  # zeta transform: load[S] becomes the need of the tasks held to S
            has = (idx >> u & 1).astype(bool)
            load[has] += load[idx[has] ^ (1 << u)]
            cap[has] += room[u]
    else:
        sets = [1 << u for u in range(p.m)] + [(1 << p.m) - 1]
        only = p.can_run.sum(axis=1) == 1
        load = np.bincount(np.argmax(p.can_run, axis=1)[only], weights=need[only], minlength=p.m)
        load, cap = np.append(load, need.sum()), np.append(room, room.sum())
    over = np.flatnonzero(load > cap).tolist()
    if not over:
        return None
    k = min(over, key=lambda s: (sets[s].bit_count(), cap[s] - load[s]))  # fewest devices, then most short
    devs = [u for u in range(p.m) if sets[k] >> u & 1]
    names = [repr(p.device_names[u]) for u in devs]
    have = p.mem[devs].sum()
    if len(devs) == 1:
        who = f"device {names[0]} has"
    else:
        who = f"all {p.m} devices have" if len(devs) == p.m > 2 else f"devices {', '.join(names)} have"
    return (f"{who} {have:.0f} bytes of memory, the tasks only {'it' if len(devs) == 1 else 'they'} "
            f"can run need {load[k]:.0f}: {math.ceil(load[k] - have):.0f} bytes short")


def favourite_lp(problem: Problem, time_limit: float | None = None) -> tuple[np.ndarray, float] | None:
    """Hanen and Munier's LP relaxation over unboundedly many devices: ``x[e]`` in [0, 1] per
    edge (0: a favourite edge, no communication), and its optimum; None when HiGHS stops
    before an optimum (time limit or interrupt).

    Minimise W subject to ``s_j >= s_i + p_i + c_e x_e`` for every edge e = (i, j),
    ``sum x >= (out-degree - 1)`` over each task's out-edges and ``sum x >= (in-degree - 1)``
    over its in-edges (at most one favourite child and one favourite parent),
    ``W >= s_i + p_i``, ``s >= 0``. ``p_i`` is task i's mean time over the devices that can
    run it, ``c_e`` edge e's mean time over the links.

    Notes
    -----
    E + n + 1 columns and at most 3E + n rows (degree rows only where the degree is 2 or
    more, makespan rows only at exits); HiGHS's default LP solver, one thread.

    Examples
    --------
    >>> from mapsched import Problem
    >>> x, w = favourite_lp(Problem.from_arrays([[1, 1], [1, 1], [10, 10]], [(0, 1, 5), (0, 2, 5)]))
    >>> x.tolist(), w  # the long child is the favourite; the short one waits for its data
    ([1.0, 0.0], 11.0)
    """
    import highspy
    from scipy.sparse import coo_matrix

    p = problem
    n, E = p.n, p.E
    w, c = mean_cost(p), mean_comm(p)
    src, dst, edges = p.src, p.dst, np.arange(E)
    outdeg, indeg = np.bincount(src, minlength=n), np.bincount(dst, minlength=n)
    fan_out, fan_in = np.flatnonzero(outdeg >= 2), np.flatnonzero(indeg >= 2)
    sinks = np.flatnonzero(outdeg == 0)
    row_of_out = np.full(n, -1)
    row_of_out[fan_out] = E + np.arange(len(fan_out))
    row_of_in = np.full(n, -1)
    row_of_in[fan_in] = E + len(fan_out) + np.arange(len(fan_in))
    first_sink = E + len(fan_out) + len(fan_in)
    many_out, many_in = outdeg[src] >= 2, indeg[dst] >= 2
    rows = np.concatenate([edges, edges, edges, row_of_out[src[many_out]], row_of_in[dst[many_in]],
                           first_sink + np.arange(len(sinks)), first_sink + np.arange(len(sinks))])
    cols = np.concatenate([E + dst, E + src, edges, edges[many_out], edges[many_in],
                           np.full(len(sinks), E + n), E + sinks])
    vals = np.concatenate([np.ones(E), -np.ones(E), -c, np.ones(many_out.sum()), np.ones(many_in.sum()),
                           np.ones(len(sinks)), -np.ones(len(sinks))])
    lower = np.concatenate([w[src], outdeg[fan_out] - 1.0, indeg[fan_in] - 1.0, w[sinks]])
    a = coo_matrix((vals, (rows, cols)), shape=(len(lower), E + n + 1)).tocsr()
    a.eliminate_zeros()  # free edges (c = 0) need no x term

    highspy.Highs.resetGlobalScheduler(True)  # one pool per process, sized by the first solve
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("threads", 1)
    if time_limit is not None:
        h.setOptionValue("time_limit", max(time_limit, 0.01))
    upper = np.concatenate([np.ones(E), np.full(n + 1, highspy.kHighsInf)])
    h.addVars(E + n + 1, np.zeros(E + n + 1), upper)
    h.changeColsCost(1, np.array([E + n], dtype=np.int32), np.array([1.0]))
    h.addRows(len(lower), lower, np.full(len(lower), highspy.kHighsInf), a.nnz, a.indptr[:-1].astype(np.int32),
              a.indices.astype(np.int32), a.data)
    h.HandleUserInterrupt = True  # lets cancelSolve stop it
    with interrupt.on_stop(h.cancelSolve):
        h.run()
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        return None
    col = np.asarray(h.getSolution().col_value)
    return col[:E].clip(0.0, 1.0), float(col[E + n])


def favourite_children(problem: Problem, x: np.ndarray, threshold: float = 0.5) -> np.ndarray:
    """Round the LP: ``fav[i]`` is task i's favourite child, or -1.

    Edges with ``x < threshold`` are candidates; taken by increasing x (ties: the costlier
    transfer first, then edge order), an edge is kept when neither its source already has
    a favourite child nor its destination a favourite parent. O(E log E).

    Examples
    --------
    >>> from mapsched import Problem
    >>> p = Problem.from_arrays([[1.0]] * 3, [(0, 1, 5), (0, 2, 9)])
    >>> favourite_children(p, np.array([0.2, 0.2])).tolist()  # the costlier of two ties
    [2, -1, -1]
    """
    p = problem
    try:
        x = np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        x = np.full(0, np.nan)
    if x.shape != (p.E,) or np.isnan(x).any():
        raise OptionError(f"x: expected {p.E} numbers, one an edge, as favourite_lp gives")
    fav = np.full(p.n, -1, dtype=np.int64)
    has_parent = np.zeros(p.n, dtype=bool)
    for e in np.lexsort((np.arange(p.E), -p.nbytes, x)).tolist():
        i, j = int(p.src[e]), int(p.dst[e])
        if x[e] >= threshold:
            break
        if fav[i] < 0 and not has_parent[j]:
            fav[i], has_parent[j] = j, True
    return fav


def etf_placement(problem: Problem, favourite: np.ndarray | None = None,
                  ctx: SolveContext | None = None) -> Placement:
    """The m-ETF placement, or m-SCT's when ``favourite`` (from :func:`favourite_children`) is given.

    Each device keeps two heaps of the ready tasks it can run and hold: *pending* by the
    time their data reaches it, *startable* by priority once that time is no later than
    the device is free. A device's proposal is its top startable task at the time it is
    free, else its top pending task at its data time; the proposal that starts earliest
    is placed (ties: higher upward rank, then earlier finish). Tasks that no longer fit a
    device's memory are dropped from its heaps when they reach the top (memory only fills
    up, so they never fit again). With favourites, a device whose last task's favourite
    child is ready, fits, and starts on it no later than anywhere else proposes only that
    child or an urgent task (its own heap by the time the data reaches every device).

    Once ``ctx`` expires, the rest go in priority order, each where it starts earliest.

    Notes
    -----
    O(E m + n m log n): each ready task costs O(in-degree m) for its data times and is
    pushed at most once into each heap of each device (2 n m pushes; 3 n m with
    favourites), and each placement scans the m proposals (O(m^2) with favourites, for
    the favourite child's earliest device).

    Examples
    --------
    >>> from mapsched import Problem
    >>> p = Problem.from_arrays([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]], [(0, 1, 1), (0, 2, 1)])
    >>> etf_placement(p).owner.tolist()  # a fork: the longer child stays, the other starts sooner away
    [0, 1, 0]
    """
    p = problem
    n, m = p.n, p.m
    prio = [0] * n
    for k, i in enumerate(rank_order(p, upward_rank(p))):
        prio[i] = k
    dur = p.dur.tolist()
    can = p.can_run.tolist()
    need = (p.weight + p.act).tolist()
    left = p.room.tolist()
    llat, mpb, nb = p.link_latency.tolist(), p.link_ms_per_byte.tolist(), p.nbytes.tolist()
    src = p.src.tolist()
    fav = None
    if favourite is not None:
        fav = np.asarray(favourite).tolist()
        if len(fav) != n or not all(type(c) is int and -1 <= c < n for c in fav):
            raise OptionError(f"favourite: expected {n} task indices or -1, as favourite_children gives")

    waiting = [len(p.in_edges[i]) for i in range(n)]
    owner, end = [-1] * n, [0.0] * n
    data: list[list[float] | None] = [None] * n  # per device, when a released task's data is there
    avail, last = [0.0] * m, [-1] * m
    pending: list[list[tuple[float, int, int]]] = [[] for _ in range(m)]
    startable: list[list[tuple[int, int]]] = [[] for _ in range(m)]
    urgent: list[list[tuple[float, int, int]]] = [[] for _ in range(m)]
    ready: list[tuple[int, int]] = []  # every released task by priority, for the hurried finish
    order: list[int] = []
    pushes = 0

    def release(o: int) -> bool:
        """Compute when o's data is on each device and offer it; False if no device can take it."""
        nonlocal pushes
        r = [_INF] * m
        for d in range(m):
            if can[o][d] and need[o] <= left[d]:
                t = 0.0
                for e in p.in_edges[o]:
                    q = src[e]
                    v = owner[q]
                    a = end[q] if v == d else end[q] + llat[v][d] + nb[e] * mpb[v][d]
                    if a > t:
                        t = a
                r[d] = t
        data[o] = r
        heapq.heappush(ready, (prio[o], o))
        everywhere = max((t for t in r if t < _INF), default=_INF)
        for d in range(m):
            if r[d] < _INF:
                heapq.heappush(pending[d], (r[d], prio[o], o))
                pushes += 1
                if fav is not None:
                    heapq.heappush(urgent[d], (everywhere, prio[o], o))
                    pushes += 1
        return everywhere < _INF

    def gone(o: int, d: int) -> bool:
        return owner[o] >= 0 or need[o] > left[d]

    def etf_proposal(d: int) -> tuple[float, int, int] | None:
        nonlocal pushes
        a, pend, start = avail[d], pending[d], startable[d]
        while pend and pend[0][0] <= a:
            _, pr, o = heapq.heappop(pend)
            heapq.heappush(start, (pr, o))
            pushes += 1
        while start and gone(start[0][1], d):
            heapq.heappop(start)
        if start:
            return a, start[0][0], start[0][1]
        while pend and gone(pend[0][2], d):
            heapq.heappop(pend)
        return pend[0] if pend else None

    def sct_proposal(d: int) -> tuple[float, int, int] | None:
        f = fav[last[d]] if last[d] >= 0 else -1
        if f < 0 or owner[f] >= 0 or data[f] is None or gone(f, d) or data[f][d] == _INF:
            return etf_proposal(d)
        rf = data[f]
        at = max(avail[d], rf[d])
        if any(rf[x] < _INF and not gone(f, x) and max(avail[x], rf[x]) < at for x in range(m)):
            return etf_proposal(d)  # the child starts earlier elsewhere: the device is free
        urg = urgent[d]
        while urg and gone(urg[0][2], d):
            heapq.heappop(urg)
        if urg and urg[0][0] <= at:
            o = urg[0][2]
            return max(avail[d], data[o][d]), prio[o], o
        return at, prio[f], f

    def place(o: int, d: int, start: float) -> bool:
        owner[o], end[o] = d, start + dur[o][d]
        avail[d], last[d] = end[o], o
        left[d] -= need[o]
        order.append(o)
        ok = True
        for j in p.succ[o]:
            waiting[j] -= 1
            if waiting[j] == 0:
                ok = release(j) and ok
        return ok

    propose = etf_proposal if fav is None else sct_proposal
    alive = all(release(i) for i in range(n) if waiting[i] == 0)
    hurried = False
    while alive and len(order) < n:
        if len(order) % _CHECK_EVERY == 0 and ctx is not None and ctx.expired():
            hurried = True
            break
        best = None
        for d in range(m):
            offer = propose(d)
            if offer is not None:
                start, pr, o = offer
                key = (start, pr, start + dur[o][d], d, o)
                if best is None or key < best:
                    best = key
        if best is None:
            break  # every ready task is out of memory everywhere: a dead end
        start, _, _, d, o = best
        alive = place(o, d, start)
    if hurried:
        while alive and ready:
            _, o = heapq.heappop(ready)
            if owner[o] >= 0:
                continue
            r = data[o]
            fit = [(max(avail[d], r[d]), max(avail[d], r[d]) + dur[o][d], d) for d in range(m)
                   if r[d] < _INF and not gone(o, d)]
            if not fit:
                break
            start, _, d = min(fit)
            alive = place(o, d, start)
    return Placement(np.array(owner, dtype=np.int64), order, pushes, hurried)


def _schedule(problem: Problem, ctx: SolveContext, placement: Placement, log: str) -> Schedule:
    """Re-time a complete placement with the insertion decoder in its own order, or hand a
    dead-ended one to the feasibility repair, which keeps what it can of it."""
    p = problem
    owner = placement.owner
    if (owner < 0).any():
        s = repair_placement(p, owner)
    else:
        s = Decoder(p, placement.order, insertion=True).schedule(owner[:, None])
    s.log = log + s.log
    ctx.improved(s.makespan)
    return s


def _check_memory(problem: Problem, method: str) -> None:
    why = memory_shortfall(problem)
    if why is not None:
        raise InfeasibleError(f"{method}: no mapping fits memory: {why}")


@register("m-topo", "Baechi's m-TOPO: devices filled in topological order up to a memory cap",
          objectives=("latency",),
          options=(Option("cap", str, "uniform", "per-device memory cap: 'uniform' (total memory / devices + "
                          "largest task) or 'memory' (each device's own)", choices=("uniform", "memory")),))
def m_topo(problem: Problem, ctx: SolveContext, cap: str = "uniform") -> Schedule:
    """O(E m + n m) to place (see :func:`topo_placement`), then one insertion decode.

    Examples
    --------
    >>> import mapsched
    >>> mapsched.solve(mapsched.instances.load("topcuoglu2002"), "m-topo").makespan
    127.0
    """
    _check_memory(problem, "m-topo")
    placement = topo_placement(problem, cap)
    order = rank_order(problem, upward_rank(problem))  # re-time in HEFT's order: any topological one is valid
    return _schedule(problem, ctx, placement._replace(order=order), f"m-topo: {cap} cap\n")


@register("m-etf", "Baechi's m-ETF: earliest task first under memory", objectives=("latency",))
def m_etf(problem: Problem, ctx: SolveContext) -> Schedule:
    """O(E m + n m log n) to place (see :func:`etf_placement`), then one insertion decode.

    Examples
    --------
    >>> import mapsched
    >>> mapsched.solve(mapsched.instances.load("topcuoglu2002"), "m-etf").makespan
    99.0
    """
    _check_memory(problem, "m-etf")
    placement = etf_placement(problem, ctx=ctx)
    return _schedule(problem, ctx, placement, _etf_log("m-etf", problem, placement))


@register("m-sct", "Baechi's m-SCT: ETF that keeps a device for its task's favourite child, "
          "chosen by an LP (HiGHS)", objectives=("latency",),
          options=(Option("threshold", float, 0.5, "an edge is favourite when its LP value is below this"),))
def m_sct(problem: Problem, ctx: SolveContext, threshold: float = 0.5) -> Schedule:
    """The LP of :func:`favourite_lp` (HiGHS; about a second for 10,000 tasks), its rounding,
    then the ETF placement with favourites and one insertion decode.

    Examples
    --------
    >>> import mapsched
    >>> mapsched.solve(mapsched.instances.load("topcuoglu2002"), "m-sct").makespan
    99.0
    """
    _check_memory(problem, "m-sct")
    # Half the time at most: the placement and its decode follow, and on large graphs they
    # overran a short limit when the LP had all of it.
    solved = None if ctx.expired() else favourite_lp(problem, None if ctx.time_limit is None else ctx.remaining() / 2)
    if solved is None:
        fav = np.full(problem.n, -1, dtype=np.int64)
        log = "m-sct: the LP found no optimum in time; no favourite children (m-ETF)\n"
    else:
        x, w = solved
        fav = favourite_children(problem, x, threshold)
        log = f"m-sct: LP makespan {w:g}, {int((fav >= 0).sum())} favourite children\n"
    placement = etf_placement(problem, fav, ctx)
    return _schedule(problem, ctx, placement, log + _etf_log("m-sct", problem, placement))


def _etf_log(method: str, problem: Problem, placement: Placement) -> str:
    line = f"{method}: {len(placement.order)} of {problem.n} tasks placed, {placement.pushes} heap pushes\n"
    if placement.hurried:
        line += f"{method}: time limit reached; the rest placed in rank order where each starts earliest\n"
    return line
