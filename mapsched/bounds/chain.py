"""The seed paper's lower bound over a chain of modules (section IV-B2), made sound in general.

Split a task set X into M (its part in the first module) and G2 (the rest), joined by
channel edges from outputs O in M to inputs I in G2. In any schedule:

* let o* be the output that finishes last, at f*, feeding input w*. Every task of
  ``M_out`` (M's tasks that precede some output) ends by f*, and every task of
  ``dep(w*)`` (w* and what depends on it, in G2) starts after f*, so
  ``C >= OPT(M_out) + min_w OPT(dep(w))``;
* let w' be the input that starts first, at s*, fed by output o'. Every task of
  ``pre(o')`` (o' and what it depends on, in M) ends by s*, and every task of
  ``G2_in`` (G2's tasks after some input) starts after s*, so
  ``C >= OPT(pre(o')) + OPT(G2_in) >= min_o OPT(pre(o)) + OPT(G2_in)``.

On single-channel and sdep chains ``M_out = M`` and ``G2_in = G2``, which is the
paper's statement; on wdep chains a module may end with a task no channel leaves
from, and only the restricted sets keep the bound sound. Restricting a schedule to
a subset of tasks leaves a schedule of that subset, so OPT of a subset is bounded
by the proved bound of an exact solve of it; the recursion runs down the chain on
G2 and the dependency sets, memoised. With batched throughput, the bound uses
the L - b + 1 argument of the paper; here only latency is covered.
"""

from __future__ import annotations

import time

import networkx as nx

from ..problem import Problem
from .simple import critical_path_bound, work_bound

__all__ = ["chain_bound"]


def chain_bound(problem: Problem, chain=None, time_limit: float = 60.0, module_time_limit: float = 2.0) -> float:
    """Lower bound on the optimal makespan by the chain recursion.

    Parameters
    ----------
    problem : Problem
        A latency problem.
    chain : ModuleChain, optional
        Default: :func:`mapsched.split.detect_modules` with the fewest channels that split the graph.
    time_limit : float
        Seconds in all; past it, subsets get only the simple bounds (still sound).
    module_time_limit : float
        Seconds for each exact solve of a subset within one module.
    """
    from ..solve import solve
    from ..split.milp_split import _pick_chain

    p = problem
    if p.L != 1:
        raise ValueError("chain_bound covers the latency objective")
    chain = chain or _pick_chain(p, 0)
    T = len(chain.modules)
    module_of = {i: t for t, mod in enumerate(chain.modules) for i in mod}
    g = p.graph
    deadline = time.perf_counter() + time_limit
    exact_memo: dict[frozenset, float] = {}
    memo: dict[tuple[frozenset, int], float] = {}

    def simple(x: frozenset) -> float:
        sub = p.restrict(sorted(x))
        return max(critical_path_bound(sub), work_bound(sub))

    def exact(x: frozenset) -> float:
        """Proved bound of a subset inside one module (an exact solve, or the simple bounds)."""
        if not x:
            return 0.0
        if x not in exact_memo:
            left = deadline - time.perf_counter()
            if left <= 0.05:
                exact_memo[x] = simple(x)
            else:
                r = solve(p.restrict(sorted(x)), "exact", time_limit=min(module_time_limit, left), threads=1)
                exact_memo[x] = max(float(r.lower_bound), simple(x))
        return exact_memo[x]

    def bound(x: frozenset, s: int) -> float:
        """Lower bound of task set x, all of whose tasks lie in modules s and later."""
        if not x:
            return 0.0
        while s < T and not (x & set(chain.modules[s])):
            s += 1
        key = (x, s)
        if key in memo:
            return memo[key]
        m1 = frozenset(i for i in x if module_of[i] == s)
        g2 = x - m1
        if not g2:
            memo[key] = exact(m1)
            return memo[key]
        cross = [(int(p.src[e]), int(p.dst[e])) for e in range(p.E)
                 if int(p.src[e]) in m1 and int(p.dst[e]) in g2]
        best = max(exact(m1), bound(g2, s + 1))
        if cross and time.perf_counter() < deadline:
            outs = {a for a, _ in cross}
            ins = {b for _, b in cross}
            sub_m, sub_g = g.subgraph(m1), g.subgraph(g2)
            m_out = frozenset(set().union(*(nx.ancestors(sub_m, o) | {o} for o in outs)))
            g_in = frozenset(set().union(*(nx.descendants(sub_g, w) | {w} for w in ins)))
            dep = min(bound(frozenset(nx.descendants(sub_g, w) | {w}), s + 1) for w in ins)
            pre = min(exact(frozenset(nx.ancestors(sub_m, o) | {o})) for o in outs)
            best = max(best, exact(m_out) + dep, bound(g_in, s + 1) + pre)
        memo[key] = best
        return best

    return max(bound(frozenset(range(p.n)), 0), critical_path_bound(p), work_bound(p))
