"""GiPH (issue 29): the shapes of the paper's Fig. 4, Table 6 and Fig. 6, its goal against HEFT,
and the shipped policy's transfer to mapsched's DNN presets. Every placement is run by the
work-conserving runtime model (:mod:`mapsched.scheduling.simulate`, GiPH's simulator); SLR is the makespan
over the critical path under least latencies (:func:`mapsched.bounds.critical_path_bound`).

Parts (``--parts``, default all):

- ``a`` Fig. 4: mean best-so-far SLR against search steps / |V| (0 .. 2) on ``--cases`` unseen
  cases of ``multi-diff`` (its test graphs on its test networks, 15-24 devices), at noise 0 and
  0.2, for ``giph`` (the policy), random sampling (best of the samples so far, one per step),
  random-task + EFT and HEFT's mapping (a constant), all from GiPH's seed-20 start placement;
  ``--variants`` adds policies of GiPH's variants (``mapsched train giph --variant ne|task-eft``,
  ``--mp-rounds 3``) as rows.
- ``b`` Table 6: better / equal / worse (%, relative tolerance 1e-6) of each row against each
  column on the cases of ``a`` with at most ``--max-exact-tasks`` tasks: giph, random, random-eft,
  heft and exact (given ``--exact-time`` s; its mapping run by the runtime model).
- ``c`` the goal: on ``--goal-cases`` unseen ``multi-diff`` cases, ``giph`` better than or equal to
  HEFT on at least 65% of them, with a mean SLR at or below HEFT's; rows for GiPH's protocol
  (random start, 2|V| steps), ``--ratio 4`` and ``--start heft`` (never worse than HEFT's mapping
  by construction: the search keeps the best placement seen, its start included), and for
  comparison ``peft``'s mapping run by the same model.
- ``d`` Fig. 6: GiPH's device-change sequence (``giph_adapt``: 20 devices, ``--changes`` changes,
  ``--adapt-graphs`` graphs): per change the mean SLR of GiPH's search (2n steps) warm-started
  from the previous placement (tasks on removed devices placed afresh, as ``solve(...,
  initial=...)`` does), from GiPH's seed-20 random start, and HEFT's mapping, all run by the
  runtime model, and the warm start's seconds; the goal: warm within 2% of scratch, under 1 s
  per change.
- ``e`` transfer to mapsched's DNN presets (vgg, resnet, inception, transformer on the default
  platform): SLR and the gap to mapsched's proved lower bound (:func:`mapsched.bounds.lower_bound`)
  for giph, heft and sa.

Prints markdown tables. Smoke run (seconds)::

    python benchmarks/bench_giph.py --cases 3 --goal-cases 3 --exact-time 1 --adapt-graphs 1 --changes 2 \\
        --presets vgg

Full run (the lead's, alone on the machine)::

    python benchmarks/bench_giph.py
"""

from __future__ import annotations

import argparse
import time
from itertools import product

import numpy as np

from mapsched import solve
from mapsched.bounds import critical_path_bound, lower_bound
from mapsched.generators import (
    giph_adapt,
    giph_experiment,
    giph_graph,
    giph_network,
    giph_problem,
    inception,
    resnet,
    transformer,
    vgg,
)
from mapsched.heuristics.random_search import random_owner
from mapsched.learned.giph import _Static, load_policy, search
from mapsched.learned.reinforce import one_thread
from mapsched.learned.starts import random_placement
from mapsched.scheduling.decoder import as_owner
from mapsched.scheduling.initial import initial_schedule
from mapsched.scheduling.simulate import simulate

PRESETS = {"vgg": vgg, "resnet": resnet, "inception": inception, "transformer": transformer}
POINTS = np.linspace(0, 2, 21)  # steps / n (n tasks)
TOL = 1e-6


def cases(count: int, seed: int) -> list:
    """``count`` (graph, network) pairs drawn without replacement from multi-diff's test split."""
    e = giph_experiment("multi-diff")
    pairs = list(product(e.test_graphs, e.test_networks))
    rng = np.random.default_rng(seed)
    return [pairs[k] for k in rng.choice(len(pairs), size=min(count, len(pairs)), replace=False)]


def run(p, owner, noise, rng):
    return simulate(p, owner, noise, rng, "giph") if noise else simulate(p, owner)


def random_trace(p, start, steps, noise, rng):
    """Best-so-far makespan of random sampling after 0 .. steps samples (sample 0: the start placement)."""
    out = [run(p, start, noise, rng).makespan]
    for _ in range(steps):
        out.append(min(out[-1], run(p, random_owner(p, rng)[:, 0], noise, rng).makespan))
    return out


def eft_trace(p, owner, steps, noise, rng):
    """Best-so-far makespan of random-task + EFT (GiPH's baseline, as ``random-eft``) from ``owner``."""
    owner = owner.copy()
    s = run(p, owner, noise, rng)
    out = [s.makespan]
    for _ in range(steps):
        end = np.zeros(p.n)
        for j in s.jobs:
            end[p.task_index[j.task]] = j.end
        i = int(rng.integers(p.n))
        can = np.flatnonzero(p.can_run[i])
        ready = np.zeros(len(can))
        for e in p.in_edges[i]:
            q = int(p.src[e])
            ready = np.maximum(ready, end[q] + p.link_latency[owner[q], can]
                               + p.nbytes[e] * p.link_ms_per_byte[owner[q], can])
        owner[i] = int(rng.choice(can)) if not p.pred[i] else int(can[np.argmin(ready + p.dur[i, can])])
        s = run(p, owner, noise, rng)
        out.append(min(out[-1], s.makespan))
    return out


def at(trace, n):
    """The trace at each point of POINTS (steps = point x n)."""
    return [trace[min(len(trace) - 1, int(round(x * n)))] for x in POINTS]


def part_a_b(a, nets, pairs):
    """``nets``: name -> policy network, searched in that order (``giph`` the shipped or --policy one)."""
    tables, finals = {}, {}
    for noise in (0.0, 0.2):
        sums = {k: np.zeros(len(POINTS)) for k in (*nets, "random", "random-eft", "heft")}
        for c, (g, nw) in enumerate(pairs):
            p = giph_problem(giph_graph(**g), giph_network(**nw))
            st, cp, steps = _Static(p), critical_path_bound(p), 2 * p.n
            start = random_placement(p, np.random.default_rng(20))
            traces = {}
            with one_thread():
                for name, net in nets.items():
                    traces[name] = search(st, net, start, steps, np.random.default_rng(a.seed + c), noise).history
            rng = np.random.default_rng(a.seed + c)
            traces["random"] = random_trace(p, start, steps, noise, rng)
            traces["random-eft"] = eft_trace(p, start, steps, noise, rng)
            h = solve(p, "heft")
            traces["heft"] = [run(p, h.mapping(), noise, rng).makespan]
            for k, t in traces.items():
                sums[k] += np.array(at(t, p.n)) / cp
            if noise == 0.0:
                finals[c] = {k: t[-1] / cp for k, t in traces.items()}
                if p.n <= a.max_exact_tasks and "b" in a.parts:
                    x = solve(p, "exact", time_limit=a.exact_time, seed=a.seed)
                    finals[c]["exact"] = simulate(p, x.mapping()).makespan / cp
        tables[noise] = {k: v / len(pairs) for k, v in sums.items()}
    if "a" in a.parts:
        for noise, t in tables.items():
            print(f"\n### Fig. 4 shape: mean best-so-far SLR, {len(pairs)} unseen multi-diff cases, noise {noise}\n")
            cols = [0, 2, 5, 10, 15, 20]
            print("| method | " + " | ".join(f"{POINTS[i]:.1f} n" for i in cols) + " |")
            print("|---|" + "---|" * len(cols))
            for k, v in t.items():
                print(f"| {k} | " + " | ".join(f"{v[i]:.3f}" for i in cols) + " |")
    if "b" in a.parts:
        small = [f for f in finals.values() if "exact" in f]
        names = [*nets, "random", "random-eft", "heft", "exact"]
        print(f"\n### Table 6 shape: row better / equal / worse than column (%), {len(small)} cases of "
              f"<= {a.max_exact_tasks} tasks, noise 0\n")
        print("| row \\ col | " + " | ".join(names) + " |")
        print("|---|" + "---|" * len(names))
        for r in names:
            cells = []
            for c in names:
                if r == c or not small:
                    cells.append("-")
                    continue
                x = np.array([f[r] for f in small])
                y = np.array([f[c] for f in small])
                eq = np.abs(x - y) <= TOL * np.maximum(x, y)
                cells.append(f"{100 * np.mean((x < y) & ~eq):.1f}/{100 * np.mean(eq):.1f}/"
                             f"{100 * np.mean((x > y) & ~eq):.1f}")
            print(f"| {r} | " + " | ".join(cells) + " |")


def part_c(a, policy):
    pairs = [giph_problem(giph_graph(**g), giph_network(**nw)) for g, nw in cases(a.goal_cases, a.seed + 1)]
    cps = np.array([critical_path_bound(p) for p in pairs])
    heft = np.array([simulate(p, solve(p, "heft").mapping()).makespan for p in pairs]) / cps
    print(f"\n### Goal: shipped giph against heft on {len(pairs)} unseen multi-diff cases (15-24 devices)\n")
    print("| giph options | giph <= heft | giph mean SLR | heft mean SLR | giph s per case | goal (65%, mean) |")
    print("|---|---|---|---|---|---|")
    for label, opts in (("GiPH's protocol: random start, 2n steps", {"start": "random"}),
                        ("--ratio 4", {"ratio": 4.0, "start": "random"}), ("--start heft", {"start": "heft"}),
                        ("defaults (best of heft and peft)", {})):
        t = time.perf_counter()
        x = np.array([solve(p, "giph", seed=a.seed + c, policy=policy, **opts).makespan
                      for c, p in enumerate(pairs)]) / cps
        seconds = (time.perf_counter() - t) / len(pairs)
        ok = np.mean(x <= heft * (1 + TOL))
        met = ok >= 0.65 and x.mean() <= heft.mean()
        print(f"| {label} | {100 * ok:.1f}% | {x.mean():.3f} | {heft.mean():.3f} | {seconds:.2f} | "
              f"{'met' if met else 'not met'} |", flush=True)
    # For comparison, a list scheduler with a look-ahead, its mapping run by the same model.
    t = time.perf_counter()
    x = np.array([simulate(p, solve(p, "peft").mapping()).makespan for p in pairs]) / cps
    seconds = (time.perf_counter() - t) / len(pairs)
    print(f"| (`peft`, not learned) | {100 * np.mean(x <= heft * (1 + TOL)):.1f}% | {x.mean():.3f} | "
          f"{heft.mean():.3f} | {seconds:.2f} | - |", flush=True)


def part_d(a, net):
    nets, changes, graphs = giph_adapt(a.changes)
    graphs = graphs[:a.adapt_graphs]
    rows = np.zeros((a.changes, 4))

    def place(q, owner, seed):
        """GiPH's search (2n steps) from ``owner``: its best placement and runtime-model makespan."""
        with one_thread():
            res = search(_Static(q), net, owner, 2 * q.n, np.random.default_rng(seed))
        return {q.task_names[i]: q.device_names[d] for i, d in enumerate(res.owner)}, res.makespan

    for g in graphs:
        p = giph_problem(g, nets[0])
        prev, _ = place(p, random_placement(p, np.random.default_rng(20)), a.seed)
        for k, change in enumerate(changes):
            q = change.apply(p, giph_problem(g, nets[k + 1]))
            t = time.perf_counter()
            # the previous placement, tasks on removed devices placed afresh (what solve(initial=...) does)
            warm_map, warm = place(q, as_owner(q, initial_schedule(q, prev).schedule.mapping())[:, 0], a.seed + k)
            rows[k, 3] += time.perf_counter() - t
            _, cold = place(q, random_placement(q, np.random.default_rng(20)), a.seed + k)
            heft = simulate(q, solve(q, "heft").mapping()).makespan
            rows[k, :3] += np.array([warm, cold, heft]) / critical_path_bound(q)
            p, prev = q, warm_map
    rows /= len(graphs)
    print(f"\n### Fig. 6 shape: {a.changes} device changes, {len(graphs)} graphs (mean SLR)\n")
    print("| change | devices | giph warm | giph scratch | heft | warm / scratch | warm s |")
    print("|---|---|---|---|---|---|---|")
    for k, change in enumerate(changes):
        what = f"-{len(change.removed)}" if change.removed else f"+{len(change.added)}"
        print(f"| {k + 1} {what} | {len(nets[k + 1].present)} | {rows[k, 0]:.3f} | {rows[k, 1]:.3f} | "
              f"{rows[k, 2]:.3f} | {rows[k, 0] / rows[k, 1]:.3f} | {rows[k, 3]:.2f} |")
    within = np.mean(rows[:, 0] <= 1.02 * rows[:, 1])
    print(f"\nwarm within 2% of scratch on {100 * within:.0f}% of changes; mean {rows[:, 3].mean():.2f} s per "
          "change (goal: within 2%, under 1 s)")


def part_e(a, policy):
    print("\n### Transfer to mapsched's DNN presets (default platform): SLR and gap to the proved bound\n")
    print("| preset | tasks | devices | method | makespan | SLR | gap to bound |")
    print("|---|---|---|---|---|---|---|")
    for name in a.presets.split(","):
        p = PRESETS[name]()
        cp, bound = critical_path_bound(p), lower_bound(p).value
        for method, kw in (("giph", {"policy": policy}), ("heft", {}), ("sa", {})):
            r = solve(p, method, seed=a.seed, **kw)
            ms = simulate(p, r.mapping()).makespan
            print(f"| {name} | {p.n} | {p.m} | {method} | {ms:.4g} | {ms / cp:.3f} | "
                  f"{100 * (ms - bound) / bound:.1f}% |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", default="abcde", help="which of a b c d e to run (default all)")
    ap.add_argument("--policy", default="", help="a policy file (default: the shipped one)")
    ap.add_argument("--variants", default="", help="more rows for parts a and b, NAME=POLICY.pt,... (e.g. "
                    "giph-ne=ne.pt from 'mapsched train giph --variant ne -o ne.pt')")
    ap.add_argument("--cases", type=int, default=100, help="unseen cases for parts a and b")
    ap.add_argument("--goal-cases", type=int, default=300, help="unseen cases for part c")
    ap.add_argument("--max-exact-tasks", type=int, default=20)
    ap.add_argument("--exact-time", type=float, default=10.0, help="seconds per exact solve (part b)")
    ap.add_argument("--changes", type=int, default=20, help="device changes (part d)")
    ap.add_argument("--adapt-graphs", type=int, default=10, help="graphs of the device-change run (part d)")
    ap.add_argument("--presets", default="vgg,resnet,inception,transformer", help="part e")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    net, _ = load_policy(a.policy)
    if "a" in a.parts or "b" in a.parts:
        extra = dict(item.split("=", 1) for item in a.variants.split(",") if item)
        part_a_b(a, {"giph": net, **{k: load_policy(v)[0] for k, v in extra.items()}}, cases(a.cases, a.seed))
    if "c" in a.parts:
        part_c(a, a.policy)
    if "d" in a.parts:
        part_d(a, net)
    if "e" in a.parts:
        part_e(a, a.policy)


if __name__ == "__main__":
    main()
