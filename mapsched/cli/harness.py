"""The PyTorch harness's commands: ``profile`` and ``trace`` a model into a problem, ``run`` a
schedule of it for real, ``calibrate`` a profiled problem to real runs. torch and the harness are
imported where a command runs, never for ``--help``."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from mapsched.checks import count_arg, integers, number_arg
from mapsched.cli.common import MAX_INT, MAX_RUNS, MAX_TORCH_SEED, fmt, load_problem, table
from mapsched.cli.torch_model import (
    checked_input,
    load_harness,
    load_model,
    model_files,
    model_input,
    model_inputs,
    model_runs,
    set_threads,
)
from mapsched.errors import HarnessError, OptionError, ProblemError, shown
from mapsched.model.files import check_output
from mapsched.model.problem import COMPILE, MAX_BATCH, MAX_DEVICES, Objective, Problem
from mapsched.model.schedule import Schedule
from mapsched.solve import MAX_THREADS

_MODEL_HELP = "MODULE:FACTORY building an nn.Module, e.g. mapsched.harness.models:resnet"
_SHAPE_HELP = "input shape with a batch of 1 first, e.g. 1,3,224,224 (default: the model's input_shape)"


def add_profile(sub: Any) -> None:
    """The ``profile`` command's parser."""
    pr = sub.add_parser(
        "profile", help="trace a PyTorch model and time it on the devices (needs torch)",
        description="Trace a model, time every task on every device and batch size, and write the problem. Each "
                    "measurement's spread (1.4826 x MAD / median of its timed passes, a robust coefficient of "
                    "variation) is checked: over --max-spread (and over 0.05 ms of scatter) the device and batch "
                    "size are timed again, up to --retries extra rounds, each task keeping its steadiest round, with "
                    "a warning on stderr; measurements still over it refuse the file (exit 2) unless --force. "
                    "--check prints the spreads and the worst measurements; without -o it writes nothing and exits "
                    "1 when some measurement is unstable, 0 otherwise.")
    pr.add_argument("model", help=_MODEL_HELP)
    pr.add_argument("--input-shape", help=_SHAPE_HELP)
    pr.add_argument("--devices", help="comma-separated: cpu, cuda:I, or emulated cpu:K (default: all present)")
    pr.add_argument("--batch-sizes", default="1", help="comma-separated batch sizes to time (default 1)")
    pr.add_argument("--batch", type=count_arg(1, MAX_BATCH), default=1,
                    help="inputs L; above 1 the objective is throughput")
    pr.add_argument("--no-cluster", action="store_true", help="one task per op (no conv-BN-ReLU fusion)")
    pr.add_argument("--warmup", type=count_arg(0, MAX_RUNS), default=2)
    pr.add_argument("--repeats", type=count_arg(1, MAX_RUNS), default=5,
                    help="timed runs per measurement (median kept)")
    pr.add_argument("--max-spread", type=number_arg(), default=0.25,
                    help="largest spread (robust coefficient of variation) a measurement may have (default 0.25)")
    pr.add_argument("--retries", type=count_arg(0, MAX_RUNS), default=2,
                    help="extra rounds of --repeats runs to re-measure noisy measurements (default 2)")
    pr.add_argument("--force", action="store_true", help="write the file even with measurements over --max-spread")
    pr.add_argument("--check", action="store_true",
                    help="report how stable the measurements were; with no -o, write nothing (exit 1 if unstable)")
    pr.add_argument("--threads", type=count_arg(1, MAX_THREADS), default=None,
                    help="torch intra-op threads (default: PyTorch's, or with several emulated devices "
                         "cpu:K the cores shared among them); recorded, and 'run' needs the same")
    pr.add_argument("--interop-threads", type=count_arg(1, MAX_THREADS), default=None,
                    help="torch inter-op threads (default: PyTorch's); recorded, and 'run' needs the same")
    pr.add_argument("--no-overheads", action="store_true",
                    help="do not measure the executor's per-job and cross-device overheads into the times")
    pr.add_argument("--compile", choices=COMPILE, default="none",
                    help="how each task runs: none (fx, op by op), jit (a frozen TorchScript trace per batch "
                         "size) or cuda-graph (that trace as a CUDA graph on a GPU); recorded, and 'run' needs "
                         "the same")
    pr.add_argument("--calibrate", action=argparse.BooleanOptionalAction, default=True,
                    help="then run a few schedules for real and fit the overheads to them, as 'mapsched "
                         "calibrate' with its defaults does (default); --no-calibrate writes the profiled times")
    pr.add_argument("--contention", action="store_true",
                    help="also time copies alone and side by side, and write which links carry one at a time "
                         "(concurrency 1, duplex) and which devices' copies occupy them (copy_engines 0)")
    pr.add_argument("-o", "--output", help="the problem file to write (required unless --check)")
    pr.set_defaults(handler=cmd_profile)


def add_trace(sub: Any) -> None:
    """The ``trace`` command's parser."""
    tr = sub.add_parser("trace", help="trace a PyTorch model's training step op by op in fake mode (needs torch)",
                        description="Trace one training step (forward, cross-entropy loss, backward, SGD update) "
                                    "with make_fx on fake tensors, so no weights, data or memory are needed, and cost "
                                    "every aten op with the roofline of each device of the system preset.")
    tr.add_argument("model", help="MODULE:FACTORY building an nn.Module, e.g. mapsched.harness.models:gpt_train12")
    tr.add_argument("--train", action=argparse.BooleanOptionalAction, default=True,
                    help="the whole training step (default); --no-train: the forward pass alone")
    tr.add_argument("--input-shape", help="the whole batch's input shape, e.g. 8,128 (default: the model's)")
    tr.add_argument("--batch-size", type=count_arg(1, MAX_INT), default=None,
                    help="replace the input shape's first dimension")
    tr.add_argument("--system", default="cpu-t4-a100", help="system preset")
    tr.add_argument("-o", "--output", required=True)
    tr.set_defaults(handler=cmd_trace)


def _run_arguments(parser: argparse.ArgumentParser, schedule: bool) -> None:
    """The arguments that ``run`` (with ``schedule``) and ``calibrate`` share."""
    parser.add_argument("model", help=_MODEL_HELP)
    parser.add_argument("problem", help="the problem that 'mapsched profile' wrote")
    if schedule:
        parser.add_argument("schedule")
    parser.add_argument("--input-shape", help=_SHAPE_HELP)
    parser.add_argument("--no-cluster", action="store_true", help="as given to 'mapsched profile'")
    parser.add_argument("--seed", type=count_arg(0, MAX_TORCH_SEED), default=0,
                        help="seed of the random inputs (and schedules)")
    parser.add_argument("--threads", type=count_arg(1, MAX_THREADS), default=None,
                        help="torch intra-op threads (default: those the problem was profiled with; "
                             "others are refused)")
    parser.add_argument("--interop-threads", type=count_arg(1, MAX_THREADS), default=None,
                        help="torch inter-op threads; must be those the problem was profiled with")
    parser.add_argument("--warmup", type=count_arg(0, MAX_RUNS), default=1)
    parser.add_argument("--repeats", type=count_arg(1, MAX_RUNS), default=None,
                        help="timed runs, the median used (default: at least 3, and up to 50 until they "
                             "add up to 100 ms)")
    parser.add_argument("--compile", choices=COMPILE, default=None,
                        help="how each task runs (default: as profiled); must be the profile's")


def add_run(sub: Any) -> None:
    """The ``run`` command's parser."""
    rn = sub.add_parser("run", help="execute a schedule of a profiled model for real (needs torch)")
    _run_arguments(rn, schedule=True)
    rn.add_argument("-o", "--output",
                    help="write the measured jobs as a schedule file: a timeline, not a valid schedule (its jobs "
                         "last what they measured, and its makespan is the run's wall time, to the last output "
                         "gathered, past the last job's end)")
    rn.set_defaults(handler=cmd_run)


def add_calibrate(sub: Any) -> None:
    """The ``calibrate`` command's parser."""
    cb = sub.add_parser(
        "calibrate", help="fit a profiled problem's overheads to real runs of a few schedules (needs torch)",
        description="Run a handful of schedules (HEFT, each device alone, MET, CPOP, random mappings; for "
                    "throughput bheft, bmet and bgreedy in place of HEFT, MET and CPOP) for real, fit one "
                    "per-job overhead, one cross-device sync and a kernel-time factor by least squares on "
                    "their makespans, print the fit (predicted before and after, measured) and write the "
                    "problem with the fitted terms in its times.")
    _run_arguments(cb, schedule=False)
    cb.add_argument("--schedules", type=count_arg(1, MAX_RUNS), default=6, help="schedules to run (default 6)")
    cb.add_argument("--rounds", type=count_arg(1, MAX_RUNS), default=None,
                    help="executions of each schedule, in rounds over all of them, the median fitted (default 3)")
    cb.add_argument("-o", "--output", required=True, help="the calibrated problem file to write")
    cb.set_defaults(handler=cmd_calibrate)


def _check_batch(devices: int, sizes: list[int], objective: Objective) -> None:
    """Refuse, before the profile's minutes rather than after them, an ``objective`` that
    ``devices`` devices running ``sizes`` cannot take: the profiled problem's own check, asked
    of a problem of one task that every device runs at every size (a split of L inputs
    takes at most L devices; a problem at most MAX_DEVICES)."""
    from mapsched.model.problem import Device, System, Task

    names = [f"d{k}" for k in range(min(devices, objective.inputs, MAX_DEVICES))]
    task = Task("t", {d: dict.fromkeys(map(str, sizes), 1.0) for d in names})
    try:
        Problem([task], [], System(tuple(Device(d, batch_sizes=tuple(sizes)) for d in names)), objective)
    except ProblemError:
        L = objective.inputs
        if L == 1:
            raise OptionError("--batch-sizes: a latency problem (--batch 1) runs each task at batch size 1; "
                              "include it, e.g. --batch-sizes 1,2,4") from None
        raise OptionError(f"--batch-sizes: no choice of one of the sizes {','.join(map(str, sorted(set(sizes))))} "
                          f"per device (or none) on {devices} device(s) adds up to --batch {L}; include {L}, e.g. "
                          f"--batch-sizes {','.join(map(str, sorted({*sizes, L})))}") from None


def _run_setup(harness: Any, torch: Any, args: argparse.Namespace) -> tuple[Problem, Any, Any, Any]:
    """The problem, the model, its traced graph and its seeded random inputs of ``run`` and
    ``calibrate``, under the thread settings the problem was profiled with (refused before
    anything changes), the inputs of the size it was profiled at."""
    from mapsched.harness.execute import check_inputs

    problem = load_problem(args.problem)
    if args.threads is None and problem.calibration is not None:
        args.threads = problem.calibration.threads  # the profile's, unless given
    harness.check_threads(problem, "--threads N, --interop-threads N",
                          (args.threads or torch.get_num_threads(),
                           args.interop_threads or torch.get_num_interop_threads()))
    args.compile = harness.recorded_compile(problem, args.compile, "--compile")
    set_threads(torch, args)
    model, shape = load_model(args.model, args.input_shape)
    inputs = model_inputs(torch, model, problem, shape, args.seed, args.input_shape is not None)
    graph = harness.trace(model, inputs[:1], not args.no_cluster)  # traced once, for the check and the runs
    check_inputs(graph, problem, "--input-shape")
    return problem, model, graph, inputs


def _report(report: Any) -> None:
    """A calibration's table on stdout, and its warning, if any, on stderr."""
    print(report.table())
    serial = report.serial()
    if serial:
        print(f"mapsched: warning: {serial}", file=sys.stderr)


def cmd_profile(args: argparse.Namespace) -> int:
    """``profile``: time a model's tasks on the devices, check their spread, and write the problem
    (calibrated unless ``--no-calibrate``)."""
    harness = load_harness()
    import warnings

    import torch

    if args.output is None and not args.check:
        raise OptionError("-o: give the problem file to write, e.g. -o model.json, or --check to only report "
                          "how stable the measurements are")
    if args.output is not None:
        check_output(args.output, model_files(args.model))
    devices = args.devices.split(",") if args.devices is not None else harness.available()
    if not all(devices):
        raise OptionError(f"--devices: expected device names separated by commas, got {shown(args.devices)}")
    if args.threads is None:  # emulated devices at PyTorch's default would each run a team on every core
        args.threads = harness.default_threads(devices)
    set_threads(torch, args)
    sizes = integers(args.batch_sizes, "--batch-sizes", MAX_BATCH)
    objective = Objective("throughput", args.batch) if args.batch > 1 else Objective()
    _check_batch(len(devices), sizes, objective)
    model, shape = load_model(args.model, args.input_shape)
    example = checked_input(torch, model, shape, 0, args.input_shape is not None)

    def show(message: Warning | str, category: type[Warning], *_: object, **__: object) -> None:
        print(f"mapsched: warning: {message}", file=sys.stderr, flush=True)

    with warnings.catch_warnings():
        # Re-measurements are announced as they start, one line each, as the run goes on.
        warnings.simplefilter("always", harness.NoisyMeasurementWarning)
        warnings.showwarning = show
        with model_runs("profiling it"):
            result = harness.profile_report(model, example, devices, sizes,
                                            cluster=not args.no_cluster, warmup=args.warmup, repeats=args.repeats,
                                            objective=objective, name=args.model.partition(":")[2],
                                            max_spread=args.max_spread, retries=args.retries,
                                            overheads=not args.no_overheads, compile=args.compile)
    if args.check:
        print(result.report())
    if args.output is None:
        return 1 if result.unstable else 0
    reason = result.refusal("--max-spread", "--force")
    if reason and not args.force:
        raise HarnessError(reason)
    if reason:
        print(f"mapsched: warning: writing {len(result.unstable)} unstable measurements anyway (--force)",
              file=sys.stderr)
    problem = result.problem
    if not args.check:
        print(result.summary())
    print(f"overheads {problem.calibration.summary()}")
    if args.calibrate:
        # The profiled times miss how jobs side by side slow each other: a fit to a few
        # real runs corrects the overhead terms.
        inputs = model_inputs(torch, model, problem, shape, 0, args.input_shape is not None)
        with model_runs("calibrating it"):
            problem, report = harness.calibrate(model, problem, inputs, cluster=not args.no_cluster,
                                                compile=args.compile)
        _report(report)
    if args.contention:
        from mapsched.harness.contention import measure_contention

        found = measure_contention(devices, warmup=args.warmup, repeats=args.repeats)
        problem = found.apply(problem)
        print("contention: " + ", ".join(f"{k} {v:.2f}x" for k, v in found.ratios.items())
              + f"; {'transfers take turns' if problem.contended else 'copies overlap: no contention written'}")
    problem.write(args.output)
    print(f"wrote {'the calibrated ' if args.calibrate else ''}{problem!r} to {shown(args.output, quote=False)}")
    return 0


def cmd_trace(args: argparse.Namespace) -> int:
    """``trace``: trace a model's training step (or forward pass) in fake mode and write its problem."""
    harness = load_harness()
    from mapsched.generators import platform

    check_output(args.output, model_files(args.model))
    system = platform(args.system)  # an unknown preset fails before the model is built
    model, shape = load_model(args.model, args.input_shape)
    if args.batch_size:
        shape = (args.batch_size, *shape[1:])
    t0 = time.perf_counter()
    with model_input(shape, args.input_shape is not None, "traces"):
        problem = harness.trace_step(model, shape, train=args.train, platform=system,
                                     name=args.model.partition(":")[2])
    seconds = time.perf_counter() - t0
    problem.write(args.output)
    step = "training step" if args.train else "forward pass"
    print(f"wrote {problem!r} to {shown(args.output, quote=False)} ({step} of a batch of shape {list(shape)}, "
          f"{seconds:.1f} s)")
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    """``calibrate``: fit a profiled problem's overheads to real runs and write it."""
    harness = load_harness()
    import torch

    check_output(args.output, [args.problem, *model_files(args.model)])
    problem, _, graph, inputs = _run_setup(harness, torch, args)
    rounds = {} if args.rounds is None else {"rounds": args.rounds}
    with model_runs("calibrating it"):
        calibrated, report = harness.calibrate(graph, problem, inputs, count=args.schedules,
                                               cluster=not args.no_cluster, warmup=args.warmup, repeats=args.repeats,
                                               seed=args.seed, compile=args.compile, **rounds)
    _report(report)
    calibrated.write(args.output)
    print(f"wrote the calibrated {calibrated!r} to {shown(args.output, quote=False)}")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    """``run``: execute a schedule for real; exit 1 if its outputs differ from the model's."""
    harness = load_harness()
    import torch

    if args.output:
        check_output(args.output, [args.problem, args.schedule, *model_files(args.model)])
    problem, model, graph, inputs = _run_setup(harness, torch, args)
    schedule = Schedule.read(args.schedule)
    with model_runs("running the schedule"):
        run = harness.execute(graph, problem, schedule, inputs, cluster=not args.no_cluster, warmup=args.warmup,
                              repeats=args.repeats, compile=args.compile)
        with torch.inference_mode():
            reference = model(inputs)
    same = harness.outputs_match(run.outputs, reference, problem.device_names)
    rows = [["makespan (ms)", fmt(run.predicted, 6), fmt(run.makespan, 6),
             f"{run.makespan / run.predicted:.2f}" if run.predicted > 0 else "-"]]
    if problem.L > 1:
        predicted_thr = 1000.0 * problem.L / run.predicted if run.predicted > 0 else None
        rows.append(["throughput (inputs/s)", fmt(predicted_thr, 6), fmt(run.throughput, 6),
                     f"{run.throughput / predicted_thr:.2f}" if predicted_thr and run.throughput else "-"])
    print(table(["", "predicted", "measured", "measured/predicted"], rows))
    spent = ", ".join(f"{d} {ms:.3f}" for d, ms in run.assembly.items())
    print(f"input assembly, on the devices' threads and in no task's time (ms): {spent}")
    print(f"outputs match the unscheduled model: {'yes' if same else 'NO'}")
    if args.output:
        run.measured.write(args.output)
        print(f"wrote the measured jobs to {shown(args.output, quote=False)}")
    return 0 if same else 1

