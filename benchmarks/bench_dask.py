"""split on a Dask LocalCluster of 1 and 2 worker processes; how far it would scale; Dask's overhead.

Three tables, on the 20-module stacks of ``bench_split.py`` (10 nodes a module,
cpu-t4-a100; single-channel, and 2- and 4-channel sdep and wdep solved by the
independent module solves, ``--window 0``, whose subproblems are independent):

1. split's wall time through ``mapsched.distributed`` on ``local:1`` and ``local:2``
   (one solver thread per subproblem either way; the median of ``--repeats`` runs, as
   runs of a second or two vary by 5-10% on 2 cores; a stack's runs on the two clusters
   are taken one after the other), side by side, with the Dask tasks the median run took
   (short subproblems go several to a task: split's ``chunk_seconds``);
   goal: 2 workers at least 1.7 times faster where there are enough subproblems.
2. From each subproblem's time measured on the worker (1-worker run), the makespan of
   the subproblem list on W = 1, 2, 4, ..., 64 workers by list scheduling (each
   subproblem, in submission order, to the worker free first), plus the rest of
   split's run (the median 1-worker run's wall time less the subproblems' total: warm start, module
   detection, DP, stitching, Dask's own cost), which does not shrink. Workers are
   warmed up (imports) by two small solves before any timing.
3. Dask's overhead per task through the same path (``DaskExecutor.submit`` with the
   problem shared once): no-op tasks, all in flight at once (per task) and one at a
   time (round trip); goal: under 10 ms. The CPU the tasks in flight take, of this process
   and of the workers, per task. And the CPU the idle cluster takes (this
   process, with the scheduler and the nannies, and the workers), which on 2 cores comes
   out of the solves.

    python benchmarks/bench_dask.py                    # the tables (10-20 minutes, on 2 cores: run alone)
    python benchmarks/bench_dask.py --modules 3 --nodes 5 --configs 1 --noop 20 --repeats 1  # a smoke run
    python benchmarks/bench_dask.py --chunk-seconds 0     # one subproblem a task, as before chunks

``--rounds R`` prints instead, per stack, R rounds of a fresh 1-worker cluster and then a
fresh 2-worker one (the faster of ``--repeats`` runs on each), with the CPU seconds of this
process (the client, and on ``local:N`` the scheduler and the nannies) over each run: the
spread of the speed-up on a machine whose speed drifts, and what Dask's side costs.

    python benchmarks/bench_dask.py --configs 4w --rounds 10 --repeats 2
"""

from __future__ import annotations

import argparse
import heapq
import statistics
import time
from concurrent.futures import Future

import mapsched
from mapsched.engine.dask import connect
from mapsched.generators import stack
from mapsched.split.milp_split import _solve_chunk

CONFIGS = {"1": (1, "sdep"), "2s": (2, "sdep"), "4s": (4, "sdep"), "2w": (2, "wdep"), "4w": (4, "wdep")}


def _timed(fn, *args, **kwargs):
    """``fn``'s result and its seconds on the worker."""
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t0


def _noop(shared):
    return None


class Timed:
    """An executor passing everything to ``inner`` and recording each task's seconds on its
    worker, and each subproblem's (split's tasks return them: :func:`_solve_chunk`)."""

    def __init__(self, inner):
        self.inner, self.seconds, self.subproblems = inner, [], []

    def __getattr__(self, name):  # share, slots, lost
        return getattr(self.inner, name)

    def submit(self, fn, *args, **kwargs):
        outer = Future()

        def unwrap(f):
            if f.cancelled():
                outer.cancel()
                outer.set_running_or_notify_cancel()
            elif f.exception() is not None:
                outer.set_exception(f.exception())
            else:
                result, seconds = f.result()
                self.seconds.append(seconds)
                if fn is _solve_chunk:
                    self.subproblems.extend(result[1])
                outer.set_result(result)

        self.inner.submit(_timed, fn, *args, **kwargs).add_done_callback(unwrap)
        return outer


def list_schedule(durations: list[float], workers: int) -> float:
    """Makespan of the jobs, in order, each to the worker free first."""
    free = [0.0] * workers
    for d in durations:
        heapq.heappush(free, heapq.heappop(free) + d)
    return max(free)


def _cpu_seconds() -> tuple[float, float]:
    """CPU seconds so far of this process (the client, and on ``local:N`` the scheduler and the
    nannies) and of its children (the workers of a LocalCluster, alive or not)."""
    import psutil  # a dependency of distributed

    me = psutil.Process()
    return time.process_time(), sum(sum(c.cpu_times()[:2]) for c in me.children(recursive=True))


def overhead(executor, problem, n: int, idle: float = 5.0) -> tuple[float, ...]:
    """Milliseconds per no-op task: all ``n`` in flight at once, and one at a time; the CPU
    milliseconds per task in flight of this process and of the workers; and the CPU
    milliseconds a second of the cluster idle (this process and the worker processes)."""
    shared = executor.share(problem)
    executor.submit(_noop, shared).result()  # the problem reaches the workers
    c0 = sum(_cpu_seconds())
    time.sleep(idle)
    quiet = 1e3 * (sum(_cpu_seconds()) - c0) / idle
    before, t0 = _cpu_seconds(), time.perf_counter()
    for f in [executor.submit(_noop, shared) for _ in range(n)]:
        f.result()
    flight = (time.perf_counter() - t0) / n
    mine, theirs = (1e3 * (b - a) / n for a, b in zip(before, _cpu_seconds()))
    t0 = time.perf_counter()
    for _ in range(n):
        executor.submit(_noop, shared).result()
    return 1e3 * flight, 1e3 * (time.perf_counter() - t0) / n, mine, theirs, quiet


def cluster_runs(p, channels: int, workers: int, repeats: int, opts: dict) -> list[tuple]:
    """``repeats`` split solves of ``p`` on a fresh ``local:workers`` cluster, after two small
    ones that warm the workers up: (wall seconds, result, :class:`Timed`, this process's CPU
    seconds) each, every result checked valid and equal to the first."""
    runs = []
    with connect(f"local:{workers}") as ex:
        # Workers import mapsched and the solvers on their first task: not part of any timing.
        for _ in range(2):
            mapsched.solve(stack(2, 4, seed=0), "split", executor=ex, **opts)
        for _ in range(repeats):
            timed = Timed(ex)
            c0, t0 = time.process_time(), time.perf_counter()
            r = mapsched.solve(p, "split", channels=channels, executor=timed, **opts)
            runs.append((time.perf_counter() - t0, r, timed, time.process_time() - c0))
            assert not mapsched.validate(p, r)
            assert r.makespan == runs[0][1].makespan  # the same schedule value, run after run
    return runs


def rounds(problems: dict, count: int, repeats: int, opts: dict) -> None:
    """The ``--rounds`` table: per stack, ``count`` rounds of a 1- then a 2-worker cluster."""
    print(f"## {count} rounds of a fresh 1-worker and then a fresh 2-worker cluster, the faster of {repeats} "
          "run(s) on each\n")
    print("| channels | round | 1 worker (s) | 2 workers (s) | speed-up | Dask tasks (1 / 2) "
          "| client CPU (s, 1 / 2) | subproblems' seconds (1 / 2) |")
    print("|---|---:|---:|---:|---:|---|---|---|")
    for k, p in problems.items():
        ratios = []
        for n in range(count):
            best = {w: min(cluster_runs(p, CONFIGS[k][0], w, repeats, opts), key=lambda x: x[0]) for w in (1, 2)}
            ratios.append(best[1][0] / best[2][0])
            print(f"| {k} | {n + 1} | {best[1][0]:.2f} | {best[2][0]:.2f} | {ratios[-1]:.2f}x "
                  f"| {len(best[1][2].seconds)} / {len(best[2][2].seconds)} | {best[1][3]:.2f} / {best[2][3]:.2f} "
                  f"| {sum(best[1][2].subproblems):.2f} / {sum(best[2][2].subproblems):.2f} |", flush=True)
        print(f"| {k} | median | | | {statistics.median(ratios):.2f}x | | | |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--modules", type=int, default=20)
    ap.add_argument("--nodes", type=int, default=10)
    ap.add_argument("--configs", default="1,2s,4s,2w,4w", help=f"of {', '.join(CONFIGS)}")
    ap.add_argument("--module-threads", type=int, default=1, help="solver threads per subproblem")
    ap.add_argument("--noop", type=int, default=500, help="no-op tasks for the overhead")
    ap.add_argument("--repeats", type=int, default=3, help="runs per stack and cluster; the median is reported")
    ap.add_argument("--chunk-seconds", type=float, default=None,
                    help="split's chunk_seconds (0: one subproblem a task; default: split's)")
    ap.add_argument("--rounds", type=int, default=0, help="print the rounds table instead (see above)")
    args = ap.parse_args()
    problems = {k: stack(args.modules, args.nodes, CONFIGS[k][0], CONFIGS[k][1], seed=args.modules)
                for k in args.configs.split(",")}
    opts = dict(module_threads=args.module_threads, window=0)
    if args.chunk_seconds is not None:
        opts["chunk_seconds"] = args.chunk_seconds
    if args.rounds:
        rounds(problems, args.rounds, args.repeats, opts)
        return
    wall, times, tasks, results = {}, {}, {}, {}
    # A stack's 1- and 2-worker runs follow each other, so that the ratio compares runs of the
    # same minute: this shared machine's speed drifts by 10-20% over a 10-minute benchmark.
    for k, p in problems.items():
        for w in (1, 2):
            runs = cluster_runs(p, CONFIGS[k][0], w, args.repeats, opts)
            wall[k, w], r, timed, _ = sorted(runs, key=lambda x: x[0])[len(runs) // 2]
            results[k, w], times[k, w], tasks[k, w] = r, timed.subproblems, len(timed.seconds)
    with connect("local:2") as ex:
        flight, trip, mine, theirs, idle = overhead(ex, next(iter(problems.values())), args.noop)

    chunks = "split's default" if args.chunk_seconds is None else f"{args.chunk_seconds:g}"
    print(f"## split through Dask, {args.modules} modules of {args.nodes} nodes, {args.module_threads} solver "
          f"thread(s) a subproblem, chunk_seconds {chunks}, the median of {args.repeats} run(s)\n")
    print("| channels | tasks | subproblems | Dask tasks (1 / 2 workers) | 1 worker (s) | 2 workers (s) | speed-up "
          "| makespans equal |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for k, p in problems.items():
        same = abs(results[k, 1].makespan - results[k, 2].makespan) <= 1e-9 * results[k, 1].makespan
        print(f"| {k} | {p.n} | {len(times[k, 2])} | {tasks[k, 1]} / {tasks[k, 2]} | {wall[k, 1]:.2f} "
              f"| {wall[k, 2]:.2f} | {wall[k, 1] / wall[k, 2]:.2f}x | {'yes' if same else 'no'} |")

    ws = [2 ** i for i in range(7)]
    print("\n## the measured subproblems list-scheduled on W workers (s), plus the rest of split's run\n")
    print("| channels | subproblems | rest (s) | " + " | ".join(f"W={w}" for w in ws) + " | speed-up at W=64 |")
    print("|---|---:|---:|" + "---:|" * (len(ws) + 1))
    for k in problems:
        d = times[k, 1]  # measured with one worker: no two subproblems contend for the cores
        rest = max(0.0, wall[k, 1] - sum(times[k, 1]))
        spans = [rest + list_schedule(d, w) for w in ws]
        print(f"| {k} | {len(d)} | {rest:.2f} | " + " | ".join(f"{s:.2f}" for s in spans)
              + f" | {spans[0] / spans[-1]:.1f}x |")

    print(f"\n## Dask's overhead per task (local:2, {args.noop} no-op tasks, the problem shared)\n")
    print("| all in flight (ms/task) | one at a time (ms/task) | CPU in flight, this process (ms/task) "
          "| CPU in flight, the workers (ms/task) | idle (CPU ms a second) |")
    print("|---:|---:|---:|---:|---:|")
    print(f"| {flight:.2f} | {trip:.2f} | {mine:.2f} | {theirs:.2f} | {idle:.0f} |")


if __name__ == "__main__":
    main()
