"""What moves a measured schedule on two emulated devices, beside the schedule itself.

``allocator``: runs of one schedule with glibc's malloc thresholds left to move (as
before the harness fixed them) or fixed (:func:`mapsched.harness.allocator.steady`),
each run's values freed before the next (as :func:`~mapsched.harness.execute` does now)
or all kept alive until the end (as it did before). Inception (the bench_harness size) is
profiled on ``cpu:0,cpu:1``, then its every-task-on-``cpu:0`` schedule for 4 inputs is
launched ``--runs`` times in a row, ``--rounds`` times, through the executor's own
launch. Printed per setting: the fastest, median and slowest run (ms), the share of
runs more than 20% above the fastest, and the medians of the fastest and slowest round
(what an execution of ``--runs`` timed runs would report).

``pinning``: whole executions (:func:`~mapsched.harness.execute`, its default runs) with
each device's worker thread pinned to its own core (:func:`mapsched.harness.devices.pin`,
as ``execute`` does now) or left to the scheduler, with fx tasks and with ``jit`` tasks
(which run without the interpreter lock). The transformer (the bench_harness size) is
profiled on ``cpu:0,cpu:1``, then its ``bheft``, ``bmet``, ``bgreedy`` and
``single-best`` schedules for 4 inputs are each executed ``--executions`` times. Printed
per setting: over the schedules, the mean of (median execution / fastest execution) and
of (slowest / fastest).

``executor``: what the executor itself adds between a device's jobs. The random-wired
network (the bench_harness size, 32 tasks of about 0.1 ms) is profiled on
``cpu:0,cpu:1`` with fx and with ``jit`` tasks, then its ``single-best`` and ``heft``
latency schedules are each executed ``--executions`` times. Printed per setting and
schedule: the median makespan (ms) over the executions, and the median and mean gap
between the end of a job and the start of the next on its device (µs, every run's
median run pooled): the loop's own Python, and on two devices the waits for the other.

``overlap``: whether jobs slow each other when both devices run. The same random-wired
network, profiled with fx and with ``jit`` tasks; its ``single-best``, ``heft`` and
``cpop`` latency schedules are each executed ``--executions`` times. Printed per setting
and schedule: the median of each job's measured time over its profiled latency, for the
jobs that more than half overlap a job of the other device, and for the others.

``handoff``: what a job waiting for another device's job pays. The same random-wired
network and settings; its ``heft`` and ``cpop`` latency schedules are each executed
``--executions`` times. Printed per setting and schedule: the profiled link latency (the
copy's latency and the hand-off that ``profile`` measures with empty jobs), and, over
the cross-device dependencies whose consumer's device was idle before the input came,
the median and 90th percentile of the consumer's start less the producer's end.

``threads``: whether two threads of one process slow each other where the interpreter
lock is released. A frozen TorchScript trace of two 32-channel 3x3 convolutions (a batch
of 2 of 32x32 images: about 0.5 ms a call) is called in a loop for 4 s, on one core
alone, then in two threads of one process pinned to the two cores, then in two processes
pinned to the two cores. Printed: the calls of each loop, and their mean over the calls
alone.

Each setting runs in a fresh process, one after the other.

    python benchmarks/bench_steady.py --runs 20 --rounds 5 --executions 8
    python benchmarks/bench_steady.py --what executor --executions 20
    python benchmarks/bench_steady.py --what overlap --executions 10
    python benchmarks/bench_steady.py --what threads
    python benchmarks/bench_steady.py --what handoff --executions 10
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

ALLOCATOR = {"moving, kept": (False, True), "moving, freed": (False, False),
             "fixed, kept": (True, True), "fixed, freed": (True, False)}
PINNING = {"fx, free": ("none", False), "fx, pinned": ("none", True),
           "jit, free": ("jit", False), "jit, pinned": ("jit", True)}
EXECUTOR = {"fx": "none", "jit": "jit"}


def profiled(name: str, size: dict, inputs: int = 1, compile: str = "none", force: bool = False):
    """Example model ``name`` at ``size`` traced, and profiled on ``cpu:0,cpu:1`` (one thread
    each) with ``compile`` tasks (``force``: kept however noisy); its problem (throughput
    over ``inputs`` where more than one) and ``inputs`` random inputs."""
    import torch

    import mapsched
    from mapsched.harness import profile, trace
    from mapsched.harness.models import FACTORIES

    torch.set_num_threads(1)
    model = FACTORIES[name](**size)
    example = torch.randn(model.input_shape, generator=torch.Generator().manual_seed(0))
    graph = trace(model, example)
    p = profile(model, example, ["cpu:0", "cpu:1"], [1, 2, 4], compile=compile, force=force)
    if inputs > 1:
        p = p.with_objective(mapsched.Objective("throughput", inputs))
    x = torch.randn(inputs, *model.input_shape[1:], generator=torch.Generator().manual_seed(1))
    return graph, p, x


def consecutive(measured, devices):
    """Each two jobs that follow each other on a device of a measured schedule."""
    for d in devices:
        line = sorted((j for j in measured.jobs if j.device == d), key=lambda j: j.start)
        yield from zip(line, line[1:])


def allocator_child(fixed: bool, keep: bool, runs: int, rounds: int) -> list[float]:
    import gc

    import numpy as np

    from mapsched.harness import allocator
    from mapsched.harness.calibrate import _decode
    from mapsched.harness.execute import _Devices, _launch, _plan

    if not fixed:
        allocator._state.append(False)  # steady() then does nothing in this process
    # With moving thresholds the profile is as noisy as the runs under study, and refused
    # at times; only the runs are measured here.
    graph, p, x = profiled("inception", {"width": 16, "image": 64}, inputs=4, force=True)
    jobs = list(_decode(p, np.zeros(p.n, dtype=np.int64), "only cpu:0").jobs)
    walls = []
    for _ in range(rounds):
        devs = _Devices.open(graph, p, jobs, (x,), "none")
        plan = _plan(graph, jobs, devs)
        kept = []
        gc.disable()
        for _ in range(runs + 1):
            done, wall = _launch(jobs, (x,), devs, plan)
            walls.append(wall)
            if keep:
                kept.append(done)
            del done
        walls.pop(-runs - 1)  # each round's first run warms up
        gc.enable()
    return walls


def pinning_child(compile: str, pinned: bool, executions: int) -> list[list[float]]:
    import importlib

    import mapsched
    from mapsched.harness import execute

    if not pinned:  # execute then leaves the worker threads where the scheduler puts them
        importlib.import_module("mapsched.harness.execute").pin = lambda names: {}
        importlib.import_module("mapsched.harness.overheads").pin = lambda names: {}
    graph, p, x = profiled("transformer", {"d_model": 256, "tokens": 64}, inputs=4, compile=compile)
    made = [mapsched.solve(p, method) for method in ("bheft", "bmet", "bgreedy", "single-best")]
    return [[execute(graph, p, s, x).makespan for _ in range(executions)] for s in made]


def random_wired(compile: str, executions: int, methods: tuple[str, ...]):
    """The random-wired network profiled with ``compile`` tasks, and per latency schedule of
    ``methods`` the measured schedules of ``executions`` executions."""
    import mapsched
    from mapsched.harness import execute

    graph, p, x = profiled("random-wired", {"n": 12, "width": 32, "image": 32}, compile=compile)
    made = {method: mapsched.solve(p, method) for method in methods}
    return p, {method: [execute(graph, p, s, x).measured for _ in range(executions)] for method, s in made.items()}


def executor_child(compile: str, executions: int) -> dict[str, list[float]]:
    import numpy as np

    p, runs = random_wired(compile, executions, ("single-best", "heft"))
    out = {}
    for method, measured in runs.items():
        gaps = []
        for m in measured:
            gaps += [b.start - a.end for a, b in consecutive(m, p.device_names)]
        out[method] = [float(np.median([m.makespan for m in measured])), 1000 * float(np.median(gaps)),
                       1000 * float(np.mean(gaps))]
    return out


def overlap_child(compile: str, executions: int) -> dict[str, list[float]]:
    import numpy as np

    p, runs = random_wired(compile, executions, ("single-best", "heft", "cpop"))
    out = {}
    for method, measured in runs.items():
        alone, together = [], []
        for m in measured:
            jobs = [j for j in m.jobs if j.end > j.start]
            for j in jobs:
                span, latency = j.end - j.start, p.tasks[p.task_index[j.task]].latency[j.device][len(j.inputs)]
                if latency > 0:  # a task of views only profiles at 0
                    shared = sum(max(0.0, min(j.end, o.end) - max(j.start, o.start))
                                 for o in jobs if o.device != j.device)
                    (together if shared > span / 2 else alone).append(span / latency)
        out[method] = [len(alone), float(np.median(alone)) if alone else float("nan"),
                       len(together), float(np.median(together)) if together else float("nan")]
    return out


def handoff_child(compile: str, executions: int) -> dict[str, list[float]]:
    import numpy as np

    p, runs = random_wired(compile, executions, ("heft", "cpop"))
    out = {}
    for method, measured in runs.items():
        waited = []
        for m in measured:
            job = {j.task: j for j in m.jobs}
            before = {b.task: a for a, b in consecutive(m, p.device_names)}  # each job's predecessor there
            for e in p.edges:
                a, b = job[e.src], job[e.dst]
                prev = before.get(b.task)
                if a.device != b.device and a.end > a.start and (prev is None or prev.end < a.end):
                    waited.append(b.start - a.end)
        out[method] = [1000 * max(link.latency for link in p.system.links), len(waited),
                       1000 * float(np.median(waited)), 1000 * float(np.percentile(waited, 90))]
    return out


def threads_child(cores: list[int], seconds: float = 4.0) -> list[int]:
    import os
    import threading
    import time

    import torch

    torch.set_num_threads(1)
    net = torch.nn.Sequential(torch.nn.Conv2d(32, 32, 3, padding=1), torch.nn.ReLU(),
                              torch.nn.Conv2d(32, 32, 3, padding=1)).eval()
    x = torch.randn(2, 32, 32, 32)
    with torch.inference_mode():
        fn = torch.jit.freeze(torch.jit.trace(net, x))
        for _ in range(5):
            fn(x)
    calls: list[int] = []

    def loop(core: int) -> None:
        os.sched_setaffinity(0, {core})
        torch.set_num_threads(1)
        n, t0 = 0, time.perf_counter()
        with torch.inference_mode():
            while time.perf_counter() - t0 < seconds:
                fn(x)
                n += 1
        calls.append(n)

    threads = [threading.Thread(target=loop, args=(c,)) for c in cores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return calls


def run_child(args: argparse.Namespace, what: str, name: str) -> object:
    out = subprocess.run([sys.executable, __file__, "--child", what, name, "--runs", str(args.runs), "--rounds",
                          str(args.rounds), "--executions", str(args.executions)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--what", default="both",
                    choices=["allocator", "pinning", "both", "executor", "overlap", "threads", "handoff"])
    ap.add_argument("--runs", type=int, default=20, help="timed runs a round (allocator)")
    ap.add_argument("--rounds", type=int, default=5, help="rounds (allocator)")
    ap.add_argument("--executions", type=int, default=8, help="executions of each schedule (pinning)")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        what, name = args.child
        if what == "allocator":
            print(json.dumps(allocator_child(*ALLOCATOR[name], args.runs, args.rounds)))
        elif what == "executor":
            print(json.dumps(executor_child(EXECUTOR[name], args.executions)))
        elif what == "overlap":
            print(json.dumps(overlap_child(EXECUTOR[name], args.executions)))
        elif what == "handoff":
            print(json.dumps(handoff_child(EXECUTOR[name], args.executions)))
        elif what == "threads":
            print(json.dumps(threads_child([int(c) for c in name.split(",")])))
        else:
            print(json.dumps(pinning_child(*PINNING[name], args.executions)))
        return
    import numpy as np

    if args.what in ("allocator", "both"):
        print("| malloc thresholds, runs' values | runs | fastest (ms) | median (ms) | slowest (ms) "
              "| runs > 1.2x fastest | round medians (ms) |")
        print("|---|---:|---:|---:|---:|---:|---|")
        for name in ALLOCATOR:
            w = np.array(run_child(args, "allocator", name))
            rounds = np.median(w.reshape(args.rounds, args.runs), axis=1)
            print(f"| {name} | {len(w)} | {w.min():.1f} | {np.median(w):.1f} | {w.max():.1f} "
                  f"| {np.mean(w > 1.2 * w.min()):.0%} | {rounds.min():.1f} to {rounds.max():.1f} |", flush=True)
        print()
    if args.what in ("pinning", "both"):
        print("| tasks, worker threads | executions | median / fastest | slowest / fastest "
              "| fastest (ms, by schedule) |")
        print("|---|---:|---:|---:|---|")
        for name in PINNING:
            per = [np.array(v) for v in run_child(args, "pinning", name)]
            print(f"| {name} | {sum(len(v) for v in per)} | {np.mean([np.median(v) / v.min() for v in per]):.3f} "
                  f"| {np.mean([v.max() / v.min() for v in per]):.3f} | {', '.join(f'{v.min():.2f}' for v in per)} |",
                  flush=True)

    if args.what == "executor":
        print("| tasks | schedule | makespan (ms, median execution) | gap between jobs, median (us) | mean (us) |")
        print("|---|---|---:|---:|---:|")
        for name in EXECUTOR:
            for method, (span, median, mean) in run_child(args, "executor", name).items():
                print(f"| {name} | {method} | {span:.3f} | {median:.1f} | {mean:.1f} |", flush=True)
    if args.what == "handoff":
        print("| tasks | schedule | profiled link latency (µs) | waits | start - producer's end, median (µs) "
              "| 90th percentile (µs) |")
        print("|---|---|---:|---:|---:|---:|")
        for name in EXECUTOR:
            for method, (link, n, median, p90) in run_child(args, "handoff", name).items():
                print(f"| {name} | {method} | {link:.1f} | {n} | {median:.1f} | {p90:.1f} |", flush=True)
    if args.what == "threads":
        alone = run_child(args, "threads", "1")
        both = run_child(args, "threads", "0,1")
        pair = [subprocess.Popen([sys.executable, __file__, "--child", "threads", str(c)], stdout=subprocess.PIPE,
                                 text=True) for c in (0, 1)]
        apart = [json.loads(proc.communicate()[0].strip().splitlines()[-1])[0] for proc in pair]
        print("| setting | calls in 4 s | mean / alone |")
        print("|---|---|---:|")
        for name, calls in (("one thread alone", alone), ("two threads, one process", both),
                            ("two processes", apart)):
            print(f"| {name} | {', '.join(map(str, calls))} | {np.mean(calls) / alone[0]:.3f} |", flush=True)
    if args.what == "overlap":
        print("| tasks | schedule | jobs mostly alone | measured / profiled | jobs mostly beside the other device "
              "| measured / profiled |")
        print("|---|---|---:|---:|---:|---:|")
        for name in EXECUTOR:
            for method, (n1, r1, n2, r2) in run_child(args, "overlap", name).items():
                print(f"| {name} | {method} | {n1} | {r1:.3f} | {n2} | {r2:.3f} |", flush=True)


if __name__ == "__main__":
    main()
