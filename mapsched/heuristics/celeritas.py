"""``order-place`` and ``celeritas``: Celeritas's placers (Xu, Liao, Xie and Zhou, "Celeritas:
Fast Optimizer for Large Dataflow Graphs", section 5).

Both first fuse the graph (:func:`fuse`): a topological order (CPD-TOPO by default) is cut
into contiguous intervals of at most ``R`` tasks and a share ``M`` of device memory so
that the cut edges weigh least (:func:`mapsched.scheduling.coarsen.fuse_intervals`, the dynamic
programme of eqs. 4-6), and each interval becomes one task of a coarse problem
(:func:`mapsched.scheduling.coarsen.quotient`). Then, on the coarse problem, taken in the same kind
of order:

* ``order-place`` fills the devices one after the other, each up to its memory
  (:func:`order_placement`, the paper's Order-Place);
* ``celeritas`` runs Adjusting Placement (:func:`adjusting_placement`, Alg. 2): a
  cluster stays on the previous cluster's device unless another device finishes it
  earlier by more than the time to send its largest output back (eqs. 7-9).

The coarse schedule is expanded to the original tasks (:func:`mapsched.scheduling.coarsen.expand`):
each task on its cluster's device, re-timed by insertion in the coarse schedule's order,
never later than the coarse schedule. Celeritas is a memory-driven splitter that
minimises communication, not a parallelism finder: where memory is plentiful it keeps
most of the graph on one device (``order-place`` all of it).

How this differs from the paper (no Celeritas code is public):

* Cost model: mapsched's (docs/format.md). Links are contention-free and every edge
  pays its own transfer (Celeritas adds TF send/recv ops to both devices); memory is
  the static rule 6, a task holding its weight and activation bytes on its device for
  the whole run. A cluster's time on a device is the sum of its members' times there,
  its memory the sum of theirs (exact under rule 6), and the bytes of the edges
  between two clusters are summed, as in the paper.
* ``M`` is a fraction of the largest finite device memory (the paper's "M = 0.25 *",
  read as a quarter of one GPU's memory); without memory limits only ``R`` bounds a
  cluster. A cluster must also fit, and be runnable on, one device. The cost of
  cutting an edge is its mean time over the links.
* Heterogeneous devices (the paper has identical GPUs): CPD-TOPO's levels use each
  task's mean time over the devices that run it and each edge's mean time over the
  links, as HEFT's ranks do; Adjusting Placement times a cluster with its actual time
  on each device and compares earliest *finish* times (the same comparison as the
  paper's start times when devices are identical); the earliest device ``d1`` is the
  one finishing first, and ``back_cost`` is the time of the largest coarse out-edge
  over the actual link from ``d1`` back to the previous device (infinite without one:
  then the cluster stays). The first cluster, which has no previous device, goes where
  it finishes first. Order-Place fills the devices fastest first (:func:`fill_order`),
  in index order when they are identical.
* A device that cannot run a cluster, or that a parent's device has no link to, counts
  as full. When every device is full, the paper places the cluster best-effort on the
  device with the lowest memory usage (its Alg. 2, line 20, writes argmin of the free
  memory, contradicting its text), which mapsched's validator would reject; here the
  clusters placed so far seed the feasibility repair of :mod:`mapsched.scheduling.feasibility`
  on the original tasks. A problem that fails the check of
  :func:`~mapsched.heuristics.baechi.memory_shortfall` raises at once, in one line.
  Order-Place sends a cluster that the current device cannot take (restriction, link)
  to the next device with room, as ``m-topo`` does (:func:`~mapsched.heuristics.baechi.topo_placement`);
  option ``cap="uniform"`` gives it Baechi's uniform cap instead of each device's memory.
* Orders: option ``order`` picks CPD-TOPO (``cpd``, the paper's), DFS-TOPO (``dfs``,
  section 4.2.2) or the breadth-first order of m-TOPO (``bfs``); the same kind of order
  is computed again on the coarse problem to place its clusters (Alg. 2, line 3).
* The expansion re-times every task by list scheduling with insertion; Celeritas hands
  the placement to TensorFlow's executor. No co-location groups, no Standard
  Evaluation (profiling): costs are the problem's.
* Time limit: fusion and expansion are not cut short (both near-linear, so short beside
  any limit a graph of that size is given). Adjusting Placement looks at the clock every
  256 clusters; once the limit has passed, ``celeritas`` returns Order-Place's placement
  of the same coarse problem instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from mapsched import checks
from mapsched.engine.context import SolveContext
from mapsched.engine.registry import Option, register
from mapsched.errors import OptionError, shown
from mapsched.heuristics.baechi import Placement, _check_memory, topo_placement
from mapsched.model.problem import Problem
from mapsched.model.schedule import Schedule
from mapsched.scheduling import coarsen, orders
from mapsched.scheduling.construct import repair_placement
from mapsched.scheduling.decoder import Builder, Decoder, checked_order
from mapsched.scheduling.ranks import mean_comm, mean_cost

__all__ = ["ORDERS", "Fused", "adjusting_placement", "fill_order", "fuse", "order_placement"]

ORDERS = {
    "cpd": lambda p: orders.cpd_topo(p),
    "dfs": lambda p: orders.dfs_topo(p),
    "bfs": lambda p: p.topo.copy(),
}
"""The topological orders a method may fuse and place along, by option value: CPD-TOPO and
DFS-TOPO (:mod:`mapsched.scheduling.orders`) and the breadth-first :attr:`Problem.topo`."""

_CHECK_EVERY = 256  # clusters placed between two looks at the clock


class Fused(NamedTuple):
    """A fused problem: ``coarse`` has one task per interval, ``group_of[i]`` is the coarse task
    of original task i, ``order`` the coarse tasks in the order to place them, and ``M`` the
    most bytes an interval of several tasks may hold."""

    coarse: Problem
    group_of: np.ndarray
    order: np.ndarray
    M: float


def fuse(problem: Problem, R: int = 200, M: float = 0.25, order: str = "cpd") -> Fused:
    """Celeritas's Optimal Operation Fusion (Alg. 1) and its coarse problem.

    Parameters
    ----------
    problem : Problem
        A latency problem.
    R : int
        Most tasks per interval (the paper's 200).
    M : float
        Most memory per interval, as a fraction of the largest finite device memory
        (the paper's 0.25); no limit when no device has one.
    order : {"cpd", "dfs", "bfs"}
        The topological order cut into intervals (see :data:`ORDERS`); the same kind of
        order of the coarse problem is returned to place it along.

    Returns
    -------
    Fused

    Notes
    -----
    O((n + E) R) for the dynamic programme (n + E numpy calls), O(n + E log E) for the
    orders, O(n m + E log E) for the quotient.

    Examples
    --------
    >>> import mapsched
    >>> p = mapsched.generators.random_dag(500, 3, seed=1)
    >>> f = fuse(p, R=50)
    >>> f.coarse.n, len(f.group_of), f.M  # intervals of at most 50; no memory limits
    (14, 500, inf)
    """
    p = problem
    if order not in ORDERS:
        raise OptionError(f"order: expected one of {list(ORDERS)}, got {shown(order)}")
    if not (checks.real(M) and M >= 0):  # with no memory limit, M went unread
        raise OptionError(f"M: expected a fraction of the largest memory, 0 or more, got {shown(M)}")
    finite = p.mem[np.isfinite(p.mem)]
    limit = M * float(finite.max()) if finite.size else np.inf
    groups = coarsen.fuse_intervals(p, ORDERS[order](p), R=R, M=limit)
    coarse, group_of = coarsen.quotient(p, groups)
    return Fused(coarse, group_of, np.asarray(ORDERS[order](coarse), dtype=np.int64), limit)


def fill_order(problem: Problem) -> list[int]:
    """The devices fastest first: by the mean, over the tasks a device runs, of its time for
    the task over the task's mean time (ties, as among identical devices: by index). O(n m).

    Examples
    --------
    >>> from mapsched import Problem
    >>> fill_order(Problem.from_arrays([[4, 2, 4], [8, 4, 6]], []))
    [1, 2, 0]
    """
    p = problem
    w = mean_cost(p)
    ok = p.can_run & (w[:, None] > 0)
    ratio = np.where(ok, p.dur / np.where(w > 0, w, 1.0)[:, None], 0.0)
    runs = ok.sum(axis=0)
    speed = np.where(runs > 0, ratio.sum(axis=0) / np.maximum(runs, 1), np.inf)
    return np.argsort(speed, kind="stable").tolist()


def order_placement(problem: Problem, order: Sequence[int] | None = None, cap: str = "memory") -> Placement:
    """Order-Place: the tasks in ``order`` (default :func:`~mapsched.scheduling.orders.cpd_topo`) fill the
    devices one after the other, fastest first (:func:`fill_order`), each up to its memory
    (``cap="memory"``) or Baechi's uniform cap (``"uniform"``).

    See :func:`~mapsched.heuristics.baechi.topo_placement`, which it calls: a task the current
    device cannot take goes to the next with room; ``owner`` holds -1 after a dead end.
    O(E m + n m).

    Examples
    --------
    >>> from mapsched import Device, Problem, System, Task
    >>> tasks = [Task(f"t{i}", {"a": 2.0, "b": 1.0}, weight_bytes=10) for i in range(3)]
    >>> p = Problem(tasks, [], System((Device("a", memory=100), Device("b", memory=25))))
    >>> order_placement(p).owner.tolist()  # the faster b first, up to its 25 bytes
    [1, 1, 0]
    """
    p = problem
    return topo_placement(p, cap, orders.cpd_topo(p) if order is None else order, fill_order(p))


def adjusting_placement(problem: Problem, order: Sequence[int] | None = None,
                        ctx: SolveContext | None = None) -> Placement:
    """Celeritas's Adjusting Placement (Alg. 2) of the tasks in ``order`` (default CPD-TOPO).

    For each task, the earliest finish on every device that can take it (runs it, holds
    its memory beside the tasks already there, and has a link from each parent's device)
    is found by insertion into idle gaps, communication included (eq. 7). Let ``dk`` be
    the previous task's device and ``d1`` the device finishing first: the task goes to
    ``d1`` if ``dk`` cannot take it, or if it finishes on ``d1`` earlier than on ``dk`` by
    more than ``back_cost``, the time of its largest out-edge over the link from ``d1``
    back to ``dk`` (eqs. 8-9); otherwise it stays on ``dk``. The first task goes to
    ``d1``.

    Parameters
    ----------
    problem : Problem
        A latency problem, usually a fused one (:func:`fuse`).
    order : sequence of int, optional
        A topological order.
    ctx : SolveContext, optional
        Once it has expired (looked at every 256 tasks), the placement stops, with
        ``hurried`` set.

    Returns
    -------
    Placement
        ``owner[i] = -1`` for the tasks after a dead end (no device can take a task) or
        after the time limit; ``order`` the tasks placed, in order.

    Notes
    -----
    O(n m) trials of the insertion :class:`~mapsched.scheduling.decoder.Builder`, each O(in-degree)
    plus O(log n) amortised for the gap search: O((n m + E m) log n).

    Examples
    --------
    A source feeding two 4 ms tasks and a sink, 1 ms transfers, two identical devices:
    the first branch stays with the source on d0; the second finishes at 6 on d1
    instead of 9 on d0, 3 ms sooner, more than the 1 ms to send its output back, so it
    moves; the sink then finishes first on d1, where it stays.

    >>> from mapsched import Problem
    >>> p = Problem.from_arrays([[1, 1], [4, 4], [4, 4], [1, 1]], [(0, 1, 1), (0, 2, 1), (1, 3, 1), (2, 3, 1)])
    >>> adjusting_placement(p, [0, 1, 2, 3]).owner.tolist()
    [0, 0, 1, 1]
    """
    p = problem
    order = orders.cpd_topo(p).tolist() if order is None else checked_order(p, order)
    b = Builder(p, insertion=True)
    llat, mpb = p.link_latency.tolist(), p.link_ms_per_byte.tolist()
    heaviest = np.zeros(p.n)
    np.maximum.at(heaviest, p.src, p.nbytes)
    heaviest = heaviest.tolist()
    senders = (np.bincount(p.src, minlength=p.n) > 0).tolist()
    can = p.can_run.tolist()
    owner = np.full(p.n, -1, dtype=np.int64)
    placed: list[int] = []
    prev, hurried = -1, False
    for k, i in enumerate(order):
        if k and k % _CHECK_EVERY == 0 and ctx is not None and ctx.expired():
            hurried = True
            break
        est = {}  # device -> (device, mask, start, end, slot), the job's earliest insertion there
        for u in range(p.m):
            if can[i][u] and (t := b.trial(i, [(u, 1)])) is not None:
                est[u] = t[0]
        if not est:
            break  # memory, restrictions or links leave the task nowhere: the repair takes over
        d1 = min(est, key=lambda u: (est[u][3], est[u][2], u))
        u = d1
        if prev in est and prev != d1:
            back = llat[d1][prev] + heaviest[i] * mpb[d1][prev] if senders[i] else 0.0
            if not est[prev][3] - est[d1][3] > back:
                u = prev
        b.commit(i, [est[u]])
        owner[i], prev = u, u
        placed.append(i)
    return Placement(owner, placed, hurried=hurried)


def _expand(method: str, problem: Problem, ctx: SolveContext, fused: Fused, placement: Placement,
            log: str) -> Schedule:
    """The original problem's schedule from a placement of the fused one: the coarse schedule
    expanded, or, after a dead end, the feasibility repair seeded with the clusters placed."""
    p, q = problem, fused.coarse
    owner = placement.owner
    if (owner < 0).any():
        s = repair_placement(p, owner[fused.group_of])
    else:
        coarse = Decoder(q, placement.order, insertion=True).schedule(owner[:, None])
        s = coarsen.expand(p, coarse, fused.group_of)
        log += f"{method}: coarse makespan {coarse.makespan:g}, expanded {s.makespan:g}\n"
    s.log = log + s.log
    ctx.improved(s.makespan)
    return s


def _fuse_log(method: str, problem: Problem, fused: Fused, R: int, order: str) -> str:
    def ccr(x: Problem) -> float:
        work = mean_cost(x).sum()
        return float(mean_comm(x).sum() / work) if work > 0 else 0.0

    return (f"{method}: {order} order, R={R}, M={fused.M:g} bytes: {problem.n} tasks fused into "
            f"{fused.coarse.n} clusters; CCR {ccr(problem):.3g} -> {ccr(fused.coarse):.3g}\n")


def _moves(placement: Placement) -> int:
    devs = placement.owner[placement.order]
    return int((devs[1:] != devs[:-1]).sum())


_OPTIONS = (
    Option("R", int, 200, "most tasks fused into one cluster (the paper's exploration range)", positive=True),
    Option("M", float, 0.25, "most memory of one cluster, as a fraction of the largest finite device memory"),
    Option("order", str, "cpd", "topological order to fuse and place along: CPD-TOPO, DFS-TOPO or breadth-first",
           choices=tuple(ORDERS)),
)


@register("order-place", "Celeritas's Order-Place: optimal interval fusion of a CPD-TOPO order, then devices "
          "filled in order up to their memory", objectives=("latency",),
          options=(*_OPTIONS, Option("cap", str, "memory", "per-device cap: 'memory' (each device's own) or "
                                     "'uniform' (Baechi's: total memory / devices + largest task)",
                                     choices=("memory", "uniform"))))
def order_place(problem: Problem, ctx: SolveContext, R: int = 200, M: float = 0.25, order: str = "cpd",
                cap: str = "memory") -> Schedule:
    """:func:`fuse`, :func:`order_placement` on the coarse problem, expansion.

    Examples
    --------
    >>> import mapsched
    >>> mapsched.solve(mapsched.instances.load("topcuoglu2002"), "order-place").makespan  # one device
    127.0
    """
    _check_memory(problem, "order-place")
    fused = fuse(problem, R, M, order)
    placement = order_placement(fused.coarse, fused.order, cap)
    log = _fuse_log("order-place", problem, fused, R, order)
    log += f"order-place: {cap} cap, {_moves(placement) + 1} runs of clusters on one device\n"
    return _expand("order-place", problem, ctx, fused, placement, log)


@register("celeritas", "Celeritas: optimal interval fusion of a CPD-TOPO order, then Adjusting Placement "
          "(stay on the previous device unless another finishes sooner by more than the transfer back)",
          objectives=("latency",), options=_OPTIONS)
def celeritas(problem: Problem, ctx: SolveContext, R: int = 200, M: float = 0.25, order: str = "cpd") -> Schedule:
    """:func:`fuse`, :func:`adjusting_placement` on the coarse problem, expansion.

    Examples
    --------
    >>> import mapsched
    >>> p = mapsched.instances.load("topcuoglu2002")
    >>> mapsched.solve(p, "celeritas").makespan  # its 10 tasks fuse into one cluster
    127.0
    >>> mapsched.solve(p, "celeritas", R=1).makespan  # no fusion (HEFT: 80)
    81.0
    """
    _check_memory(problem, "celeritas")
    fused = fuse(problem, R, M, order)
    log = _fuse_log("celeritas", problem, fused, R, order)
    placement = adjusting_placement(fused.coarse, fused.order, ctx)
    if placement.hurried:
        placement = order_placement(fused.coarse, fused.order)
        log += "celeritas: time limit reached during Adjusting Placement; Order-Place's placement instead\n"
    else:
        log += f"celeritas: {_moves(placement)} moves between devices\n"
    return _expand("celeritas", problem, ctx, fused, placement, log)
